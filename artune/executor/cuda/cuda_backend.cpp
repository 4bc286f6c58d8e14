// The cuda backend: replays a Program (cuda_program.hpp) with CUDA calls.
// prepare() does every allocation, stream/event creation, peer enabling and
// pointer resolution once; run() only issues the precomputed calls and waits
// for the streams (polling, so a wedged device ends in Timeout, not a hang).
// After a Timeout the device state is abandoned, not freed: cudaFree would wait
// for the wedged device and turn the Timeout back into a hang.

#include "artune/executor/cuda/cuda_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
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
#include "artune/executor/schedule.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune {

int cuda_device_count() { return cuda::usable_device_count(); }

void cuda::require_free_gpu_memory(int gpu, std::uint64_t needed, std::int64_t count, DataType type,
                                   std::string_view where) {
  std::size_t free = 0, total = 0;
  {
    DeviceGuard guard(gpu);
    ARTUNE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  }
  if (static_cast<double>(needed) <= 0.95 * static_cast<double>(free)) return;
  const auto gib = [](double b) { return fmt::format("{:.2f} GiB", b / (1024.0 * 1024.0 * 1024.0)); };
  throw InvalidInput(fmt::format(
      "{}: a {}-byte message ({} {}) needs {} {}, more than the {} free of {}; "
      "use a smaller size",
      parameter("max_bytes"), static_cast<std::uint64_t>(count) * element_size(type), count, to_string(type),
      gib(static_cast<double>(needed)), where, gib(static_cast<double>(free)), gib(static_cast<double>(total))));
}

