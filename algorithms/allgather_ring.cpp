// Ring all-gather and ring reduce-scatter (issue 17): the two halves of the ring all-reduce as
// collectives of their own, over the plan's blocks (even pieces, block k on rank k) rather than
// the ring all-reduce's padded chunks. Each rank sends (n−1)/n of the buffer over one link.

#include "algorithms/collective_families.hpp"

namespace artune::detail {

void emit_allgather_ring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count) {
  const int n = static_cast<int>(slots.size());
  for (int s = 0; s + 1 < n; ++s) {
    for (int r = 0; r < n; ++r) {
      const int b = ((r - s) % n + n) % n;
      const Slot& from = slots[static_cast<std::size_t>(r)];
      const Slot& to = slots[static_cast<std::size_t>((r + 1) % n)];
      e.copy(blocks_at(from, count, n, b, b + 1), blocks_at(to, count, n, b, b + 1));
    }
  }
}

void emit_reducescatter_ring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by) {
  const int n = static_cast<int>(slots.size());
  for (int s = 0; s + 1 < n; ++s) {
    for (int r = 0; r < n; ++r) {
      // Block b starts at rank b+1 and gathers one rank per step; after n−1 steps it reaches rank b.
      const int b = ((r - s - 1) % n + n) % n;
      const Slot& from = slots[static_cast<std::size_t>(r)];
      const Slot& to = slots[static_cast<std::size_t>((r + 1) % n)];
      e.reduce(blocks_at(from, count, n, b, b + 1), blocks_at(to, count, n, b, b + 1));
    }
  }
  if (scale_by == kNoScale) return;
  for (int k = 0; k < n; ++k) e.scale(blocks_at(slots[static_cast<std::size_t>(k)], count, n, k, k + 1), scale_by);
}

}  // namespace artune::detail
