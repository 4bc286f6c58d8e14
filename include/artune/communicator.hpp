#pragma once
// artune's production API: a Communicator all-reduces, all-gathers and
// reduce-scatters the caller's own buffers with the plan a decision table (or an
// in-memory tuning run, or a named spec) picks for the message size, on the cpu,
// mpi, cuda or nccl backend.
//
// Create it once per rank and reuse it for every call, the way
// ncclCommInitRank + ncclAllReduce or a gloo::Context are used:
//
//  * cpu (threads of one process) and cuda (GPUs of one process):
//    Communicator::create_local returns one communicator per rank, like
//    ncclCommInitAll. Each rank's thread calls allreduce on its own
//    communicator; the call returns when every rank of the group has called
//    it and the result is in every rank's recv buffer. The group's backend
//    owns the workers (cpu: one thread per plan device, shared by every
//    cached plan), so threads stay at ranks + helpers however many sizes run.
//  * mpi: Communicator::create_mpi on every rank of an MPI communicator
//    (MPI_Init first; the communicator duplicates the MPI_Comm).
//  * nccl: Communicator::create_nccl on every rank (one GPU each), bootstrapped
//    over MPI_COMM_WORLD.
//
// Plans are compiled (built, verified, prepared) once per (collective, size bucket, dtype, op) and kept in a
// least-recently-used cache of CommOptions::cache_capacity entries. The size buckets are the sizes the
// collective's decision table was tuned at (CommOptions::tune_sizes without a table); bucket k's plan is the
// table's pick for that size. A call of any count runs the plan of the smallest bucket that holds it, built
// for the call's exact count: the cpu backend re-targets the bucket's compiled plan to that count (same ops,
// element ranges recomputed by the builder; see artune/comm/comm_group.hpp), so it runs one exact plan
// straight on the caller's buffer. All-reduces on the other backends, and counts whose plan changes shape,
// are padded to the bucket's count in communicator-owned scratch (up to CommOptions::pad_limit bytes) or run
// as bucket plans on consecutive parts of the buffer (call_split.hpp); all-gathers and reduce-scatters there
// compile the bucket's entry again when the count changes. Buffers are the caller's: the cpu backend's
// workers read and write them in place, the mpi backend sends from and receives into them, cuda/nccl bind
// the caller's device pointers.
//
// Errors are artune::Error exceptions with a code: InvalidInput (invalid
// usage), BackendFailure (a peer or library failed), Timeout (a peer did not
// arrive or answer within CommOptions::timeout_s), and std::exception for
// internal failures. After a BackendFailure or Timeout the communicator is
// broken and every later call throws; create a new one. (mpi: a dead peer
// leaves MPI unusable; destroying a broken mpi communicator ends the job with
// MPI_Abort, as `artune run` does.)

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/core/types.hpp"

