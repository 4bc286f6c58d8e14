#pragma once
// Hand-built plans for the executor tests: independent of the builders, so the
// backends are tested against plans whose correctness is evident by
// construction. Dependencies are derived from the data each op touches (every
// earlier op with an overlapping access, one of them a write), which is
// race-free and local by construction.

#include <algorithm>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"

namespace artune::test {

/// A plan with `ranks` participants (node i, name "gpuI") and `helpers` helper devices.
inline Plan empty_plan(int ranks, std::int64_t count, ReduceOp op, int helpers = 0) {
  Plan p;
  p.spec = "hand";
  p.count = count;
  p.reduce_op = op;
  for (int r = 0; r < ranks; ++r) {
    p.devices.push_back(PlanDevice{r, "gpu" + std::to_string(r), true});
    p.buffers.push_back({count});
  }
  for (int h = 0; h < helpers; ++h) {
    p.devices.push_back(PlanDevice{ranks + h, "cpu" + std::to_string(h), false});
    p.buffers.push_back({});
  }
  return p;
}

/// Accesses of an op: (location, is_write).
inline std::vector<std::pair<Location, bool>> accesses(const Op& op) {
  switch (op.kind) {
    case OpKind::kCopy: return {{op.src, false}, {op.dst, true}};
    case OpKind::kReduce: return {{op.src, false}, {op.dst, true}};
    case OpKind::kScale: return {{op.dst, true}};
    case OpKind::kGroup: {
      std::vector<std::pair<Location, bool>> out;
      for (int m : op.group) out.push_back({Location{m, op.dst.buffer, op.dst.offset, op.dst.count}, true});
      return out;
    }
  }
  return {};
}

inline bool overlap(const Location& a, const Location& b) {
  return a.device == b.device && a.buffer == b.buffer && a.offset < b.offset + b.count &&
         b.offset < a.offset + a.count && a.count > 0 && b.count > 0;
}

/// Adds `op` with deps on every earlier conflicting op; returns its id.
inline int add_auto(Plan& p, Op op) {
  op.deps.clear();
  const auto mine = accesses(op);
  for (const Op& prev : p.ops) {
    bool conflict = false;
    for (const auto& [a, aw] : accesses(prev)) {
      for (const auto& [b, bw] : mine) {
        if ((aw || bw) && overlap(a, b)) conflict = true;
      }
    }
    if (conflict) op.deps.push_back(prev.id);
  }
  return p.add(std::move(op));
}

inline Op copy_op(Location src, Location dst) {
  Op o;
  o.kind = OpKind::kCopy;
  o.src = src;
  o.dst = dst;
  return o;
}
inline Op reduce_op(Location src, Location dst) {
  Op o = copy_op(src, dst);
  o.kind = OpKind::kReduce;
  return o;
}
inline Op scale_op(Location dst, int divisor) {
  Op o;
  o.kind = OpKind::kScale;
  o.dst = dst;
  o.divisor = divisor;
  return o;
}
inline Op group_op(Collective c, std::vector<int> members, int buffer, std::int64_t offset, std::int64_t count,
                   int root = -1) {
  Op o;
  o.kind = OpKind::kGroup;
  o.collective = c;
  o.group = std::move(members);
  o.dst = Location{o.group.front(), buffer, offset, count};
  o.root = root;
  return o;
}

inline void add_avg_scale(Plan& p) {
  if (p.reduce_op != ReduceOp::kAvg) return;
  for (int r = 0; r < p.ranks(); ++r) add_auto(p, scale_op(Location{r, 0, 0, p.count}, p.ranks()));
}

/// Ring all-reduce: reduce-scatter then all-gather over even chunks, in place.
inline Plan ring_plan(int ranks, std::int64_t count, ReduceOp op) {
  Plan p = empty_plan(ranks, count, op);
  auto chunk = [&](int device, int c) {
    const auto [off, n] = even_piece(count, ranks, ((c % ranks) + ranks) % ranks);
    return Location{device, 0, off, n};
  };
  for (int s = 0; s + 1 < ranks; ++s) {
    for (int d = 0; d < ranks; ++d) add_auto(p, reduce_op(chunk(d, d - s), chunk((d + 1) % ranks, d - s)));
  }
  // Device d now holds the full chunk d + 1.
  for (int s = 0; s + 1 < ranks; ++s) {
    for (int d = 0; d < ranks; ++d) add_auto(p, copy_op(chunk(d, d + 1 - s), chunk((d + 1) % ranks, d + 1 - s)));
  }
  add_avg_scale(p);
  return p;
}

/// Shuffle through a helper: gather-reduce into the helper's scratch, then copy back.
inline Plan helper_plan(int ranks, std::int64_t count, ReduceOp op) {
  Plan p = empty_plan(ranks, count, op, 1);
  const int h = ranks;
  const int scratch = p.add_buffer(h, count);
  add_auto(p, copy_op(Location{0, 0, 0, count}, Location{h, scratch, 0, count}));
  for (int r = 1; r < ranks; ++r) add_auto(p, reduce_op(Location{r, 0, 0, count}, Location{h, scratch, 0, count}));
  if (op == ReduceOp::kAvg) add_auto(p, scale_op(Location{h, scratch, 0, count}, ranks));
  for (int r = 0; r < ranks; ++r) add_auto(p, copy_op(Location{h, scratch, 0, count}, Location{r, 0, 0, count}));
  return p;
}

/// Library collectives: a group reduce-scatter then a group all-gather (or one all-reduce,
/// or reduce + broadcast), followed by the avg scale.
inline Plan group_plan(int ranks, std::int64_t count, ReduceOp op, Collective first) {
  Plan p = empty_plan(ranks, count, op);
  std::vector<int> all(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) all[static_cast<std::size_t>(r)] = r;
  // A non-identity member order exercises the library rank mapping.
  std::rotate(all.begin(), all.begin() + ranks / 2, all.end());
  switch (first) {
    case Collective::kReduceScatter:
      add_auto(p, group_op(Collective::kReduceScatter, all, 0, 0, count));
      add_auto(p, group_op(Collective::kAllGather, all, 0, 0, count));
      break;
    case Collective::kReduce:
      add_auto(p, group_op(Collective::kReduce, all, 0, 0, count, all.back()));
      add_auto(p, group_op(Collective::kBroadcast, all, 0, 0, count, all.back()));
      break;
    default: add_auto(p, group_op(Collective::kAllReduce, all, 0, 0, count)); break;
  }
  add_avg_scale(p);
  return p;
}

/// Two-level: groups of `per` consecutive ranks all-reduce inside (group op), then the
/// group leaders ring-exchange... kept simple: leaders reduce into rank 0 by transfers,
/// rank 0 sends back to leaders, leaders broadcast in their group.
inline Plan hierarchical_plan(int ranks, int per, std::int64_t count, ReduceOp op) {
  Plan p = empty_plan(ranks, count, op);
  std::vector<int> leaders;
  for (int g = 0; g < ranks; g += per) {
    std::vector<int> members;
    for (int r = g; r < std::min(ranks, g + per); ++r) members.push_back(r);
    leaders.push_back(g);
    add_auto(p, group_op(Collective::kAllReduce, members, 0, 0, count));
  }
  for (std::size_t i = 1; i < leaders.size(); ++i) {
    add_auto(p, reduce_op(Location{leaders[i], 0, 0, count}, Location{0, 0, 0, count}));
  }
  for (std::size_t i = 1; i < leaders.size(); ++i) {
    add_auto(p, copy_op(Location{0, 0, 0, count}, Location{leaders[i], 0, 0, count}));
  }
  for (int g = 0; g < ranks; g += per) {
    std::vector<int> members;
    for (int r = g; r < std::min(ranks, g + per); ++r) members.push_back(r);
    add_auto(p, group_op(Collective::kBroadcast, members, 0, 0, count, g));
  }
  add_avg_scale(p);
  return p;
}

/// The plan without op `victim` (ids renumbered, deps on it dropped): a planted fault.
inline Plan without_op(const Plan& plan, int victim) {
  Plan out = plan;
  out.ops.clear();
  for (const Op& op : plan.ops) {
    if (op.id == victim) continue;
    Op o = op;
    o.id = op.id > victim ? op.id - 1 : op.id;
    o.deps.clear();
    for (int d : op.deps) {
      if (d != victim) o.deps.push_back(d > victim ? d - 1 : d);
    }
    out.ops.push_back(std::move(o));
  }
  return out;
}

}  // namespace artune::test
