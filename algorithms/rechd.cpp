// Recursive halving-doubling, as TF's build_recursive_hd_all_reduce for a
// power-of-two device count, with a Rabenseifner fold for any other count.
//
// Cost (p = 2^k devices, m bytes): 2 lg p·α + 2(p−1)/p·mβ + (p−1)/p·mγ.
// With n = p + r devices the r extra ones first send their whole buffer to a
// partner (α + mβ + mγ) and get the result back at the end (α + mβ).

#include <fmt/format.h>

#include "algorithms/families.hpp"
#include "core/error.hpp"

namespace artune::detail {

void emit_rechd(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by) {
  const int n = static_cast<int>(slots.size());
  if (n == 0) return;
  int p = 1;
  int hops = 0;
  while (p * 2 <= n) {
    p *= 2;
    ++hops;
  }
  const int r = n - p;
  auto slot = [&](int d) -> const Slot& { return slots[static_cast<std::size_t>(d)]; };

  // Fold: extra device p + i hands its input to device i.
  for (int i = 0; i < r; ++i) e.reduce(at(slot(p + i), 0, count), at(slot(i), 0, count));

  // Gather phase over the power-of-two core: at hop h, left d (d mod 2^(h+1) < 2^h) pairs with
  // d + 2^h; the left keeps the first half of their common region, the right the second half.
  std::vector<std::int64_t> lo(static_cast<std::size_t>(p), 0);
  std::vector<std::int64_t> len(static_cast<std::size_t>(p), count);
  for (int h = 0; h < hops; ++h) {
    const int span = 1 << h;
    for (int d = 0; d < p; ++d) {
      if (d % (2 * span) >= span) continue;
      const int right = d + span;
      const auto ud = static_cast<std::size_t>(d);
      const auto ur = static_cast<std::size_t>(right);
      const std::int64_t base = lo[ud];
      const std::int64_t first = even_piece(len[ud], 2, 0).second;
      const std::int64_t second = len[ud] - first;
      e.reduce(at(slot(right), base, first), at(slot(d), base, first));
      e.reduce(at(slot(d), base + first, second), at(slot(right), base + first, second));
      len[ud] = first;
      lo[ur] = base + first;
      len[ur] = second;
    }
  }
  if (scale_by != kNoScale) {
    for (int d = 0; d < p; ++d) {
      e.scale(at(slot(d), lo[static_cast<std::size_t>(d)], len[static_cast<std::size_t>(d)]), scale_by);
    }
  }
  // Scatter phase: the same pairs in reverse order exchange their reduced halves.
  for (int h = hops - 1; h >= 0; --h) {
    const int span = 1 << h;
    for (int d = 0; d < p; ++d) {
      if (d % (2 * span) >= span) continue;
      const int right = d + span;
      const auto ud = static_cast<std::size_t>(d);
      const auto ur = static_cast<std::size_t>(right);
      e.copy(at(slot(right), lo[ur], len[ur]), at(slot(d), lo[ur], len[ur]));
      e.copy(at(slot(d), lo[ud], len[ud]), at(slot(right), lo[ud], len[ud]));
      len[ud] += len[ur];
      lo[ur] = lo[ud];
      len[ur] = len[ud];
    }
  }
  // Unfold: the extra devices get the result back.
  for (int i = 0; i < r; ++i) e.copy(at(slot(i), 0, count), at(slot(p + i), 0, count));
}

}  // namespace artune::detail
