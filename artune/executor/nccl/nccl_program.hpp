#pragma once
// Host-side lowering of one rank's slice of a Plan (schedule.hpp's
// ProcessSchedule) to the NCCL and CUDA calls the nccl backend issues on its
// one stream. Pure host code, so tests replay every rank's program on host
// arrays with a simulated NCCL (in-order matching of sends and receives per
// peer pair inside groups) without a GPU.
//
// Units, issued in plan order on one stream: runs of consecutive sends and
// receives become one ncclGroupStart/ncclGroupEnd (a run ends before an action
// that descends from an op already in it anywhere in the plan DAG, and at any
// local action); local copies,
// reductions, scales and collectives are units of their own. Every rank issues
// its units in the global plan order, so the unit holding the smallest
// unfinished op always has all its participants present: no cross-rank cycle
// can form, whatever the run boundaries on each rank.
//
// NCCL moves device memory only, so a send from a host-memory helper is first
// copied into the staging buffer, and a receive that reduces (or lands in host
// memory) arrives in staging and is combined after the group ends; a local copy
// between two host-memory devices also passes through staging (a host-to-host
// cudaMemcpyAsync is not stream-ordered). Staging is one device buffer per rank,
// carved per group (a bump allocator).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/executor/schedule.hpp"

namespace artune::nccl {

/// A region start: a plan buffer of a hosted device, or the rank's staging buffer (buffer = kStaging).
struct Ref {
  static constexpr int kStaging = -1;
  int device = -1;  ///< plan device (ignored for staging)
  int buffer = 0;
  std::int64_t offset = 0;  ///< elements
  friend bool operator==(const Ref&, const Ref&) = default;
};

/// What a step issues.
enum class StepKind {
  kGroupStart,  ///< ncclGroupStart()
  kGroupEnd,    ///< ncclGroupEnd(), then wait until the world communicator has enqueued it
  kSend,        ///< ncclSend(src, count, type, peer, world, stream)
  kRecv,        ///< ncclRecv(dst, count, type, peer, world, stream)
  kCopy,        ///< cudaMemcpyAsync(dst, src, …, cudaMemcpyDefault, stream)
  kReduce,      ///< reduce kernel dst ⊕= src
  kScale,       ///< scale kernel dst /= divisor
  kCollective,  ///< the op's collective on communicator `comm`
};

/// One call of a rank's program.
struct Step {
  StepKind kind = StepKind::kCopy;
  int op = -1;                                     ///< plan op (message order and diagnostics)
  Ref dst;                                         ///< kRecv/kCopy/kReduce/kScale; kCollective: this member's region
  Ref src;                                         ///< kSend/kCopy/kReduce
  std::int64_t count = 0;                          ///< elements
  int peer = -1;                                   ///< kSend/kRecv: the peer's MPI rank
  std::int64_t divisor = 1;                        ///< kScale
  Collective collective = Collective::kAllReduce;  ///< kCollective
  int comm = -1;                                   ///< kCollective: index into distinct_groups(plan)
  int comm_rank = -1;                              ///< kCollective: this rank's position in the group
  int comm_size = 0;                               ///< kCollective: members
  int root = -1;                                   ///< kCollective: root's position in the group (broadcast, reduce)
};

/// One rank's lowered program.
struct Program {
  int rank = -1;
  std::vector<int> devices;       ///< plan devices hosted by this rank
  std::vector<bool> host_device;  ///< per plan device: lives in (pinned) host memory
  std::vector<Step> steps;
  std::int64_t staging = 0;  ///< staging elements needed
  std::vector<int> comms;    ///< distinct_groups indices this rank belongs to
};

/// Lowers the slice of `plan` for MPI rank `rank`. host_of_device[d] is the rank hosting plan
/// device d (schedule.hpp's host_processes); host_device[d] is true for devices in host memory
/// (CPU helpers). InvalidInput when a group op has a member in host memory (NCCL needs GPUs).
Program lower_rank(const Plan& plan, const std::vector<int>& host_of_device, const std::vector<bool>& host_device,
                   int rank);

/// What the nccl backend allocates for one rank, in bytes.
struct RankMemory {
  std::uint64_t gpu_bytes = 0;   ///< on the rank's GPU: buffers of its GPU-placed devices + staging
  std::uint64_t host_bytes = 0;  ///< pinned: its CPU helpers' buffers + the message-sized copy the check reads
};
/// The memory prepare() allocates for `program` (lowered from `plan`) with elements of `element_bytes`.
RankMemory rank_memory(const Plan& plan, const Program& program, std::size_t element_bytes);

/// Plan-device machine indices read from device names ("m2/gpu1" → 2; no prefix → 0).
std::vector<int> machines_from_names(const Plan& plan);
/// Devices whose name marks a CPU helper ("cpu0", "m1/cpu0", "socket1").
std::vector<bool> host_devices_from_names(const Plan& plan);

/// A communicator's key: its members' MPI ranks in NCCL rank order (member k is NCCL rank k, so
/// the same ranks in another order are another communicator).
using CommKey = std::vector<int>;
/// Per distinct group of `plan` (distinct_groups order, the index Step::comm uses): its key.
std::vector<CommKey> communicator_keys(const Plan& plan, const std::vector<int>& host_of_device);

/// Which communicators a prepare() reuses and which it splits. The backend keeps its communicators
/// across prepare() calls (one per message size in a sweep): a plan whose groups were already split
/// splits nothing. `Key` is a CommKey, or a CommKey with what else makes a communicator distinct (the
/// backend adds the forced NCCL algorithm/protocol/channels: the same ranks forced differently are
/// another communicator).
template <class Key>
struct BasicCommPlan {
  std::vector<int> slot;    ///< per needed group: its index in the cache (after the new ones are appended)
  std::vector<Key> create;  ///< keys to split now, appended to the cache in this order
};
using CommPlan = BasicCommPlan<CommKey>;

/// Plans the communicators for `needed` (per distinct group) given the cache's keys in order. Every rank
/// computes the same plan from the same sequence of plans, so the splits stay collective.
template <class Key>
BasicCommPlan<Key> plan_communicators(const std::vector<Key>& cached, const std::vector<Key>& needed) {
  BasicCommPlan<Key> out;
  for (const Key& key : needed) {
    const auto old = std::find(cached.begin(), cached.end(), key);
    if (old != cached.end()) {
      out.slot.push_back(static_cast<int>(old - cached.begin()));
      continue;
    }
    auto fresh = std::find(out.create.begin(), out.create.end(), key);
    if (fresh == out.create.end()) fresh = out.create.insert(out.create.end(), key);
    out.slot.push_back(static_cast<int>(cached.size()) + static_cast<int>(fresh - out.create.begin()));
  }
  return out;
}

/// One line per step (debugging, test messages).
std::string describe(const Program& program);

}  // namespace artune::nccl