namespace artune {

/// How a communicator picks and keeps its plans.
struct CommOptions {
  /// Topology file, built-in name or generator; "" = "uniform:<ranks>" (ranks of the group).
  std::string topology;
  /// Decision table written by `artune autotune` for that topology; "" = tune in memory with the simulator
  /// (over `tune_sizes`) unless `spec` is set.
  std::string table;
  /// One plan spec for every size ("xring", "rechd", "nccl/xring" …), or a plan label as tables and dump_cache()
  /// print it ("xring perm=0,3,2,1 seg=2": the ring order, gather devices and pipeline depth); takes precedence
  /// over `table`.
  std::string spec;
  /// Decision tables of `artune autotune --collective allgather` / `reducescatter` for that topology; "" =
  /// tune that collective in memory (over `tune_sizes`) at its first call. (`spec` is for all-reduce only.)
  std::string allgather_table;
  std::string reducescatter_table;
  /// Sizes in bytes tuned in memory when there is neither table nor spec, and the size buckets of a spec;
  /// empty = 4 B to 256 MiB, ×2.
  std::vector<std::uint64_t> tune_sizes;
  /// Cost-model profile of in-memory tuning: "cpu", "mpi", "cuda" or "nccl"; "" = the backend's own (cpu and mpi
  /// price plans for host threads, cuda and nccl for GPUs). A table or calibration of another profile than the
  /// backend's is used as it is, with one warning line on stderr.
  std::string profile;
  /// Calibration overlay of `artune calibrate` (a JSON file) applied to that profile's model for in-memory
  /// tuning; "" = the profile's defaults. Its own "profile" field, when present, must agree with `profile`.
  std::string calibration;
  /// A peer that does not arrive or answer within this many seconds ends the call with a Timeout.
  double timeout_s = 60;
  /// Compiled plans kept; the least recently used one is dropped beyond this (at least 1).
  std::size_t cache_capacity = 64;
  /// All-reduces a backend cannot re-target (mpi, cuda, nccl): calls up to this many bytes run as one plan of the
  /// next size bucket (padded in scratch when the count is not the bucket's); larger ones as bucket plans on
  /// parts of the caller's buffer (see above).
  std::uint64_t pad_limit = std::uint64_t{256} << 10;
};

/// One compiled plan as the cache holds it (for logs and dumps).
struct PlanInfo {
  Collective collective = Collective::kAllReduce;  ///< what it computes
  std::string label;                               ///< the plan's spec text with its parameters ("xring#2 seg=4")
  int bucket = -1;                                 ///< index of its size bucket (size_buckets())
  std::uint64_t bucket_bytes = 0;                  ///< the bucket's size
  int range = -1;               ///< index of the table's size range holding the bucket (-1: a fixed spec)
  std::uint64_t min_bytes = 0;  ///< the range's smallest tuned size (0 for a fixed spec)
  std::uint64_t max_bytes = 0;  ///< the range's largest tuned size (0 for a fixed spec)
  std::int64_t count = 0;       ///< elements per rank it runs now (all-gather, reduce-scatter: all blocks)
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int devices = 0;  ///< plan devices (ranks + helpers)
  /// What the plan's library (group) ops run as on this backend, "" when it has none. A `nccl` plan (or a hybrid's
  /// `nccl` part) is NCCL only on the nccl backend: on cpu it is artune's shared-memory group op on the workers
  /// ("cpu group op"), on mpi the MPI collective ("MPI_Iallreduce" …), on cuda artune's peer copies and
  /// reduction kernels ("cuda kernels").
  std::string runs_as;
  std::uint64_t calls = 0;  ///< allreduce calls that used it
};

/// A call in flight, returned by Communicator's *_async calls (a default-constructed one has finished).
///
/// cpu and mpi: the call runs on the rank's own progress thread, in the order this rank submitted its calls
/// (synchronous calls made meanwhile queue behind them); its buffers must stay valid and untouched until it has
/// finished. mpi: MPI must be initialised with MPI_THREAD_MULTIPLE (MPI_THREAD_SERIALIZED when nothing else
/// calls MPI while a request is in flight), else the *_async call throws InvalidInput. cuda and nccl: the call is queued on the caller's stream before *_async returns, as the
/// synchronous call is; the request finishes when the stream has run it.
class Request {
 public:
  Request() = default;
  /// Blocks until the call has finished; rethrows its error (artune::Error; after a BackendFailure or Timeout the
  /// communicator is broken, as after a synchronous call). A rank that never joins ends it within timeout_s.
  void wait();
  /// Waits at most `seconds` (>= 0); true when the call has finished (its error rethrown), false otherwise.
  bool wait_for(double seconds);
  /// Whether the call has finished (successfully or not); never blocks.
  bool done() const noexcept;
  /// Runs `fn` once the call has finished, with its error (null on success): on the thread that finishes the
  /// call, or on this thread at once when it has finished already. `fn` must not throw and must not wait for
  /// a later asynchronous call of the same rank (a synchronous call made in `fn` runs at once, on that thread).
  void on_done(std::function<void(std::exception_ptr)> fn);

  struct State;  ///< internal
  explicit Request(std::shared_ptr<State> state);

