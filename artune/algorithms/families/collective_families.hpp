#pragma once
// Internal to the algorithms module: emitters of the all-gather and reduce-scatter families
// (issue 17), whose records (registry.hpp, ARTUNE_COLLECTIVE_FAMILIES) live in the same files.
// Slot k is rank k and owns block collective_block(plan, k) of the region (even blocks, or the
// per-rank sizes of an all-gather-v).

#include <cstdint>
#include <vector>

#include "artune/algorithms/families/families.hpp"
#include "artune/algorithms/spec.hpp"

namespace artune::detail {

/// Blocks [first, last) of a slot's region, the plan's blocks (collective_block: even, or the per-rank
/// sizes of an all-gather-v), as one contiguous run.
inline Location blocks_at(Emitter& e, const Slot& slot, int first, int last) {
  if (first >= last) return at(slot, 0, 0);
  const std::int64_t lo = collective_block(e.plan(), first).first;
  const auto [off, cnt] = collective_block(e.plan(), last - 1);
  return at(slot, lo, off + cnt - lo);
}

/// The ranks a point-to-point family runs over: member i is slots[i] and owns the plan's block blocks[i]
/// (a flat plan: rank k, block k; the across-machines level of a hybrid: GPU l of every machine, whose
/// blocks m·g + l lie g blocks apart). Runs of members are moved as runs of adjacent plan blocks.
struct Members {
  std::vector<Slot> slots;
  std::vector<int> blocks;
  int size() const { return static_cast<int>(slots.size()); }
};

/// Every rank of a flat plan: member k is rank k's user buffer, owning block k.
inline Members all_ranks(int ranks) {
  Members m{user_slots(ranks), {}};
  for (int k = 0; k < ranks; ++k) m.blocks.push_back(k);
  return m;
}

/// Copies (reduce: reduces) the blocks of members [first, last) from slot `from` to slot `to`, one op per
/// run of adjacent plan blocks (one op for a flat plan's run; one per block for a hybrid's column).
inline void move_blocks(Emitter& e, const Members& m, const Slot& from, const Slot& to, int first, int last,
                        bool reduce = false) {
  for (int i = first; i < last;) {
    int j = i + 1;
    while (j < last && m.blocks[static_cast<std::size_t>(j)] == m.blocks[static_cast<std::size_t>(j - 1)] + 1) ++j;
    const int lo = m.blocks[static_cast<std::size_t>(i)], hi = m.blocks[static_cast<std::size_t>(j - 1)] + 1;
    if (reduce) {
      e.reduce(blocks_at(e, from, lo, hi), blocks_at(e, to, lo, hi));
    } else {
      e.copy(blocks_at(e, from, lo, hi), blocks_at(e, to, lo, hi));
    }
    i = j;
  }
}

/// Reduce-scatter's avg: each rank scales the block it owns (nothing unless scale_by is set).
inline void scale_owned_blocks(Emitter& e, const std::vector<Slot>& slots, int scale_by) {
  if (scale_by == kNoScale) return;
  for (int k = 0; k < static_cast<int>(slots.size()); ++k) {
    e.scale(blocks_at(e, slots[static_cast<std::size_t>(k)], k, k + 1), scale_by);
  }
}

/// Ring all-gather along `order` (every rank once): n−1 steps, in step s the member at position i copies
/// the block of the member at i−s to the member at i+1.
void emit_allgather_ring(Emitter& e, const std::vector<Slot>& slots, const std::vector<int>& order);
/// Bruck all-gather over the members, any n: in step k member r copies the min(2^k, n−2^k) blocks it
/// holds from member r + 2^k (blocks of members r+2^k …), ⌈lg n⌉ steps, straight into their final places.
void emit_allgather_bruck(Emitter& e, const Members& members);
/// Recursive-doubling all-gather over the members: pairs at distance 1, 2, 4 … exchange everything they
/// hold; for a non-power-of-two n the last r = n − 2^⌊lg n⌋ members first give their block to members
/// 0..r−1 and get the whole result back at the end.
void emit_allgather_rd(Emitter& e, const Members& members);
/// Ring reduce-scatter along `order`: n−1 steps, in step s the member at position i reduces the block of
/// the member at i−s−1 into the member at i+1; rank k ends with block k, then scaled on it for avg.
void emit_reducescatter_ring(Emitter& e, const std::vector<Slot>& slots, const std::vector<int>& order, int scale_by);
/// Recursive-halving reduce-scatter over the members (no scale): pairs at distance 2^⌊lg n⌋/2 … 1 reduce
/// the half of the blocks their partner keeps into it; a non-power-of-two n first reduces the last r
/// members' blocks into members 0..r−1, which hand block 2^⌊lg n⌋+i back to member 2^⌊lg n⌋+i at the end.
void emit_reducescatter_halving(Emitter& e, const Members& members);
/// The 2-D collectives' level across machines: one ring per local position over the machines (GPU l of each
/// machine), member w owning the block of its rank; all-gather copies, reduce-scatter (`reduce`) reduces each
/// block into its owner. workers[w] = ranks of machine w (the same number on each).
void ring_columns_across_machines(Emitter& e, const std::vector<Slot>& slots,
                                  const std::vector<std::vector<int>>& workers, bool reduce);
/// 2-D all-gather: a ring across machines per local position, then a ring inside each machine over
/// those columns of blocks. workers[w] = ranks of machine w (the same number on each).
void emit_allgather_two_d(Emitter& e, const std::vector<Slot>& slots, const std::vector<std::vector<int>>& workers);
/// 2-D reduce-scatter: a ring inside each machine over columns of blocks, then a ring across machines
/// per local position; scaled on each owner for avg.
void emit_reducescatter_two_d(Emitter& e, const std::vector<Slot>& slots, const std::vector<std::vector<int>>& workers,
                              int scale_by);
/// One library group op of `c` over the slots (one buffer and offset), forcing NCCL's `variant` (the
/// ALGO[.PROTO][.cN] of a `nccl.VARIANT` spec, "" = NCCL's choice), then the avg scale of each owner's block
/// for reduce-scatter.
void emit_collective_group(Emitter& e, Collective c, const std::vector<Slot>& slots, int scale_by,
                           const std::string& variant);

/// The ring families' order of the ranks: --gpu-perm inside each machine, machines concatenated.
std::vector<int> collective_ring_order(const Setup& s);
/// Tuner candidates of a ring family of a collective: the ring orders of the tuner's context (the best
/// few and identity with every pipeline depth, the rest unpipelined), as the all-reduce ring does.
void collective_ring_candidates(const char* spec, CandidateContext& ctx, std::vector<CandidateSeed>& out);
/// A ring over `members` (ranks) where member i owns the blocks sets[i]: in step s member i copies
/// (all-gather) the set of member i−s, or reduces (reduce-scatter) that of member i−s−1, into member i+1.
void ring_over_sets(Emitter& e, const std::vector<Slot>& slots, const std::vector<int>& members,
                    const std::vector<std::vector<int>>& sets, bool reduce);

}  // namespace artune::detail
