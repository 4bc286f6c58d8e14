// The Emitter: appends ops to a plan and derives their dependencies from the
// regions they touch (see families.hpp for why).

#include <fmt/format.h>

#include <algorithm>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune::detail {

std::vector<Slot> user_slots(int ranks) {
  std::vector<Slot> out;
  out.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) out.push_back(Slot{r, 0, 0});
  return out;
}

std::pair<std::int64_t, std::int64_t> padded_piece(std::int64_t count, int pieces, int index) {
  ARTUNE_CHECK(pieces >= 1 && index >= 0 && index < pieces && count >= 0,
               fmt::format("padded_piece: piece {} of {} over {} elements", index, pieces, count));
  const std::int64_t size = (count + pieces - 1) / pieces;
  const std::int64_t begin = std::min(count, size * index);
  const std::int64_t end = std::min(count, begin + size);
  return {begin, end - begin};
}

void Emitter::split_at(Track& track, std::int64_t x) {
  if (track.empty()) track.emplace(0, Segment{});
  auto it = track.upper_bound(x);
  --it;  // the segment containing x (the track always has a key at 0)
  if (it->first != x) track.emplace_hint(std::next(it), x, it->second);
}

void Emitter::read(const Location& loc, int op, std::vector<int>& deps) {
  Track& track = tracks_[{loc.device, loc.buffer}];
  split_at(track, loc.offset);
  split_at(track, loc.offset + loc.count);
  const auto end = track.find(loc.offset + loc.count);
  for (auto it = track.find(loc.offset); it != end; ++it) {
    if (it->second.writer >= 0) deps.push_back(it->second.writer);
    if (it->second.readers.empty() || it->second.readers.back() != op) it->second.readers.push_back(op);
  }
}

void Emitter::write(const Location& loc, int op, std::vector<int>& deps) {
  Track& track = tracks_[{loc.device, loc.buffer}];
  split_at(track, loc.offset);
  split_at(track, loc.offset + loc.count);
  const auto first = track.find(loc.offset);
  const auto end = track.find(loc.offset + loc.count);
  for (auto it = first; it != end; ++it) {
    if (it->second.writer >= 0) deps.push_back(it->second.writer);
    deps.insert(deps.end(), it->second.readers.begin(), it->second.readers.end());
  }
  // The written range becomes one segment owned by this op.
  track.erase(std::next(first), end);
  first->second = Segment{op, {}};
}

int Emitter::finish(Op op, std::vector<int> deps) {
  if (plan_.ops.size() >= kMaxPlanOps) {
    // The backstop for families without an up-front estimate (see builders.cpp).
    throw InvalidInput(
        fmt::format("{} {}: the plan needs more than {} ops, artune's limit per plan (use fewer "
                    "participants, subchunks, shards, packs, copies or slices)",
                    parameter("spec"), plan_.spec, kMaxPlanOps));
  }
  const int id = static_cast<int>(plan_.ops.size());
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  deps.erase(std::remove(deps.begin(), deps.end(), id), deps.end());
  op.deps = std::move(deps);
  op.phase = phase_;
  return plan_.add(std::move(op));
}

void Emitter::set_phase(double phase) {
  ARTUNE_CHECK(phase >= 0 && phase < 1, fmt::format("emitter: pipeline phase {} outside [0, 1)", phase));
  phase_ = phase;
}

int Emitter::copy(const Location& src, const Location& dst) {
  ARTUNE_CHECK(src.count == dst.count, fmt::format("emitter: copy of {} elements into {}", src.count, dst.count));
  if (dst.count == 0) return -1;
  const int id = static_cast<int>(plan_.ops.size());
  std::vector<int> deps;
  read(src, id, deps);
  write(dst, id, deps);
  Op op;
  op.kind = OpKind::kCopy;
  op.src = src;
  op.dst = dst;
  return finish(std::move(op), std::move(deps));
}

int Emitter::reduce(const Location& src, const Location& dst) {
  ARTUNE_CHECK(src.count == dst.count, fmt::format("emitter: reduce of {} elements into {}", src.count, dst.count));
  if (dst.count == 0) return -1;
  const int id = static_cast<int>(plan_.ops.size());
  std::vector<int> deps;
  read(src, id, deps);
  write(dst, id, deps);  // a write also orders after the previous writer, which it reads
  Op op;
  op.kind = OpKind::kReduce;
  op.src = src;
  op.dst = dst;
  return finish(std::move(op), std::move(deps));
}

int Emitter::scale(const Location& dst, int divisor) {
  if (dst.count == 0) return -1;
  const int id = static_cast<int>(plan_.ops.size());
  std::vector<int> deps;
  write(dst, id, deps);
  Op op;
  op.kind = OpKind::kScale;
  op.dst = dst;
  op.divisor = divisor;
  return finish(std::move(op), std::move(deps));
}

int Emitter::group(Collective collective, const std::vector<int>& devices, int buffer, std::int64_t offset,
                   std::int64_t count, int root) {
  if (count == 0 || devices.empty()) return -1;
  const int id = static_cast<int>(plan_.ops.size());
  std::vector<int> deps;
  const int n = static_cast<int>(devices.size());
  for (int k = 0; k < n; ++k) {
    const int d = devices[static_cast<std::size_t>(k)];
    const Location whole{d, buffer, offset, count};
    switch (collective) {
      case Collective::kAllReduce:
      case Collective::kReduceScatter:  // reads all of it; what is left outside its shard is unspecified
        read(whole, id, deps);
        write(whole, id, deps);
        break;
      case Collective::kBroadcast:
        if (d == root) {
          read(whole, id, deps);
        } else {
          write(whole, id, deps);
        }
        break;
      case Collective::kReduce:
        read(whole, id, deps);
        if (d == root) write(whole, id, deps);
        break;
      case Collective::kAllGather: {
        const auto [off, len] = even_piece(count, n, k);
        read(Location{d, buffer, offset + off, len}, id, deps);
        write(whole, id, deps);
        break;
      }
    }
  }
  Op op;
  op.kind = OpKind::kGroup;
  op.collective = collective;
  op.group = devices;
  op.root = root;
  op.dst = Location{-1, buffer, offset, count};
  return finish(std::move(op), std::move(deps));
}

int Emitter::device_for_node(int node) {
  for (std::size_t d = 0; d < plan_.devices.size(); ++d) {
    if (plan_.devices[d].node == node) return static_cast<int>(d);
  }
  const auto& nodes = topo_.nodes();
  if (node < 0 || node >= static_cast<int>(nodes.size())) {
    throw InvalidInput(fmt::format("topology '{}' has no node {}", topo_.name(), node));
  }
  PlanDevice helper;
  helper.node = node;
  helper.name = nodes[static_cast<std::size_t>(node)].id;
  helper.participant = false;
  plan_.devices.push_back(std::move(helper));
  plan_.buffers.resize(plan_.devices.size());
  return static_cast<int>(plan_.devices.size()) - 1;
}

int Emitter::scratch(int device, std::int64_t count) { return plan_.add_buffer(device, count); }

}  // namespace artune::detail
