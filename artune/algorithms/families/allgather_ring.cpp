// Ring all-gather and ring reduce-scatter (issue 17): the two halves of the ring all-reduce as
// collectives of their own, over the plan's blocks (even pieces, block k on rank k) rather than
// the ring all-reduce's padded chunks. Each rank sends (n−1)/n of the buffer over one link. The
// ring follows an order of the ranks (--gpu-perm inside each machine); 2d runs the same ring over
// sets of blocks. The ring families' registry records are at the bottom.

#include "artune/algorithms/families/collective_families.hpp"

namespace artune::detail {

std::vector<int> collective_ring_order(const Setup& s) {
  const std::vector<int>& perm = s.options.gpu_perm;
  std::vector<int> order;
  for (const auto& w : s.workers) {
    for (std::size_t l = 0; l < w.size(); ++l) order.push_back(w[perm.empty() ? l : static_cast<std::size_t>(perm[l])]);
  }
  return order;
}

void collective_ring_candidates(const char* spec, CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  for (std::size_t k = 0; k < ctx.orders.size(); ++k) {
    const bool identity = is_identity(ctx.orders[k]);
    const bool expand = k < ctx.expanded_orders || identity;
    out.push_back({spec,
                   identity ? std::vector<int>{} : ctx.orders[k],
                   {},
                   expand ? CandidateSeed::Segments::kAll : CandidateSeed::Segments::kNone});
  }
}

void ring_over_sets(Emitter& e, const std::vector<Slot>& slots, const std::vector<int>& members,
                    const std::vector<std::vector<int>>& sets, bool reduce) {
  const int k = static_cast<int>(members.size());
  for (int s = 0; s + 1 < k; ++s) {
    for (int i = 0; i < k; ++i) {
      const int owner = ((i - s - (reduce ? 1 : 0)) % k + k) % k;
      const Slot& from = slots[static_cast<std::size_t>(members[static_cast<std::size_t>(i)])];
      const Slot& to = slots[static_cast<std::size_t>(members[static_cast<std::size_t>((i + 1) % k)])];
      for (int b : sets[static_cast<std::size_t>(owner)]) {
        const Location src = blocks_at(e, from, b, b + 1);
        const Location dst = blocks_at(e, to, b, b + 1);
        if (reduce) {
          e.reduce(src, dst);
        } else {
          e.copy(src, dst);
        }
      }
    }
  }
}

void emit_allgather_ring(Emitter& e, const std::vector<Slot>& slots, const std::vector<int>& order) {
  std::vector<std::vector<int>> own;
  for (int r : order) own.push_back({r});
  ring_over_sets(e, slots, order, own, false);
}

void emit_reducescatter_ring(Emitter& e, const std::vector<Slot>& slots, const std::vector<int>& order, int scale_by) {
  std::vector<std::vector<int>> own;
  for (int r : order) own.push_back({r});
  // Block b starts at the member after its owner and gathers one rank per step; after n−1 steps it reaches b.
  ring_over_sets(e, slots, order, own, true);
  scale_owned_blocks(e, slots, scale_by);
}

}  // namespace artune::detail

// ---------------------------------------------------------------------------
// The ring all-gather and ring reduce-scatter records.

namespace artune::detail {
namespace {

void emit_allgather_ring_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_allgather_ring(e, user_slots(ranks(s)), collective_ring_order(s));
}

void emit_reducescatter_ring_family(Emitter& e, const Setup& s, const AlgToken&) {
  emit_reducescatter_ring(e, user_slots(ranks(s)), collective_ring_order(s), s.scale_by);
}

// Exact on one uniform machine; across machines the in-machine link's constants make it a lower bound.
ClosedForm allgather_ring_closed_form(const ClosedFormInput& in) {
  return {ring_allgather_us(in.ranks, in.bytes, in.link),
          in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
}

ClosedForm reducescatter_ring_closed_form(const ClosedFormInput& in) {
  return {ring_reducescatter_us(in.ranks, in.bytes, in.link),
          in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
}

// Across machines in a hybrid: the ring over the column's members, in machine order.
void ring_over_members(Emitter& e, const Members& m, bool reduce) {
  std::vector<int> order;
  std::vector<std::vector<int>> sets;
  for (int i = 0; i < m.size(); ++i) {
    order.push_back(i);
    sets.push_back({m.blocks[static_cast<std::size_t>(i)]});
  }
  ring_over_sets(e, m.slots, order, sets, reduce);
}

void allgather_ring_across(Emitter& e, const Members& m) { ring_over_members(e, m, false); }
void reducescatter_ring_across(Emitter& e, const Members& m) { ring_over_members(e, m, true); }

void ring_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  collective_ring_candidates("ring", ctx, out);
}

}  // namespace
}  // namespace artune::detail

namespace artune::family {
const Family allgather_ring{
    .collective = Collective::kAllGather,
    .name = "ring",
    .readable = "ring",
    .specs = {{"ring", "xring", ArgKind::kNone, "ring all-gather: n-1 steps, (n-1)/n of the buffer over each link"}},
    .emit = detail::emit_allgather_ring_family,
    .across = detail::allgather_ring_across,
    .closed_form = detail::allgather_ring_closed_form,
    .candidates = detail::ring_candidates,
    .tuner_position = 10,
};
const Family reducescatter_ring{
    .collective = Collective::kReduceScatter,
    .name = "ring",
    .readable = "ring",
    .specs = {{"ring", "xring", ArgKind::kNone, "ring reduce-scatter: n-1 steps of reduce into the next rank"}},
    .emit = detail::emit_reducescatter_ring_family,
    .across = detail::reducescatter_ring_across,
    .closed_form = detail::reducescatter_ring_closed_form,
    .candidates = detail::ring_candidates,
    .tuner_position = 10,
};
}  // namespace artune::family
