// The nccl backend: one MPI rank per GPU. MPI only bootstraps (the unique id
// broadcast) and combines per-rank figures; all data moves through NCCL on
// one stream per rank, following the rank's Program (nccl_program.hpp).
//
// Communicators, their watchdog and what happens on a stuck peer or an error:
// nccl_comms.hpp. NCCL calls return once enqueued (blocking communicators), and
// a run ends in one wait on a CUDA event (no polling, no sleep).
//
// The plan's device buffers and staging are registered with the communicators
// that use them (nccl_registry.hpp; ARTUNE_NCCL_REGISTER=0 turns it off), and
// --back-to-back issues the n runs' calls on the stream with one wait at the
// end, or launches one captured CUDA graph n times (nccl_issue.hpp).

#include "artune/executor/nccl/nccl_backend.hpp"

#include <fmt/format.h>
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings warn under -Wextra)
#endif
#include <mpi.h>
#include <nccl.h>

#include <cstdlib>
#include <memory>
#include <span>
#include <string>
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
#include "artune/executor/nccl/nccl_comms.hpp"
#include "artune/executor/nccl/nccl_forced_choice.hpp"
#include "artune/executor/nccl/nccl_issue.hpp"
#include "artune/executor/nccl/nccl_program.hpp"
#include "artune/executor/nccl/nccl_registry.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/executor/test_fault.hpp"
#include "artune/executor/harness/verification.hpp"
#include "artune/topology/topology.hpp"

namespace artune {
namespace {

using cuda::DeviceBuffer;
using cuda::DeviceGuard;
using cuda::Event;
using cuda::PinnedBuffer;
using cuda::Stream;
using nccl::nccl_message;
using nccl::Program;
using nccl::Ref;
using nccl::StepKind;

// kernel_dispatch.hpp states NCCL's enum values without including nccl.h; hold it to them.
static_assert(ncclInt8 == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclInt64 == 4 && ncclFloat16 == 6 &&
              ncclFloat32 == 7 && ncclFloat64 == 8 && ncclBfloat16 == 9);
static_assert(ncclSum == 0 && ncclProd == 1 && ncclMax == 2 && ncclMin == 3 && ncclAvg == 4);

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

class NcclBackend final : public HarnessBackend {
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
    caller_event_ = Event(gpu_);
    done_event_ = Event(gpu_);
    const char* reg = std::getenv("ARTUNE_NCCL_REGISTER");
    register_buffers_ = reg == nullptr || std::string(reg) != "0";

    ncclUniqueId id;
    agree_on(MPI_COMM_WORLD, "nccl backend: bootstrap (NCCL unique id)", [&] {
      inject_boot_fault();
      if (rank_ == 0) ARTUNE_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
    });
    ARTUNE_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
    comms_ = std::make_unique<nccl::Communicators>(rank_, options_.timeout_s);
    comms_->init(size_, id);
  }

  ~NcclBackend() override {
    if (comms_ != nullptr) comms_->close(stream_.get());
    reset_graph();  // after the stream is idle (or its communicators aborted)
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
    // The previous plan's memory goes first, so the check below sees what this plan can have; its
    // registrations before it (and after any run still in flight on the caller's streams).
    comms_->watched("draining the stream", [&] { ARTUNE_CUDA_CHECK(cudaStreamSynchronize(stream_.get())); });
    reset_graph();
    comms_->registry().release_all();
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
    std::vector<nccl::Communicators::CacheKey> needed;
    for (std::size_t g = 0; g < members_of.size(); ++g) needed.push_back({members_of[g], forced.at(g)});
    comm_slot_ = comms_->groups_for(needed);

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
    if (register_buffers_) comms_->watched("ncclCommRegister", [&] { register_buffers(plan); });
    ARTUNE_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    prepared_ = true;
  }

  void fill_inputs(int iteration) override {
    require_prepared();
    io().fill(rank_buffers(), iteration);
  }

  void run() override {
    require_prepared();
    ARTUNE_CUDA_CHECK(cudaSetDevice(gpu_));
    comms_->watched("the run", [&] { nccl::issue_run(program_, issuer_); });
  }

