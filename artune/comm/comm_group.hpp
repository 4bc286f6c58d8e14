#pragma once
// The shared state of a Communicator's ranks (internal). Its jobs live in their own classes: where plans come
// from (plan_source.hpp: table, in-memory tuning or fixed spec), the compiled plans (plan_cache.hpp), the padding
// scratch (scratch.hpp); the group itself keeps the rendezvous of the ranks of one process, the progress queues and
// the call path: a warm call crosses the group, the cache and Backend::run_on (run_on_streams), nothing else.
//
// A cached plan serves its size bucket (a tuned size) for one collective, type and op. It is compiled at the
// bucket's count and re-targeted to the count a call asks for: the plan is built again at that count (the
// builders' own partition rule; the tests verify it for many counts), and, when it has the compiled plan's shape
// (schedule.hpp's same_shape), the backend re-targets its compiled state to it (Backend::retarget: the cpu backend
// rebuilds its task lists over the same buffers and workers). So the cpu backend runs every count <= a bucket as one
// exact plan on the caller's buffer, with no padding copy and no tail run. Where a backend cannot re-target
// (mpi, cuda, nccl) or the shape differs, an all-reduce pads to the bucket (call_split.hpp) and an all-gather
// or reduce-scatter compiles the entry again at the call's count.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/comm/call_split.hpp"
#include "artune/comm/plan_cache.hpp"
#include "artune/comm/plan_source.hpp"
#include "artune/comm/scratch.hpp"
#include "artune/executor/backend.hpp"
#include "artune/topology/topology.hpp"
#include "artune_config.hpp"

#if ARTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace artune {

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

// The meeting of a process's local ranks for one call (cpu, cuda): each gives its arguments; the last to arrive
// runs the call for all (Group::call) and the others wait for its outcome. Guarded by the group's mutex.
struct Rendezvous {
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t generation = 0;
  std::exception_ptr result;  // outcome of the last completed generation
  std::vector<CallArgs> args;  // per local rank
};

struct Communicator::Group {
  // Everything below is built by create_local / create_mpi / create_nccl (communicator.cpp), in this order.
  Group(BackendKind kind, const CommOptions& options, int ranks);
  ~Group();

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
  PlanSource source;                               // where each collective's plans come from
  std::unique_ptr<PlanCache> cache;                // compiled plans (made once the backend options are final)
  std::unique_ptr<Scratch> scratch;                // per local rank
  std::vector<std::shared_ptr<CallQueue>> queues;  // per local rank, started at its first asynchronous call
  std::vector<PlanInfo> last;                      // per local rank

  std::mutex mutex;  // guards the group's state for every rank's call
  Rendezvous rendezvous;

  // Binds the group to `local` ranks driven by this process out of `ranks` (the first being `rank_base`) and
  // makes its cache and scratch (the backend options are final then).
  void bind(int ranks, int local, int rank_base);
  bool gpu() const noexcept { return runs_on_streams(kind); }  // cuda, nccl: calls queue on streams
  // Runs a call of local rank `rank` now, or behind the rank's asynchronous calls still in flight.
  void run(int rank, const std::function<void()>& job);
  // Submits a call of local rank `rank` (checked already): host backends queue it on the rank's progress thread;
  // cuda/nccl run it now (queued on `stream`) and finish the request when the stream has run it.
  Request submit(int rank, void* stream, const void* buffer, std::function<void()> job);
  // The compiled plan of `key` at its bucket's count, compiling it (build, verify, prepare) on a miss.
  PlanCache::Entry& lookup(const CacheKey& key, std::int64_t bucket_count);
  // Makes `e` run `count` elements: re-targets it where the backend can or, when `recompile`, compiles it again
  // at `count`; false when neither (the caller pads).
  bool target(PlanCache::Entry& e, std::int64_t count, bool recompile);
  // Runs entry `e` once, in place, on the local ranks' buffers `at` (GPU backends: on the callers' streams).
  void run_entry(PlanCache::Entry& e, std::span<void* const> at, std::span<void* const> streams);
  // One call on the local ranks' buffers: an all-reduce of send[i] into buffers[i], split into runs of bucket
  // plans (split_call); an all-gather or reduce-scatter as one plan in place on buffers[i].
  void execute(const CallArgs& call, std::span<const void* const> send, std::span<void* const> buffers,
               std::span<void* const> streams);
  // The whole call of local rank `rank` (args.send/recv as execute takes them): a local group meets at the
  // rendezvous and its last rank runs it for all; a single-rank group runs it directly.
  void call(int rank, const CallArgs& args);
  void check_usable() const;
  // InvalidInput (naming `what`) for a negative count, null buffers or a stream on a host backend.
  void check_call(std::string_view what, std::int64_t count, const void* send, const void* recv, void* stream) const;

 private:
  void execute_allreduce(const CallArgs& call, std::span<const void* const> send, std::span<void* const> buffers,
                         std::span<void* const> streams);
};

}  // namespace artune
