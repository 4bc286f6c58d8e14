// Recursive-halving reduce-scatter (issue 17; Thakur, Rabenseifner and Gropp 2005, the first half
// of Rabenseifner's all-reduce): lg n steps, in step k the pairs at distance 2^⌊lg n⌋/2^(k+1) each
// reduce the half of their current blocks the partner keeps into the partner. A non-power-of-two
// n first reduces the last r = n − 2^⌊lg n⌋ ranks' buffers into ranks 0..r−1; rank i then also
// stands for block 2^⌊lg n⌋+i and hands it back at the end. Its registry record is at the bottom.

#include <algorithm>
#include <bit>

#include "artune/algorithms/families/collective_families.hpp"

namespace artune::detail {

void emit_reducescatter_halving(Emitter& e, const Members& members) {
  const int n = members.size();
  if (n < 1) return;
  const int m = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - m;
  auto slot = [&](int r) -> const Slot& { return members.slots[static_cast<std::size_t>(r)]; };
  // The fold: every block of the members (a flat plan: the whole buffer, one op).
  for (int i = 0; i < extra; ++i) move_blocks(e, members, slot(m + i), slot(i), 0, n, true);
  for (int dist = m / 2; dist >= 1; dist /= 2) {
    for (int i = 0; i < m; ++i) {
      // Member i keeps the cores c0 … c0+dist−1 of its half (and their extra blocks); its partner
      // reduces its copy of them into i.
      const int j = i ^ dist;
      const int c0 = i & ~(dist - 1);
      move_blocks(e, members, slot(j), slot(i), c0, c0 + dist, true);
      const int x_end = std::min(c0 + dist, extra);
      if (c0 < x_end) move_blocks(e, members, slot(j), slot(i), m + c0, m + x_end, true);
    }
  }
  for (int i = 0; i < extra; ++i) move_blocks(e, members, slot(i), slot(m + i), m + i, m + i + 1);
}

}  // namespace artune::detail

namespace artune::detail {
namespace {

void emit_reducescatter_halving_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_reducescatter_halving(e, all_ranks(ranks(s)));
  scale_owned_blocks(e, user_slots(ranks(s)), s.scale_by);
}

// lg p·α + (p−1)/p·n(β + γ), exact for a power of two on one uniform machine. Otherwise a lower bound:
// the fold's full-buffer reduce alone costs α + n(β + γ), so ⌊lg p⌋ + 1 rounds and (p−1)/p·n(β + γ).
ClosedForm halving_closed_form(const ClosedFormInput& in) {
  const int p = in.ranks;
  const int core = static_cast<int>(std::bit_floor(static_cast<unsigned>(std::max(p, 1))));
  if (core == p) {
    return {halving_reducescatter_us(p, in.bytes, in.link),
            in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
  }
  const AlphaBetaGamma& c = in.link;
  const double rounds = std::bit_width(static_cast<unsigned>(core));  // ⌊lg p⌋ + 1
  return {rounds * c.alpha_us + static_cast<double>(p - 1) / p * in.bytes * (c.beta_us_per_byte + c.gamma_us_per_byte),
          Exactness::kLowerBound};
}

void halving_candidates(CandidateContext&, std::vector<CandidateSeed>& out) { out.push_back({"halving", {}, {}}); }

}  // namespace
}  // namespace artune::detail

namespace artune::family {
const Family reducescatter_halving{
    .collective = Collective::kReduceScatter,
    .name = "halving",
    .readable = "recursive-halving",
    .specs = {{"halving", "recursive-halving", ArgKind::kNone,
               "recursive-halving reduce-scatter: lg n steps; a non-power-of-two n folds its extra ranks first"}},
    .emit = detail::emit_reducescatter_halving_family,
    .across = detail::emit_reducescatter_halving,
    .closed_form = detail::halving_closed_form,
    .candidates = detail::halving_candidates,
    .tuner_position = 20,
};
}  // namespace artune::family