  // nccl-tests' timing loop: the n runs' calls one after the other on the stream, one wait at the end
  // (BackendOptions::nccl_graph: one captured run launched n times). One timeout bounds them all.
  void run_back_to_back(int n) override {
    require_prepared();
    ARTUNE_CUDA_CHECK(cudaSetDevice(gpu_));
    comms_->watched("the back-to-back runs",
                    [&] { nccl::issue_back_to_back(program_, n, options_.nccl_graph, issuer_); });
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
    DeviceGuard guard(gpu_);
    auto caller = static_cast<cudaStream_t>(streams[0]);
    ARTUNE_CUDA_CHECK(cudaEventRecord(caller_event_.get(), caller));
    ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), caller_event_.get(), 0));
    comms_->watched("issuing on the caller's stream", [&] { nccl::issue_steps(program_, issuer_); });
    ARTUNE_CUDA_CHECK(cudaEventRecord(done_event_.get(), stream_.get()));
    ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(caller, done_event_.get(), 0));
  }

  void bind(std::span<void* const> user) {
    require_prepared();
    if (user.size() != local_ranks_.size()) {
      throw InvalidInput(
          fmt::format("nccl backend: run_on() got {} buffers for {} local ranks", user.size(), local_ranks_.size()));
    }
    for (std::size_t i = 0; i < user.size(); ++i) {
      void*& bound = pointers_.at(static_cast<std::size_t>(local_ranks_[i])).at(0);
      if (bound != user[i]) reset_graph();  // captured with the old pointers
      bound = user[i];
    }
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
  std::string_view group_op_name(Collective c) const override {
    switch (c) {
      case Collective::kAllReduce: return "ncclAllReduce";
      case Collective::kBroadcast: return "ncclBroadcast";
      case Collective::kReduce: return "ncclReduce";
      case Collective::kReduceScatter: return "ncclReduceScatter";
      case Collective::kAllGather: return "ncclAllGather";
    }
    return "NCCL";
  }

 private:
  void require_alive() const {
    if (comms_->aborted()) throw BackendFailure("nccl backend: communicators were aborted after an earlier error");
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

  // InvalidInput (naming -e/--maxbytes) when this rank's buffers and staging exceed its GPU's free memory
  // or the host's memory.
  void check_memory(const Plan& plan, const nccl::RankMemory& need) const {
    cuda::require_free_gpu_memory(gpu_, need.gpu_bytes, plan.count, type_,
                                  fmt::format("on rank {}'s GPU (cuda:{})", rank_, gpu_));
    check_host_memory(static_cast<double>(need.host_bytes), plan.count, type_,
                      fmt::format("nccl backend, rank {}: pinned buffers", rank_));
  }

  // Registers every buffer the program passes to NCCL with the communicator it passes it to (each once).
  void register_buffers(const Plan& plan) {
    for (const nccl::BufferUse& use : nccl::buffer_uses(program_)) {
      ncclComm_t comm = use.comm == nccl::BufferUse::kPeers
                            ? comms_->peers()
                            : comms_->group(comm_slot_.at(static_cast<std::size_t>(use.comm)));
      if (use.device < 0) {
        comms_->registry().add(comm, staging_.get(), static_cast<std::size_t>(program_.staging) * esize_);
      } else {
        comms_->registry().add(
            comm, pointers_.at(static_cast<std::size_t>(use.device)).at(static_cast<std::size_t>(use.buffer)),
            static_cast<std::size_t>(cuda::buffer_elements(plan, use.device, use.buffer)) * esize_);
      }
    }
  }

  // The backend's side of nccl_issue.hpp: steps become NCCL and CUDA calls on the rank's stream.
  class Issuer final : public nccl::StepIssuer {
   public:
    explicit Issuer(NcclBackend& backend) : b_(backend) {}
    void issue(const nccl::Step& step) override { b_.issue_step(step); }
    // One event, no host sleep: cudaEventSynchronize spins or yields as the device's schedule flags say.
    void wait() override {
      ARTUNE_CUDA_CHECK(cudaEventRecord(b_.done_event_.get(), b_.stream_.get()));
      ARTUNE_CUDA_CHECK(cudaEventSynchronize(b_.done_event_.get()));
    }
    bool captured() const override { return b_.graph_exec_ != nullptr; }
    void begin_capture() override {
      ARTUNE_CUDA_CHECK(cudaStreamBeginCapture(b_.stream_.get(), cudaStreamCaptureModeThreadLocal));
    }
    void end_capture() override {
      cudaGraph_t graph = nullptr;
      ARTUNE_CUDA_CHECK(cudaStreamEndCapture(b_.stream_.get(), &graph));
      const cudaError_t made = cudaGraphInstantiate(&b_.graph_exec_, graph, 0);
      cudaGraphDestroy(graph);
      if (made != cudaSuccess) b_.graph_exec_ = nullptr;
      cuda::check(made, "cudaGraphInstantiate(&exec, graph, 0)");
    }
    void cancel_capture() noexcept override {
      cudaGraph_t graph = nullptr;
      if (cudaStreamEndCapture(b_.stream_.get(), &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      cuda::clear_last_error();
    }
    void launch_captured() override { ARTUNE_CUDA_CHECK(cudaGraphLaunch(b_.graph_exec_, b_.stream_.get())); }

   private:
    NcclBackend& b_;
  };

  void reset_graph() noexcept {
    if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }

  // Issues one step of the rank's program on its stream.
  void issue_step(const nccl::Step& step) {
    cudaStream_t s = stream_.get();
    switch (step.kind) {
      case StepKind::kGroupStart: comms_->group_start(); break;
      case StepKind::kGroupEnd: comms_->group_end(comms_->peers()); break;
      case StepKind::kSend:
        ARTUNE_NCCL_CHECK(ncclSend(pointer(step.src), step.count, nccl_type_, step.peer, comms_->peers(), s), nullptr);
        break;
      case StepKind::kRecv:
        ARTUNE_NCCL_CHECK(ncclRecv(pointer(step.dst), step.count, nccl_type_, step.peer, comms_->peers(), s), nullptr);
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
      case StepKind::kCollective: collective(step); break;
    }
  }

  void collective(const nccl::Step& step) {
    ncclComm_t comm = comms_->group(comm_slot_.at(static_cast<std::size_t>(step.comm)));
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
        ARTUNE_NCCL_CHECK(ncclAllReduce(region, region, count, nccl_type_, nccl_op_, comm, s), comm);
        break;
      case Collective::kBroadcast:
        ARTUNE_NCCL_CHECK(ncclBroadcast(region, region, count, nccl_type_, step.root, comm, s), comm);
        break;
      case Collective::kReduce:
        ARTUNE_NCCL_CHECK(ncclReduce(region, region, count, nccl_type_, nccl_op_, step.root, comm, s), comm);
        break;
      case Collective::kReduceScatter:
        if (even) {
          // In place: member k's shard already sits at region + k·shard.
          const std::int64_t shard = count / g;
          ARTUNE_NCCL_CHECK(
              ncclReduceScatter(region, region + static_cast<std::size_t>(step.comm_rank * shard) * esize_, shard,
                                nccl_type_, nccl_op_, comm, s),
              comm);
        } else {
          // Uneven shards (even_piece): one reduce per shard, rooted at its owner.
          comms_->group_start();
          for (int k = 0; k < g; ++k) {
            const auto [off, cnt] = piece(k);
            char* p = region + static_cast<std::size_t>(off) * esize_;
            ARTUNE_NCCL_CHECK(ncclReduce(p, p, cnt, nccl_type_, nccl_op_, k, comm, s), comm);
          }
          comms_->group_end(comm);
        }
        break;
      case Collective::kAllGather:
        if (even) {
          const std::int64_t shard = count / g;
          ARTUNE_NCCL_CHECK(ncclAllGather(region + static_cast<std::size_t>(step.comm_rank * shard) * esize_, region,
                                          shard, nccl_type_, comm, s),
                            comm);
        } else {
          comms_->group_start();
          for (int k = 0; k < g; ++k) {
            const auto [off, cnt] = piece(k);
            char* p = region + static_cast<std::size_t>(off) * esize_;
            ARTUNE_NCCL_CHECK(ncclBroadcast(p, p, cnt, nccl_type_, k, comm, s), comm);
          }
          comms_->group_end(comm);
        }
        break;
    }
  }

  BackendOptions options_;
  int gpus_ = 0;
  int gpu_ = 0;
  int rank_ = 0;
  int size_ = 1;
  bool prepared_ = false;
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
  Event caller_event_;          // run_on_streams: the caller's work so far
  Event done_event_;            // the end of a run (its one wait) or of the plan on the caller's stream
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
  cudaGraphExec_t graph_exec_ = nullptr;  // --graph: one captured run (until the next prepare or new pointers)
  bool register_buffers_ = true;          // ARTUNE_NCCL_REGISTER=0: off
  Issuer issuer_{*this};
  // Last: destroyed first (close() in the destructor has released what it registered in the buffers above).
  std::unique_ptr<nccl::Communicators> comms_;
};

}  // namespace

std::unique_ptr<HarnessBackend> make_nccl_backend(const BackendOptions& options) {
  return std::make_unique<NcclBackend>(options);
}

}  // namespace artune
