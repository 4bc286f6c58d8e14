// Ring all-reduce with subchunks, as TF's build_ring_all_reduce.
//
// Cost (n devices, m bytes, one subchunk): 2(n−1) steps of m/n bytes each,
// 2(n−1)α + 2(n−1)/n·mβ + (n−1)/n·mγ. Subchunks give every device S
// different predecessors per tick so parallel channels carry traffic at once.

#include <fmt/format.h>

#include <algorithm>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

RingPermutations ring_permutations(int workers, int subchunks, const std::vector<int>& gpu_perm) {
  const int gpus = static_cast<int>(gpu_perm.size());
  if (workers < 0) throw InvalidInput(fmt::format("ring: {} workers", workers));
  RingPermutations out;
  const int devices = workers * gpus;
  if (devices == 0) return out;
  if (subchunks < 1) throw InvalidInput(fmt::format("xring#{}: subchunks must be ≥ 1", subchunks));
  if (subchunks > gpus) {
    throw InvalidInput(
        fmt::format("xring#{}: {} subchunks exceed the {} GPUs per worker of the ring", subchunks, subchunks, gpus));
  }
  for (int i : gpu_perm) {
    if (i < 0 || i >= gpus) {
      throw InvalidInput(
          fmt::format("{}: entry {} is not a local GPU index in 0..{}", parameter("gpu_perm"), i, gpus - 1));
    }
  }
  // TF: max(1, int(num_gpus / num_subchunks)), integer division of positives.
  const int rotation_interval = std::max(1, gpus / subchunks);
  for (int s = 0; s < subchunks; ++s) {
    std::vector<int> full_order;
    full_order.reserve(static_cast<std::size_t>(devices));
    const int offset = s * rotation_interval;
    for (int w = 0; w < workers; ++w) {
      std::vector<int> default_order;
      for (int i : gpu_perm) default_order.push_back(w * gpus + i);
      // Python's default_order[offset:] + default_order[:offset]; offset may exceed the length
      // (then the slice is empty and the order is unrotated).
      const int cut = std::min(offset, gpus);
      full_order.insert(full_order.end(), default_order.begin() + cut, default_order.end());
      full_order.insert(full_order.end(), default_order.begin(), default_order.begin() + cut);
    }
    out.order_by_s.push_back(std::move(full_order));
  }
  out.pred_by_s_d.assign(static_cast<std::size_t>(subchunks), std::vector<int>(static_cast<std::size_t>(devices), -1));
  out.rank_by_s_d.assign(static_cast<std::size_t>(subchunks), std::vector<int>(static_cast<std::size_t>(devices), -1));
  for (int s = 0; s < subchunks; ++s) {
    const auto& order = out.order_by_s[static_cast<std::size_t>(s)];
    for (int t = 0; t < devices; ++t) {
      const int d = order[static_cast<std::size_t>(t)];
      // TF keeps the first position of a device (its inner loop breaks there).
      if (out.rank_by_s_d[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] >= 0) continue;
      out.rank_by_s_d[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] = t;
      out.pred_by_s_d[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)] =
          order[static_cast<std::size_t>((t + devices - 1) % devices)];
    }
  }
  return out;
}

namespace detail {

namespace {

struct RingView {
  int n;
  int subchunks;
  std::vector<std::vector<int>> rank;  // rank[s][slot]
  std::vector<std::vector<int>> pred;  // pred[s][slot]
};

RingView view_of(const std::vector<Slot>& slots, const RingParams& p) {
  const int n = static_cast<int>(slots.size());
  RingView v{n, static_cast<int>(p.orders.size()), {}, {}};
  if (v.subchunks < 1) throw InvalidInput("ring: no ring order");
  for (const auto& order : p.orders) {
    if (static_cast<int>(order.size()) != n) {
      throw InvalidInput(fmt::format("ring: order of {} devices for {} slots", order.size(), n));
    }
    std::vector<int> rank(static_cast<std::size_t>(n), -1);
    std::vector<int> pred(static_cast<std::size_t>(n), -1);
    for (int t = 0; t < n; ++t) {
      const int d = order[static_cast<std::size_t>(t)];
      if (d < 0 || d >= n || rank[static_cast<std::size_t>(d)] >= 0) {
        throw InvalidInput(fmt::format("ring: order is not a permutation of 0..{}", n - 1));
      }
      rank[static_cast<std::size_t>(d)] = t;
      pred[static_cast<std::size_t>(d)] = order[static_cast<std::size_t>((t + n - 1) % n)];
    }
    v.rank.push_back(std::move(rank));
    v.pred.push_back(std::move(pred));
  }
  return v;
}

}  // namespace

namespace {

// Visits TF's ring schedule: for every tick, device and subchunk, the chunk a
// device receives from its predecessor. `first_lag` is 2 for the reduction
// pass (_build_ring_gather) and 1 for the scatter pass (_build_ring_scatter).
template <typename Step>
void for_each_ring_step(const std::vector<Slot>& slots, std::int64_t count, const RingParams& p, int first_lag,
                        Step&& step) {
  const RingView v = view_of(slots, p);
  const int n = v.n;
  const RingChunks chunks{count, n, v.subchunks};
  for (int tick = 0; tick + 1 < n; ++tick) {
    for (int d = 0; d < n; ++d) {
      for (int s = 0; s < v.subchunks; ++s) {
        const int rank = v.rank[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)];
        const int seg = (rank + n - (first_lag + tick)) % n;
        const int pred = v.pred[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)];
        const auto [off, len] = chunks.chunk(seg * v.subchunks + s);
        step(at(slots[static_cast<std::size_t>(pred)], off, len), at(slots[static_cast<std::size_t>(d)], off, len));
      }
    }
  }
}

}  // namespace

