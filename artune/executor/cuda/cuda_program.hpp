#pragma once
// Host-side lowering of a Plan to the work the cuda backend issues: where
// each plan device lives (a GPU or pinned host memory), and an ordered list of
// steps per stream (copies, reduce and scale kernels, event records and
// cross-stream waits). Pure host code: the backend replays the program with
// CUDA calls, and tests replay it on host arrays under random stream
// interleavings, so the dependency logic is checked without a GPU.
//
// Rules. Every plan device has one stream (a helper's stream lives on the
// GPU of the first GPU-placed device). A copy runs on its destination's
// stream (or the source's when the destination is host memory); a reduce or
// scale runs on its destination's stream (or the source's when the destination
// is host memory, writing it through the mapping). A reduce whose source the
// executing GPU cannot load (another GPU without peer access, or host memory,
// which a DMA copy reads faster than a kernel) is staged first into that
// stream's staging buffer; so is a copy between two host buffers (a host-to-host
// cudaMemcpyAsync is synchronous with respect to the host, not queued in stream
// order). The stream runs in order, so one staging buffer per stream suffices.
// An op records an event when a dependent runs on another stream; dependents
// wait on it (cudaStreamWaitEvent), never on the device.
// Group ops are lowered to direct pulls in rounds: broadcast (a binomial tree
// from the root: in round r each holder is pulled from by one new member, which
// waits for its parent's own pull), reduce (the root reduces one member in per
// round), reduce-scatter (in round s member k reduces shard k of member k+s) and
// all-gather (in round s member m copies shard m+s from member m+s), all-reduce
// (reduce-scatter, then all-gather after each member's reduce-scatter event).
// The rotation makes every device read by at most one peer per round (fan-in 1,
// see fan_in()), where pulling from members 0, 1, … in the same order on every
// member would make all of them read the same device at once.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "artune/algorithms/plan.hpp"

namespace artune {
class Topology;
}

