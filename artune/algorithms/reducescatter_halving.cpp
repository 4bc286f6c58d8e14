// Recursive-halving reduce-scatter (issue 17; Thakur, Rabenseifner and Gropp 2005, the first half
// of Rabenseifner's all-reduce): lg n steps, in step k the pairs at distance 2^⌊lg n⌋/2^(k+1) each
// reduce the half of their current blocks the partner keeps into the partner. A non-power-of-two
// n first reduces the last r = n − 2^⌊lg n⌋ ranks' buffers into ranks 0..r−1; rank i then also
// stands for block 2^⌊lg n⌋+i and hands it back at the end.

#include <bit>

#include "artune/algorithms/collective_families.hpp"

namespace artune::detail {

void emit_reducescatter_halving(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by) {
  const int n = static_cast<int>(slots.size());
  if (n < 1) return;
  const int m = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - m;
  auto slot = [&](int r) -> const Slot& { return slots[static_cast<std::size_t>(r)]; };
  for (int i = 0; i < extra; ++i) e.reduce(at(slot(m + i), 0, count), at(slot(i), 0, count));
  for (int dist = m / 2; dist >= 1; dist /= 2) {
    for (int i = 0; i < m; ++i) {
      // Rank i keeps the cores c0 … c0+dist−1 of its half (and their extra blocks); its partner
      // reduces its copy of them into i.
      const int j = i ^ dist;
      const int c0 = i & ~(dist - 1);
      e.reduce(blocks_at(slot(j), count, n, c0, c0 + dist), blocks_at(slot(i), count, n, c0, c0 + dist));
      const int x_end = std::min(c0 + dist, extra);
      if (c0 < x_end) {
        e.reduce(blocks_at(slot(j), count, n, m + c0, m + x_end), blocks_at(slot(i), count, n, m + c0, m + x_end));
      }
    }
  }
  for (int i = 0; i < extra; ++i) {
    e.copy(blocks_at(slot(i), count, n, m + i, m + i + 1), blocks_at(slot(m + i), count, n, m + i, m + i + 1));
  }
  if (scale_by == kNoScale) return;
  for (int k = 0; k < n; ++k) e.scale(blocks_at(slot(k), count, n, k, k + 1), scale_by);
}

}  // namespace artune::detail
