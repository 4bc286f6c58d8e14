#include "artune/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/verifier.hpp"
#include "artune_config.hpp"
#include "artune/executor/api/call_split.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/topology/io.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/search.hpp"

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

// What a compiled plan is cached under: the size bucket (index of a tuned size), type and op. The count is the
// bucket's; every call count is served by bucket plans (split_call).
struct CacheKey {
  int bucket = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  friend bool operator<(const CacheKey& a, const CacheKey& b) {
    return std::tie(a.bucket, a.type, a.op) < std::tie(b.bucket, b.type, b.op);
  }
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// One call's arguments as a rank gave them (checked equal over the ranks of a local group).
struct CallArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  void* stream = nullptr;
  std::int64_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

std::vector<std::uint64_t> default_tune_sizes() {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = 4; b <= (std::uint64_t{256} << 20); b *= 2) sizes.push_back(b);
  return sizes;
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
  int ranks = 1;  // ranks of the group
  int local = 1;  // ranks driven by this process
  int rank_base = 0;
  bool broken = false;
  bool broken_timeout = false;  // broken by a timeout (rather than a failure)
  std::string broken_reason;
#if ARTUNE_HAVE_MPI
  MPI_Comm mpi_comm = MPI_COMM_NULL;  // duplicated from the caller's (mpi)
#endif

  // Size buckets (bytes, ascending) and the padding limit (split_call).
  std::vector<std::uint64_t> buckets;
  std::uint64_t pad_limit = 0;
  std::uint64_t compiles = 0;  // plans compiled so far