void emit_ring_reduce_scatter(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const RingParams& p) {
  // The predecessor updated this chunk in the previous tick and does not touch it in this
  // one, so reducing straight out of its buffer equals TF's "last tick's value".
  for_each_ring_step(slots, count, p, 2, [&](const Location& src, const Location& dst) { e.reduce(src, dst); });
}

void emit_ring_all_gather(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const RingParams& p) {
  for_each_ring_step(slots, count, p, 1, [&](const Location& src, const Location& dst) { e.copy(src, dst); });
}

void emit_ring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const RingParams& p, int scale_by) {
  emit_ring_reduce_scatter(e, slots, count, p);
  if (scale_by != kNoScale) {
    const RingView v = view_of(slots, p);
    const RingChunks chunks{count, v.n, v.subchunks};
    // TF's _apply_unary_to_chunks runs on every chunk of every device, but only the fully
    // reduced ones survive the scatter pass: scaling just those scales each element once.
    for (int d = 0; d < v.n; ++d) {
      for (int s = 0; s < v.subchunks; ++s) {
        const int seg = v.rank[static_cast<std::size_t>(s)][static_cast<std::size_t>(d)];
        const auto [off, len] = chunks.chunk(seg * v.subchunks + s);
        e.scale(at(slots[static_cast<std::size_t>(d)], off, len), scale_by);
      }
    }
  }
  emit_ring_all_gather(e, slots, count, p);
}

}  // namespace detail
// ---------------------------------------------------------------------------
// The ring family's record.

namespace detail {

// Orders of TF's _ring_permutations mapped from global device index (worker·G + i) to slots.
RingParams ring_params(const AlgToken& token, const std::vector<std::vector<int>>& workers,
                       const std::vector<int>& perm) {
  const int subchunks = token.arg < 0 ? 1 : token.arg;
  const int g = static_cast<int>(perm.size());
  if (subchunks > g) {
    throw InvalidInput(
        fmt::format("{}: {} subchunks exceed the {} devices per worker of the ring (TF requires "
                    "num_subchunks <= num_gpus)",
                    token_text(token), subchunks, g));
  }
  const RingPermutations perms = ring_permutations(static_cast<int>(workers.size()), subchunks, perm);
  RingParams p;
  for (const auto& order : perms.order_by_s) {
    std::vector<int> mapped;
    for (int d : order) mapped.push_back(workers[static_cast<std::size_t>(d / g)][static_cast<std::size_t>(d % g)]);
    p.orders.push_back(std::move(mapped));
  }
  return p;
}

namespace {

void emit_ring_family(Emitter& e, const Setup& s, const AlgToken& token) {
  const RingParams params = ring_params(token, s.workers, local_order(s, token));
  emit_ring(e, user_slots(ranks(s)), s.options.count, params, s.scale_by);
}

// n·S chunks around the ring (S subchunks, one order each), plus a scale per chunk for avg.
std::uint64_t ring_max_ops(const Setup& s, const AlgToken& token) {
  const auto subchunks = static_cast<std::int64_t>(ring_params(token, s.workers, local_order(s, token)).orders.size());
  return ring_ops(ranks(s), subchunks * ranks(s), s.options.count) +
         scale_ops(s, subchunks * ranks(s), s.options.count);
}

// TF build_nccl_then_ring / build_shuffle_then_ring: a ring over the workers with gpu_perm [0].
UpperLevel ring_upper(Emitter&, const Setup& s, const SpecRange& range) {
  std::vector<std::vector<int>> one_each;
  for (int w = 0; w < static_cast<int>(s.workers.size()); ++w) one_each.push_back({w});
  const RingParams p = ring_params(*range.inter, one_each, {0});
  return [p](Emitter& em, const std::vector<Slot>& reps, std::int64_t count, int scale_by) {
    emit_ring(em, reps, count, p, scale_by);
  };
}

// One subchunk on one machine: exact (every tick one transfer and reduce per link, all in lockstep). S
// subchunks: the chain of one subchunk's ring over n/S bytes, a lower bound (its S rings may share links
// and every device's reducer). Across machines: the same with the best pair's constants, a lower bound.
ClosedForm ring_closed_form(const ClosedFormInput& in) {
  const int subchunks = in.token.arg < 0 ? 1 : in.token.arg;
  const double t = ring_allreduce_us(in.ranks, in.bytes / subchunks, in.link);
  const bool exact = subchunks == 1 && in.machines == 1;
  return {t, exact ? Exactness::kExact : Exactness::kLowerBound};
}

// Every subchunk count for the best few orders (and identity), one subchunk for the rest.
void ring_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  for (std::size_t k = 0; k < ctx.orders.size(); ++k) {
    const bool expand = k < ctx.expanded_orders || is_identity(ctx.orders[k]);
    const std::vector<int> perm = is_identity(ctx.orders[k]) ? std::vector<int>{} : ctx.orders[k];
    for (int s : ctx.subchunks) {
      if (!expand && s != 1) continue;
      out.push_back({s == 1 ? "xring" : fmt::format("xring#{}", s),
                     perm,
                     {},
                     expand ? CandidateSeed::Segments::kAll : CandidateSeed::Segments::kNone});
    }
  }
}

}  // namespace
}  // namespace detail

namespace family {
const Family ring{
    .name = "ring",
    .readable = "ring",
    .specs = {{"xring", "ring", ArgKind::kSubchunks, "ring all-reduce (TF build_ring_all_reduce); #S = subchunks"}},
    .emit = detail::emit_ring_family,
    .upper = detail::ring_upper,
    .closed_form = detail::ring_closed_form,
    .max_ops = detail::ring_max_ops,
    .candidates = detail::ring_candidates,
    .tuner_position = 10,
};
}  // namespace family

}  // namespace artune
