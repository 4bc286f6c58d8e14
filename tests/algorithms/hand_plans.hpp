#pragma once
// Plans built by hand for the Plan IR, verifier and pipeline tests: they do
// not depend on the builders, so the verifier is tested against known-good
// and known-bad inputs of its own.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "artune/algorithms/plan.hpp"

namespace artune::test {

/// A plan with `ranks` participants (node i, name "gpuI") and `helpers` helper devices.
inline Plan empty_plan(int ranks, std::int64_t count, ReduceOp op = ReduceOp::kSum, int helpers = 0) {
  Plan p;
  p.spec = "hand";
  p.count = count;
  p.reduce_op = op;
  for (int r = 0; r < ranks; ++r) p.devices.push_back({r, fmt::format("gpu{}", r), true});
  for (int h = 0; h < helpers; ++h) p.devices.push_back({ranks + h, fmt::format("cpu{}", h), false});
  p.buffers.resize(p.devices.size());
  for (int r = 0; r < ranks; ++r) p.buffers[static_cast<std::size_t>(r)] = {count};
  return p;
}

inline Location loc(int device, int buffer, std::int64_t offset, std::int64_t count) {
  return Location{device, buffer, offset, count};
}

inline Op copy_op(Location src, Location dst, std::vector<int> deps) {
  Op op;
  op.kind = OpKind::kCopy;
  op.src = src;
  op.dst = dst;
  op.deps = std::move(deps);
  return op;
}

inline Op reduce_op(Location src, Location dst, std::vector<int> deps) {
  Op op = copy_op(src, dst, std::move(deps));
  op.kind = OpKind::kReduce;
  return op;
}

inline Op scale_op(Location dst, int divisor, std::vector<int> deps) {
  Op op;
  op.kind = OpKind::kScale;
  op.dst = dst;
  op.divisor = divisor;
  op.deps = std::move(deps);
  return op;
}

inline Op group_op(Collective c, std::vector<int> group, int buffer, std::int64_t offset, std::int64_t count,
                   std::vector<int> deps, int root = -1) {
  Op op;
  op.kind = OpKind::kGroup;
  op.collective = c;
  op.group = std::move(group);
  op.dst = Location{-1, buffer, offset, count};
  op.root = root;
  op.deps = std::move(deps);
  return op;
}

inline int mod(int a, int n) { return ((a % n) + n) % n; }

/// Ring all-reduce: reduce-scatter with one scratch slot per rank, then all-gather straight
/// into buffer 0; avg scales each chunk on its owner right after its last reduce (as TF's
/// _build_ring_gather applies un_op).
inline Plan ring_plan(int ranks, std::int64_t count, ReduceOp op = ReduceOp::kSum) {
  Plan p = empty_plan(ranks, count, op);
  const int n = ranks;
  std::int64_t biggest = 0;
  for (int c = 0; c < n; ++c) biggest = std::max(biggest, even_piece(count, n, c).second);
  std::vector<int> scratch(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) scratch[static_cast<std::size_t>(r)] = p.add_buffer(r, biggest);
  auto chunk = [&](int c) { return even_piece(count, n, mod(c, n)); };
  // last_on[r]: the op that last produced data on rank r's chunk chain; last_reduce[r]: last reader of r's scratch.
  std::vector<int> produced(static_cast<std::size_t>(n), -1), scratch_reader(static_cast<std::size_t>(n), -1);
  for (int s = 0; s + 1 < n; ++s) {
    std::vector<int> copies(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const int to = mod(r + 1, n);
      const auto [off, cnt] = chunk(r - s);
      std::vector<int> deps;
      if (produced[static_cast<std::size_t>(r)] >= 0) deps.push_back(produced[static_cast<std::size_t>(r)]);
      if (scratch_reader[static_cast<std::size_t>(to)] >= 0)
        deps.push_back(scratch_reader[static_cast<std::size_t>(to)]);
      copies[static_cast<std::size_t>(r)] =
          p.add(copy_op(loc(r, 0, off, cnt), loc(to, scratch[static_cast<std::size_t>(to)], 0, cnt), deps));
    }
    for (int r = 0; r < n; ++r) {
      const int to = mod(r + 1, n);
      const auto [off, cnt] = chunk(r - s);
      const int id = p.add(reduce_op(loc(to, scratch[static_cast<std::size_t>(to)], 0, cnt), loc(to, 0, off, cnt),
                                     {copies[static_cast<std::size_t>(r)]}));
      produced[static_cast<std::size_t>(to)] = id;
      scratch_reader[static_cast<std::size_t>(to)] = id;
    }
  }
  if (op == ReduceOp::kAvg) {
    for (int r = 0; r < n; ++r) {
      const auto [off, cnt] = chunk(r + 1);
      std::vector<int> deps;
      if (produced[static_cast<std::size_t>(r)] >= 0) deps.push_back(produced[static_cast<std::size_t>(r)]);
      produced[static_cast<std::size_t>(r)] = p.add(scale_op(loc(r, 0, off, cnt), n, deps));
    }
  }
  for (int s = 0; s + 1 < n; ++s) {
    std::vector<int> next(produced);
    for (int r = 0; r < n; ++r) {
      const int to = mod(r + 1, n);
      const auto [off, cnt] = chunk(r + 1 - s);
      next[static_cast<std::size_t>(to)] =
          p.add(copy_op(loc(r, 0, off, cnt), loc(to, 0, off, cnt), {produced[static_cast<std::size_t>(r)]}));
    }
    produced = next;
  }
  return p;
}

/// Shuffle all-reduce: shard k of ragged_piece(count, shards, k) is gathered on a device
/// (a helper when `on_helpers`, else rank k % ranks into a scratch buffer), reduced
/// there, scaled for avg, and copied back to every rank.
inline Plan shuffle_plan(int ranks, std::int64_t count, int shards, bool on_helpers, ReduceOp op = ReduceOp::kSum) {
  Plan p = empty_plan(ranks, count, op, on_helpers ? shards : 0);
  for (int k = 0; k < shards; ++k) {
    const auto [off, cnt] = ragged_piece(count, shards, k);
    const int g = on_helpers ? ranks + k : k % ranks;
    const int acc = p.add_buffer(g, cnt);
    int last = p.add(copy_op(loc(0, 0, off, cnt), loc(g, acc, 0, cnt), {}));
    for (int r = 1; r < ranks; ++r) last = p.add(reduce_op(loc(r, 0, off, cnt), loc(g, acc, 0, cnt), {last}));
    if (op == ReduceOp::kAvg) last = p.add(scale_op(loc(g, acc, 0, cnt), ranks, {last}));
    for (int r = 0; r < ranks; ++r) p.add(copy_op(loc(g, acc, 0, cnt), loc(r, 0, off, cnt), {last}));
  }
  return p;
}

/// Removes op `id`; ops that depended on it inherit its deps, later ids shift down.
inline Plan remove_op(const Plan& plan, int id) {
  Plan out = plan;
  out.ops.clear();
  const auto& gone = plan.ops[static_cast<std::size_t>(id)];
  for (const Op& op : plan.ops) {
    if (op.id == id) continue;
    Op copy = op;
    std::vector<int> deps;
    for (int d : op.deps) {
      if (d == id) {
        deps.insert(deps.end(), gone.deps.begin(), gone.deps.end());
      } else {
        deps.push_back(d);
      }
    }
    for (int& d : deps) d = d > id ? d - 1 : d;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    copy.deps = deps;
    out.add(std::move(copy));
  }
  return out;
}

/// Index of the first op of `kind` whose dst is on `device` (and, when ≥ 0, buffer), or -1.
inline int find_op(const Plan& plan, OpKind kind, int device, int buffer = -1) {
  for (const Op& op : plan.ops) {
    if (op.kind == kind && op.dst.device == device && (buffer < 0 || op.dst.buffer == buffer)) return op.id;
  }
  return -1;
}

}  // namespace artune::test
