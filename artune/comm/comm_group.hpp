#pragma once
// The shared state of a Communicator's ranks (internal): per collective the decision table and size buckets,
// the plan cache, the padding scratch, and the rendezvous of the ranks of one process.
//
// A cached plan serves its size bucket (a tuned size) for one collective, type and op. It is compiled at the
// bucket's count and re-targeted to the count a call asks for: the plan is built again at that count (the
// builders' own partition rule; the tests verify it for many counts), and, when it has the compiled plan's shape
// (schedule.hpp's same_shape), the backend re-targets its compiled state to it (Backend::retarget: the cpu backend
// rebuilds its task lists over the same buffers and workers). So the cpu backend runs every count <= a bucket as one
// exact plan on the caller's buffer, with no padding copy and no tail run. Where a backend cannot re-target
// (mpi, cuda, nccl) or the shape differs, an all-reduce pads to the bucket (call_split.hpp) and an all-gather
// or reduce-scatter compiles the entry again at the call's count.

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/comm/call_split.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune_config.hpp"

#if ARTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace artune {

// What a compiled plan is cached under: the collective, its size bucket (index of a tuned size), type and op.
struct CacheKey {
  Collective collective = Collective::kAllReduce;
  int bucket = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  friend bool operator<(const CacheKey& a, const CacheKey& b) {
    return std::tie(a.collective, a.bucket, a.type, a.op) < std::tie(b.collective, b.bucket, b.type, b.op);
  }
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// One call's arguments as a rank gave them (checked equal over the ranks of a local group). `count` is the
// plan's count: all-reduce elements per rank, all-gather and reduce-scatter the whole buffer (ranks blocks).
struct CallArgs {
  Collective collective = Collective::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;  // where the plan runs (all-reduce: recv; all-gather: recv; reduce-scatter: scratch)
  void* stream = nullptr;
  std::int64_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// A call in flight: finished once, with its error (null on success); callbacks run on the finishing thread.
struct Request::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::exception_ptr error;
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  void* event = nullptr;  // cuda/nccl: cudaEvent_t recorded on the caller's stream after the call
  int device = -1;        // the event's device
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State();
  void finish(std::exception_ptr e);
};

// One rank's calls in flight, run in submission order by its own thread (started at the rank's first
// asynchronous call). The thread holds the queue, not the group: a job may drop the group's last reference.
struct CallQueue {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool running = false;  // a job is being run
  bool stop = false;
  std::thread thread;
  static std::shared_ptr<CallQueue> start();
  void push(std::function<void()> job);
  // No job queued or running.
  bool idle();
  // Runs the jobs queued, then ends the thread (joined; detached when called from the thread itself).
  void shutdown();
};

/// The default sizes tuned in memory: 4 B to 256 MiB, x2.
std::vector<std::uint64_t> default_tune_sizes();
/// The size buckets of a decision table: the sizes it was tuned at, ascending (InvalidInput when it has none).
std::vector<std::uint64_t> table_buckets(const DecisionTable& table);

struct Communicator::Group {
  struct Entry {
    CacheKey key;
    PlanInfo info;
    std::int64_t target = 0;           // the count the compiled state runs now
    std::unique_ptr<Backend> backend;  // mpi, cuda, nccl: one prepared backend per plan
    CpuBackend::Prepared held;         // cpu: the plan's state while another plan is current
  };
  // The plans of one collective: its decision table (none for a fixed all-reduce spec) and size buckets.
  struct Tuning {
    bool ready = false;
    std::optional<DecisionTable> table;
    std::vector<std::uint64_t> buckets;  // bytes, ascending
    std::string profile;                 // cost-model profile of its table ("" for a fixed spec)
  };
  // Padding (all-reduce) and input (reduce-scatter) scratch of a local rank: host, or device memory.
  struct Pad {
    void* data = nullptr;
    std::size_t bytes = 0;
    std::size_t dirty = 0;  // bytes from the start that may be non-zero
    int device = -1;
    void* event = nullptr;  // cudaEvent_t recorded after the last use
    bool used = false;
    Pad() = default;
    Pad(const Pad&) = delete;
    Pad& operator=(const Pad&) = delete;
    ~Pad() { release(); }
    void release();
  };

