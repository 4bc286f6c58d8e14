#include "artune/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "algorithms/builders.hpp"
#include "algorithms/verifier.hpp"
#include "artune_config.hpp"
#include "executor/cpu/cpu_backend.hpp"
#include "topology/io.hpp"
#include "tuner/decision_table.hpp"
#include "tuner/search.hpp"

#if ARTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#if ARTUNE_HAVE_CUDA_BACKEND
#include <cuda_runtime.h>
#endif

namespace artune {

namespace {

// What a compiled plan is cached under.
struct CacheKey {
  int bucket = -1;
  std::int64_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  friend bool operator<(const CacheKey& a, const CacheKey& b) {
    return std::tie(a.bucket, a.count, a.type, a.op) < std::tie(b.bucket, b.count, b.type, b.op);
  }
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// One call's arguments as a rank gave them (checked equal over the ranks of a local group).
struct CallArgs {
  void* recv = nullptr;
  void* stream = nullptr;
  std::int64_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

std::vector<std::uint64_t> default_tune_sizes() {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = 4; b <= (std::uint64_t{256} << 20); b *= 4) sizes.push_back(b);
  return sizes;
}

void copy_host(void* recv, const void* send, std::size_t bytes) {
  if (bytes == 0 || send == recv) return;
  const auto* s = static_cast<const std::byte*>(send);
  auto* r = static_cast<std::byte*>(recv);
  if (s < r + bytes && r < s + bytes) {
    throw InvalidInput("allreduce: send and recv overlap without being the same buffer");
  }
  std::memcpy(recv, send, bytes);
}

}  // namespace

struct Communicator::Group {
  struct Entry {
    CacheKey key;
    PlanInfo info;
    std::unique_ptr<Backend> backend;  // mpi, cuda, nccl: one prepared backend per plan
    CpuBackend::Prepared held;         // cpu: the plan's state while another plan is current
  };

  BackendKind kind = BackendKind::kCpu;
  CommOptions options;
  BackendOptions backend_options;
  Topology topo;
  std::optional<DecisionTable> table;
  int ranks = 1;   // ranks of the group
  int local = 1;   // ranks driven by this process
  int rank_base = 0;
  bool broken = false;
  bool broken_timeout = false;  // broken by a timeout (rather than a failure)
  std::string broken_reason;
#if ARTUNE_HAVE_MPI
  MPI_Comm mpi_comm = MPI_COMM_NULL;  // duplicated from the caller's (mpi)
#endif

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
  std::vector<void*> buffers;
  std::vector<void*> streams;

  ~Group() {
    // cpu: give each entry its state back before the backend (and its workers) go.
    if (cpu && current != nullptr) cpu->swap_prepared(current->held);
    current = nullptr;
    lru.clear();
    cpu.reset();
#if ARTUNE_HAVE_MPI
    if (mpi_comm != MPI_COMM_NULL) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Comm_free(&mpi_comm);
    }
#endif
  }

  // The table range (bucket) and plan for `count` elements.
  Plan build(std::int64_t count, DataType type, ReduceOp op, int bucket) const {
    if (!options.spec.empty()) {
      BuildOptions b;
      b.count = count;
      b.reduce_op = op;
      return build_plan(topo, options.spec, b);
    }
    (void)type;
    Plan plan = build_candidate(topo, table->ranges[static_cast<std::size_t>(bucket)].plan, count, op);
    verify_or_throw(plan);
    return plan;
  }

  int bucket_of(std::int64_t count, DataType type) const {
    if (!options.spec.empty()) return -1;
    const auto bytes = static_cast<std::uint64_t>(count) * element_size(type);
    const TableRange& r = table->lookup(bytes);
    return static_cast<int>(&r - table->ranges.data());
  }

  // Makes `e` the plan inside the cpu backend.
  void make_current(Entry& e) {
    if (current == &e) return;
    if (current != nullptr) cpu->swap_prepared(current->held);
    cpu->swap_prepared(e.held);
    current = &e;
  }

