#pragma once
// Internal to the algorithms module: the parameters of each builder family and
// the emitters that write their ops into a plan.
//
// Emitters compose. Each one works on a set of "slots" (one per device: a
// buffer and an offset there, all covering the same number of elements) and
// appends its ops to a shared Emitter. The Emitter derives every op's
// dependencies from the memory the op touches — read-after-write,
// write-after-read and write-after-write on overlapping regions of one
// device's buffer — in the order ops are emitted. An emitter is therefore a
// plain sequential program over regions ("reduce this chunk of pred into mine")
// and needs no knowledge of what ran before it: a hybrid emits a group
// all-reduce per machine, then a ring over one slot per machine, then a
// broadcast per machine, and each op waits exactly for the ops whose results
// it uses or whose inputs it overwrites. Dependencies are local by
// construction (two ops conflict only on memory of a device both touch), and
// the DAG is as parallel as the data allows, which is what the simulator and
// the executors need (a per-device "last op" frontier would serialise a
// device's sends behind its receives).

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/topology/topology.hpp"

namespace artune::detail {

/// Where one device holds the region an emitter works on.
struct Slot {
  int device = -1;          ///< plan device
  int buffer = 0;           ///< buffer on that device
  std::int64_t offset = 0;  ///< first element of the region in that buffer
  friend bool operator==(const Slot&, const Slot&) = default;
};

/// The location of elements [offset, offset + count) of a slot's region.
inline Location at(const Slot& slot, std::int64_t offset, std::int64_t count) {
  return Location{slot.device, slot.buffer, slot.offset + offset, count};
}

/// Whether `perm` is 0, 1, …, n−1 (the order a candidate leaves empty).
inline bool is_identity(const std::vector<int>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int>(i)) return false;
  }
  return true;
}

/// Slots for buffer 0 of plan devices 0..n-1 (the user buffers of the ranks).
std::vector<Slot> user_slots(int ranks);

/// Piece `index` of TF's _padded_split with the padding stripped: every piece
/// has ceil(count / pieces) elements except the tail, which may be short or empty.
std::pair<std::int64_t, std::int64_t> padded_piece(std::int64_t count, int pieces, int index);

/// Appends ops to a plan, deriving their dependencies from the regions they touch.
class Emitter {
 public:
  /// Emits into `plan`; helper devices are resolved against `topo`.
  Emitter(Plan& plan, const Topology& topo) : plan_(plan), topo_(topo) {}

  /// The plan being built.
  Plan& plan() { return plan_; }
  /// The topology the plan runs on.
  const Topology& topo() const { return topo_; }

  /// dst := src; returns the op id, or -1 when count is 0 (nothing emitted).
  int copy(const Location& src, const Location& dst);
  /// dst := dst ⊕ src; -1 when count is 0.
  int reduce(const Location& src, const Location& dst);
  /// dst := dst / divisor; -1 when count is 0.
  int scale(const Location& dst, int divisor);
  /// A library collective over `devices` on the same (buffer, offset, count) of each; -1 when count is 0.
  int group(Collective collective, const std::vector<int>& devices, int buffer, std::int64_t offset, std::int64_t count,
            int root = -1);

  /// The plan device of topology node `node`: a rank running on it, else a helper (added on first use).
  int device_for_node(int node);
  /// Adds a scratch buffer of `count` elements to a plan device; returns its buffer index.
  int scratch(int device, std::int64_t count);
  /// The pipeline phase (Op::phase, in [0, 1)) of the ops emitted from now on; 0 at the start.
  void set_phase(double phase);

 private:
  struct Segment {
    int writer = -1;
    std::vector<int> readers;  // ops that read since the last write
  };
  // Keyed by the segment's first element; a segment ends where the next begins.
  using Track = std::map<std::int64_t, Segment>;

  void split_at(Track& track, std::int64_t x);
  void read(const Location& loc, int op, std::vector<int>& deps);
  void write(const Location& loc, int op, std::vector<int>& deps);
  int finish(Op op, std::vector<int> deps);

  Plan& plan_;
  const Topology& topo_;
  std::map<std::pair<int, int>, Track> tracks_;
  double phase_ = 0;
};

/// Sentinel for "no scale": the family leaves fully reduced values as they are.
inline constexpr int kNoScale = 0;

