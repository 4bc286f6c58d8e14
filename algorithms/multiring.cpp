// Multi-ring: K plain rings along link-disjoint Hamiltonian cycles, each
// all-reducing its own share of the buffer, so K channels carry traffic at
// once (NCCL's channels, Blink's packing of rings).
//
// Cost: with K rings on disjoint links each of bandwidth B, the bandwidth term
// of a ring, 2(n−1)/n·m/B, shrinks to 2(n−1)/n·m/(K·B).

#include "algorithms/families.hpp"

namespace artune::detail {

void emit_multiring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const MultiRingParams& p,
                    int scale_by) {
  const int rings = static_cast<int>(p.rings.size());
  for (int j = 0; j < rings; ++j) {
    const auto [off, len] = even_piece(count, rings, j);
    if (len == 0) continue;
    std::vector<Slot> part = slots;
    for (Slot& s : part) s.offset += off;
    emit_ring(e, part, len, RingParams{{p.rings[static_cast<std::size_t>(j)]}}, scale_by);
  }
}

}  // namespace artune::detail
