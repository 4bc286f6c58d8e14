// Logarithmic all-gathers (issue 17): Bruck's algorithm (any rank count, ⌈lg n⌉ steps) and
// recursive doubling (lg n steps for a power of two; otherwise the extra ranks fold onto the first
// ones and get the result back, two more steps). Blocks go straight to their final offsets, so
// Bruck needs neither its usual rotated scratch buffer nor the final local rotation. Their registry
// records are at the bottom.

#include <algorithm>
#include <bit>

#include "artune/algorithms/families/collective_families.hpp"

namespace artune::detail {

namespace {

// Copies the blocks of the cyclic run of `len` members starting at `first` from one slot to another.
void copy_cyclic(Emitter& e, const Members& m, const Slot& from, const Slot& to, int first, int len) {
  const int n = m.size();
  const int end = first + len;
  move_blocks(e, m, from, to, first, std::min(end, n));
  if (end > n) move_blocks(e, m, from, to, 0, end - n);
}

}  // namespace

void emit_allgather_bruck(Emitter& e, const Members& members) {
  const int n = members.size();
  // After step k member r holds the blocks of members r … r + 2^(k+1) − 1 (mod n).
  for (int dist = 1; dist < n; dist *= 2) {
    const int len = std::min(dist, n - dist);
    for (int r = 0; r < n; ++r) {
      const int src = (r + dist) % n;
      copy_cyclic(e, members, members.slots[static_cast<std::size_t>(src)], members.slots[static_cast<std::size_t>(r)],
                  src, len);
    }
  }
}

void emit_allgather_rd(Emitter& e, const Members& members) {
  const int n = members.size();
  if (n < 2) return;
  const int m = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - m;  // member m+i folds onto member i
  auto slot = [&](int r) -> const Slot& { return members.slots[static_cast<std::size_t>(r)]; };
  for (int i = 0; i < extra; ++i) move_blocks(e, members, slot(m + i), slot(i), m + i, m + i + 1);
  // Core member i holds the blocks of an aligned group of `dist` cores: cores c0 … c0+dist−1 and the
  // extra blocks m+c of those below `extra`; the partner i ^ dist sends its group's.
  for (int dist = 1; dist < m; dist *= 2) {
    for (int i = 0; i < m; ++i) {
      const int j = i ^ dist;
      const int c0 = j & ~(dist - 1);
      move_blocks(e, members, slot(j), slot(i), c0, c0 + dist);
      const int x_end = std::min(c0 + dist, extra);
      if (c0 < x_end) move_blocks(e, members, slot(j), slot(i), m + c0, m + x_end);
    }
  }
  for (int i = 0; i < extra; ++i) {
    move_blocks(e, members, slot(i), slot(m + i), 0, m + i);
    move_blocks(e, members, slot(i), slot(m + i), m + i + 1, n);
  }
}

}  // namespace artune::detail

namespace artune::detail {
namespace {

void emit_allgather_bruck_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_allgather_bruck(e, all_ranks(ranks(s)));
}

void emit_allgather_rd_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_allgather_rd(e, all_ranks(ranks(s)));
}

bool power_of_two(int p) { return p > 0 && (p & (p - 1)) == 0; }

// Recursive doubling: ⌈lg p⌉α + (p−1)/p·nβ, exact for a power of two on one uniform machine; otherwise a
// lower bound (the fold adds two rounds, and its last copy alone carries (p−1)/p·n).
ClosedForm allgather_rd_closed_form(const ClosedFormInput& in) {
  const bool exact = in.machines == 1 && power_of_two(in.ranks);
  return {bruck_allgather_us(in.ranks, in.bytes, in.link), exact ? Exactness::kExact : Exactness::kLowerBound};
}

// Bruck: the same for a power of two. Otherwise some of its rounds send blocks their source already held
// (at p = 3 both rounds run at once over different links), so only a bound: one message, and every rank's
// (p−1)/p·n through all of its links, at least one block through one of them.
ClosedForm allgather_bruck_closed_form(const ClosedFormInput& in) {
  if (power_of_two(in.ranks) || in.ranks < 2) return allgather_rd_closed_form(in);
  const double p = in.ranks;
  const double bandwidth =
      std::max(in.bytes / p * in.link.beta_us_per_byte, (p - 1) / p * in.bytes * in.ingress_us_per_byte);
  return {in.link.alpha_us + bandwidth, Exactness::kLowerBound};
}

void bruck_candidates(CandidateContext&, std::vector<CandidateSeed>& out) { out.push_back({"bruck", {}, {}}); }
void rd_candidates(CandidateContext&, std::vector<CandidateSeed>& out) { out.push_back({"rd", {}, {}}); }

}  // namespace
}  // namespace artune::detail

namespace artune::family {
const Family allgather_bruck{
    .collective = Collective::kAllGather,
    .name = "bruck",
    .readable = "bruck",
    .specs = {{"bruck", nullptr, ArgKind::kNone,
               "Bruck all-gather: ceil(lg n) steps for any n, blocks copied to their places"}},
    .emit = detail::emit_allgather_bruck_family,
    .across = detail::emit_allgather_bruck,
    .closed_form = detail::allgather_bruck_closed_form,
    .candidates = detail::bruck_candidates,
    .tuner_position = 20,
};
const Family allgather_rd{
    .collective = Collective::kAllGather,
    .name = "rd",
    .readable = "recursive-doubling",
    .specs = {{"rd", "recursive-doubling", ArgKind::kNone,
               "recursive-doubling all-gather: lg n exchanges; a non-power-of-two n folds its extra ranks first"}},
    .emit = detail::emit_allgather_rd_family,
    .across = detail::emit_allgather_rd,
    .closed_form = detail::allgather_rd_closed_form,
    .candidates = detail::rd_candidates,
    .tuner_position = 30,
};
}  // namespace artune::family