// ---------------------------------------------------------------------------
// Ring (TF build_ring_all_reduce).

/// One ring order per subchunk (positions into the slots): order[s][rank] = slot.
struct RingParams {
  std::vector<std::vector<int>> orders;
};

/// Geometry of a ring over n slots with S subchunks: n·S chunks, chunk = seg·S + s.
struct RingChunks {
  std::int64_t count = 0;
  int devices = 0;
  int subchunks = 1;
  /// (offset, count) of chunk `c` inside the region (TF padded split, padding stripped).
  std::pair<std::int64_t, std::int64_t> chunk(int c) const { return padded_piece(count, devices * subchunks, c); }
};

/// TF's _build_ring_gather over the slots: n−1 ticks; afterwards the slot at rank r of
/// subchunk s's ring holds chunk r·S + s fully reduced.
void emit_ring_reduce_scatter(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const RingParams& p);
/// TF's _build_ring_scatter: n−1 ticks of copies that spread each fully reduced chunk.
void emit_ring_all_gather(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const RingParams& p);
/// Reduce-scatter, one scale per fully reduced chunk on its owner (TF's un_op), all-gather.
void emit_ring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const RingParams& p, int scale_by);

// ---------------------------------------------------------------------------
// Recursive halving-doubling (TF build_recursive_hd_all_reduce, Rabenseifner fold otherwise).

/// Emits recursive halving-doubling over the slots, in slot order (TF's pairing); a non-power-of-two
/// count first folds the last r = n − 2^⌊lg n⌋ slots into the first r and copies the result back at the end.
void emit_rechd(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by);

// ---------------------------------------------------------------------------
// Shuffle (TF build_shuffle_all_reduce).

/// One plan device per gather shard (repeats allowed); shard k = ragged_piece(count, N, k).
struct ShuffleParams {
  std::vector<int> gather_devices;
};

/// Reduces every slot into `target` (in place when target is one of the slots), TF's _build_shuffle_gather
/// for one shard: a copy into a foreign target first, then one reduce per slot, in slot order.
void emit_gather_to(Emitter& e, const std::vector<Slot>& slots, std::int64_t offset, std::int64_t count,
                    const Slot& target);
/// Copies `source` to every slot other than itself (TF's _build_shuffle_scatter for one shard).
void emit_scatter_from(Emitter& e, const Slot& source, const std::vector<Slot>& slots, std::int64_t offset,
                       std::int64_t count);
/// Shuffle all-reduce: each shard gathered, reduced and scaled on its device, then copied back.
void emit_shuffle(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const ShuffleParams& p, int scale_by);

// ---------------------------------------------------------------------------
// Hierarchical copy (TF aggregate_gradients_using_hierarchical_copy).

/// Groups of slot positions (NVLink cliques) and the number of packs.
struct HierCopyParams {
  std::vector<std::vector<int>> groups;
  int packs = 1;
};

/// Emits hierarchical copy: per pack, reduce each group into its main, mains into group 0's main,
/// copy back to the mains, broadcast in each group.
void emit_hiercopy(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const HierCopyParams& p,
                   int scale_by);

// ---------------------------------------------------------------------------
// Library collectives (TF build_nccl_all_reduce).

/// One group all-reduce over the slots (which must share buffer and offset), then a scale per slot.
/// `variant` is the NCCL algorithm[.protocol] the spec forces (empty: NCCL's choice), recorded on the group op.
void emit_nccl(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by,
               const std::string& variant = {});

// ---------------------------------------------------------------------------
// Multi-ring.

/// Ring orders (positions into the slots), one per ring; ring j reduces even_piece(count, K, j).
struct MultiRingParams {
  std::vector<std::vector<int>> rings;
};

/// K independent plain rings, each over its share of the buffer.
void emit_multiring(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const MultiRingParams& p,
                    int scale_by);

// ---------------------------------------------------------------------------
// Double binary tree (NCCL).

/// Parent of each position in NCCL's in-order binary tree over n ranks (root 0 has parent -1).
std::vector<int> btree_parents(int n);
/// Parents of NCCL's two complementary trees (mirror for even n, shift by one for odd n).
std::pair<std::vector<int>, std::vector<int>> double_btree_parents(int n);