  // Padding scratch of a local rank (host, or device memory of the rank's GPU).
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
    void release() {
      if (data != nullptr || event != nullptr) {
        if (device < 0) {
          std::free(data);
        } else {
#if ARTUNE_HAVE_CUDA_BACKEND
          int previous = 0;
          cudaGetDevice(&previous);
          cudaSetDevice(device);
          if (event != nullptr) cudaEventSynchronize(static_cast<cudaEvent_t>(event));
          if (data != nullptr) cudaFree(data);
          if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
          cudaSetDevice(previous);
#endif
        }
      }
      data = nullptr;
      event = nullptr;
      bytes = 0;
      dirty = 0;
      device = -1;
      used = false;
    }
  };
  std::vector<Pad> pads;  // per local rank

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
  std::vector<const void*> sends;
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

  // The plan of size bucket `bucket` for `count` elements (the bucket's).
  Plan build(std::int64_t count, ReduceOp op, int bucket) const {
    if (!options.spec.empty()) {
      BuildOptions b;
      b.count = count;
      b.reduce_op = op;
      return build_plan(topo, options.spec, b);
    }
    Plan plan = build_candidate(topo, table->lookup(buckets[static_cast<std::size_t>(bucket)]).plan, count, op);
    verify_or_throw(plan);
    return plan;
  }

  // Makes `e` the plan inside the cpu backend.
  void make_current(Entry& e) {
    if (current == &e) return;
    if (current != nullptr) cpu->swap_prepared(current->held);
    cpu->swap_prepared(e.held);
    current = &e;
  }

  // The compiled plan of (bucket, type, op), compiling it (build, verify, prepare) on a miss.
  Entry& lookup(int bucket, DataType type, ReduceOp op) {
    const CacheKey key{bucket, type, op};
    if (!lru.empty() && lru.front().key == key) return lru.front();
    if (auto it = index.find(key); it != index.end()) {
      lru.splice(lru.begin(), lru, it->second);
      return lru.front();
    }
    const std::uint64_t bytes = buckets[static_cast<std::size_t>(bucket)];
    const std::int64_t count = bucket_count(bytes, element_size(type));
    const Plan plan = build(count, op, bucket);
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
    e.info.bucket = bucket;
    e.info.bucket_bytes = bytes;
    if (options.spec.empty()) {
      const TableRange& range = table->lookup(bytes);
      e.info.label = range.plan.label();
      e.info.range = static_cast<int>(&range - table->ranges.data());
      e.info.min_bytes = range.min_bytes;
      e.info.max_bytes = range.max_bytes;
    } else {
      e.info.label = options.spec;
    }
    e.info.count = count;
    e.info.type = type;
    e.info.op = op;
    e.info.devices = static_cast<int>(plan.devices.size());
    ++compiles;
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

  // Runs entry `e` once, in place, on the local ranks' buffers `at` (GPU backends: on the callers' streams).
  void run_entry(Entry& e, std::span<void* const> at, std::span<void* const> streams) {
    if (kind == BackendKind::kCpu) {
      make_current(e);
      cpu->run_on(at);
    } else if (kind == BackendKind::kCuda || kind == BackendKind::kNccl) {
      e.backend->run_on_streams(at, streams);
    } else {
      e.backend->run_on(at);
    }
    ++e.info.calls;
  }

  // Copies `bytes` from `src` to `dst` (host, or device memory on `stream`).
  void copy(void* dst, const void* src, std::size_t bytes, void* stream) const {
    if (bytes == 0 || dst == src) return;
    if (!gpu()) {
      std::memcpy(dst, src, bytes);
      return;
    }
#if ARTUNE_HAVE_CUDA_BACKEND
    if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      throw BackendFailure("allreduce: cudaMemcpyAsync failed");
    }
#else
    (void)stream;
#endif
  }

  bool gpu() const noexcept { return kind == BackendKind::kCuda || kind == BackendKind::kNccl; }

  // Local rank i's padding scratch, at least `bytes` long, with zeros from `keep` bytes on, ready on `stream`.
  void* pad_buffer(std::size_t i, std::size_t bytes, std::size_t keep, const void* user, void* stream) {
    Pad& p = pads[i];
    if (p.bytes < bytes) {
      p.release();
      if (!gpu()) {
        const std::size_t rounded = (bytes + 63) / 64 * 64;
        p.data = std::aligned_alloc(64, rounded);
        if (p.data == nullptr) throw BackendFailure(fmt::format("allreduce: out of memory ({} B of scratch)", bytes));
      } else {
#if ARTUNE_HAVE_CUDA_BACKEND
        // On the device of the caller's buffer.
        cudaPointerAttributes attr{};
        if (cudaPointerGetAttributes(&attr, user) != cudaSuccess ||
            (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
          (void)cudaGetLastError();
          throw InvalidInput("allreduce: the buffers of a cuda/nccl communicator must be device memory");
        }
        int previous = 0;
        cudaGetDevice(&previous);
        cudaSetDevice(attr.device);
        p.device = attr.device;  // release() frees on it, even after a failure below
        const bool ok =
            cudaMalloc(&p.data, bytes) == cudaSuccess &&
            cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(&p.event), cudaEventDisableTiming) == cudaSuccess;
        cudaSetDevice(previous);
        if (!ok) {
          p.release();
          throw BackendFailure(fmt::format("allreduce: cannot allocate {} B of device scratch", bytes));
        }
#else
        (void)user;
#endif
      }
      p.bytes = bytes;
      p.dirty = bytes;  // not zeroed yet: the tail is zeroed below (on the caller's stream for GPU memory)
    }
#if ARTUNE_HAVE_CUDA_BACKEND
    // The scratch's previous use (maybe on another stream) comes first.
    if (gpu() && p.used &&
        cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(p.event), 0) != cudaSuccess) {
      throw BackendFailure("allreduce: cudaStreamWaitEvent failed");
    }