namespace artune::cuda {

/// Where a plan device's buffers live.
struct Placement {
  bool host = false;    ///< pinned, mapped host memory (a CPU helper)
  int cuda_device = 0;  ///< GPU ordinal of its buffers (host: the GPU whose stream runs its ops)
  int local_gpu = -1;   ///< the GPU's local index in the machine, as read from the topology or device name
};

/// What a topology node id says about a device ("gpu3", "m1/gpu3", "cpu0", "m0/socket1").
struct DeviceNameInfo {
  bool host = false;   ///< a CPU socket / NUMA node: host memory
  int gpu_index = -1;  ///< local GPU index, -1 when the name carries none
  int machine = 0;     ///< from an "m<k>/" prefix, else 0
};
/// Parses a device name as written by the topology loaders; unknown shapes give {false, -1, 0}.
DeviceNameInfo parse_device_name(std::string_view name);

/// Maps plan devices to CUDA devices: GPU local index K goes to the (K mod `cuda_devices`)-th GPU in PCI
/// bus order, which is CUDA ordinal `bus_order[K mod N]` (pci_bus_order; empty: CUDA ordinal K mod N);
/// CPU helpers to host memory. Uses `topo` when given (node kind and local index), otherwise the device
/// names ("gpu3", "m1/gpu3", "cpu0"); a participant whose name says nothing takes its rank as local index.
std::vector<Placement> place_devices(const Plan& plan, int cuda_devices, const Topology* topo = nullptr,
                                     const std::vector<int>& bus_order = {});

/// CUDA ordinals in PCI bus order: entry K is the CUDA device whose PCI bus id (cudaDeviceGetPCIBusId,
/// "dddd:bb:dd.f" in hex) is the K-th smallest, the order nvidia-smi and topology import number GPUs in
/// (CUDA's default order is fastest first). InvalidInput for an id that does not parse.
std::vector<int> pci_bus_order(const std::vector<std::string>& bus_ids);
/// True when several plan devices share one GPU (the backend logs it).
bool shares_gpus(const std::vector<Placement>& placement);

/// An element region of a plan buffer, or of a stream's staging buffer (buffer = kStaging).
struct Ref {
  static constexpr int kStaging = -1;
  int device = -1;  ///< plan device (for kStaging: the stream's plan device)
  int buffer = 0;
  std::int64_t offset = 0;  ///< elements
  friend bool operator==(const Ref&, const Ref&) = default;
};

/// What one step does.
enum class StepKind {
  kCopy,    ///< dst := src (cudaMemcpyPeerAsync between GPUs, cudaMemcpyAsync otherwise)
  kReduce,  ///< dst := dst ⊕ src (kernel)
  kScale,   ///< dst := dst / divisor (kernel)
  kRecord,  ///< cudaEventRecord(event, stream)
  kWait,    ///< cudaStreamWaitEvent(stream, event)
};

/// The phase of a group op a step belongs to (kNone: a plain op, or event steps).
enum class Phase { kNone, kBroadcast, kReduce, kReduceScatter, kAllGather };
/// Its name ("broadcast", "reduce", "reduce_scatter", "all_gather", "-").
std::string_view to_string(Phase phase) noexcept;

/// One call the backend issues, in program order, on `stream`.
struct Step {
  StepKind kind = StepKind::kCopy;
  int stream = -1;  ///< plan device whose stream issues it
  Ref dst;
  Ref src;
  std::int64_t count = 0;      ///< elements
  std::int64_t divisor = 1;    ///< scale only
  int event = -1;              ///< record / wait only
  int op = -1;                 ///< the plan op it comes from
  Phase phase = Phase::kNone;  ///< group ops: the phase this step belongs to
  int round = -1;              ///< group ops: the round within the phase (0-based)
};

/// A lowered plan.
struct Program {
  std::vector<Placement> placement;   ///< per plan device
  std::vector<Step> steps;            ///< issue order
  int events = 0;                     ///< events the backend creates (ids 0..events-1)
  std::vector<std::int64_t> staging;  ///< per stream: staging elements needed
  std::vector<int> event_stream;      ///< per event: the stream that records it
};

/// Lowers `plan` (verified) for `placement`. peer[a][b]: a kernel on CUDA device a may load
/// memory of CUDA device b (P2P enabled; a == b is always true).
Program lower_plan(const Plan& plan, const std::vector<Placement>& placement,
                   const std::vector<std::vector<bool>>& peer);

/// Elements the backend allocates for buffer `buffer` of plan device `device` (a participant's
/// buffer 0 holds at least the whole message).
std::int64_t buffer_elements(const Plan& plan, int device, int buffer);

/// Memory a lowered plan needs, in bytes.
struct MemoryNeed {
  std::vector<std::uint64_t> gpu_bytes;  ///< per CUDA device: buffers of the plan devices on it + staging
  std::uint64_t host_bytes = 0;          ///< pinned host memory (CPU helpers' buffers)
  std::vector<int> devices_on_gpu;       ///< per CUDA device: how many plan devices share it
};
/// What prepare() will allocate for `program` (lowered from `plan`) on `cuda_devices` GPUs.
MemoryNeed memory_need(const Plan& plan, const Program& program, int cuda_devices, std::size_t element_bytes);

/// Stream that issues a plain (non-group) op under the rules above.
int executing_stream(const Op& op, const std::vector<Placement>& placement);

/// Fan-in of one round of a group phase: how many peers read each plan device in it.
struct RoundFanIn {
  int op = -1;
  Phase phase = Phase::kNone;
  int round = -1;
  std::vector<int> readers;  ///< per plan device: distinct other streams that read it in this round
  /// The largest entry (1 when every device is read by at most one peer).
  int max() const;
};
/// Per round of every group phase, the fan-in of every plan device (reads by other streams,
/// staged reads counted at their source), in program order.
std::vector<RoundFanIn> fan_in(const Program& program);

/// The CUDA graph of a program: one node per work step (copy, reduce, scale); records and waits
/// become edges, as stream capture turns them (cudaStreamBeginCapture on stream 0, every other stream
/// forked from it): a work step depends on the last work of its own stream and, through each wait
/// since then, on the work its event was recorded after. The backend adds exactly these nodes and
/// edges (add_graph_nodes), so the graph it replays is the one tests check against the stream
/// lowering's happens-before order.
struct GraphDag {
  std::vector<int> step;               ///< per node: its index in Program::steps
  std::vector<std::vector<int>> deps;  ///< per node: the nodes it depends on directly (ascending)
  /// Number of edges.
  std::size_t edges() const;
};
/// Builds the graph DAG of `program`.
GraphDag graph_of(const Program& program);

/// What a graph is built with: the backend adds CUDA graph nodes, tests record them. Nodes are
/// added in topological order; `deps` are ids returned by earlier add() calls.
class GraphBuilder {
 public:
  virtual ~GraphBuilder() = default;
  /// Adds the node of `program.steps[step]` after `deps`; returns its id.
  virtual int add(int step, const std::vector<int>& deps) = 0;
};
/// Adds every node of graph_of(program) to `builder`, in node order.
void add_graph_nodes(const Program& program, GraphBuilder& builder);

/// One line per step, for debugging and test failure messages.
std::string describe(const Program& program);

}  // namespace artune::cuda
