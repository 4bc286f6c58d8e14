// Hierarchical copy, as TF's aggregate_gradients_using_hierarchical_copy
// (cross_device_utils.py), generalised from DGX-1's two NVLink quads to any
// grouping and to P packs.
//
// Per pack: every group reduces into its main device over in-group links
// (NVLink cliques), the mains reduce into group 0's main, which copies the
// total back to the other mains, and each main broadcasts inside its group.
// Rotating the main device with the pack index spreads the work over all
// devices, as TF rotates it with the gradient index.

#include <fmt/format.h>

#include <algorithm>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"

namespace artune::detail {

void emit_hiercopy(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const HierCopyParams& p,
                   int scale_by) {
  const int n = static_cast<int>(slots.size());
  if (n == 0) return;
  if (p.packs < 1) throw InvalidInput(fmt::format("hiercopy#{}: packs must be ≥ 1", p.packs));
  // group_of[d] = (group, position in group); every slot exactly once.
  std::vector<std::pair<int, int>> group_of(static_cast<std::size_t>(n), {-1, -1});
  for (int g = 0; g < static_cast<int>(p.groups.size()); ++g) {
    const auto& members = p.groups[static_cast<std::size_t>(g)];
    if (members.empty()) throw InvalidInput("hiercopy: empty group");
    for (int q = 0; q < static_cast<int>(members.size()); ++q) {
      const int d = members[static_cast<std::size_t>(q)];
      if (d < 0 || d >= n || group_of[static_cast<std::size_t>(d)].first >= 0) {
        throw InvalidInput("hiercopy: groups must partition the participants");
      }
      group_of[static_cast<std::size_t>(d)] = {g, q};
    }
  }
  for (const auto& gq : group_of) {
    if (gq.first < 0) throw InvalidInput("hiercopy: groups must partition the participants");
  }
  const int groups = static_cast<int>(p.groups.size());
  auto slot = [&](int d) -> const Slot& { return slots[static_cast<std::size_t>(d)]; };

  for (int i = 0; i < p.packs; ++i) {
    const auto [off, len] = even_piece(count, p.packs, i);
    if (len == 0) continue;
    // TF: group_0_main_device = i % num_devices; group 1's main sits at the same position of the
    // other quad ((main + n/2) % n on DGX-1). Other groups follow group 0 cyclically.
    const int main0 = i % n;
    const auto [g0, q0] = group_of[static_cast<std::size_t>(main0)];
    std::vector<int> order;  // groups, group 0 first
    std::vector<int> mains;  // main device of each entry of `order`
    for (int k = 0; k < groups; ++k) {
      const int g = (g0 + k) % groups;
      const auto& members = p.groups[static_cast<std::size_t>(g)];
      order.push_back(g);
      mains.push_back(g == g0 ? main0 : members[static_cast<std::size_t>(q0) % members.size()]);
    }
    // Aggregate each group on its main (TF add_n on the main device).
    for (std::size_t k = 0; k < order.size(); ++k) {
      for (int d : p.groups[static_cast<std::size_t>(order[k])]) {
        if (d != mains[k]) e.reduce(at(slot(d), off, len), at(slot(mains[k]), off, len));
      }
    }
    // Aggregate between the groups on group 0's main.
    for (std::size_t k = 1; k < order.size(); ++k) {
      e.reduce(at(slot(mains[k]), off, len), at(slot(main0), off, len));
    }
    if (scale_by != kNoScale) e.scale(at(slot(main0), off, len), scale_by);
    // Back to the root of each group, then to each member from its root.
    for (std::size_t k = 1; k < order.size(); ++k) {
      e.copy(at(slot(main0), off, len), at(slot(mains[k]), off, len));
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
      for (int d : p.groups[static_cast<std::size_t>(order[k])]) {
        if (d != mains[k]) e.copy(at(slot(mains[k]), off, len), at(slot(d), off, len));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The hierarchical-copy family's record.

namespace {

HierCopyParams hiercopy_params(const Setup& s, const AlgToken& token) {
  HierCopyParams p;
  p.packs = token.arg < 0 ? ranks(s) : token.arg;
  bool any = false;
  std::vector<char> placed(static_cast<std::size_t>(ranks(s)), 0);
  for (std::size_t w = 0; w < s.workers.size(); ++w) {
    const int m = s.worker_machine[w];
    const auto gpus = s.topo.gpus_of_machine(m);
    for (const auto& clique : nvlink_cliques(s.topo, m)) {
      std::vector<int> group;
      for (int local : clique) {
        const int node = gpus[static_cast<std::size_t>(local)];
        for (int r : s.workers[w]) {
          if (s.nodes[static_cast<std::size_t>(r)] == node) group.push_back(r);
        }
      }
      if (group.empty()) continue;
      any = any || group.size() > 1;
      for (int r : group) placed[static_cast<std::size_t>(r)] = 1;
      p.groups.push_back(std::move(group));
    }
  }
  for (int r = 0; r < ranks(s); ++r) {
    if (!placed[static_cast<std::size_t>(r)]) p.groups.push_back({r});  // CPU ranks: groups of their own
  }
  if (!any && ranks(s) > 1) {
    throw InvalidInput(
        fmt::format("{}: topology '{}' has no NVLink groups (hierarchical copy needs GPUs joined "
                    "by NVLink)",
                    token_text(token), s.topo.name()));
  }
  return p;
}

void emit_hiercopy_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_hiercopy(e, user_slots(ranks(s)), s.options.count, hiercopy_params(s, token), s.scale_by);
}

// One NVLink clique (a uniform machine): every pack is a shuffle shard on its main, the mains rotating
// over the p ranks, so the k = ⌈P/p⌉ packs of the busiest main share its links and reducer: exact, as
// the shuffle's closed form over shards of k·n/P bytes. Several groups (G cliques, the largest of q GPUs,
// over all machines): one pack's chain, (q−1) + (G−1) reduces and a copy back to the mains and into the
// groups, a lower bound.
ClosedForm hiercopy_closed_form(const ClosedFormInput& in) {
  const int packs = in.token.arg < 0 ? in.ranks : in.token.arg;
  const auto cliques = nvlink_cliques(in.topo, 0);
  const int groups = static_cast<int>(cliques.size()) * in.machines;
  if (groups <= 1) {
    const int per_main = (packs + in.ranks - 1) / in.ranks;
    return {shuffle_us(in.ranks, packs, in.bytes * per_main, in.link, true), Exactness::kExact};
  }
  int largest = 1;
  for (const auto& c : cliques) largest = std::max(largest, static_cast<int>(c.size()));
  const double shard = in.bytes / packs;
  const AlphaBetaGamma& c = in.link;
  const int reduces = (largest - 1) + (groups - 1);
  const int copies = 1 + (largest > 1 ? 1 : 0);
  const double t =
      (reduces + copies) * (c.alpha_us + shard * c.beta_us_per_byte) + reduces * shard * c.gamma_us_per_byte;
  return {t, Exactness::kLowerBound};
}

// One machine with two or more NVLink cliques: 1…2G packs (powers of two), unsegmented.
void hiercopy_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  *ctx.cliques = nvlink_cliques(ctx.topo, 0);
  if (ctx.machines > 1) return;
  const bool joined = std::any_of(ctx.cliques->begin(), ctx.cliques->end(), [](const auto& c) { return c.size() > 1; });
  if (ctx.cliques->size() < 2 || !joined) return;
  for (int packs = 1; packs <= 2 * std::min(ctx.gpus, ctx.exhaustive_gpus); packs *= 2) {
    out.push_back({fmt::format("hiercopy#{}", packs), {}, {}, CandidateSeed::Segments::kNone});
  }
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family hierarchical_copy{
    .name = "hiercopy",
    .readable = "hierarchical-copy",
    .specs = {{"hiercopy", "hierarchical-copy", ArgKind::kPacks,
               "hierarchical copy over NVLink cliques (TF DGX-1 algorithm); #P = packs"}},
    .emit = detail::emit_hiercopy_family,
    .closed_form = detail::hiercopy_closed_form,
    .candidates = detail::hiercopy_candidates,
    .tuner_position = 50,
};
}  // namespace artune::family
