// The nccl backend: one MPI rank per GPU. MPI only bootstraps (the unique id
// broadcast) and combines per-rank figures; all data moves through NCCL on
// one stream per rank, following the rank's Program (nccl_program.hpp).
//
// Never hang: every communicator is non-blocking (config.blocking = 0), so
// NCCL calls return at once and completion is polled together with
// ncclCommGetAsyncError under a deadline of options.timeout_s. A stuck or dead
// peer ends in Timeout after ncclCommAbort on every communicator; an NCCL
// error (asynchronous ones included) ends in BackendFailure with
// ncclGetErrorString and NCCL's last-error text. Any error during a run aborts
// the communicators too, so neither this rank nor its peers wait on work that
// can no longer complete.

#include "artune/executor/nccl/nccl_backend.hpp"

#include <fmt/format.h>
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings warn under -Wextra)
#endif
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/executor/cuda/cuda_check.hpp"
#include "artune/executor/cuda/cuda_program.hpp"
#include "artune/executor/cuda/device_io.hpp"
#include "artune/executor/cuda/kernel_dispatch.hpp"
#include "artune/executor/cuda/reduce_kernels.hpp"
#include "artune/executor/mpi/launcher.hpp"
#include "artune/executor/mpi/mpi_init.hpp"
#include "artune/executor/nccl/nccl_forced_choice.hpp"
#include "artune/executor/nccl/nccl_program.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/executor/test_fault.hpp"
#include "artune/executor/verification.hpp"
#include "artune/topology/topology.hpp"