namespace {

using namespace artune::cuda;

// One precomputed CUDA call of run().
struct Call {
  StepKind kind = StepKind::kCopy;
  int gpu = 0;  // current device while issuing
  cudaStream_t stream = nullptr;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  int dst_gpu = -1;  // copies: -1 = host memory
  int src_gpu = -1;
  int kernel = -1;
  LaunchGeometry geometry;
  std::int64_t divisor = 1;
  cudaEvent_t event = nullptr;
  int op = -1;
};

class CudaBackend final : public HarnessBackend {
 public:
  explicit CudaBackend(const BackendOptions& options) : options_(options) {
    gpus_ = usable_device_count();
    if (gpus_ <= 0) throw Unsupported("no CUDA device available");
    // Plan device gpuK is the K-th GPU in PCI bus order (as nvidia-smi and topology import number them).
    std::vector<std::string> bus_ids;
    for (int g = 0; g < gpus_; ++g) {
      char id[32] = {};
      ARTUNE_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof(id), g));
      bus_ids.emplace_back(id);
    }
    bus_order_ = pci_bus_order(bus_ids);
  }

  ~CudaBackend() override {
    // Let queued work finish before buffers are freed under it (bounded: see release()).
    release();
  }

  // Refuses, before allocating, a plan whose buffers and staging do not fit the free memory of
  // the GPUs it lands on (or of the host, for pinned CPU-helper buffers).
  void check_plan(const Plan& plan, DataType type) const override {
    check_plan_shape(plan);
    const auto placement = place_devices(plan, gpus_, options_.topology, bus_order_);
    const MemoryNeed need =
        memory_need(plan, lower_plan(plan, placement, peer_capability(placement)), gpus_, element_size(type));
    for (int g = 0; g < gpus_; ++g) {
      if (need.gpu_bytes[g] == 0) continue;
      require_free_gpu_memory(g, need.gpu_bytes[g], plan.count, type,
                              fmt::format("on cuda:{} ({} plan device(s) placed there)", g, need.devices_on_gpu[g]));
    }
    if (need.host_bytes > 0) {
      check_host_memory(static_cast<double>(need.host_bytes), plan.count, type,
                        "cuda backend, pinned CPU-helper buffers");
    }
  }

  void prepare(const Plan& plan, DataType type, ReduceOp op) override {
    release();  // frees the previous plan's memory before checking this one's
    check_plan(plan, type);
    type_ = type;
    op_ = op;
    ranks_ = plan.ranks();
    count_ = plan.count;
    collective_ = plan.collective;
    blocks_ = plan.blocks;
    esize_ = element_size(type);
    const int n = static_cast<int>(plan.devices.size());

    placement_ = place_devices(plan, gpus_, options_.topology, bus_order_);
    log_placement(plan);
    const auto peer = enable_peers();
    program_ = lower_plan(plan, placement_, peer);

    // Buffers: GPU memory, or pinned mapped host memory for CPU helpers.
    buffers_.resize(n);
    pointers_.resize(n);
    for (int d = 0; d < n; ++d) {
      const auto& sizes = plan.buffers[d];
      for (std::size_t b = 0; b < sizes.size(); ++b) {
        const std::size_t bytes = static_cast<std::size_t>(buffer_elements(plan, d, static_cast<int>(b))) * esize_;
        if (placement_[d].host) {
          host_buffers_.emplace_back(bytes);
          pointers_[d].push_back(host_buffers_.back().get());
        } else {
          buffers_[d].emplace_back(placement_[d].cuda_device, bytes);
          pointers_[d].push_back(buffers_[d].back().get());
        }
      }
    }
    for (int d = 0; d < n; ++d) {
      streams_.emplace_back(placement_[d].cuda_device);
      staging_.emplace_back(placement_[d].cuda_device, static_cast<std::size_t>(program_.staging[d]) * esize_);
    }
    for (int e = 0; e < program_.events; ++e) {
      events_.emplace_back(placement_[program_.event_stream[e]].cuda_device);
    }
    sms_.assign(static_cast<std::size_t>(gpus_), 1);
    reduce_blocks_.assign(static_cast<std::size_t>(gpus_), kBlocksPerSm);
    scale_blocks_.assign(static_cast<std::size_t>(gpus_), kBlocksPerSm);
    const int reduce_id = select_reduce_kernel(type_, op_).id;
    for (int g = 0; g < gpus_; ++g) {
      ARTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&sms_[g], cudaDevAttrMultiProcessorCount, g));
      // Grid cap from the kernels' own occupancy (registers decide it), not a fixed blocks-per-SM guess.
      DeviceGuard guard(g);
      check(reduce_blocks_per_sm(reduce_id, kThreadsPerBlock, &reduce_blocks_[g]), "reduce_blocks_per_sm");
      check(scale_blocks_per_sm(scale_kernel_id(type_), kThreadsPerBlock, &scale_blocks_[g]), "scale_blocks_per_sm");
    }
    build_calls();
    host_io_ = PinnedBuffer(static_cast<std::size_t>(count_) * esize_);
    participants_.clear();
    for (int d = 0; d < n; ++d) {
      if (plan.devices[d].participant) participants_.push_back(d);
    }
    prepared_ = true;
  }

  // Issues every call of the lowered program, switching the current device only when it changes.
  void issue_all() {
    int current = -1;
    for (const Call& c : calls_) {
      if (c.gpu != current) {
        ARTUNE_CUDA_CHECK(cudaSetDevice(c.gpu));
        current = c.gpu;
      }
      issue(c);
    }
  }

  void fill_inputs(int iteration) override {
    require_prepared();
    io().fill(rank_buffers(), iteration);
  }

  void run() override {
    require_prepared();
    launch();
    wait_all();
  }

  // Graph launches on one stream run one after the other (each complete before the next starts), so n of
  // them need no fence between runs; without a graph, runs are fenced by run()'s wait.
  void run_back_to_back(int n) override {
    require_prepared();
    if (!options_.cuda_graph || calls_.empty()) {
      HarnessBackend::run_back_to_back(n);
      return;
    }
    for (int i = 0; i < n; ++i) launch();
    wait_all();
  }

  // One run's work: the plan's CUDA graph (built on first use after prepare or a pointer change), or
  // every call issued from the host.
  void launch() {
    if (!options_.cuda_graph || calls_.empty()) {
      issue_all();
      return;
    }
    if (graph_exec_ == nullptr) build_graph();
    DeviceGuard guard(placement_[0].cuda_device);
    ARTUNE_CUDA_CHECK(cudaGraphLaunch(graph_exec_.get(), streams_[0].get()));
  }

  // The graph of the lowered program (cuda_program.hpp graph_of): one child-graph node per copy, reduce
  // or scale, each captured alone on its own stream, joined by exactly the dependencies that the
  // streams and events impose (add_graph_nodes; tests replay the same builder on the host).
  // Copies are captured as cudaMemcpyAsync with cudaMemcpyDefault (unified addressing finds peers).
  class NodeBuilder final : public GraphBuilder {
   public:
    NodeBuilder(CudaBackend& backend, cudaGraph_t graph) : backend_(backend), graph_(graph) {}
    int add(int step, const std::vector<int>& deps) override {
      const Call& c = backend_.calls_.at(static_cast<std::size_t>(step));
      DeviceGuard guard(c.gpu);
      cudaGraph_t child = nullptr;
      ARTUNE_CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
      try {
        if (c.kind == StepKind::kCopy) {
          ARTUNE_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, c.stream));
        } else {
          backend_.issue(c);
        }
      } catch (...) {
        cudaStreamEndCapture(c.stream, &child);
        if (child != nullptr) cudaGraphDestroy(child);
        throw;
      }
      ARTUNE_CUDA_CHECK(cudaStreamEndCapture(c.stream, &child));
      std::vector<cudaGraphNode_t> after;
      after.reserve(deps.size());
      for (int d : deps) after.push_back(nodes_.at(static_cast<std::size_t>(d)));
      cudaGraphNode_t node = nullptr;
      const cudaError_t added = cudaGraphAddChildGraphNode(&node, graph_, after.data(), after.size(), child);
      cudaGraphDestroy(child);  // the node holds its own copy
      check(added, "cudaGraphAddChildGraphNode(&node, graph, deps, n, child)");
      nodes_.push_back(node);
      return static_cast<int>(nodes_.size()) - 1;
    }

   private:
    CudaBackend& backend_;
    cudaGraph_t graph_;
    std::vector<cudaGraphNode_t> nodes_;
  };

  void build_graph() {
    graph_exec_.reset();
    cudaGraph_t raw = nullptr;
    ARTUNE_CUDA_CHECK(cudaGraphCreate(&raw, 0));
    const std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter> graph(raw);
    NodeBuilder builder(*this, graph.get());
    add_graph_nodes(program_, builder);
    cudaGraphExec_t exec = nullptr;
    ARTUNE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
    graph_exec_.reset(exec);
  }

  struct GraphDeleter {
    void operator()(cudaGraph_t g) const noexcept { cudaGraphDestroy(g); }
  };
  struct GraphExecDeleter {
    void operator()(cudaGraphExec_t g) const noexcept { cudaGraphExecDestroy(g); }
  };

  // The issued calls with their pointers and launch geometries (which depend on the pointers' alignment):
  // rebuilt by run_on when the caller's buffers change.
  void build_calls() {
    const ReduceKernel kernel = select_reduce_kernel(type_, op_);
    graph_exec_.reset();  // captured with the old pointers
    calls_.clear();
    calls_.reserve(program_.steps.size());
    for (const Step& s : program_.steps) {
      Call c;
      c.kind = s.kind;
      c.op = s.op;
      c.gpu = placement_[s.stream].cuda_device;
      c.stream = streams_[s.stream].get();
      switch (s.kind) {
        case StepKind::kCopy:
          c.dst = pointer(s.dst);
          c.src = pointer(s.src);
          c.bytes = static_cast<std::size_t>(s.count) * esize_;
          c.dst_gpu = gpu_of(s.dst);
          c.src_gpu = gpu_of(s.src);
          break;
        case StepKind::kReduce:
          c.dst = pointer(s.dst);
          c.src = pointer(s.src);
          c.kernel = kernel.id;
          c.geometry = launch_geometry(s.count, type_, reinterpret_cast<std::uintptr_t>(c.dst),
                                       reinterpret_cast<std::uintptr_t>(c.src), sms_[c.gpu], reduce_blocks_[c.gpu]);
          break;
        case StepKind::kScale:
          c.dst = pointer(s.dst);
          c.kernel = scale_kernel_id(type_);
          c.divisor = s.divisor;
          c.geometry = launch_geometry(s.count, type_, reinterpret_cast<std::uintptr_t>(c.dst),
                                       reinterpret_cast<std::uintptr_t>(c.dst), sms_[c.gpu], scale_blocks_[c.gpu]);
          break;
        case StepKind::kRecord:
        case StepKind::kWait: c.event = events_[s.event].get(); break;
      }
      calls_.push_back(c);
    }
  }

  // Binds every local participant's buffer 0 to the caller's device memory, then runs.
  void run_on(std::span<void* const> user) override {
    bind(user);
    run();
  }

  // Fences the plan's streams between the callers' streams: callers' work -> plan -> callers' later work.
  void run_on_streams(std::span<void* const> user, std::span<void* const> streams) override {
    bind(user);
    if (streams.size() != participants_.size()) {
      throw InvalidInput(fmt::format("cuda backend: run_on_streams() got {} streams for {} ranks", streams.size(),
                                     participants_.size()));
    }
    if (caller_events_.size() != participants_.size()) {
      caller_events_.clear();
      for (int d : participants_) caller_events_.emplace_back(placement_[d].cuda_device);
    }
    if (done_events_.size() != streams_.size()) {
      done_events_.clear();
      for (std::size_t d = 0; d < streams_.size(); ++d) done_events_.emplace_back(placement_[d].cuda_device);
    }
    for (std::size_t i = 0; i < participants_.size(); ++i) {
      DeviceGuard guard(placement_[participants_[i]].cuda_device);
      ARTUNE_CUDA_CHECK(cudaEventRecord(caller_events_[i].get(), static_cast<cudaStream_t>(streams[i])));
    }
    for (std::size_t d = 0; d < streams_.size(); ++d) {
      DeviceGuard guard(placement_[d].cuda_device);
      for (const Event& e : caller_events_) ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(streams_[d].get(), e.get(), 0));
    }
    launch();
    for (std::size_t d = 0; d < streams_.size(); ++d) {
      DeviceGuard guard(placement_[d].cuda_device);
      ARTUNE_CUDA_CHECK(cudaEventRecord(done_events_[d].get(), streams_[d].get()));
    }
    for (std::size_t i = 0; i < participants_.size(); ++i) {
      DeviceGuard guard(placement_[participants_[i]].cuda_device);
      for (const Event& e : done_events_) {
        ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(streams[i]), e.get(), 0));
      }
    }
  }

  // Points every local participant's buffer 0 at the caller's memory (calls rebuilt when it moved).
  void bind(std::span<void* const> user) {
    require_prepared();
    if (user.size() != participants_.size()) {
      throw InvalidInput(
          fmt::format("cuda backend: run_on() got {} buffers for {} ranks", user.size(), participants_.size()));
    }
    bool changed = false;
    for (std::size_t i = 0; i < user.size(); ++i) {
      void*& slot = pointers_[static_cast<std::size_t>(participants_[i])][0];
      if (slot != user[i]) {
        slot = user[i];
        changed = true;
      }
    }
    if (changed) build_calls();
  }

  std::int64_t count_wrong(int iteration) override {
    require_prepared();
    return io().wrong(rank_buffers(), iteration);
  }

  std::vector<int> local_ranks() const override { return participants_; }
  std::string_view name() const override { return "cuda"; }
  std::string_view group_op_name(Collective) const override { return "cuda kernels"; }

 private:
  void require_prepared() const {
    if (!prepared_) throw InvalidInput("cuda backend: run before prepare");
  }

  // Frees everything prepare() made once the streams have drained; a stream still busy after the
  // timeout (an exception left work queued on a wedged device) gets its state abandoned instead.
  void release() noexcept {
    if (!drain()) abandon();
    graph_exec_.reset();
    calls_.clear();
    events_.clear();
    staging_.clear();
    streams_.clear();
    buffers_.clear();
    host_buffers_.clear();
    pointers_.clear();
    host_io_ = PinnedBuffer();
    prepared_ = false;
  }

  // True when every stream is idle within options_.timeout_s; never throws.
  bool drain() const noexcept {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    for (const Stream& s : streams_) {
      if (s.get() == nullptr) continue;
      for (;;) {
        const cudaError_t status = cudaStreamQuery(s.get());
        if (status != cudaErrorNotReady) break;  // done, or failed (nothing left to wait for)
        if (Clock::now() > deadline) {
          clear_last_error();
          return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    clear_last_error();
    return true;
  }

  // Hands every device resource to a holder that is never destroyed. Work still queued on a device
  // that does not finish would make cudaFree / cudaFreeHost (which synchronise) hang, and freeing
  // memory that queued copies and kernels still use would corrupt it; the process is about to
  // report the Timeout and exit, so leaking is the safe choice.
  void abandon() noexcept {
    struct Abandoned {
      std::vector<std::vector<DeviceBuffer>> buffers;
      std::vector<PinnedBuffer> host_buffers;
      std::vector<DeviceBuffer> staging;
      std::vector<Event> events;
      std::vector<Stream> streams;
      PinnedBuffer host_io;
    };
    try {
      (void)graph_exec_.release();  // its launch may still run on the wedged device
      static auto* const graveyard = new std::vector<std::unique_ptr<Abandoned>>();
      graveyard->push_back(
          std::make_unique<Abandoned>(Abandoned{std::move(buffers_), std::move(host_buffers_), std::move(staging_),
                                                std::move(events_), std::move(streams_), std::move(host_io_)}));
    } catch (...) {
      // Out of host memory while leaking: the members are freed normally (may block).
    }
    buffers_.clear();
    host_buffers_.clear();
    staging_.clear();
    events_.clear();
    streams_.clear();
  }

  // Once per placement and process: a sweep prepares the same placement for every size (the first GPU run
  // printed it on every row of the table), and a communicator makes a backend per cached plan (a Python test
  // of every type printed it 32 times).
  void log_placement(const Plan& plan) {
    if (!shares_gpus(placement_)) return;
    std::string map;
    for (std::size_t d = 0; d < placement_.size(); ++d) {
      if (!map.empty()) map += ", ";
      map += placement_[d].host ? fmt::format("{}→host", plan.devices[d].name)
                                : fmt::format("{}→cuda:{}", plan.devices[d].name, placement_[d].cuda_device);
    }
    static std::mutex logged_mutex;
    static std::set<std::string> logged;
    {
      const std::lock_guard<std::mutex> lock(logged_mutex);
      if (!logged.insert(map).second) return;
    }
    fmt::print(stderr, "artune: cuda: {} plan devices share {} GPU(s) of this machine ({})\n", placement_.size(), gpus_,
               map);
  }

  // Which used GPUs report peer access to each other (cudaDeviceCanAccessPeer), without enabling it.
  std::vector<std::vector<bool>> peer_capability(const std::vector<Placement>& placement) const {
    std::vector<bool> used(gpus_, false);
    for (const Placement& p : placement) used[p.cuda_device] = true;
    std::vector<std::vector<bool>> peer(gpus_, std::vector<bool>(gpus_, false));
    for (int a = 0; a < gpus_; ++a) {
      peer[a][a] = true;
      for (int b = 0; b < gpus_; ++b) {
        if (a == b || !used[a] || !used[b]) continue;
        int can = 0;
        ARTUNE_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
        peer[a][b] = can != 0;
      }
    }
    return peer;
  }

  // Enables peer access between every pair of used GPUs that supports it; peer[a][b] says whether
  // kernels on a may load b's memory.
  std::vector<std::vector<bool>> enable_peers() {
    std::vector<std::vector<bool>> peer = peer_capability(placement_);
    for (int a = 0; a < gpus_; ++a) {
      for (int b = 0; b < gpus_; ++b) {
        if (a == b || !peer[a][b]) continue;
        peer[a][b] = false;  // until enabled
        DeviceGuard guard(a);
        const cudaError_t status = cudaDeviceEnablePeerAccess(b, 0);
        // Both outcomes below are recorded as the thread's last error, which the next kernel
        // launch would report as its own: clear it.
        clear_last_error();
        if (status == cudaSuccess || status == cudaErrorPeerAccessAlreadyEnabled) {
          peer[a][b] = true;
        } else {
          // Advertised but refused (a VM, an IOMMU, too many peers): kernels on `a` then read b's
          // data from a staged copy, which works without P2P.
          fmt::print(stderr, "artune: cuda: peer access cuda:{} -> cuda:{} unavailable ({}); staging copies instead\n",
                     a, b, cudaGetErrorString(status));
        }
      }
    }
    return peer;
  }

  void* pointer(const Ref& r) const {
    char* base = r.buffer == Ref::kStaging ? static_cast<char*>(staging_[r.device].get())
                                           : static_cast<char*>(pointers_[r.device][r.buffer]);
    return base + static_cast<std::size_t>(r.offset) * esize_;
  }

  int gpu_or_host(int device) const { return placement_[device].host ? -1 : placement_[device].cuda_device; }

  int gpu_of(const Ref& r) const {
    if (r.buffer == Ref::kStaging) return placement_[r.device].cuda_device;  // staging is device memory
    return gpu_or_host(r.device);
  }

  DeviceIo io() const { return DeviceIo{type_, op_, ranks_, count_, host_io_.get(), collective_, blocks_}; }

  // Every local participant's buffer 0 and the GPU it is on (its stream's GPU for host memory).
  std::vector<RankBuffer> rank_buffers() const {
    std::vector<RankBuffer> out;
    for (int d : participants_) out.push_back({d, pointers_[d][0], placement_[d].cuda_device});
    return out;
  }

  void issue(const Call& c) {
    switch (c.kind) {
      case StepKind::kCopy:
        if (c.dst_gpu >= 0 && c.src_gpu >= 0 && c.dst_gpu != c.src_gpu) {
          ARTUNE_CUDA_CHECK(cudaMemcpyPeerAsync(c.dst, c.dst_gpu, c.src, c.src_gpu, c.bytes, c.stream));
        } else {
          ARTUNE_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, c.stream));
        }
        break;
      case StepKind::kReduce:
        check(launch_reduce(c.kernel, c.dst, c.src, c.geometry, c.stream),
              "launch_reduce(kernel, dst, src, geometry, stream)");
        break;
      case StepKind::kScale:
        check(launch_scale(c.kernel, c.dst, c.divisor, c.geometry, c.stream),
              "launch_scale(kernel, dst, divisor, geometry, stream)");
        break;
      case StepKind::kRecord: ARTUNE_CUDA_CHECK(cudaEventRecord(c.event, c.stream)); break;
      case StepKind::kWait: ARTUNE_CUDA_CHECK(cudaStreamWaitEvent(c.stream, c.event, 0)); break;
    }
  }

  // Polls every stream until it drains; a device that never finishes ends in Timeout.
  void wait_all() {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
    for (std::size_t d = 0; d < streams_.size(); ++d) {
      for (int spins = 0;; ++spins) {
        if (finished(cudaStreamQuery(streams_[d].get()), "cudaStreamQuery(stream)")) break;
        if (Clock::now() > deadline) {
          const std::string what =
              fmt::format("cuda backend: plan device {} did not finish within {} s", d, options_.timeout_s);
          prepared_ = false;
          abandon();
          throw Timeout(what);
        }
        // Spin briefly (short runs finish in microseconds), then back off.
        if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

  BackendOptions options_;
  int gpus_ = 0;
  std::vector<int> bus_order_;  // CUDA ordinals in PCI bus order
  bool prepared_ = false;
  DataType type_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  int ranks_ = 0;
  std::int64_t count_ = 0;
  Collective collective_ = Collective::kAllReduce;  // all-gather/reduce-scatter: per-rank fill and check
  std::vector<std::int64_t> blocks_;                // the plan's per-rank block sizes (empty: even)
  std::size_t esize_ = 4;
  std::vector<Placement> placement_;
  Program program_;
  std::vector<std::vector<DeviceBuffer>> buffers_;
  std::vector<PinnedBuffer> host_buffers_;
  std::vector<std::vector<void*>> pointers_;
  std::vector<Stream> streams_;
  std::vector<DeviceBuffer> staging_;
  std::vector<Event> events_;
  std::vector<Call> calls_;
  std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter> graph_exec_;  // null until built
  PinnedBuffer host_io_;
  std::vector<int> participants_;
  std::vector<int> sms_;              // multiprocessors per GPU (launch geometry)
  std::vector<int> reduce_blocks_;    // per GPU: resident blocks per SM of the prepared reduce kernel
  std::vector<int> scale_blocks_;     // per GPU: the same for the scale kernel
  std::vector<Event> caller_events_;  // run_on_streams: per participant, the caller's work so far
  std::vector<Event> done_events_;    // run_on_streams: per plan stream, the plan's end
};

}  // namespace

std::unique_ptr<HarnessBackend> make_cuda_backend(const BackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace artune