  BackendKind kind = BackendKind::kCpu;
  CommOptions options;
  BackendOptions backend_options;
  Topology topo;
  int ranks = 1;  // ranks of the group
  int local = 1;  // ranks driven by this process
  int rank_base = 0;
  bool broken = false;
  bool broken_timeout = false;  // broken by a timeout (rather than a failure)
  std::string broken_reason;
#if ARTUNE_HAVE_MPI
  MPI_Comm mpi_comm = MPI_COMM_NULL;  // duplicated from the caller's (mpi)
#endif
  std::array<Tuning, 3> tunings;  // all-reduce, all-gather, reduce-scatter
  std::uint64_t pad_limit = 0;
  std::uint64_t compiles = 0;                      // plans compiled so far
  std::uint64_t retargets = 0;                     // re-targets done so far
  std::vector<Pad> pads;                           // per local rank
  std::vector<std::shared_ptr<CallQueue>> queues;  // per local rank, started at its first asynchronous call

  // The cache: most recently used first.
  std::list<Entry> lru;
  std::map<CacheKey, std::list<Entry>::iterator> index;
  std::unique_ptr<CpuBackend> cpu;  // cpu: the one backend whose workers every plan shares
  Entry* current = nullptr;         // cpu: the entry whose state is inside `cpu`
  std::vector<PlanInfo> last;       // per local rank

  // Rendezvous of the local ranks (cpu, cuda).
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t generation = 0;
  std::exception_ptr result;  // outcome of the last completed generation
  std::vector<CallArgs> args;

  ~Group();

  bool gpu() const noexcept { return kind == BackendKind::kCuda || kind == BackendKind::kNccl; }
  // Runs a call of local rank `rank` now, or behind the rank's asynchronous calls still in flight.
  void run(int rank, const std::function<void()>& job);
  // Submits a call of local rank `rank` (checked already): host backends queue it on the rank's progress thread;
  // cuda/nccl run it now (queued on `stream`) and finish the request when the stream has run it.
  Request submit(int rank, void* stream, const void* buffer, std::function<void()> job);
  // The cost-model profile in-memory tuning uses (CommOptions::profile, else the backend's).
  BackendProfile tuning_profile() const;
  // The table and buckets of collective `c`, tuned or read on first use.
  Tuning& tuning(Collective c);
  // The plan `c` runs at size bucket `bucket`, built for `count` elements (and verified unless `verify` is false).
  Plan build(Collective c, std::int64_t count, ReduceOp op, int bucket, bool verify = true);
  // The compiled plan of `key` at its bucket's count, compiling it (build, verify, prepare) on a miss.
  Entry& lookup(const CacheKey& key, std::int64_t bucket_count);
  // What `plan`'s group ops run as on this backend (PlanInfo::runs_as).
  std::string runs_as(const Plan& plan) const;
  // Compiles `plan` (built for e's key) into `e`, replacing what it held.
  void prepare(Entry& e, const Plan& plan);
  // cpu: makes `e` the plan inside the backend.
  void make_current(Entry& e);
  // Makes `e` run `count` elements: re-targets it (cpu) or, when `recompile`, compiles it again at `count`;
  // false when neither (the caller pads).
  bool target(Entry& e, std::int64_t count, bool recompile);
  // Runs entry `e` once, in place, on the local ranks' buffers `at` (GPU backends: on the callers' streams).
  void run_entry(Entry& e, std::span<void* const> at, std::span<void* const> streams);
  // Copies `bytes` from `src` to `dst` (host, or device memory on `stream`).
  void copy(void* dst, const void* src, std::size_t bytes, void* stream) const;
  // Local rank i's scratch, at least `bytes` long, with zeros from `keep` bytes on, ready on `stream`.
  void* pad_buffer(std::size_t i, std::size_t bytes, std::size_t keep, const void* user, void* stream);
  // After a run on local rank i's scratch on `stream`: only the first `keep` bytes can be non-zero.
  void pad_done(std::size_t i, std::size_t keep, void* stream);
  // One call on the local ranks' buffers: an all-reduce of send[i] into buffers[i], split into runs of bucket
  // plans (split_call); an all-gather or reduce-scatter as one plan in place on buffers[i].
  void execute(const CallArgs& call, std::span<const void* const> send, std::span<void* const> buffers,
               std::span<void* const> streams);
  // The whole call of local rank `rank` (args.send/recv as execute takes them): a local group meets at a
  // rendezvous and its last rank runs it for all; a single-rank group runs it directly.
  void call(int rank, const CallArgs& args);
  void check_usable() const;
  // InvalidInput (naming `what`) for a negative count, null buffers or a stream on a host backend.
  void check_call(std::string_view what, std::int64_t count, const void* send, const void* recv, void* stream) const;
  // One line on stderr, once per group, when a table or calibration was priced for another profile than the
  // backend's (`what` names it).
  void warn_profile(std::string_view what, std::string_view profile);
  bool warned_profile = false;

 private:
  void execute_allreduce(const CallArgs& call, std::span<const void* const> send, std::span<void* const> buffers,
                         std::span<void* const> streams);
};

}  // namespace artune