  Entry& lookup(std::int64_t count, DataType type, ReduceOp op) {
    const int bucket = bucket_of(count, type);
    const CacheKey key{bucket, count, type, op};
    if (!lru.empty() && lru.front().key == key) return lru.front();
    if (auto it = index.find(key); it != index.end()) {
      lru.splice(lru.begin(), lru, it->second);
      return lru.front();
    }
    // Compile: build, verify, prepare on caller buffers.
    const Plan plan = build(count, type, op, bucket);
    if (plan.ranks() != ranks) {
      throw InvalidInput(fmt::format("communicator: the plan has {} ranks but the group has {} (check the topology)",
                                     plan.ranks(), ranks));
    }
    while (lru.size() >= std::max<std::size_t>(options.cache_capacity, 1)) {
      Entry& victim = lru.back();
      if (current == &victim) {
        cpu->swap_prepared(victim.held);
        current = nullptr;
      }
      index.erase(victim.key);
      lru.pop_back();
    }
    Entry e;
    e.key = key;
    e.info.label = options.spec.empty() ? table->ranges[static_cast<std::size_t>(bucket)].plan.label() : options.spec;
    e.info.bucket = bucket;
    if (bucket >= 0) {
      e.info.min_bytes = table->ranges[static_cast<std::size_t>(bucket)].min_bytes;
      e.info.max_bytes = table->ranges[static_cast<std::size_t>(bucket)].max_bytes;
    }
    e.info.count = count;
    e.info.type = type;
    e.info.op = op;
    e.info.devices = static_cast<int>(plan.devices.size());
    if (kind == BackendKind::kCpu) {
      if (current != nullptr) cpu->swap_prepared(current->held);
      current = nullptr;
      cpu->prepare_for_user_buffers(plan, type, op);
      lru.push_front(std::move(e));
      current = &lru.front();
    } else {
      e.backend = make_backend(kind, backend_options);
      e.backend->prepare_for_user_buffers(plan, type, op);
      lru.push_front(std::move(e));
    }
    index[key] = lru.begin();
    return lru.front();
  }

  // Runs one all-reduce on the local ranks' recv buffers (already holding their inputs).
  // GPU backends: asynchronous on the callers' streams.
  void run(std::int64_t count, DataType type, ReduceOp op, std::span<void* const> recv, std::span<void* const> streams) {
    Entry& e = lookup(count, type, op);
    try {
      if (kind == BackendKind::kCpu) {
        make_current(e);
        cpu->run_on(recv);
      } else if (kind == BackendKind::kCuda || kind == BackendKind::kNccl) {
        e.backend->run_on_streams(recv, streams);
      } else {
        e.backend->run_on(recv);
      }
    } catch (const Error& err) {
      if (err.code() == ErrorCode::kTimeout || err.code() == ErrorCode::kBackendFailure) {
        broken = true;
        broken_timeout = err.code() == ErrorCode::kTimeout;
        broken_reason = err.what();
      }
      throw;
    }
    ++e.info.calls;
    for (auto& l : last) l = e.info;
  }

  void check_usable() const {
    if (!broken) return;
    const std::string text = fmt::format("communicator is broken by an earlier failure: {}", broken_reason);
    if (broken_timeout) throw Timeout(text);
    throw BackendFailure(text);
  }
};

Communicator::Communicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

namespace {

std::shared_ptr<Communicator::Group> make_group(BackendKind kind, const CommOptions& options, int ranks) {
  auto g = std::make_shared<Communicator::Group>();
  g->kind = kind;
  g->options = options;
  if (!(options.timeout_s > 0)) throw InvalidInput("CommOptions::timeout_s: must be > 0");
  g->backend_options.timeout_s = effective_timeout_s(options.timeout_s);
  g->options.timeout_s = g->backend_options.timeout_s;
  g->topo = load_topology(options.topology.empty() ? fmt::format("uniform:{}", ranks) : options.topology);
  g->backend_options.topology = &g->topo;
  if (options.spec.empty()) {
    if (!options.table.empty()) {
      g->table = load_decision_table(options.table, g->topo);
    } else {
      SearchOptions s;
      s.sizes = options.tune_sizes.empty() ? default_tune_sizes() : options.tune_sizes;
      std::sort(s.sizes.begin(), s.sizes.end());
      g->table = search(g->topo, s).table;
    }
    if (g->table->ranges.empty()) throw InvalidInput("communicator: the decision table has no size ranges");
  }
  return g;
}

// A group of one local rank among `ranks` processes (mpi, nccl): this process drives rank `rank`.
[[maybe_unused]] void bind_one_rank(Communicator::Group& g, int ranks, int rank) {
  g.ranks = ranks;
  g.local = 1;
  g.rank_base = rank;
  g.last.assign(1, PlanInfo{});
}

}  // namespace

std::vector<Communicator> Communicator::create_local(BackendKind backend, const CommOptions& options, int ranks) {
  if (backend != BackendKind::kCpu && backend != BackendKind::kCuda) {
    throw InvalidInput(fmt::format("create_local: the {} backend runs one rank per process (create_mpi / create_nccl)",
                                   to_string(backend)));
  }
  if (ranks < 0) throw InvalidInput("create_local: ranks must be >= 0");
  if (ranks == 0 && options.topology.empty()) {
    ranks = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  }
  auto g = make_group(backend, options, ranks);
  const int topo_ranks = static_cast<int>(g->topo.gpus().size());
  if (ranks == 0) ranks = topo_ranks;
  if (ranks != topo_ranks) {
    throw InvalidInput(fmt::format("create_local: {} ranks asked but the topology '{}' has {} GPUs", ranks,
                                   g->topo.name(), topo_ranks));
  }
  if (backend == BackendKind::kCpu) {
    g->cpu = std::make_unique<CpuBackend>(g->backend_options);
  } else {
    (void)make_backend(backend, g->backend_options);  // Unsupported now rather than at the first call
  }
  g->ranks = ranks;
  g->local = ranks;
  g->last.assign(static_cast<std::size_t>(ranks), PlanInfo{});
  g->args.assign(static_cast<std::size_t>(ranks), CallArgs{});
  g->buffers.assign(static_cast<std::size_t>(ranks), nullptr);
  g->streams.assign(static_cast<std::size_t>(ranks), nullptr);
  std::vector<Communicator> out;
  out.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) out.push_back(Communicator(g, r));
  return out;
}

