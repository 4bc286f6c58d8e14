#pragma once
// The Plan IR: the single currency between algorithm builders, the simulator
// and every executor backend.
//
// A plan has devices (participants first, as ranks 0..R-1, then helper
// devices such as a CPU gather shard), buffers per device (buffer 0 of a
// participant is the user's in/out buffer of `count` elements; every other
// buffer is scratch of a declared size), and ops in dependency order: an op's
// deps always have smaller ids. An op whose src and dst lie on different
// devices is a transfer over the route between them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/core/types.hpp"

namespace artune {

/// Most ops one plan may hold (after pipelining): 2^19 = 524288. Building and verifying a plan
/// costs about ops × ranks, so this keeps every accepted plan within seconds and a few hundred MB
/// (a ring over 512 GPUs has 523264 ops; a 2d plan over 1024 GPUs 274432). Builders and pipeline()
/// refuse larger plans up front with InvalidInput instead of exhausting time and memory.
inline constexpr std::size_t kMaxPlanOps = std::size_t{1} << 19;
/// Most participants (ranks) one plan may have: 8192. The static verifier tracks which ranks'
/// inputs every region holds, so its memory grows with ranks²: a tree over 8192 GPUs verifies in
/// about 1.5 s and 600 MB, over 16384 in 5 s and 2 GB, over 65536 (the largest topology) not at all.
inline constexpr std::size_t kMaxPlanRanks = 8192;
/// Most segments pipeline() splits an op into: beyond it a plan only grows without any gain.
inline constexpr int kMaxSegments = 4096;

/// What an op does.
enum class OpKind {
  kCopy,    ///< dst := src
  kReduce,  ///< dst := dst ⊕ src
  kScale,   ///< dst := dst / divisor (finalises avg); src unused
  kGroup,   ///< a collective a library performs on a device subset
};

/// The collective of a group op (`Collective`, in core/types.hpp). A group op acts on the same region (dst.buffer,
/// dst.offset, dst.count) of every device in `group`. For reduce-scatter and
/// all-gather the region is split with even_piece(dst.count, group.size(), k)
/// and shard k belongs to group[k]: reduce-scatter leaves the reduced shard k in
/// place on group[k] (the rest of its region is unspecified afterwards);
/// all-gather takes shard k from group[k] and leaves the whole region on all.

/// A region of one device's buffer, in elements.
struct Location {
  int device = -1;          ///< plan device index
  int buffer = 0;           ///< 0 = user buffer, ≥1 scratch
  std::int64_t offset = 0;  ///< first element
  std::int64_t count = 0;   ///< elements
  friend bool operator==(const Location&, const Location&) = default;
};

/// One step of a plan.
struct Op {
  int id = -1;
  OpKind kind = OpKind::kCopy;
  Location src;           ///< copy/reduce source (unused by scale and group)
  Location dst;           ///< copy/reduce/scale destination; group: the region (device field unused)
  std::vector<int> deps;  ///< ops that must finish first; each shares a device with this op
  // Group ops only.
  Collective collective = Collective::kAllReduce;
  std::vector<int> group;  ///< plan devices taking part, in the library's rank order
  int root = -1;           ///< plan device of the root (broadcast, reduce)
  std::string algo;        ///< NCCL algorithm[.protocol] the spec forces ("ring", "tree.ll"); empty = NCCL's choice
  // Scale ops only.
  int divisor = 1;  ///< dst is divided by this (avg: the number of participants)
  /// pipeline()'s stagger, in [0, 1): its segment boundaries start this fraction of a segment early, so that the
  /// op runs a first piece of 1 − phase segments, whole segments, and a last piece of `phase` (0: even pieces).
  /// Streams of transfers that share links and pause alike between pieces (each piece waits its latency before
  /// its bytes move) pause at different moments when their phases differ, and the link stays busy. The ops
  /// that carry one piece of data along should share a phase, so that their segments line up.
  double phase = 0;
  friend bool operator==(const Op&, const Op&) = default;
};

/// A device of the plan and the topology node it runs on.
struct PlanDevice {
  int node = -1;            ///< topology node index
  std::string name;         ///< the topology node's id (for JSON and reports)
  bool participant = true;  ///< ranks hold user data; helpers (gather shards) only scratch
  friend bool operator==(const PlanDevice&, const PlanDevice&) = default;
};

/// A complete plan of one collective (all-reduce unless `collective` says otherwise).
///
/// `collective` is what the whole plan computes (issue 17): kAllReduce, kAllGather or kReduceScatter.
/// Buffer 0 of every rank holds `count` elements in all three, cut into blocks
/// even_piece(count, ranks, k) (in-place, as NCCL's ncclAllGather/ncclReduceScatter with
/// sendbuff = recvbuff + rank·block): all-gather starts with rank k's input in its block k (the rest
/// of its buffer undefined) and ends with every block k holding rank k's input on every rank;
/// reduce-scatter starts with every rank's input over the whole buffer and ends with rank k's block
/// k reduced over all ranks (the rest of its buffer unspecified). `blocks` gives the blocks their own
/// sizes instead (all-gather-v: rank k's block has blocks[k] elements, in rank order; sum = count).
struct Plan {
  std::string spec;                                ///< the spec it was built from
  std::int64_t count = 0;                          ///< elements per participant (all-gather etc.: the whole buffer)
  ReduceOp reduce_op = ReduceOp::kSum;             ///< recorded reduce op
  Collective collective = Collective::kAllReduce;  ///< what the plan computes: all-reduce, all-gather or reduce-scatter
  std::vector<PlanDevice> devices;                 ///< participants (ranks 0..R-1) then helpers
  std::vector<std::vector<std::int64_t>> buffers;  ///< per device: element count of each buffer
  std::vector<Op> ops;                             ///< in dependency order, ids = positions
  std::vector<std::int64_t> blocks;                ///< per-rank block sizes (all-gather-v); empty = even blocks

