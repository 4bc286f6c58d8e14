// Recursive halving-doubling, as TF's build_recursive_hd_all_reduce for a
// power-of-two device count, with a Rabenseifner fold for any other count.
//
// Cost (p = 2^k devices, m bytes): 2 lg p·α + 2(p−1)/p·mβ + (p−1)/p·mγ.
// With n = p + r devices the r extra ones first send their whole buffer to a
// partner (α + mβ + mγ) and get the result back at the end (α + mβ).

#include <fmt/format.h>

#include <limits>
#include <numeric>
#include <set>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"

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

// ---------------------------------------------------------------------------
// The halving-doubling family's record.

namespace {

void emit_rechd_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_rechd(e, ordered_slots(s, token), s.options.count, s.scale_by);
}

UpperLevel rechd_upper(Emitter&, const Setup&, const SpecRange&) {
  return [](Emitter& em, const std::vector<Slot>& reps, std::int64_t count, int scale_by) {
    emit_rechd(em, reps, count, scale_by);
  };
}

// Exact on one machine (every pair of a step on its own link); across machines a lower bound.
ClosedForm rechd_closed_form(const ClosedFormInput& in) {
  return {halving_doubling_us(in.ranks, in.bytes, in.link),
          in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
}

/// Recursive halving-doubling cost of a device order (first step pairs neighbours, as TF does):
/// Σ over steps of the data exchanged / the slowest pair of that step, in arbitrary units.
double rechd_cost(const std::vector<int>& order, const std::vector<std::vector<double>>& bw) {
  const std::size_t p = order.size();
  double cost = 0, data = 0.5;
  for (std::size_t span = 1; span < p; span *= 2, data /= 2) {
    double slowest = std::numeric_limits<double>::infinity();
    for (std::size_t d = 0; d + span < p; ++d) {
      if ((d % (2 * span)) >= span) continue;
      const int a = order[d], b = order[d + span];
      slowest = std::min(slowest, std::min(bw[a][b], bw[b][a]));
    }
    cost += data / std::max(slowest, 1e-9);
  }
  return cost;
}

/// Hill-climbs pairwise swaps from `start` to lower rechd_cost (deterministic, first improvement).
std::vector<int> improve_rechd_order(std::vector<int> order, const std::vector<std::vector<double>>& bw) {
  double best = rechd_cost(order, bw);
  for (bool improved = true; improved;) {
    improved = false;
    for (std::size_t i = 0; i < order.size() && !improved; ++i) {
      for (std::size_t j = i + 1; j < order.size() && !improved; ++j) {
        std::swap(order[i], order[j]);
        const double c = rechd_cost(order, bw);
        if (c < best - 1e-12) {
          best = c;
          improved = true;
        } else {
          std::swap(order[i], order[j]);
        }
      }
    }
  }
  return order;
}

// One machine: identity, the best ring order and a hill-climbed order; clusters: identity.
void rechd_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.machines > 1) {
    out.push_back({"rechd", {}, {}});
    return;
  }
  std::vector<int> identity(static_cast<std::size_t>(ctx.gpus));
  std::iota(identity.begin(), identity.end(), 0);
  std::set<std::vector<int>> orders;
  orders.insert(identity);
  if (!ctx.best_cycles.empty()) orders.insert(ctx.best_cycles.front());
  const int g = ctx.gpus;
  if ((g & (g - 1)) == 0 && !ctx.large) orders.insert(improve_rechd_order(identity, ctx.bandwidth));
  for (const auto& o : orders) out.push_back({"rechd", o == identity ? std::vector<int>{} : o, {}});
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family halving_doubling{
    .name = "rechd",
    .readable = "halving-doubling",
    .specs = {{"rechd", "halving-doubling", ArgKind::kNone,
               "recursive halving-doubling (TF build_recursive_hd_all_reduce), any device count"}},
    .emit = detail::emit_rechd_family,
    .upper = detail::rechd_upper,
    .closed_form = detail::rechd_closed_form,
    .candidates = detail::rechd_candidates,
    .tuner_position = 30,
};
}  // namespace artune::family
