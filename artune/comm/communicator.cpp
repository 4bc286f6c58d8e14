#include "artune/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "artune/comm/comm_group.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/topology/io/io.hpp"
#include "artune_config.hpp"

namespace artune {

Communicator::Communicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

namespace {

std::shared_ptr<Communicator::Group> make_group(BackendKind kind, const CommOptions& options, int ranks) {
  auto g = std::make_shared<Communicator::Group>(kind, options, ranks);
  // All-reduce plans are tuned (or read) now; all-gather and reduce-scatter ones on their first call.
  (void)g->source.tuning(Collective::kAllReduce);
  return g;
}

}  // namespace

std::vector<Communicator> Communicator::create_local(BackendKind backend, const CommOptions& options, int ranks) {
  if (!drives_local_ranks(backend)) {
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
  g->bind(ranks, ranks, 0);
  g->cache->open();  // Unsupported now rather than at the first call
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
  g->bind(size, 1, rank);
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
  g->bind(size, 1, rank);
  return Communicator(g, rank);
#else
  (void)options;
  throw Unsupported("nccl backend not built: NCCL (with CUDA and MPI) was not found at configure time");
#endif
}

namespace {

// InvalidInput unless [a, a + a_bytes) and [b, b + b_bytes) are disjoint.
void check_disjoint(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes, std::string_view what) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  if (a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes) throw InvalidInput(std::string(what));
}

}  // namespace

void Communicator::Group::check_call(std::string_view what, std::int64_t count, const void* send, const void* recv,
                                     void* stream) const {
  if (count < 0) throw InvalidInput(fmt::format("{}: count {} is negative", what, count));
  if (count > 0 && (send == nullptr || recv == nullptr)) throw InvalidInput(fmt::format("{}: null buffer", what));
  if (!gpu() && stream != nullptr)
    throw InvalidInput(fmt::format("{}: a stream is for the cuda and nccl backends", what));
#if !ARTUNE_HAVE_CUDA_BACKEND
  if (gpu()) throw Unsupported(fmt::format("{}: cuda is not built here", what));
#endif
}

namespace {

using Group = Communicator::Group;

// Each call is checked at once (bad input throws to the caller, asynchronous or not), then becomes a job that
// runs it: now, or on the rank's progress thread. The job holds the group.
std::function<void()> allreduce_job(const std::shared_ptr<Group>& group, int rank, const void* send, void* recv,
                                    std::int64_t count, DataType type, ReduceOp op, void* stream) {
  Group& g = *group;
  g.check_call("allreduce", count, send, recv, stream);
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
  if (send != recv) {
    check_disjoint(send, bytes, recv, bytes, "allreduce: send and recv overlap without being the same buffer");
  }
  return [group, rank, send, recv, count, type, op, stream, bytes] {
    const void* from = send;
    // On the host each rank copies its own input first (in parallel for a local group), so the plan runs in place.
    if (!group->gpu() && send != recv && bytes > 0) {
      std::memcpy(recv, send, bytes);
      from = recv;
    }
    group->call(rank, CallArgs{Collective::kAllReduce, from, recv, stream, count, type, op});
  };
}

std::function<void()> allgather_job(const std::shared_ptr<Group>& group, int rank, const void* send, void* recv,
                                    std::int64_t count_per_rank, DataType type, void* stream) {
  Group& g = *group;
  g.check_call("allgather", count_per_rank, send, recv, stream);
  const std::size_t block = static_cast<std::size_t>(count_per_rank) * element_size(type);
  auto* own = static_cast<std::byte*>(recv) + block * static_cast<std::size_t>(rank);
  // In place when send is this rank's block of recv (NCCL's convention); otherwise send must not overlap recv.
  if (send != own) {
    check_disjoint(send, block, recv, block * static_cast<std::size_t>(g.ranks),
                   "allgather: send overlaps recv without being this rank's block of it");
  }
  return [group, rank, send, recv, count_per_rank, type, stream, block, own] {
    group->scratch->copy(own, send, block, stream);
    group->call(rank, CallArgs{Collective::kAllGather, send, recv, stream, count_per_rank * group->ranks, type,
                               ReduceOp::kSum});
  };
}

std::function<void()> reducescatter_job(const std::shared_ptr<Group>& group, int rank, const void* send, void* recv,
                                        std::int64_t count_per_rank, DataType type, ReduceOp op, void* stream) {
  Group& g = *group;
  g.check_call("reducescatter", count_per_rank, send, recv, stream);
  const std::size_t block = static_cast<std::size_t>(count_per_rank) * element_size(type);
  const std::size_t whole = block * static_cast<std::size_t>(g.ranks);
  const auto* own = static_cast<const std::byte*>(send) + block * static_cast<std::size_t>(rank);
  // In place when recv is this rank's block of send (NCCL's convention): the plan runs on the caller's buffer
  // (its other blocks are unspecified afterwards); otherwise on a copy of send in the communicator's scratch.
  const bool in_place = own == recv;
  if (!in_place) {
    check_disjoint(send, whole, recv, block, "reducescatter: recv overlaps send without being this rank's block of it");
  }
  return [group, rank, send, recv, count_per_rank, type, op, stream, block, whole, in_place] {
    Group& g = *group;
    const std::size_t i = g.local == 1 ? 0 : static_cast<std::size_t>(rank);
    void* at = static_cast<std::byte*>(recv) - block * static_cast<std::size_t>(rank);
    if (!in_place && block > 0) {
      at = g.scratch->acquire(i, whole, whole, recv, stream);
      g.scratch->copy(at, send, whole, stream);
    }
    g.call(rank, CallArgs{Collective::kReduceScatter, at, at, stream, count_per_rank * g.ranks, type, op});
    if (!in_place && block > 0) {
      g.scratch->copy(recv, static_cast<const std::byte*>(at) + block * static_cast<std::size_t>(rank), block, stream);
      g.scratch->release(i, whole, stream);
    }
  };
}

}  // namespace

void Communicator::allreduce(const void* send, void* recv, std::int64_t count, DataType type, ReduceOp op,
                             void* stream) {
  group_->run(rank_, allreduce_job(group_, rank_, send, recv, count, type, op, stream));
}

void Communicator::allgather(const void* send, void* recv, std::int64_t count_per_rank, DataType type, void* stream) {
  group_->run(rank_, allgather_job(group_, rank_, send, recv, count_per_rank, type, stream));
}

void Communicator::reducescatter(const void* send, void* recv, std::int64_t count_per_rank, DataType type, ReduceOp op,
                                 void* stream) {
  group_->run(rank_, reducescatter_job(group_, rank_, send, recv, count_per_rank, type, op, stream));
}

Request Communicator::allreduce_async(const void* send, void* recv, std::int64_t count, DataType type, ReduceOp op,
                                      void* stream) {
  return group_->submit(rank_, stream, recv, allreduce_job(group_, rank_, send, recv, count, type, op, stream));
}

Request Communicator::allgather_async(const void* send, void* recv, std::int64_t count_per_rank, DataType type,
                                      void* stream) {
  return group_->submit(rank_, stream, recv, allgather_job(group_, rank_, send, recv, count_per_rank, type, stream));
}

Request Communicator::reducescatter_async(const void* send, void* recv, std::int64_t count_per_rank, DataType type,
                                          ReduceOp op, void* stream) {
  return group_->submit(rank_, stream, recv,
                        reducescatter_job(group_, rank_, send, recv, count_per_rank, type, op, stream));
}

int Communicator::rank() const noexcept { return rank_; }
int Communicator::size() const noexcept { return group_->ranks; }
BackendKind Communicator::backend() const noexcept { return group_->kind; }

std::string Communicator::profile() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->source.tuning(Collective::kAllReduce).profile;
}