  /// Number of participants (ranks).
  int ranks() const;
  /// Adds an op, assigning its id; returns the id.
  int add(Op op);
  /// Adds a scratch buffer of `count` elements to `device`; returns its buffer index.
  int add_buffer(int device, std::int64_t count);
  friend bool operator==(const Plan&, const Plan&) = default;
};

/// Name of an op kind ("copy", "reduce", "scale", "group").
std::string_view to_string(OpKind kind) noexcept;
/// Name of a collective ("all_reduce", "broadcast", "reduce", "reduce_scatter", "all_gather").
std::string_view to_string(Collective c) noexcept;

/// Name of a plan-level collective for the command line ("allreduce", "allgather", "reducescatter").
std::string_view collective_flag_name(Collective c) noexcept;
/// Parses --collective (allreduce, allgather, reducescatter; also all_gather, reduce_scatter, all_reduce);
/// InvalidInput naming `flag` for anything else (broadcast and reduce are not plan kinds).
Collective parse_collective_kind(std::string_view text, std::string_view flag = "parameter collective");
/// nccl-tests' bus-bandwidth factor busbw/algbw of a plan-level collective over `ranks` ranks:
/// all-reduce 2(n−1)/n, all-gather and reduce-scatter (n−1)/n (algbw counts the whole buffer); 0 for one rank.
double bus_factor(Collective c, int ranks) noexcept;
/// Block k of a plan-level all-gather or reduce-scatter over `count` elements: even_piece(count, ranks, k),
/// or with per-rank sizes `blocks` (non-empty): blocks[k] elements after the blocks of ranks 0..k−1.
std::pair<std::int64_t, std::int64_t> collective_block(std::int64_t count, int ranks, int k,
                                                       const std::vector<std::int64_t>& blocks = {});
/// Block k of the plan (its count, ranks and blocks).
std::pair<std::int64_t, std::int64_t> collective_block(const Plan& plan, int k);

/// Devices an op touches (src and dst devices; every group member for group ops), deduplicated.
std::vector<int> op_devices(const Op& op);
/// op_devices(op) appended to `out` (no vector of its own: for callers that keep every op's devices in one array).
void append_op_devices(const Op& op, std::vector<int>& out);
/// True when the op moves data between two devices.
bool is_transfer(const Op& op);

/// The plan as JSON: {"spec","count","op","ranks":[…],"helpers":[…],"buffers":[…],"ops":[…]}.
nlohmann::json plan_to_json(const Plan& plan);
/// Reads a plan written by plan_to_json; InvalidInput naming `source` and the JSON path on errors.
Plan plan_from_json(const nlohmann::json& doc, std::string_view source);

/// Splits every op into `segments` pieces with per-segment dependencies so that
/// successive segments of a chain of transfers overlap (1 ≤ segments ≤ kMaxSegments; InvalidInput
/// before any work when the result would exceed kMaxPlanOps).
/// Pieces are even_piece()s of the op's region (empty ones dropped), or with a phase φ > 0 (Op::phase)
/// staggered_pieces(); segment j of
/// an op follows segment j-1 of the same op and, for each dep, the latest of that
/// dep's segments overlapping it in memory (its last segment when none overlaps).
/// Reduce-scatter and all-gather group ops stay whole (their shards would move).
Plan pipeline(const Plan& plan, int segments);

/// The (offset, count) of piece `index` when `count` elements are split into
/// `pieces` as TF's _ragged_split does (count/pieces each, the last takes the remainder).
std::pair<std::int64_t, std::int64_t> ragged_piece(std::int64_t count, int pieces, int index);
/// Balanced split (pieces differ by at most one element, larger ones first).
std::pair<std::int64_t, std::int64_t> even_piece(std::int64_t count, int pieces, int index);
/// The starts of an op's pipeline pieces at phase φ in (0, 1): `count` elements in `segments` segments of
/// count/segments, boundaries at round((k − φ)·count/segments) for k = 1..segments, so a first piece of 1 − φ
/// segments, then whole ones, then a last piece of φ (segments + 1 pieces; empty ones dropped). Starts with 0.
std::vector<std::int64_t> staggered_pieces(std::int64_t count, int segments, double phase);

}  // namespace artune