Communicator Communicator::create_mpi(const CommOptions& options, const void* mpi_comm) {
#if ARTUNE_HAVE_MPI
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw InvalidInput("create_mpi: call MPI_Init before creating an mpi communicator");
  const MPI_Comm parent = mpi_comm != nullptr ? *static_cast<const MPI_Comm*>(mpi_comm) : MPI_COMM_WORLD;
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(parent, &rank);
  MPI_Comm_size(parent, &size);
  auto g = make_group(BackendKind::kMpi, options, size);
  if (static_cast<int>(g->topo.gpus().size()) != size) {
    throw InvalidInput(fmt::format("create_mpi: the topology '{}' has {} GPUs but the MPI communicator {} ranks",
                                   g->topo.name(), g->topo.gpus().size(), size));
  }
  if (MPI_Comm_dup(parent, &g->mpi_comm) != MPI_SUCCESS) throw BackendFailure("create_mpi: MPI_Comm_dup failed");
  g->backend_options.mpi_comm = &g->mpi_comm;
  bind_one_rank(*g, size, rank);
  return Communicator(g, rank);
#else
  (void)options;
  (void)mpi_comm;
  throw Unsupported("mpi backend not built: MPI was not found at configure time");
#endif
}

Communicator Communicator::create_nccl(const CommOptions& options) {
#if ARTUNE_HAVE_NCCL_BACKEND
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw InvalidInput("create_nccl: call MPI_Init before creating an nccl communicator");
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto g = make_group(BackendKind::kNccl, options, size);
  bind_one_rank(*g, size, rank);
  return Communicator(g, rank);
#else
  (void)options;
  throw Unsupported("nccl backend not built: NCCL (with CUDA and MPI) was not found at configure time");
#endif
}