#endif
    if (p.dirty > keep) {
      auto* tail = static_cast<std::byte*>(p.data) + keep;
      if (!gpu()) {
        std::memset(tail, 0, p.dirty - keep);
      } else {
#if ARTUNE_HAVE_CUDA_BACKEND
        if (cudaMemsetAsync(tail, 0, p.dirty - keep, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
          throw BackendFailure("allreduce: cudaMemsetAsync failed");
        }
#endif
      }
    }
    // Until the run completes the whole buffer counts as written (a failed run leaves it unknown).
    p.dirty = p.bytes;
    return p.data;
  }

  // After a padded run on `stream`: only the first `keep` bytes can be non-zero (zeros reduce to zeros).
  void pad_done(std::size_t i, std::size_t keep, void* stream) {
    Pad& p = pads[i];
    p.dirty = keep;
#if ARTUNE_HAVE_CUDA_BACKEND
    if (gpu()) {
      if (cudaEventRecord(static_cast<cudaEvent_t>(p.event), static_cast<cudaStream_t>(stream)) != cudaSuccess) {
        throw BackendFailure("allreduce: cudaEventRecord failed");
      }
      p.used = true;
    }
#else
    (void)stream;
#endif
  }

  // One all-reduce of the local ranks' send[i] into recv[i], split into runs of bucket plans (split_call).
  // `ranks_pad`: each rank has filled its own padding scratch already and copies its result out itself
  // (local host groups, so that those copies run in parallel).
  void execute(std::int64_t count, DataType type, ReduceOp op, std::span<const void* const> send,
               std::span<void* const> recv, std::span<void* const> streams, bool ranks_pad = false) {
    const std::size_t elem = element_size(type);
    const std::size_t n = recv.size();
    std::vector<void*> at(n);
    try {
      for (const CallPiece& piece : split_call(buckets, pad_limit, count, elem)) {
        Entry& e = lookup(piece.bucket, type, op);
        const std::size_t offset = static_cast<std::size_t>(piece.offset) * elem;
        const std::size_t bytes = static_cast<std::size_t>(piece.count) * elem;
        const bool padded = piece.count != piece.compiled;
        for (std::size_t i = 0; i < n; ++i) {
          const auto* src = static_cast<const std::byte*>(send[i]) + offset;
          auto* dst = static_cast<std::byte*>(recv[i]) + offset;
          if (padded && ranks_pad) {
            at[i] = pads[i].data;
          } else if (padded) {
            at[i] = pad_buffer(i, static_cast<std::size_t>(piece.compiled) * elem, bytes, recv[i], streams[i]);
            copy(at[i], src, bytes, streams[i]);
          } else {
            copy(dst, src, bytes, streams[i]);
            at[i] = dst;
          }
        }
        run_entry(e, at, streams);
        if (padded && !ranks_pad) {
          for (std::size_t i = 0; i < n; ++i) {
            copy(static_cast<std::byte*>(recv[i]) + offset, at[i], bytes, streams[i]);
            pad_done(i, bytes, streams[i]);
          }
        }
        for (auto& l : last) l = e.info;
      }
    } catch (const Error& err) {
      if (err.code() == ErrorCode::kTimeout || err.code() == ErrorCode::kBackendFailure) {
        broken = true;
        broken_timeout = err.code() == ErrorCode::kTimeout;
        broken_reason = err.what();
      }
      throw;
    }
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
    // The buckets: the sizes the table was tuned at (a range's bounds when it lists none).
    for (const TableRange& r : g->table->ranges) {
      if (r.points.empty()) {
        g->buckets.push_back(r.min_bytes);
        g->buckets.push_back(r.max_bytes);
      }
      for (const SizePoint& p : r.points) g->buckets.push_back(p.bytes);
    }
  } else {
    g->buckets = options.tune_sizes.empty() ? default_tune_sizes() : options.tune_sizes;
  }
  std::sort(g->buckets.begin(), g->buckets.end());
  g->buckets.erase(std::unique(g->buckets.begin(), g->buckets.end()), g->buckets.end());
  if (!g->buckets.empty() && g->buckets.front() == 0) g->buckets.erase(g->buckets.begin());
  if (g->buckets.empty()) throw InvalidInput("communicator: no size to compile plans at (tune_sizes or the table)");
  g->pad_limit = options.pad_limit;
  return g;
}