namespace artune {
namespace {

using cuda::DeviceBuffer;
using cuda::DeviceGuard;
using cuda::Event;
using cuda::PinnedBuffer;
using cuda::Stream;
using nccl::Program;
using nccl::Ref;
using nccl::StepKind;

// kernel_dispatch.hpp states NCCL's enum values without including nccl.h; hold it to them.
static_assert(ncclInt8 == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt64 == 4 && ncclFloat16 == 6 &&
              ncclFloat32 == 7 && ncclFloat64 == 8 && ncclBfloat16 == 9);
static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4);

std::string nccl_message(ncclResult_t r, ncclComm_t comm) {
  std::string msg = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') msg += fmt::format(" ({})", last);
  return msg;
}

// Throws BackendFailure naming the call unless it succeeded or (non-blocking) is in progress.
void check_nccl(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw BackendFailure(fmt::format("{}: {}", call, nccl_message(r, comm)));
}
#define ARTUNE_NCCL_CHECK(call, comm) check_nccl((call), #call, (comm))

#define ARTUNE_MPI_CHECK(call) check_mpi((call), #call)

bool g_mpi_initialised_here = false;

// MPI at artune's one thread level (mpi/mpi_init.hpp); finalised at exit when this backend started it.
void ensure_mpi_for_nccl() {
  if (!ensure_mpi()) return;
  g_mpi_initialised_here = true;
  std::atexit([] {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised && g_mpi_initialised_here) MPI_Finalize();
  });
}

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(const BackendOptions& options) : options_(options) {
    gpus_ = cuda::usable_device_count();
    if (gpus_ <= 0) throw Unsupported("no CUDA device available");
    ensure_mpi_for_nccl();
    ARTUNE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    ARTUNE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    MPI_Comm local = MPI_COMM_NULL;
    ARTUNE_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    int local_rank = 0;
    int local_size = 1;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_size(local, &local_size);
    gpu_ = local_rank % gpus_;
    // NCCL needs one GPU per rank. Compare PCI bus ids (not counts: under CUDA_VISIBLE_DEVICES
    // each rank may see "device 0" and still own a different GPU).
    constexpr int kBusIdLength = 32;
    std::vector<char> bus_ids(static_cast<std::size_t>(kBusIdLength) * static_cast<std::size_t>(local_size), '\0');
    char mine[kBusIdLength] = {};
    fault_ = read_test_fault();
    // Every bootstrap step that can fail on one rank is agreed on before the collective that follows it.
    agree_on(MPI_COMM_WORLD, "nccl backend: bootstrap (PCI bus id)", [&] {
      inject_boot_fault();
      ARTUNE_CUDA_CHECK(cudaDeviceGetPCIBusId(mine, kBusIdLength, gpu_));
    });
    const int gathered = MPI_Allgather(mine, kBusIdLength, MPI_CHAR, bus_ids.data(), kBusIdLength, MPI_CHAR, local);
    MPI_Comm_free(&local);
    ARTUNE_MPI_CHECK(gathered);
    int shared = 0;
    for (int r = 0; r < local_size; ++r) {
      if (r != local_rank && std::string(&bus_ids[static_cast<std::size_t>(r) * kBusIdLength]) == mine) shared = 1;
    }
    // Every rank decides together, so all throw (no rank left waiting in a collective).
    ARTUNE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (shared) {
      throw Unsupported(
          fmt::format("nccl backend: NCCL needs one GPU per rank, but ranks share a GPU (this "
                      "machine runs {} ranks and this rank sees {} GPU(s))",
                      local_size, gpus_));
    }
    ARTUNE_CUDA_CHECK(cudaSetDevice(gpu_));
    stream_ = Stream(gpu_);

    ncclUniqueId id;
    agree_on(MPI_COMM_WORLD, "nccl backend: bootstrap (NCCL unique id)", [&] {
      inject_boot_fault();
      if (rank_ == 0) ARTUNE_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    });
    ARTUNE_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ARTUNE_NCCL_CHECK(ncclCommInitRankConfig(&world_, size_, id, rank_, &config), world_);
    wait_ready({world_}, "ncclCommInitRankConfig");
  }

  ~NcclBackend() override {
    if (aborted_) return;  // communicators gone; nothing queued waits on a peer any more
    // Bounded: queued NCCL kernels whose peers stopped would never drain; abort them instead.
    if (!drain_stream()) {
      abort_comms();
      return;
    }
    destroy_comm_list(groups_);
    if (world_ != nullptr) destroy_comm(world_);
  }

  void prepare(const Plan& plan, DataType type, ReduceOp op) override {
    check_plan_shape(plan);
    require_alive();
    if (plan.ranks() != size_) {
      throw InvalidInput(
          fmt::format("nccl backend: the plan has {} ranks but {} processes run (start it with "
                      "mpirun -np {})",
                      plan.ranks(), size_, plan.ranks()));
    }
    prepared_ = false;
    type_ = type;
    op_ = op;
    count_ = plan.count;
    collective_ = plan.collective;
    esize_ = element_size(type);
    const int n = static_cast<int>(plan.devices.size());

    std::vector<int> machines;
    std::vector<bool> host(n, false);
    if (options_.topology != nullptr) {
      machines = device_machines(plan, *options_.topology);
      for (int d = 0; d < n; ++d) {
        const int node = plan.devices[d].node;
        host[d] = node >= 0 && node < static_cast<int>(options_.topology->nodes().size()) &&
                  options_.topology->nodes()[node].kind != NodeKind::kGpu;
      }
    } else {
      machines = nccl::machines_from_names(plan);
      host = nccl::host_devices_from_names(plan);
    }
    // The previous plan's memory goes first, so the check below sees what this plan can have.
    buffers_.clear();
    host_buffers_.clear();
    staging_ = DeviceBuffer();
    host_io_ = PinnedBuffer();
    // Local checks first, then agreement: a rank that rejects the plan must not leave the others
    // waiting in a communicator split.
    std::vector<int> host_of;
    std::vector<NcclForcedChoice> forced;  // per distinct group: NCCL_ALGO/PROTO/channels of nccl.ALGO.PROTO ops
    std::string local_error;
    ErrorCode local_code = ErrorCode::kInvalidInput;
    try {
      const int declared = declared_machine();
      if (declared >= 0 && options_.topology != nullptr && machines.at(rank_) != declared) {
        throw InvalidInput(
            fmt::format("nccl backend: this rank declares machine {} ({} / "
                        "ARTUNE_MACHINE_INDEX) but the topology puts its device {} on machine {}",
                        declared, parameter("machine_index"), plan.devices[rank_].name, machines[rank_]));
      }
      host_of = host_processes(plan, machines);
      forced = nccl_forced_choices(plan);
      program_ = nccl::lower_rank(plan, host_of, host, rank_);
      check_memory(plan, nccl::rank_memory(plan, program_, esize_));
    } catch (const Error& e) {
      local_error = e.what();
      local_code = e.code();
    }
    int bad = local_error.empty() ? 0 : 1;
    ARTUNE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (!local_error.empty()) {
      if (local_code == ErrorCode::kUnsupported) throw Unsupported(local_error);
      throw InvalidInput(local_error);
    }
    if (bad) throw InvalidInput(fmt::format("nccl backend: rank {}: another rank rejected the plan", rank_));

    // Communicators by key (members' ranks in NCCL rank order), kept across prepare() calls: a sweep
    // splits each group once, not once per message size. Every rank takes part in every split
    // (NOCOLOR if not a member), in the same order, since every rank plans from the same plans.
    // A communicator is its members in NCCL rank order and what it is forced to (nccl.ALGO.PROTO plans).
    const std::vector<nccl::CommKey> members_of = nccl::communicator_keys(plan, host_of);
    std::vector<CacheKey> needed;
    for (std::size_t g = 0; g < members_of.size(); ++g) needed.push_back({members_of[g], forced.at(g)});
    const auto comms = nccl::plan_communicators(comm_keys_, needed);
    const std::size_t first_new = groups_.size();
    // Sized before splitting: a non-blocking split writes &groups_[slot] later, from NCCL's own thread.
    groups_.resize(first_new + comms.create.size(), nullptr);
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    for (std::size_t i = 0; i < comms.create.size(); ++i) {
      const auto& [members, forcing_choice] = comms.create[i];
      const std::size_t slot = first_new + i;
      int key = -1;
      for (std::size_t k = 0; k < members.size(); ++k) {
        if (members[k] == rank_) key = static_cast<int>(k);
      }
      ncclConfig_t config = split_config(forcing_choice);
      const ScopedNcclForcedChoice forcing(forcing_choice);  // NCCL reads it until the communicator is ready
      // Non-blocking: the new communicator stays NULL until the split completes in NCCL's thread,
      // which the parent reports (ncclInProgress until then); only then is groups_[slot] read.
      guard(ncclCommSplit(world_, key >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, std::max(key, 0), &groups_[slot], &config),
            "ncclCommSplit", {world_}, deadline);
      if ((groups_[slot] != nullptr) != (key >= 0)) {
        abort_all(
            BackendFailure(fmt::format("nccl backend: rank {}: ncclCommSplit for ranks {} returned {} "
                                       "communicator",
                                       rank_, fmt::join(members, ","), key >= 0 ? "no" : "an unexpected")));
      }
      if (groups_[slot] != nullptr) wait_ready({groups_[slot]}, "ncclCommSplit (new communicator)", deadline);
      comm_keys_.push_back(comms.create[i]);
    }
    comm_slot_ = comms.slot;

    pointers_.assign(n, {});
    for (int d : program_.devices) {
      for (std::size_t b = 0; b < plan.buffers[d].size(); ++b) {
        const std::size_t bytes =
            static_cast<std::size_t>(cuda::buffer_elements(plan, d, static_cast<int>(b))) * esize_;
        if (host[d]) {
          host_buffers_.emplace_back(bytes);
          pointers_[d].push_back(host_buffers_.back().get());
        } else {
          buffers_.emplace_back(gpu_, bytes);
          pointers_[d].push_back(buffers_.back().get());
        }
      }
    }
    staging_ = DeviceBuffer(gpu_, static_cast<std::size_t>(program_.staging) * esize_);
    host_io_ = PinnedBuffer(static_cast<std::size_t>(count_) * esize_);
    int sms = 1;
    ARTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu_));
    sms_ = sms;
    kernel_ = cuda::select_reduce_kernel(type, op);
    // Grid cap from the kernels' own occupancy on this GPU (current device: gpu_).
    cuda::check(cuda::reduce_blocks_per_sm(kernel_.id, cuda::kThreadsPerBlock, &reduce_blocks_),
                "reduce_blocks_per_sm");
    cuda::check(cuda::scale_blocks_per_sm(cuda::scale_kernel_id(type), cuda::kThreadsPerBlock, &scale_blocks_),
                "scale_blocks_per_sm");
    nccl_type_ = static_cast<ncclDataType_t>(cuda::nccl_data_type_code(type));
    // Group ops carry the sum of an average; the plan's scale ops finalise it.
    nccl_op_ = static_cast<ncclRedOp_t>(cuda::nccl_red_op_code(op == ReduceOp::kAvg ? ReduceOp::kSum : op));
    local_ranks_.clear();
    for (int d : program_.devices) {
      if (plan.devices[d].participant) local_ranks_.push_back(d);
    }
    ranks_ = plan.ranks();
    ARTUNE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    prepared_ = true;
  }

  void fill_inputs(int iteration) override {
    require_prepared();
    io().fill(rank_buffers(), iteration);
  }

  void run() override {
    require_prepared();
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    try {
      issue_all(deadline);
      wait_stream(deadline);
    } catch (const Error& e) {
      // Whatever failed, this rank cannot finish the run: abort so that no queued NCCL kernel (here
      // or on a peer) keeps waiting for its counterpart. abort_all's own exceptions pass through.
      if (!aborted_) abort_all(e);
      throw;
    }
  }

  // Steps resolve their pointers when issued, so binding the caller's device memory is enough.
  void run_on(std::span<void* const> user) override {
    bind(user);
    run();
  }

  // Asynchronous on the caller's stream: the rank's stream waits for the caller's work, the caller's
  // stream for the plan; no host wait (NCCL's own model: errors surface at the next synchronisation).
  void run_on_streams(std::span<void* const> user, std::span<void* const> streams) override {
    bind(user);
    if (streams.size() != 1)
      throw InvalidInput(fmt::format("nccl backend: run_on_streams() got {} streams for 1 rank", streams.size()));
    if (caller_event_.get() == nullptr) {
      caller_event_ = Event(gpu_);
      done_event_ = Event(gpu_);
    }
    DeviceGuard guard(gpu_);
    auto caller = static_cast<cudaStream_t>(streams[0]);
    ARTUNE_CUDA_CHECK(cudaEventRecord(caller_event_.get(), caller));
    ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), caller_event_.get(), 0));
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    try {
      issue_all(deadline);
    } catch (const Error& e) {
      if (!aborted_) abort_all(e);
      throw;
    }
    ARTUNE_CUDA_CHECK(cudaEventRecord(done_event_.get(), stream_.get()));
    ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(caller, done_event_.get(), 0));
  }

  void bind(std::span<void* const> user) {
    require_prepared();
    if (user.size() != local_ranks_.size()) {
      throw InvalidInput(
          fmt::format("nccl backend: run_on() got {} buffers for {} local ranks", user.size(), local_ranks_.size()));
    }
    for (std::size_t i = 0; i < user.size(); ++i)
      pointers_.at(static_cast<std::size_t>(local_ranks_[i])).at(0) = user[i];
  }

  std::int64_t count_wrong(int iteration) override {
    require_prepared();
    return io().wrong(rank_buffers(), iteration);
  }

  cuda::DeviceIo io() const { return cuda::DeviceIo{type_, op_, ranks_, count_, host_io_.get(), collective_}; }

  // This rank's participant buffers, on its one (current) GPU.
  std::vector<cuda::RankBuffer> rank_buffers() const {
    std::vector<cuda::RankBuffer> out;
    for (int d : local_ranks_) out.push_back({d, pointers_[d][0], -1});
    return out;
  }

  std::vector<int> local_ranks() const override { return local_ranks_; }
  bool is_root() const override { return rank_ == 0; }
  double all_sum(double value) override {
    ARTUNE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return value;
  }
  double all_max(double value) override {
    ARTUNE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return value;
  }
  std::string_view name() const override { return "nccl"; }

 private:
  using Clock = std::chrono::steady_clock;

  void require_alive() const {
    if (aborted_) throw BackendFailure("nccl backend: communicators were aborted after an earlier error");
  }
  void require_prepared() const {
    require_alive();
    if (!prepared_) throw InvalidInput("nccl backend: run before prepare");
  }

  // ARTUNE_TEST_FAULT=boot:rankR:iterN: the N-th bootstrap step of rank R fails (tests only).
  void inject_boot_fault() {
    ++boot_steps_;
    if (fault_.fires("boot", rank_, boot_steps_)) {
      throw BackendFailure(fmt::format("injected failure of bootstrap step {} (ARTUNE_TEST_FAULT)", boot_steps_));
    }
  }

  // --machine-index, else ARTUNE_MACHINE_INDEX, else -1 (not declared).
  int declared_machine() const { return declared_machine_index(options_.machine_index); }

  void* pointer(const Ref& r) const {
    char* base = r.buffer == Ref::kStaging ? static_cast<char*>(staging_.get())
                                           : static_cast<char*>(pointers_.at(r.device).at(r.buffer));
    return base + static_cast<std::size_t>(r.offset) * esize_;
  }

  // The configuration of every communicator split from world_: non-blocking (completion polled under
  // the deadline) and sharing the parent's resources (splitShare: no new buffers, channels or proxy
  // per split), with the forced channel count of an nccl.ALGO.PROTO plan (its algorithm and protocol go
  // through the environment, ScopedNcclForcedChoice).
  static ncclConfig_t split_config(const NcclForcedChoice& forced) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.splitShare = 1;
    apply_nccl_forced_channels(forced, config.minCTAs, config.maxCTAs);
    return config;
  }

  std::vector<ncclComm_t> all_comms() const {
    std::vector<ncclComm_t> out;
    if (world_ != nullptr) out.push_back(world_);
    for (ncclComm_t c : groups_) {
      if (c != nullptr) out.push_back(c);
    }
    return out;
  }

  // InvalidInput (naming -e/--maxbytes) when this rank's buffers and staging exceed its GPU's free memory
  // or the host's memory.
  void check_memory(const Plan& plan, const nccl::RankMemory& need) const {
    cuda::require_free_gpu_memory(gpu_, need.gpu_bytes, plan.count, type_,
                                  fmt::format("on rank {}'s GPU (cuda:{})", rank_, gpu_));
    check_host_memory(static_cast<double>(need.host_bytes), plan.count, type_,
                      fmt::format("nccl backend, rank {}: pinned buffers", rank_));
  }

  // Aborts every communicator; never throws. NCCL kernels waiting on a peer exit, and nothing
  // afterwards (destructor included) waits for them.
  void abort_comms() noexcept {
    if (group_open_) {
      // An error between ncclGroupStart and ncclGroupEnd: close the group (NCCL discards it).
      group_open_ = false;
      (void)ncclGroupEnd();
    }
    aborted_ = true;
    prepared_ = false;
    // The parent first: aborting it also ends a split still running in NCCL's thread, which
    // writes its new communicator into groups_; the children are read after that.
    if (world_ != nullptr) ncclCommAbort(world_);
    world_ = nullptr;
    for (ncclComm_t& c : groups_) {
      if (c != nullptr) ncclCommAbort(c);
      c = nullptr;
    }
    comm_keys_.clear();
  }

  [[noreturn]] void abort_all(const Error& error) {
    abort_comms();
    if (error.code() == ErrorCode::kTimeout) throw Timeout(error.what());
    throw BackendFailure(error.what());
  }

  void group_start(ncclComm_t comm) {
    ARTUNE_NCCL_CHECK(ncclGroupStart(), comm);
    group_open_ = true;
  }

  void group_end(const char* call, ncclComm_t comm, Clock::time_point deadline) {
    group_open_ = false;
    guard(ncclGroupEnd(), call, {comm}, deadline);
  }

  // Issues the rank's program on its stream (in order; group ends wait until NCCL has enqueued).
  void issue_all(Clock::time_point deadline) {
    ARTUNE_CUDA_CHECK(cudaSetDevice(gpu_));
    cudaStream_t s = stream_.get();
    for (const nccl::Step& step : program_.steps) {
      switch (step.kind) {
        case StepKind::kGroupStart: group_start(world_); break;
        case StepKind::kGroupEnd: group_end("ncclGroupEnd()", world_, deadline); break;
        case StepKind::kSend:
          ARTUNE_NCCL_CHECK(ncclSend(pointer(step.src), step.count, nccl_type_, step.peer, world_, s), world_);
          break;
        case StepKind::kRecv:
          ARTUNE_NCCL_CHECK(ncclRecv(pointer(step.dst), step.count, nccl_type_, step.peer, world_, s), world_);
          break;
        case StepKind::kCopy:
          ARTUNE_CUDA_CHECK(cudaMemcpyAsync(pointer(step.dst), pointer(step.src),
                                            static_cast<std::size_t>(step.count) * esize_, cudaMemcpyDefault, s));
          break;
        case StepKind::kReduce: {
          void* dst = pointer(step.dst);
          const void* src = pointer(step.src);
          const auto g = cuda::launch_geometry(step.count, type_, reinterpret_cast<std::uintptr_t>(dst),
                                               reinterpret_cast<std::uintptr_t>(src), sms_, reduce_blocks_);
          cuda::check(cuda::launch_reduce(kernel_.id, dst, src, g, s),
                      "launch_reduce(kernel, dst, src, geometry, stream)");
          break;
        }
        case StepKind::kScale: {
          void* dst = pointer(step.dst);
          const auto g = cuda::launch_geometry(step.count, type_, reinterpret_cast<std::uintptr_t>(dst),
                                               reinterpret_cast<std::uintptr_t>(dst), sms_, scale_blocks_);
          cuda::check(cuda::launch_scale(cuda::scale_kernel_id(type_), dst, step.divisor, g, s),
                      "launch_scale(kernel, dst, divisor, geometry, stream)");
          break;
        }
        case StepKind::kCollective: collective(step, deadline); break;
      }
    }
  }

  // Polls until no communicator in `comms` is in progress; errors and the deadline abort.
  void wait_ready(const std::vector<ncclComm_t>& comms, const char* what,
                  Clock::time_point deadline = Clock::time_point::max()) {
    if (deadline == Clock::time_point::max()) {
      deadline =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    }
    for (ncclComm_t c : comms) {
      for (int spins = 0;; ++spins) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(c, &state);
        if (r != ncclSuccess) abort_all(BackendFailure(fmt::format("ncclCommGetAsyncError: {}", nccl_message(r, c))));
        if (state == ncclSuccess) break;
        if (state != ncclInProgress) {
          abort_all(BackendFailure(fmt::format("{}: {}", what, nccl_message(state, c))));
        }
        if (Clock::now() > deadline) {
          abort_all(
              Timeout(fmt::format("nccl backend: rank {}: {} did not complete within {} s (a peer is stuck "
                                  "or gone); communicators aborted",
                                  rank_, what, options_.timeout_s)));
        }
        if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  void guard(ncclResult_t r, const char* call, const std::vector<ncclComm_t>& comms, Clock::time_point deadline) {
    if (r != ncclSuccess && r != ncclInProgress) {
      abort_all(BackendFailure(fmt::format("{}: {}", call, nccl_message(r, comms.empty() ? nullptr : comms[0]))));
    }
    if (r == ncclInProgress) wait_ready(comms, call, deadline);
  }

  void collective(const nccl::Step& step, Clock::time_point deadline) {
    ncclComm_t comm = groups_.at(static_cast<std::size_t>(comm_slot_.at(static_cast<std::size_t>(step.comm))));
    if (comm == nullptr)
      throw BackendFailure(
          fmt::format("nccl backend: op {}: rank {} has no communicator for its group", step.op, rank_));
    cudaStream_t s = stream_.get();
    char* region = static_cast<char*>(pointer(step.dst));
    const std::int64_t count = step.count;
    const int g = step.comm_size;
    auto piece = [&](int k) { return even_piece(count, g, k); };
    const bool even = count % g == 0;
    switch (step.collective) {
      case Collective::kAllReduce:
        guard(ncclAllReduce(region, region, count, nccl_type_, nccl_op_, comm, s), "ncclAllReduce", {comm}, deadline);
        break;
      case Collective::kBroadcast:
        guard(ncclBroadcast(region, region, count, nccl_type_, step.root, comm, s), "ncclBroadcast", {comm}, deadline);
        break;
      case Collective::kReduce:
        guard(ncclReduce(region, region, count, nccl_type_, nccl_op_, step.root, comm, s), "ncclReduce", {comm},
              deadline);
        break;
      case Collective::kReduceScatter:
        if (even) {
          // In place: member k's shard already sits at region + k·shard.
          const std::int64_t shard = count / g;
          guard(ncclReduceScatter(region, region + static_cast<std::size_t>(step.comm_rank * shard) * esize_, shard,
                                  nccl_type_, nccl_op_, comm, s),
                "ncclReduceScatter", {comm}, deadline);
        } else {
          // Uneven shards (even_piece): one reduce per shard, rooted at its owner.
          group_start(comm);
          for (int k = 0; k < g; ++k) {
            const auto [off, cnt] = piece(k);
            char* p = region + static_cast<std::size_t>(off) * esize_;
            ARTUNE_NCCL_CHECK(ncclReduce(p, p, cnt, nccl_type_, nccl_op_, k, comm, s), comm);
          }
          group_end("ncclGroupEnd() of a reduce-scatter", comm, deadline);
        }
        break;
      case Collective::kAllGather:
        if (even) {
          const std::int64_t shard = count / g;
          guard(ncclAllGather(region + static_cast<std::size_t>(step.comm_rank * shard) * esize_, region, shard,
                              nccl_type_, comm, s),
                "ncclAllGather", {comm}, deadline);
        } else {
          group_start(comm);
          for (int k = 0; k < g; ++k) {
            const auto [off, cnt] = piece(k);
            char* p = region + static_cast<std::size_t>(off) * esize_;
            ARTUNE_NCCL_CHECK(ncclBroadcast(p, p, cnt, nccl_type_, k, comm, s), comm);
          }
          group_end("ncclGroupEnd() of an all-gather", comm, deadline);
        }
        break;
    }
  }

  // Waits for the stream while watching every communicator for asynchronous errors.
  void wait_stream(Clock::time_point deadline) {
    const auto comms = all_comms();
    for (int spins = 0;; ++spins) {
      if (cuda::finished(cudaStreamQuery(stream_.get()), "cudaStreamQuery(stream)")) return;
      for (ncclComm_t c : comms) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(c, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          abort_all(BackendFailure(
              fmt::format("nccl backend: rank {}: asynchronous NCCL error: {}", rank_, nccl_message(state, c))));
        }
      }
      if (Clock::now() > deadline) {
        abort_all(
            Timeout(fmt::format("nccl backend: rank {}: the run did not finish within {} s (a peer is stuck "
                                "or gone); communicators aborted",
                                rank_, options_.timeout_s)));
      }
      if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // True when the stream is idle within options_.timeout_s; never throws.
  bool drain_stream() const noexcept {
    if (stream_.get() == nullptr) return true;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    bool done = true;
    while (cudaStreamQuery(stream_.get()) == cudaErrorNotReady) {
      if (Clock::now() > deadline) {
        done = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    cuda::clear_last_error();
    return done;
  }

  void destroy_comm(ncclComm_t comm) {
    // Finalise (flush) under the deadline, then free; a failing or stuck finalise aborts instead.
    const ncclResult_t r = ncclCommFinalize(comm);
    if (r != ncclSuccess && r != ncclInProgress) {
      ncclCommAbort(comm);
      return;
    }
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess || (state != ncclInProgress && state != ncclSuccess) ||
          Clock::now() > deadline) {
        ncclCommAbort(comm);
        return;
      }
      if (state == ncclSuccess) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ncclCommDestroy(comm);
  }

  void destroy_comm_list(std::vector<ncclComm_t>& comms) {
    for (ncclComm_t& c : comms) {
      if (c != nullptr) destroy_comm(c);
      c = nullptr;
    }
  }

  BackendOptions options_;
  int gpus_ = 0;
  int gpu_ = 0;
  int rank_ = 0;
  int size_ = 1;
  bool prepared_ = false;
  bool aborted_ = false;
  bool group_open_ = false;  // between ncclGroupStart and ncclGroupEnd (an error there must close it)
  DataType type_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  int ranks_ = 0;
  std::int64_t count_ = 0;
  Collective collective_ = Collective::kAllReduce;  // all-gather/reduce-scatter: per-rank fill and check
  std::size_t esize_ = 4;
  int sms_ = 1;
  int reduce_blocks_ = cuda::kBlocksPerSm;  // resident blocks per SM of the prepared reduce kernel
  int scale_blocks_ = cuda::kBlocksPerSm;   // and of the scale kernel
  cuda::ReduceKernel kernel_;
  ncclDataType_t nccl_type_ = ncclFloat32;
  ncclRedOp_t nccl_op_ = ncclSum;
  Stream stream_;
  Event caller_event_;  // run_on_streams: the caller's work so far
  Event done_event_;    // run_on_streams: the plan's end
  ncclComm_t world_ = nullptr;
  std::vector<ncclComm_t> groups_;  // the communicator cache (null where this rank is no member)
  using CacheKey = std::pair<nccl::CommKey, NcclForcedChoice>;  // members in NCCL rank order, forcing
  std::vector<CacheKey> comm_keys_;                             // per cache slot: its key
  std::vector<int> comm_slot_;  // per distinct group of the prepared plan: its cache slot
  Program program_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<PinnedBuffer> host_buffers_;
  std::vector<std::vector<void*>> pointers_;
  DeviceBuffer staging_;
  PinnedBuffer host_io_;
  TestFault fault_;     // ARTUNE_TEST_FAULT (tests only)
  int boot_steps_ = 0;  // bootstrap steps so far (fault injection)
  std::vector<int> local_ranks_;
};

}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const BackendOptions& options) {
  return std::make_unique<NcclBackend>(options);
}

}  // namespace artune
