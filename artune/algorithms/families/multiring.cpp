// Multi-ring: K plain rings along link-disjoint Hamiltonian cycles, each
// all-reducing its own share of the buffer, so K channels carry traffic at
// once (NCCL's channels, Blink's packing of rings).
//
// Cost: with K rings on disjoint links each of bandwidth B, the bandwidth term
// of a ring, 2(n−1)/n·m/B, shrinks to 2(n−1)/n·m/(K·B).

#include <fmt/format.h>

#include <algorithm>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"

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

// ---------------------------------------------------------------------------
// The multi-ring family's record.

namespace {

// Rings found per machine when mring has no #K: enough for any machine shipped.
constexpr int kMaxRings = 64;
// Rings sought on machines beyond the exhaustive searches' size.
constexpr int kLargeRings = 4;

MultiRingParams multiring_params(const Setup& s, const AlgToken& token) {
  const auto& nodes = s.topo.nodes();
  std::vector<std::vector<std::vector<int>>> per_worker;  // rings as ranks
  int holds = kMaxRings;
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    const int m = s.worker_machine[w];
    const auto gpus = s.topo.gpus_of_machine(m);
    std::vector<int> rank_of_local(gpus.size(), -1);
    for (int r : s.workers[w]) {
      const int node = s.nodes[static_cast<std::size_t>(r)];
      if (nodes[static_cast<std::size_t>(node)].kind != NodeKind::kGpu) {
        throw InvalidInput(fmt::format("{}: rings follow GPU links; {} is not a GPU", token_text(token),
                                       nodes[static_cast<std::size_t>(node)].id));
      }
      const auto it = std::find(gpus.begin(), gpus.end(), node);
      rank_of_local[static_cast<std::size_t>(it - gpus.begin())] = r;
    }
    if (static_cast<std::size_t>(
            std::count_if(rank_of_local.begin(), rank_of_local.end(), [](int r) { return r >= 0; })) != gpus.size()) {
      throw InvalidInput(
          fmt::format("{}: rings span whole machines; every GPU of machine {} must take part", token_text(token), m));
    }
    std::vector<std::vector<int>> rings;
    for (const auto& ring : link_disjoint_rings(s.topo, m, token.arg < 0 ? kMaxRings : token.arg)) {
      std::vector<int> mapped;
      for (int local : ring) mapped.push_back(rank_of_local[static_cast<std::size_t>(local)]);
      rings.push_back(std::move(mapped));
    }
    holds = std::min(holds, static_cast<int>(rings.size()));
    per_worker.push_back(std::move(rings));
  }
  if (holds == 0) {
    throw InvalidInput(fmt::format("{}: topology '{}' holds no link-disjoint ring", token_text(token), s.topo.name()));
  }
  const int want = token.arg < 0 ? holds : token.arg;
  if (want > holds) {
    throw InvalidInput(fmt::format("{}: topology '{}' holds {} link-disjoint ring{}, not {}", token_text(token),
                                   s.topo.name(), holds, holds == 1 ? "" : "s", want));
  }
  // Across machines ring j visits each machine along that machine's ring j (broken open where it
  // leaves for the next machine).
  MultiRingParams p;
  for (int j = 0; j < want; ++j) {
    std::vector<int> order;
    for (const auto& rings : per_worker) {
      const auto& ring = rings[static_cast<std::size_t>(j)];
      order.insert(order.end(), ring.begin(), ring.end());
    }
    p.rings.push_back(std::move(order));
  }
  return p;
}

void emit_multiring_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_multiring(e, user_slots(ranks(s)), s.options.count, multiring_params(s, token), s.scale_by);
}

// K plain rings, ring j over even_piece(count, K, j) cut into n chunks: at most n·K chunks in all.
std::uint64_t multiring_max_ops(const Setup& s, const AlgToken& token) {
  const auto rings = static_cast<std::int64_t>(multiring_params(s, token).rings.size());
  return ring_ops(ranks(s), rings * ranks(s), s.options.count) + scale_ops(s, rings * ranks(s), s.options.count);
}

// K rings on disjoint links in lockstep: each tick moves n/(Kp) bytes per link, and every device reduces
// the K rings' chunks at once, sharing its reducer (n/p·γ per tick): 2(p−1)α + 2(p−1)/p·(n/K)·β +
// (p−1)/p·nγ, exact on one machine; across machines a lower bound.
ClosedForm multiring_closed_form(const ClosedFormInput& in) {
  int rings = in.token.arg;
  if (rings < 1) rings = std::max(1, static_cast<int>(link_disjoint_rings(in.topo, 0, kMaxRings).size()));
  const int p = in.ranks;
  if (p < 2) return {0.0, Exactness::kExact};
  const double frac = static_cast<double>(p - 1) / p;
  const AlphaBetaGamma& c = in.link;
  const double t = 2.0 * (p - 1) * c.alpha_us + 2.0 * frac * in.bytes / rings * c.beta_us_per_byte +
                   frac * in.bytes * c.gamma_us_per_byte;
  return {t, in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
}

// One machine of three or more GPUs: 2…K link-disjoint rings.
void multiring_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.machines > 1 || ctx.gpus < 3) return;
  const auto rings = link_disjoint_rings(ctx.topo, 0, ctx.large ? kLargeRings : ctx.gpus);
  *ctx.disjoint_rings = static_cast<int>(rings.size());
  for (int k = 2; k <= static_cast<int>(rings.size()); ++k) out.push_back({fmt::format("mring#{}", k), {}, {}});
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family multi_ring{
    .name = "mring",
    .readable = "multi-ring",
    .specs = {{"mring", "multi-ring", ArgKind::kRings, "multi-ring over link-disjoint Hamiltonian cycles; #K = rings"}},
    .emit = detail::emit_multiring_family,
    .closed_form = detail::multiring_closed_form,
    .max_ops = detail::multiring_max_ops,
    .candidates = detail::multiring_candidates,
    .tuner_position = 20,
};
}  // namespace artune::family
