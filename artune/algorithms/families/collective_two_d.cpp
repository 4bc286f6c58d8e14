// 2-D hierarchical all-gather and reduce-scatter (issue 17), as the all-reduce's `2d` splits its
// work: the all-gather first rings across machines (every local position in parallel: GPU l of each
// machine collects the blocks of GPU l of the others), then inside each machine over those sets of
// blocks; the reduce-scatter runs the same two rings in reverse. Across machines every GPU moves
// (W−1)/W of its column only, as the ring over all ranks would for the whole buffer. Their registry
// records are at the bottom.

#include <fmt/format.h>

#include <algorithm>

#include "artune/algorithms/families/collective_families.hpp"
#include "artune/core/error.hpp"

namespace artune::detail {

namespace {

void check_grid(const std::vector<std::vector<int>>& workers, const char* what) {
  for (const auto& w : workers) {
    if (w.size() != workers.front().size()) {
      throw InvalidInput(fmt::format("2d: {} needs the same number of participants on every machine ({} and {})", what,
                                     w.size(), workers.front().size()));
    }
  }
}

// The blocks of local position l on every machine.
std::vector<int> column(const std::vector<std::vector<int>>& workers, std::size_t l) {
  std::vector<int> out;
  for (const auto& w : workers) out.push_back(w[l]);
  return out;
}

}  // namespace

void ring_columns_across_machines(Emitter& e, const std::vector<Slot>& slots,
                                  const std::vector<std::vector<int>>& workers, bool reduce) {
  for (std::size_t l = 0; l < workers.front().size(); ++l) {
    const std::vector<int> members = column(workers, l);
    std::vector<std::vector<int>> own;
    for (int r : members) own.push_back({r});
    ring_over_sets(e, slots, members, own, reduce);
  }
}

void emit_allgather_two_d(Emitter& e, const std::vector<Slot>& slots, const std::vector<std::vector<int>>& workers) {
  check_grid(workers, "all-gather");
  const std::size_t g = workers.front().size();
  ring_columns_across_machines(e, slots, workers, false);
  for (const auto& machine : workers) {
    std::vector<std::vector<int>> sets;
    for (std::size_t l = 0; l < g; ++l) sets.push_back(column(workers, l));
    ring_over_sets(e, slots, machine, sets, false);
  }
}

void emit_reducescatter_two_d(Emitter& e, const std::vector<Slot>& slots, const std::vector<std::vector<int>>& workers,
                              int scale_by) {
  check_grid(workers, "reduce-scatter");
  const std::size_t g = workers.front().size();
  for (const auto& machine : workers) {
    std::vector<std::vector<int>> sets;
    for (std::size_t l = 0; l < g; ++l) sets.push_back(column(workers, l));
    ring_over_sets(e, slots, machine, sets, true);
  }
  ring_columns_across_machines(e, slots, workers, true);
  scale_owned_blocks(e, slots, scale_by);
}

}  // namespace artune::detail

namespace artune::detail {
namespace {

void emit_allgather_two_d_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_allgather_two_d(e, user_slots(ranks(s)), s.workers);
}

void emit_reducescatter_two_d_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_reducescatter_two_d(e, user_slots(ranks(s)), s.workers, s.scale_by);
}

// W machines of G GPUs: W−1 steps of one block (n/p) across machines, G−1 steps of a column (n/G) inside
// them, one after the other (+ the reduces for reduce-scatter). A lower bound: the blocks of a step move as
// separate ops sharing the step's link.
ClosedForm two_d_time(const ClosedFormInput& in, bool reduce) {
  const int w = std::max(in.machines, 1);
  const int g = in.ranks / w;
  const double block = in.bytes / in.ranks, column = in.bytes / g;
  auto step = [&](const AlphaBetaGamma& c, double bytes) {
    return c.alpha_us + bytes * (c.beta_us_per_byte + (reduce ? c.gamma_us_per_byte : 0.0));
  };
  return {(w - 1) * step(in.network, block) + (g - 1) * step(in.link, column), Exactness::kLowerBound};
}

ClosedForm allgather_two_d_closed_form(const ClosedFormInput& in) { return two_d_time(in, false); }
ClosedForm reducescatter_two_d_closed_form(const ClosedFormInput& in) { return two_d_time(in, true); }

// Clusters only: on one machine 2d is the ring.
void two_d_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.machines > 1) out.push_back({"2d", {}, {}});
}

}  // namespace
}  // namespace artune::detail

namespace artune::family {
const Family allgather_two_d{
    .collective = Collective::kAllGather,
    .name = "2d",
    .readable = "2d-hierarchical",
    .specs = {{"2d", "2d-hierarchical", ArgKind::kNone,
               "2-D all-gather: ring across machines per local GPU, then ring inside each machine over those columns"}},
    .emit = detail::emit_allgather_two_d_family,
    .closed_form = detail::allgather_two_d_closed_form,
    .candidates = detail::two_d_candidates,
    .tuner_position = 70,
};
const Family reducescatter_two_d{
    .collective = Collective::kReduceScatter,
    .name = "2d",
    .readable = "2d-hierarchical",
    .specs = {{"2d", "2d-hierarchical", ArgKind::kNone,
               "2-D reduce-scatter: ring inside each machine over columns of blocks, then ring across machines"}},
    .emit = detail::emit_reducescatter_two_d_family,
    .closed_form = detail::reducescatter_two_d_closed_form,
    .candidates = detail::two_d_candidates,
    .tuner_position = 70,
};
}  // namespace artune::family