PlanInfo Communicator::last_plan() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  const int i = group_->local == 1 ? 0 : rank_;
  return group_->last[static_cast<std::size_t>(i)];
}

std::vector<PlanInfo> Communicator::cached_plans() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  std::vector<PlanInfo> out;
  for (const auto& e : group_->cache->entries()) out.push_back(e.info);
  return out;
}

std::string Communicator::dump_cache() const {
  std::string text;
  for (const PlanInfo& p : cached_plans()) {
    const std::string range =
        p.range < 0 ? std::string("spec") : fmt::format("range {} [{}..{} B]", p.range, p.min_bytes, p.max_bytes);
    // Every line starts with its collective; the reduction op only where there is one (not all-gather).
    const std::string op = p.collective == Collective::kAllGather ? "" : fmt::format(" {}", to_string(p.op));
    const std::string runs_as = p.runs_as.empty() ? "" : fmt::format(" [runs as {}]", p.runs_as);
    text += fmt::format("{} {}{}  {}  bucket {} ({} B)  count {} {}{}  devices {}  calls {}\n",
                        collective_flag_name(p.collective), p.label, runs_as, range, p.bucket, p.bucket_bytes, p.count,
                        to_string(p.type), op, p.devices, p.calls);
  }
  return text;
}

std::uint64_t Communicator::compiled_plans() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->cache->compiles();
}

std::vector<std::uint64_t> Communicator::size_buckets(Collective collective) const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->source.tuning(collective).buckets;
}

std::uint64_t Communicator::retargeted_plans() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->cache->retargeted();
}

std::size_t Communicator::worker_threads() const {
  std::lock_guard<std::mutex> lock(group_->mutex);
  return group_->cache->worker_threads();
}

}  // namespace artune