/// Reduce up both trees (children into parents), scale at the roots, broadcast down; tree i carries
/// half i of the buffer (even_piece(count, 2, i)).
void emit_tree(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by);

// ---------------------------------------------------------------------------
// 2-D hierarchical.

/// grid[m][l]: slot position of local GPU l on machine m; local ring order inside every machine.
struct TwoDParams {
  std::vector<std::vector<int>> grid;
  std::vector<int> local_order;
};

/// Ring reduce-scatter in each machine, ring all-reduce of each shard across machines (every local
/// position in parallel), ring all-gather in each machine.
void emit_two_d(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const TwoDParams& p, int scale_by);

/// The middle of a 2-D all-reduce: for every local position l, the slot at l of every machine (machine_slots[m][l])
/// all-reduces the region `shard(l)` = (offset, count) of its slot by one ring across machines, in machine order,
/// all positions at once; each ring scales the chunks it owns for avg.
void emit_rings_across_machines(Emitter& e, const std::vector<std::vector<Slot>>& machine_slots,
                                const std::function<std::pair<std::int64_t, std::int64_t>(int)>& shard, int scale_by);

// ---------------------------------------------------------------------------
// Hybrids (TF _build_nccl_hybrid, _build_shuffle_hybrid).

// UpperLevel (the upper level of a hybrid: an all-reduce across one representative slot per machine) is
// declared in registry.hpp.

/// TF's _build_nccl_hybrid: a group all-reduce inside each machine, `upper` across the first slot of
/// each machine, a group broadcast from it inside each machine. machines[m] = slots of machine m.
void emit_nccl_hybrid(Emitter& e, const std::vector<std::vector<Slot>>& machines, std::int64_t count,
                      const UpperLevel& upper, int scale_by, const std::string& variant = {});
/// TF's _build_shuffle_hybrid: each machine gathered into one region on its gather device, `upper`
/// across those, copied back to each machine's slots. gather[m] = plan device gathering machine m.
void emit_shuffle_hybrid(Emitter& e, const std::vector<std::vector<Slot>>& machines, std::int64_t count,
                         const std::vector<int>& gather, const UpperLevel& upper, int scale_by);

// ---------------------------------------------------------------------------
// What build_plan resolves once and every family's parameter builder reads.

/// The participants of one build: ranks, their machines, the options.
struct Setup {
  const Topology& topo;
  const BuildOptions& options;
  std::vector<int> nodes;                 ///< topology node of each rank
  std::vector<std::vector<int>> workers;  ///< ranks of each worker (machine), in rank order
  std::vector<int> worker_machine;        ///< topology machine index of each worker
  int per_worker = -1;                    ///< ranks per worker when equal, else -1
  int scale_by = kNoScale;
};

/// Ranks of the setup.
inline int ranks(const Setup& s) { return static_cast<int>(s.nodes.size()); }
/// "xring#2": a token as error messages quote it.
std::string token_text(const AlgToken& t);
/// Ops of a ring all-reduce over n members whose region is cut into `chunks` pieces.
std::uint64_t ring_ops(std::int64_t n, std::int64_t chunks, std::int64_t count);
/// Scale ops of an avg over a region cut into `chunks` pieces (0 when the setup does not scale).
std::uint64_t scale_ops(const Setup& s, std::int64_t chunks, std::int64_t count);
/// Refuses a plan whose op count (Family::max_ops, computed before anything is emitted) is beyond kMaxPlanOps.
void require_plan_size(const Setup& s, const AlgToken& token, std::uint64_t ops);
/// The local ring order: --gpu-perm, or identity; InvalidInput unless a permutation of 0..G−1.
std::vector<int> local_order(const Setup& s, const AlgToken& token);
/// Slots of buffer 0 of the given ranks.
std::vector<Slot> machine_slots(const std::vector<int>& ranks_of_worker);
/// Ranks in the order of --gpu-perm inside each worker, workers concatenated (rank order without it).
std::vector<Slot> ordered_slots(const Setup& s, const AlgToken& token);
/// Orders of TF's _ring_permutations mapped from global device index (worker·G + i) to slots.
RingParams ring_params(const AlgToken& token, const std::vector<std::vector<int>>& workers,
                       const std::vector<int>& perm);

}  // namespace artune::detail