// A group of one local rank among `ranks` processes (mpi, nccl): this process drives rank `rank`.
[[maybe_unused]] void bind_one_rank(Communicator::Group& g, int ranks, int rank) {
  g.ranks = ranks;
  g.local = 1;
  g.rank_base = rank;
  g.last.assign(1, PlanInfo{});
  g.pads = std::vector<Communicator::Group::Pad>(1);
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
  g->pads = std::vector<Communicator::Group::Pad>(static_cast<std::size_t>(ranks));
  g->args.assign(static_cast<std::size_t>(ranks), CallArgs{});
  g->buffers.assign(static_cast<std::size_t>(ranks), nullptr);
  g->streams.assign(static_cast<std::size_t>(ranks), nullptr);
  g->sends.assign(static_cast<std::size_t>(ranks), nullptr);
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
  if (!g.gpu() && stream != nullptr) throw InvalidInput("allreduce: a stream is for the cuda and nccl backends");
#if !ARTUNE_HAVE_CUDA_BACKEND
  if (g.gpu()) throw Unsupported("allreduce: cuda is not built here");
#endif
  if (bytes > 0 && send != recv) {
    const auto* sb = static_cast<const std::byte*>(send);
    auto* rb = static_cast<std::byte*>(recv);
    if (sb < rb + bytes && rb < sb + bytes) {
      throw InvalidInput("allreduce: send and recv overlap without being the same buffer");
    }
  }

  if (g.local == 1) {
    g.check_usable();
    if (count == 0) return;
    const void* one_send[1] = {send};
    void* one[1] = {recv};
    void* own_stream[1] = {stream};
    g.execute(count, type, op, one_send, one, own_stream);
    return;
  }

  // Local group: the last rank to arrive runs the plan for all; the others wait for its outcome. On the host
  // each rank copies its own input first (in parallel), so the plan runs in place.
  // The same for a padded last piece: each rank fills its own scratch now and copies its result out after.
  const bool ranks_pad = !g.gpu();
  std::optional<CallPiece> padded;
  void* pad = nullptr;
  if (ranks_pad && bytes > 0) {
    if (send != recv) {
      std::memcpy(recv, send, bytes);
      send = recv;
    }
    auto pieces = split_call(g.buckets, g.pad_limit, count, element_size(type));
    if (pieces.back().count != pieces.back().compiled) {
      padded = pieces.back();
      const std::size_t elem = element_size(type);
      pad = g.pad_buffer(static_cast<std::size_t>(rank_), static_cast<std::size_t>(padded->compiled) * elem,
                         static_cast<std::size_t>(padded->count) * elem, recv, nullptr);
      std::memcpy(pad, static_cast<const std::byte*>(recv) + static_cast<std::size_t>(padded->offset) * elem,
                  static_cast<std::size_t>(padded->count) * elem);
    }
  }
  // This rank's result of a padded piece, once the call succeeded.
  const auto copy_out = [&] {
    if (!padded) return;
    const std::size_t elem = element_size(type);
    std::memcpy(static_cast<std::byte*>(recv) + static_cast<std::size_t>(padded->offset) * elem, pad,
                static_cast<std::size_t>(padded->count) * elem);
    g.pad_done(static_cast<std::size_t>(rank_), static_cast<std::size_t>(padded->count) * elem, nullptr);
  };
  std::unique_lock<std::mutex> lock(g.mutex);
  g.check_usable();
  const std::uint64_t gen = g.generation;
  g.args[static_cast<std::size_t>(rank_)] = CallArgs{send, recv, stream, count, type, op};
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
          g.sends[static_cast<std::size_t>(r)] = g.args[static_cast<std::size_t>(r)].send;
          g.buffers[static_cast<std::size_t>(r)] = g.args[static_cast<std::size_t>(r)].recv;
          g.streams[static_cast<std::size_t>(r)] = g.args[static_cast<std::size_t>(r)].stream;
        }
        g.execute(count, type, op, g.sends, g.buffers, g.streams, ranks_pad);
      }
    } catch (...) {
      outcome = std::current_exception();
    }
    g.result = outcome;
    ++g.generation;
    lock.unlock();
    g.cv.notify_all();
    if (outcome) std::rethrow_exception(outcome);
    copy_out();
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
  lock.unlock();
  copy_out();
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
        p.range < 0 ? std::string("spec") : fmt::format("range {} [{}..{} B]", p.range, p.min_bytes, p.max_bytes);
    text += fmt::format("{}  {}  bucket {} ({} B)  count {} {} {}  devices {}  calls {}\n", p.label, range, p.bucket,
                        p.bucket_bytes, p.count, to_string(p.type), to_string(p.op), p.devices, p.calls);
  }
  return text;
}

std::uint64_t Communicator::compiled_plans() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->compiles;
}

std::vector<std::uint64_t> Communicator::size_buckets() const { return group_->buckets; }

std::size_t Communicator::worker_threads() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->cpu ? group_->cpu->worker_count() : 0;
}

}  // namespace artune
