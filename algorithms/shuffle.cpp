// Shuffle all-reduce (parameter-server style), as TF's build_shuffle_all_reduce,
// and the shuffle hybrid of _build_shuffle_hybrid.
//
// Cost (n sources, N gather shards, m bytes): each shard device receives
// n·m/N bytes and sends them back, so a single shard is bound by its links:
// 2·n·m/N·β per shard, (n−1)·m/N·γ of reduction, 2 steps of latency.

#include <fmt/format.h>

#include "algorithms/families.hpp"
#include "core/error.hpp"

namespace artune::detail {

namespace {

// Position of the slot whose region, shifted by `offset`, is exactly `target`; -1 if none.
int in_place_index(const std::vector<Slot>& slots, std::int64_t offset, const Slot& target) {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (s.device == target.device && s.buffer == target.buffer && s.offset + offset == target.offset) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Where shard [offset, offset + count) is gathered on `device`: in place when the device holds
// one of the slots, else a fresh scratch region there.
Slot shard_target(Emitter& e, const std::vector<Slot>& slots, std::int64_t offset, std::int64_t count, int device) {
  for (const Slot& s : slots) {
    if (s.device == device) return Slot{s.device, s.buffer, s.offset + offset};
  }
  return Slot{device, e.scratch(device, count), 0};
}

}  // namespace

void emit_gather_to(Emitter& e, const std::vector<Slot>& slots, std::int64_t offset, std::int64_t count,
                    const Slot& target) {
  if (count == 0 || slots.empty()) return;
  const int self = in_place_index(slots, offset, target);
  const Location dst = at(target, 0, count);
  bool first = self < 0;
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
    if (i == self) continue;
    const Location src = at(slots[static_cast<std::size_t>(i)], offset, count);
    if (first) {
      e.copy(src, dst);  // a foreign target starts from the first source
      first = false;
    } else {
      e.reduce(src, dst);
    }
  }
}

void emit_scatter_from(Emitter& e, const Slot& source, const std::vector<Slot>& slots, std::int64_t offset,
                       std::int64_t count) {
  if (count == 0) return;
  const int self = in_place_index(slots, offset, source);
  for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
    if (i == self) continue;
    e.copy(at(source, 0, count), at(slots[static_cast<std::size_t>(i)], offset, count));
  }
}

void emit_shuffle(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const ShuffleParams& p,
                  int scale_by) {
  const int shards = static_cast<int>(p.gather_devices.size());
  if (shards < 1) throw InvalidInput("shuffle: no gather device");
  for (int k = 0; k < shards; ++k) {
    const auto [off, len] = ragged_piece(count, shards, k);
    if (len == 0) continue;
    const Slot target = shard_target(e, slots, off, len, p.gather_devices[static_cast<std::size_t>(k)]);
    emit_gather_to(e, slots, off, len, target);
    if (scale_by != kNoScale) e.scale(at(target, 0, len), scale_by);
    emit_scatter_from(e, target, slots, off, len);
  }
}

void emit_shuffle_hybrid(Emitter& e, const std::vector<std::vector<Slot>>& machines, std::int64_t count,
                         const std::vector<int>& gather, const UpperLevel& upper, int scale_by) {
  if (gather.size() != machines.size()) {
    throw InvalidInput(fmt::format("shuffle hybrid: {} gather devices for {} machines (one per machine)",
                                   gather.size(), machines.size()));
  }
  std::vector<Slot> reps;
  for (std::size_t m = 0; m < machines.size(); ++m) {
    const Slot target = shard_target(e, machines[m], 0, count, gather[m]);
    emit_gather_to(e, machines[m], 0, count, target);
    reps.push_back(target);
  }
  upper(e, reps, count, scale_by);
  for (std::size_t m = 0; m < machines.size(); ++m) emit_scatter_from(e, reps[m], machines[m], 0, count);
}

}  // namespace artune::detail
