// 2-D hierarchical all-reduce: a ring reduce-scatter inside each machine, a
// ring all-reduce of each shard across machines by the GPUs holding it (one
// ring per local position, all in parallel), a ring all-gather inside each
// machine. Inter-machine traffic per GPU drops to 2(W−1)/W·m/G.

#include <fmt/format.h>

#include <numeric>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"

namespace artune::detail {

void emit_two_d(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const TwoDParams& p, int scale_by) {
  const int machines = static_cast<int>(p.grid.size());
  if (machines == 0) return;
  const int gpus = static_cast<int>(p.local_order.size());
  for (const auto& row : p.grid) {
    if (static_cast<int>(row.size()) != gpus) {
      throw InvalidInput(
          fmt::format("2d: machines must hold the same number of participants ({} and {})", row.size(), gpus));
    }
  }
  const RingParams local{{p.local_order}};
  std::vector<std::vector<Slot>> machine_slots;
  for (const auto& row : p.grid) {
    std::vector<Slot> ms;
    for (int d : row) ms.push_back(slots[static_cast<std::size_t>(d)]);
    machine_slots.push_back(std::move(ms));
  }
  for (const auto& ms : machine_slots) emit_ring_reduce_scatter(e, ms, count, local);
  // After the local reduce-scatter the GPU at ring rank r holds chunk r of its machine's sum; the
  // same local GPU holds the same chunk on every machine.
  std::vector<int> rank_of(static_cast<std::size_t>(gpus), -1);
  for (int r = 0; r < gpus; ++r) {
    const int l = p.local_order[static_cast<std::size_t>(r)];
    if (l < 0 || l >= gpus || rank_of[static_cast<std::size_t>(l)] >= 0) {
      throw InvalidInput(fmt::format("2d: local order is not a permutation of 0..{}", gpus - 1));
    }
    rank_of[static_cast<std::size_t>(l)] = r;
  }
  emit_rings_across_machines(
      e, machine_slots, [&](int l) { return padded_piece(count, gpus, rank_of[static_cast<std::size_t>(l)]); },
      scale_by);
  for (const auto& ms : machine_slots) emit_ring_all_gather(e, ms, count, local);
}

void emit_rings_across_machines(Emitter& e, const std::vector<std::vector<Slot>>& machine_slots,
                                const std::function<std::pair<std::int64_t, std::int64_t>(int)>& shard, int scale_by) {
  if (machine_slots.empty()) return;
  std::vector<int> across(machine_slots.size());
  std::iota(across.begin(), across.end(), 0);
  // Local positions in index order, as a ring scales its owned chunks (so one machine gives the ring plan).
  for (std::size_t l = 0; l < machine_slots.front().size(); ++l) {
    const auto [off, len] = shard(static_cast<int>(l));
    if (len == 0) continue;
    std::vector<Slot> column;
    for (const auto& ms : machine_slots) {
      Slot s = ms[l];
      s.offset += off;
      column.push_back(s);
    }
    emit_ring(e, column, len, RingParams{{across}}, scale_by);
  }
}

// ---------------------------------------------------------------------------
// The 2-D family's record.

namespace {

void emit_two_d_family(Emitter& e, const Setup& s, const AlgToken& token) {
  TwoDParams p{s.workers, local_order(s, token)};
  emit_two_d(e, user_slots(ranks(s)), s.options.count, p, s.scale_by);
}

// A ring in every machine (reduce-scatter and all-gather) plus one ring across machines per local GPU,
// whose chunks the avg scales.
std::uint64_t two_d_max_ops(const Setup& s, const AlgToken& token) {
  const std::int64_t count = s.options.count;
  const auto machines = static_cast<std::int64_t>(s.workers.size());
  const auto gpus = static_cast<std::int64_t>(local_order(s, token).size());
  return static_cast<std::uint64_t>(machines) * ring_ops(gpus, gpus, count) +
         ring_ops(machines, gpus * machines, count) + scale_ops(s, gpus * machines, count);
}

// One machine: the ring, exact. W machines of G GPUs: the local reduce-scatter (G−1)(α + n/G·(β + γ)),
// a ring all-reduce of n/G across the machines, the local all-gather (G−1)(α + n/G·β); a lower bound,
// as the G rings across machines share the network.
ClosedForm two_d_closed_form(const ClosedFormInput& in) {
  if (in.machines <= 1) return {ring_allreduce_us(in.ranks, in.bytes, in.link), Exactness::kExact};
  const int g = in.ranks / in.machines;
  const double shard = in.bytes / g;
  const AlphaBetaGamma& c = in.link;
  const double local = (g - 1) * (2 * c.alpha_us + shard * (2 * c.beta_us_per_byte + c.gamma_us_per_byte));
  return {local + ring_allreduce_us(in.machines, shard, in.network), Exactness::kLowerBound};
}

// Clusters: the best few ring orders (and identity) for the in-machine rings.
void two_d_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.machines == 1) return;
  for (std::size_t k = 0; k < ctx.orders.size(); ++k) {
    const bool identity = is_identity(ctx.orders[k]);
    if (k >= ctx.expanded_orders && !identity) continue;
    out.push_back({"2d", identity ? std::vector<int>{} : ctx.orders[k], {}});
  }
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family two_d{
    .name = "2d",
    .readable = "2d-hierarchical",
    .specs = {{"2d", "2d-hierarchical", ArgKind::kNone,
               "2-D hierarchical: reduce-scatter in machine, all-reduce across, all-gather in machine"}},
    .emit = detail::emit_two_d_family,
    .closed_form = detail::two_d_closed_form,
    .max_ops = detail::two_d_max_ops,
    .candidates = detail::two_d_candidates,
    .tuner_position = 70,
};
}  // namespace artune::family
