// Ring all-gather and ring reduce-scatter (issue 17): the two halves of the ring all-reduce as
// collectives of their own, over the plan's blocks (even pieces, block k on rank k) rather than
// the ring all-reduce's padded chunks. Each rank sends (n−1)/n of the buffer over one link. The
// ring follows an order of the ranks (--gpu-perm inside each machine); 2d runs the same ring over
// sets of blocks.

#include "artune/algorithms/collective_families.hpp"

namespace artune::detail {

void ring_over_sets(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const std::vector<int>& members,
                    const std::vector<std::vector<int>>& sets, bool reduce) {
  const int k = static_cast<int>(members.size());
  const int n = static_cast<int>(slots.size());
  for (int s = 0; s + 1 < k; ++s) {
    for (int i = 0; i < k; ++i) {
      const int owner = ((i - s - (reduce ? 1 : 0)) % k + k) % k;
      const Slot& from = slots[static_cast<std::size_t>(members[static_cast<std::size_t>(i)])];
      const Slot& to = slots[static_cast<std::size_t>(members[static_cast<std::size_t>((i + 1) % k)])];
      for (int b : sets[static_cast<std::size_t>(owner)]) {
        const Location src = blocks_at(from, count, n, b, b + 1);
        const Location dst = blocks_at(to, count, n, b, b + 1);
        if (reduce) {
          e.reduce(src, dst);
        } else {
          e.copy(src, dst);
        }
      }
    }
  }
}

void emit_allgather_ring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count,
                         const std::vector<int>& order) {
  std::vector<std::vector<int>> own;
  for (int r : order) own.push_back({r});
  ring_over_sets(e, slots, count, order, own, false);
}

void emit_reducescatter_ring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count,
                             const std::vector<int>& order, int scale_by) {
  std::vector<std::vector<int>> own;
  for (int r : order) own.push_back({r});
  // Block b starts at the member after its owner and gathers one rank per step; after n−1 steps it reaches b.
  ring_over_sets(e, slots, count, order, own, true);
  if (scale_by == kNoScale) return;
  const int n = static_cast<int>(slots.size());
  for (int k = 0; k < n; ++k) e.scale(blocks_at(slots[static_cast<std::size_t>(k)], count, n, k, k + 1), scale_by);
}

}  // namespace artune::detail