void Communicator::allreduce(const void* send, void* recv, std::int64_t count, DataType type, ReduceOp op,
                             void* stream) {
  Group& g = *group_;
  if (count < 0) throw InvalidInput(fmt::format("allreduce: count {} is negative", count));
  if (count > 0 && (send == nullptr || recv == nullptr)) throw InvalidInput("allreduce: null buffer");
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
  const bool gpu = g.kind == BackendKind::kCuda || g.kind == BackendKind::kNccl;
  if (!gpu && stream != nullptr) throw InvalidInput("allreduce: a stream is for the cuda and nccl backends");
  if (gpu) {
#if ARTUNE_HAVE_CUDA_BACKEND
    // Out of place: a device copy on the caller's stream, before the plan (which the backend fences
    // between the callers' streams), so nothing waits on the host.
    if (bytes > 0 && send != recv) {
      const auto* sb = static_cast<const std::byte*>(send);
      auto* rb = static_cast<std::byte*>(recv);
      if (sb < rb + bytes && rb < sb + bytes) {
        throw InvalidInput("allreduce: send and recv overlap without being the same buffer");
      }
      if (cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
        throw BackendFailure("allreduce: cudaMemcpyAsync(send -> recv) failed");
      }
    }
#else
    throw Unsupported("allreduce: cuda is not built here");
#endif
  } else {
    copy_host(recv, send, bytes);
  }

  if (g.local == 1) {
    g.check_usable();
    if (count == 0) return;
    void* one[1] = {recv};
    void* own_stream[1] = {stream};
    g.run(count, type, op, one, own_stream);
    return;
  }

  // Local group: the last rank to arrive runs the plan for all; the others wait for its outcome.
  std::unique_lock<std::mutex> lock(g.mutex);
  g.check_usable();
  const std::uint64_t gen = g.generation;
  g.args[static_cast<std::size_t>(rank_)] = CallArgs{recv, stream, count, type, op};
  if (++g.arrived == g.ranks) {
    g.arrived = 0;
    std::exception_ptr outcome;
    try {
      for (int r = 1; r < g.ranks; ++r) {
        const CallArgs& a = g.args[static_cast<std::size_t>(r)];
        const CallArgs& b = g.args[0];
        if (a.count != b.count || a.type != b.type || a.op != b.op) {
          throw InvalidInput(fmt::format("allreduce: rank {} called with {} x {} {} but rank 0 with {} x {} {}", r,
                                         a.count, to_string(a.type), to_string(a.op), b.count, to_string(b.type),
                                         to_string(b.op)));
        }
      }
      if (count > 0) {
        for (int r = 0; r < g.ranks; ++r) {
          g.buffers[static_cast<std::size_t>(r)] = g.args[static_cast<std::size_t>(r)].recv;
          g.streams[static_cast<std::size_t>(r)] = g.args[static_cast<std::size_t>(r)].stream;
        }
        g.run(count, type, op, g.buffers, g.streams);
      }
    } catch (...) {
      outcome = std::current_exception();
    }
    g.result = outcome;
    ++g.generation;
    lock.unlock();
    g.cv.notify_all();
    if (outcome) std::rethrow_exception(outcome);
    return;
  }
  const auto timeout = std::chrono::duration<double>(g.options.timeout_s);
  if (!g.cv.wait_for(lock, timeout, [&] { return g.generation != gen || g.broken; })) {
    const int missing = g.ranks - g.arrived;
    g.broken = true;
    g.broken_timeout = true;
    g.broken_reason = fmt::format("{} of {} ranks did not call allreduce within {} s (a rank stopped, threw or died)",
                                  missing, g.ranks, g.options.timeout_s);
    lock.unlock();
    g.cv.notify_all();
    throw Timeout(fmt::format("allreduce: rank {}: {}", rank_, g.broken_reason));
  }
  if (g.generation == gen) {
    // Another waiter timed out: this call cannot complete either.
    const std::string text = fmt::format("allreduce: rank {}: {}", rank_, g.broken_reason);
    if (g.broken_timeout) throw Timeout(text);
    throw BackendFailure(text);
  }
  if (g.result) std::rethrow_exception(g.result);
}

int Communicator::rank() const noexcept { return rank_; }
int Communicator::size() const noexcept { return group_->ranks; }
BackendKind Communicator::backend() const noexcept { return group_->kind; }

PlanInfo Communicator::last_plan() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  const int i = group_->local == 1 ? 0 : rank_;
  return group_->last[static_cast<std::size_t>(i)];
}

std::vector<PlanInfo> Communicator::cached_plans() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  std::vector<PlanInfo> out;
  for (const auto& e : group_->lru) out.push_back(e.info);
  return out;
}

std::string Communicator::dump_cache() const {
  std::string text;
  for (const PlanInfo& p : cached_plans()) {
    const std::string range =
        p.bucket < 0 ? std::string("spec") : fmt::format("range {} [{}..{} B]", p.bucket, p.min_bytes, p.max_bytes);
    text += fmt::format("{}  {}  count {} {} {}  devices {}  calls {}\n", p.label, range, p.count, to_string(p.type),
                        to_string(p.op), p.devices, p.calls);
  }
  return text;
}

std::size_t Communicator::worker_threads() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->cpu ? group_->cpu->worker_count() : 0;
}

}  // namespace artune