 private:
  std::shared_ptr<State> state_;
};

/// A rank's handle on a group that all-reduces caller buffers with tuned plans.
class Communicator {
 public:
  /// One communicator per rank of a single process: cpu (one thread per rank calls its own) or cuda (one per
  /// GPU, like ncclCommInitAll). `ranks` = 0: the topology's GPUs (cpu default topology: hardware threads, at
  /// least 2). Unsupported when the backend is not built here; InvalidInput for bad options.
  static std::vector<Communicator> create_local(BackendKind backend, const CommOptions& options, int ranks = 0);
  /// This process's rank of the MPI communicator `*mpi_comm` (an MPI_Comm*; null = MPI_COMM_WORLD), mpi backend.
  /// Collective over that communicator; MPI must be initialised.
  static Communicator create_mpi(const CommOptions& options, const void* mpi_comm = nullptr);
  /// This process's rank of MPI_COMM_WORLD on the nccl backend (one GPU per rank). Collective.
  static Communicator create_nccl(const CommOptions& options);

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  /// All-reduces `count` elements of `type` from every rank's `send` into every rank's `recv` with `op`;
  /// in place when send == recv. Host memory for cpu/mpi, device memory for cuda/nccl. `stream` (a
  /// cudaStream_t, cuda/nccl only; null = the legacy default stream): asynchronous, like ncclAllReduce —
  /// the plan starts after the work queued on the stream, work queued after the call waits for the result,
  /// and the call returns without waiting (no timeout applies to GPU work in flight). Every rank must make
  /// the same calls in the same order with the same count, type and op.
  void allreduce(const void* send, void* recv, std::int64_t count, DataType type, ReduceOp op, void* stream = nullptr);
  /// All-gathers `count_per_rank` elements from every rank's `send` into every rank's `recv`, which holds
  /// size() blocks of count_per_rank (block k = rank k's send), as ncclAllGather; in place when send is this
  /// rank's block of recv (recv + rank() · count_per_rank). Memory, streams and ordering as allreduce.
  void allgather(const void* send, void* recv, std::int64_t count_per_rank, DataType type, void* stream = nullptr);
  /// Reduce-scatters: `send` holds size() blocks of `count_per_rank` elements; rank k's `recv` gets block k
  /// reduced over every rank with `op`, as ncclReduceScatter. In place when recv is this rank's block of send
  /// (send + rank() · count_per_rank); then send's other blocks are unspecified afterwards. Otherwise send is
  /// read only (copied into communicator scratch). Memory, streams and ordering as allreduce.
  void reducescatter(const void* send, void* recv, std::int64_t count_per_rank, DataType type, ReduceOp op,
                     void* stream = nullptr);
  /// The asynchronous forms of the three calls: the same arguments, checks (bad input throws here, at once) and
  /// results, finished when the returned Request says so (see Request). Every rank must make its calls,
  /// synchronous and asynchronous together, in the same order.
  Request allreduce_async(const void* send, void* recv, std::int64_t count, DataType type, ReduceOp op,
                          void* stream = nullptr);
  Request allgather_async(const void* send, void* recv, std::int64_t count_per_rank, DataType type,
                          void* stream = nullptr);
  Request reducescatter_async(const void* send, void* recv, std::int64_t count_per_rank, DataType type, ReduceOp op,
                              void* stream = nullptr);
  /// This communicator's rank.
  int rank() const noexcept;
  /// Ranks in the group.
  int size() const noexcept;
  /// The backend it runs on.
  BackendKind backend() const noexcept;
  /// The plan the last call of this rank used (its last piece's; empty label before the first call).
  PlanInfo last_plan() const;
  /// The cost-model profile the plans were priced with ("cpu", "mpi", "cuda", "nccl"): the all-reduce table's,
  /// else the in-memory tuning's; "" for a fixed spec.
  std::string profile() const;
  /// The cached plans, most recently used first.
  std::vector<PlanInfo> cached_plans() const;
  /// The cache as text, one line per plan ("collective label [runs as X]  range  bucket k (B)  count type op
  /// devices  calls"), most recent first; "runs as" where the plan has library ops (PlanInfo::runs_as).
  std::string dump_cache() const;
  /// Plans compiled since creation (cache misses), over the whole group.
  std::uint64_t compiled_plans() const;
  /// The size buckets of `collective` in bytes (all-gather, reduce-scatter: of the whole buffer), ascending;
  /// tunes that collective when it has not run yet.
  std::vector<std::uint64_t> size_buckets(Collective collective = Collective::kAllReduce) const;
  /// Times a cached plan was re-targeted to another count (cpu; 0 for the others).
  std::uint64_t retargeted_plans() const;
  /// Worker threads the group's backend owns now (cpu; 0 for the others).
  std::size_t worker_threads() const;

  struct Group;  ///< shared state of the ranks (backend, cache, rendezvous); internal

 private:
  Communicator(std::shared_ptr<Group> group, int rank);
  std::shared_ptr<Group> group_;
  int rank_ = 0;
};

}  // namespace artune
