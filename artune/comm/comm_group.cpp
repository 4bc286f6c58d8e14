#include "artune/comm/comm_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/verifier.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/parameters.hpp"
#include "artune/tuner/calibration.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/search.hpp"

#if ARTUNE_HAVE_CUDA_BACKEND
#include <cuda_runtime.h>
#endif

namespace artune {

namespace {

std::size_t tuning_index(Collective c) {
  switch (c) {
    case Collective::kAllGather: return 1;
    case Collective::kReduceScatter: return 2;
    default: return 0;
  }
}

}  // namespace

Request::State::~State() {
#if ARTUNE_HAVE_CUDA_BACKEND
  if (event != nullptr) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaEventDestroy(static_cast<cudaEvent_t>(event));
    cudaSetDevice(previous);
  }
#endif
}

void Request::State::finish(std::exception_ptr e) {
  std::vector<std::function<void(std::exception_ptr)>> run;
  {
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
    error = e;
    run.swap(callbacks);
  }
  cv.notify_all();
  for (auto& fn : run) fn(e);
}

Request::Request(std::shared_ptr<State> state) : state_(std::move(state)) {}

void Request::wait() {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->finished; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Request::wait_for(double seconds) {
  if (!(seconds >= 0)) throw InvalidInput(fmt::format("Request::wait_for: {} s is not >= 0", seconds));
  if (!state_) return true;
  std::unique_lock<std::mutex> lock(state_->mutex);
  // Long waits are capped (a day at a time) so that the duration cannot overflow the clock.
  const double capped = std::min(seconds, 86400.0);
  if (!state_->cv.wait_for(lock, std::chrono::duration<double>(capped), [&] { return state_->finished; })) {
    return false;
  }
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

bool Request::done() const noexcept {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished;
}

void Request::on_done(std::function<void(std::exception_ptr)> fn) {
  if (!state_) {
    fn(nullptr);
    return;
  }
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (!state_->finished) {
    state_->callbacks.push_back(std::move(fn));
    return;
  }
  const std::exception_ptr e = state_->error;
  lock.unlock();
  fn(e);
}

std::shared_ptr<CallQueue> CallQueue::start() {
  auto q = std::make_shared<CallQueue>();
  q->thread = std::thread([q] {
    std::unique_lock<std::mutex> lock(q->mutex);
    for (;;) {
      q->cv.wait(lock, [&] { return q->stop || !q->jobs.empty(); });
      if (q->jobs.empty()) return;  // stopped, nothing left
      std::function<void()> job = std::move(q->jobs.front());
      q->jobs.pop_front();
      q->running = true;
      lock.unlock();
      job();          // never throws: submit() wraps the call
      job = nullptr;  // may drop the group's last reference (its destructor detaches this thread)
      lock.lock();
      q->running = false;
      q->cv.notify_all();
    }
  });
  return q;
}

void CallQueue::push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    jobs.push_back(std::move(job));
  }
  cv.notify_all();
}

bool CallQueue::idle() {
  std::lock_guard<std::mutex> lock(mutex);
  return jobs.empty() && !running;
}

void CallQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  cv.notify_all();
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();  // the group's last reference went with this thread's job: it ends after it
  } else {
    thread.join();
  }
}

std::vector<std::uint64_t> default_tune_sizes() {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = 4; b <= (std::uint64_t{256} << 20); b *= 2) sizes.push_back(b);
  return sizes;
}

std::vector<std::uint64_t> table_buckets(const DecisionTable& table) {
  if (table.ranges.empty()) throw InvalidInput("communicator: the decision table has no size ranges");
  // The sizes the table was tuned at (a range's bounds when it lists none).
  std::vector<std::uint64_t> buckets;
  for (const TableRange& r : table.ranges) {
    if (r.points.empty()) {
      buckets.push_back(r.min_bytes);
      buckets.push_back(r.max_bytes);
    }
    for (const SizePoint& p : r.points) buckets.push_back(p.bytes);
  }
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  if (!buckets.empty() && buckets.front() == 0) buckets.erase(buckets.begin());
  return buckets;
}

void Communicator::Group::Pad::release() {
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

Communicator::Group::~Group() {
  // Calls in flight hold the group, so the queues are empty here: end their threads.
  for (auto& q : queues) {
    if (q) q->shutdown();
  }
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

void Communicator::Group::run(int rank, const std::function<void()>& job) {
  const std::size_t i = local == 1 ? 0 : static_cast<std::size_t>(rank);
  const std::shared_ptr<CallQueue>& q = queues[i];
  // cuda/nccl calls are queued on their streams at once, in call order, whatever is in flight. A call made on the
  // progress thread itself (from an on_done callback) runs there and then: queueing it would wait for itself.
  if (gpu() || !q || q->idle() || q->thread.get_id() == std::this_thread::get_id()) {
    job();
    return;
  }
  // Behind this rank's asynchronous calls: the order every rank made its calls in is the order they run in.
  submit(rank, nullptr, nullptr, job).wait();
}

Request Communicator::Group::submit(int rank, void* stream, const void* buffer, std::function<void()> job) {
  auto state = std::make_shared<Request::State>();
  const std::size_t i = local == 1 ? 0 : static_cast<std::size_t>(rank);
#if ARTUNE_HAVE_MPI
  if (kind == BackendKind::kMpi) {
    // The call runs MPI on the progress thread: MPI must allow calls from any thread.
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_SERIALIZED) {
      throw InvalidInput(
          "communicator: asynchronous calls on the mpi backend run MPI on a progress thread: initialise MPI with "
          "MPI_Init_thread(MPI_THREAD_MULTIPLE) (MPI_THREAD_SERIALIZED when nothing else calls MPI meanwhile)");
    }
  }
#endif
  if (!queues[i]) queues[i] = CallQueue::start();
  if (!gpu()) {
    queues[i]->push([state, job = std::move(job)] {
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      // The callbacks run outside the handler: one that never returns (Python ends a thread that wants the GIL
      // while the interpreter exits, by unwinding it) must not unwind through a caught exception (std::terminate).
      state->finish(error);
    });
    return Request(state);
  }
#if ARTUNE_HAVE_CUDA_BACKEND
  // Queued on the caller's stream now, as the synchronous call; the request ends when the stream has run it.
  job();
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, buffer) != cudaSuccess || attr.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    attr.device = -1;
  }
  int previous = 0;
  cudaGetDevice(&previous);
  state->device = attr.device >= 0 ? attr.device : previous;
  cudaSetDevice(state->device);
  const bool ok =
      cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(&state->event), cudaEventDisableTiming) == cudaSuccess &&
      cudaEventRecord(static_cast<cudaEvent_t>(state->event), static_cast<cudaStream_t>(stream)) == cudaSuccess;
  cudaSetDevice(previous);
  if (!ok) throw BackendFailure("communicator: cannot record the asynchronous call's event on the stream");
  queues[i]->push([state] {
    cudaSetDevice(state->device);
    if (cudaEventSynchronize(static_cast<cudaEvent_t>(state->event)) == cudaSuccess) {
      state->finish(nullptr);
    } else {
      state->finish(std::make_exception_ptr(BackendFailure("communicator: the stream failed to run the call")));
    }
  });
#else
  (void)stream;
  (void)buffer;
  (void)job;
  throw Unsupported("communicator: cuda is not built here");
#endif
  return Request(state);
}

BackendProfile Communicator::Group::tuning_profile() const {
  return options.profile.empty() ? profile_for(kind) : parse_backend_profile(options.profile, parameter("profile"));
}

void Communicator::Group::warn_profile(std::string_view what, std::string_view profile) {
  if (warned_profile) return;
  const std::string line = profile_mismatch_warning(what, profile, kind);
  if (line.empty()) return;
  warned_profile = true;
  std::fprintf(stderr, "artune: warning: %s\n", line.c_str());
}

std::string Communicator::Group::runs_as(const Plan& plan) const {
  std::set<Collective> kinds;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kGroup) kinds.insert(op.collective);
  }
  if (kinds.empty()) return "";
  if (kind == BackendKind::kCpu) return "cpu group op";
  if (kind == BackendKind::kCuda) return "cuda kernels";
  std::string text;
  for (Collective c : kinds) {
    const char* name = "";
    switch (c) {
      case Collective::kAllReduce: name = kind == BackendKind::kMpi ? "MPI_Iallreduce" : "ncclAllReduce"; break;
      case Collective::kBroadcast: name = kind == BackendKind::kMpi ? "MPI_Ibcast" : "ncclBroadcast"; break;
      case Collective::kReduce: name = kind == BackendKind::kMpi ? "MPI_Ireduce" : "ncclReduce"; break;
      case Collective::kReduceScatter:
        name = kind == BackendKind::kMpi ? "MPI_Ireduce_scatter" : "ncclReduceScatter";
        break;
      case Collective::kAllGather: name = kind == BackendKind::kMpi ? "MPI_Iallgatherv" : "ncclAllGather"; break;
    }
    text += text.empty() ? name : std::string("+") + name;
  }
  return text;
}

Communicator::Group::Tuning& Communicator::Group::tuning(Collective c) {
  Tuning& t = tunings[tuning_index(c)];
  if (t.ready) return t;
  const std::string_view what = collective_flag_name(c);
  std::vector<std::uint64_t> sizes = options.tune_sizes.empty() ? default_tune_sizes() : options.tune_sizes;
  std::sort(sizes.begin(), sizes.end());
  const std::string& file = c == Collective::kAllReduce   ? options.table
                            : c == Collective::kAllGather ? options.allgather_table
                                                          : options.reducescatter_table;
  if (c == Collective::kAllReduce && !options.spec.empty()) {
    // A fixed spec: its buckets are the tune sizes.
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    if (!sizes.empty() && sizes.front() == 0) sizes.erase(sizes.begin());
    t.buckets = sizes;
  } else if (!file.empty()) {
    t.table = load_decision_table(file, topo);
    if (!t.table->ranges.empty() && t.table->ranges.front().plan.collective != c) {
      const std::string option = c == Collective::kAllReduce ? "table" : std::string(what) + "_table";
      throw InvalidInput(fmt::format("CommOptions::{}: {} was tuned for {}, not {}", option, file,
                                     collective_flag_name(t.table->ranges.front().plan.collective), what));
    }
    t.buckets = table_buckets(*t.table);
    const auto& model = t.table->cost_model;
    if (model.is_object() && model.contains("profile") && model["profile"].is_string()) {
      t.profile = model["profile"].get<std::string>();
      warn_profile(fmt::format("the table {}", file), t.profile);
    }
  } else {
    SearchOptions s;
    s.sizes = sizes;
    s.candidates.collective = c;
    BackendProfile profile = tuning_profile();
    nlohmann::json overlay;
    const std::string source = fmt::format("{} '{}'", parameter("calibration"), options.calibration);
    if (!options.calibration.empty()) {
      overlay = read_json_input(options.calibration, parameter("calibration"));
      // The overlay's own profile is the model it was fitted on (artune calibrate writes it).
      if (overlay.is_object() && overlay.contains("profile") && overlay["profile"].is_string()) {
        const BackendProfile own = parse_backend_profile(overlay["profile"].get<std::string>(), source + ": profile");
        if (!options.profile.empty() && own != profile) {
          throw InvalidInput(fmt::format("{}: its profile is {}, not {} ({})", source, to_string(own), options.profile,
                                         parameter("profile")));
        }
        profile = own;
      }
    }
    s.model = CostModel::defaults(profile);
    if (!options.calibration.empty()) {
      s.model.apply_overlay(overlay, source);
      s.calibration = options.calibration;
      warn_profile(fmt::format("the calibration {}", options.calibration), to_string(s.model.profile));
    }
    t.profile = std::string(to_string(s.model.profile));
    t.table = search(topo, s).table;
    t.buckets = table_buckets(*t.table);
  }
  if (t.buckets.empty()) {
    throw InvalidInput(fmt::format("communicator: no size to compile {} plans at (tune_sizes or the table)", what));
  }
  t.ready = true;
  return t;
}

Plan Communicator::Group::build(Collective c, std::int64_t count, ReduceOp op, int bucket, bool verify) {
  const Tuning& t = tuning(c);
  if (!t.table) {
    // A label with parameters ("xring perm=0,3,2,1"), as tables and dump_cache() print them, or a plain spec.
    if (options.spec.find(' ') != std::string::npos) {
      return build_candidate(topo, parse_candidate_label(options.spec, parameter("spec")), count, op, verify);
    }
    BuildOptions b;
    b.count = count;
    b.reduce_op = op;
    b.verify = verify;
    return build_plan(topo, options.spec, b);
  }
  return build_candidate(topo, t.table->lookup(t.buckets[static_cast<std::size_t>(bucket)]).plan, count, op, verify);
}

Communicator::Group::Entry& Communicator::Group::lookup(const CacheKey& key, std::int64_t compile_count) {
  if (!lru.empty() && lru.front().key == key) return lru.front();
  if (auto it = index.find(key); it != index.end()) {
    lru.splice(lru.begin(), lru, it->second);
    return lru.front();
  }
  const Tuning& t = tuning(key.collective);
  const std::uint64_t bytes = t.buckets[static_cast<std::size_t>(key.bucket)];
  const Plan plan = build(key.collective, compile_count, key.op, key.bucket);
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
  lru.emplace_front();
  Entry& e = lru.front();
  e.key = key;
  e.info.collective = key.collective;
  e.info.bucket = key.bucket;
  e.info.bucket_bytes = bytes;
  if (t.table) {
    const TableRange& range = t.table->lookup(bytes);
    e.info.label = range.plan.label();
    e.info.range = static_cast<int>(&range - t.table->ranges.data());
    e.info.min_bytes = range.min_bytes;
    e.info.max_bytes = range.max_bytes;
  } else {
    e.info.label = options.spec;
  }
  e.info.type = key.type;
  e.info.op = key.op;
  e.info.runs_as = runs_as(plan);
  try {
    prepare(e, plan);
  } catch (...) {
    if (current == &e) current = nullptr;
    lru.pop_front();
    throw;
  }
  index[key] = lru.begin();
  return e;
}

void Communicator::Group::prepare(Entry& e, const Plan& plan) {
  if (kind == BackendKind::kCpu) {
    make_current(e);
    cpu->prepare_for_user_buffers(plan, e.key.type, e.key.op);
  } else {
    if (!e.backend) e.backend = make_backend(kind, backend_options);
    e.backend->prepare_for_user_buffers(plan, e.key.type, e.key.op);
  }
  e.target = plan.count;
  e.info.count = plan.count;
  e.info.devices = static_cast<int>(plan.devices.size());
  ++compiles;
}

void Communicator::Group::make_current(Entry& e) {
  if (current == &e) return;
  if (current != nullptr) cpu->swap_prepared(current->held);
  cpu->swap_prepared(e.held);
  current = &e;
}

bool Communicator::Group::target(Entry& e, std::int64_t count, bool recompile) {
  if (e.target == count) return true;
  if (kind != BackendKind::kCpu && !recompile) return false;
  // Not verified again to re-target: a plan of the bucket's shape at another count is the builder's own
  // partition of it (the communicator_collectives test verifies many counts per family); compiled ones are.
  const Plan plan = build(e.key.collective, count, e.key.op, e.key.bucket, /*verify=*/false);
  if (kind == BackendKind::kCpu) {
    make_current(e);
    if (cpu->retarget(plan)) {
      e.target = count;
      e.info.count = count;
      ++retargets;
      return true;
    }
  }
  if (!recompile) return false;
  verify_or_throw(plan);
  prepare(e, plan);
  return true;
}

void Communicator::Group::run_entry(Entry& e, std::span<void* const> at, std::span<void* const> streams) {
  if (kind == BackendKind::kCpu) {
    make_current(e);
    cpu->run_on(at);
  } else if (gpu()) {
    e.backend->run_on_streams(at, streams);
  } else {
    e.backend->run_on(at);
  }
  ++e.info.calls;
  for (auto& l : last) l = e.info;
}

void Communicator::Group::copy(void* dst, const void* src, std::size_t bytes, void* stream) const {
  if (bytes == 0 || dst == src) return;
  if (!gpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if ARTUNE_HAVE_CUDA_BACKEND
  if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    throw BackendFailure("communicator: cudaMemcpyAsync failed");
  }
#else
  (void)stream;
#endif
}

void* Communicator::Group::pad_buffer(std::size_t i, std::size_t bytes, std::size_t keep, const void* user,
                                      void* stream) {
  Pad& p = pads[i];
  if (p.bytes < bytes) {
    p.release();
    if (!gpu()) {
      const std::size_t rounded = (bytes + 63) / 64 * 64;
      p.data = std::aligned_alloc(64, rounded);
      if (p.data == nullptr) throw BackendFailure(fmt::format("communicator: out of memory ({} B of scratch)", bytes));
    } else {
#if ARTUNE_HAVE_CUDA_BACKEND
      // On the device of the caller's buffer.
      cudaPointerAttributes attr{};
      if (cudaPointerGetAttributes(&attr, user) != cudaSuccess ||
          (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
        (void)cudaGetLastError();
        throw InvalidInput("communicator: the buffers of a cuda/nccl communicator must be device memory");
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
        throw BackendFailure(fmt::format("communicator: cannot allocate {} B of device scratch", bytes));
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
    throw BackendFailure("communicator: cudaStreamWaitEvent failed");
  }
#endif
  if (p.dirty > keep) {
    auto* tail = static_cast<std::byte*>(p.data) + keep;
    if (!gpu()) {
      std::memset(tail, 0, p.dirty - keep);
    } else {
#if ARTUNE_HAVE_CUDA_BACKEND
      if (cudaMemsetAsync(tail, 0, p.dirty - keep, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
        throw BackendFailure("communicator: cudaMemsetAsync failed");
      }
#endif
    }
  }
  // Until the run completes the whole buffer counts as written (a failed run leaves it unknown).
  p.dirty = p.bytes;
  return p.data;
}

void Communicator::Group::pad_done(std::size_t i, std::size_t keep, void* stream) {
  Pad& p = pads[i];
  p.dirty = keep;
#if ARTUNE_HAVE_CUDA_BACKEND
  if (gpu()) {
    if (cudaEventRecord(static_cast<cudaEvent_t>(p.event), static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      throw BackendFailure("communicator: cudaEventRecord failed");
    }
    p.used = true;
  }
#else
  (void)stream;
#endif
}

void Communicator::Group::execute_allreduce(const CallArgs& call, std::span<const void* const> send,
                                            std::span<void* const> recv, std::span<void* const> streams) {
  const std::size_t elem = element_size(call.type);
  const std::size_t n = recv.size();
  const std::vector<std::uint64_t>& buckets = tuning(Collective::kAllReduce).buckets;
  // The cpu backend re-targets a bucket plan to any smaller count, so one run serves every count up to the
  // largest bucket; the others pad small counts and run large ones in parts (split_call).
  const std::uint64_t limit = kind == BackendKind::kCpu ? std::numeric_limits<std::uint64_t>::max() : pad_limit;
  std::vector<void*> at(n);
  for (const CallPiece& piece : split_call(buckets, limit, call.count, elem)) {
    Entry& e = lookup(CacheKey{Collective::kAllReduce, piece.bucket, call.type, call.op}, piece.compiled);
    const std::size_t offset = static_cast<std::size_t>(piece.offset) * elem;
    const std::size_t bytes = static_cast<std::size_t>(piece.count) * elem;
    // Exact when the plan re-targets to the piece; else padded to the bucket's count.
    const bool padded = !target(e, piece.count, false);
    if (padded && !target(e, piece.compiled, false)) {
      prepare(e, build(Collective::kAllReduce, piece.compiled, call.op, piece.bucket));
    }
    for (std::size_t i = 0; i < n; ++i) {
      const auto* src = static_cast<const std::byte*>(send[i]) + offset;
      auto* dst = static_cast<std::byte*>(recv[i]) + offset;
      if (padded) {
        at[i] = pad_buffer(i, static_cast<std::size_t>(piece.compiled) * elem, bytes, recv[i], streams[i]);
        copy(at[i], src, bytes, streams[i]);
      } else {
        copy(dst, src, bytes, streams[i]);
        at[i] = dst;
      }
    }
    run_entry(e, at, streams);
    if (padded) {
      for (std::size_t i = 0; i < n; ++i) {
        copy(static_cast<std::byte*>(recv[i]) + offset, at[i], bytes, streams[i]);
        pad_done(i, bytes, streams[i]);
      }
    }
  }
}

void Communicator::Group::execute(const CallArgs& call, std::span<const void* const> send,
                                  std::span<void* const> buffers, std::span<void* const> streams) {
  try {
    if (call.collective == Collective::kAllReduce) {
      execute_allreduce(call, send, buffers, streams);
      return;
    }
    // All-gather, reduce-scatter: one plan of the whole buffer (ranks blocks), in place, from the smallest
    // bucket holding it (the largest when none does).
    const std::vector<std::uint64_t>& buckets = tuning(call.collective).buckets;
    const std::size_t elem = element_size(call.type);
    const auto rounded = [&](std::uint64_t b) { return (bucket_count(b, elem) + ranks - 1) / ranks * ranks; };
    int k = static_cast<int>(buckets.size()) - 1;
    while (k > 0 && rounded(buckets[static_cast<std::size_t>(k - 1)]) >= call.count) --k;
    const std::int64_t at_bucket = rounded(buckets[static_cast<std::size_t>(k)]);
    // cpu: compiled at the bucket's count (re-targeted below); the others at the call's.
    const std::int64_t compile = kind == BackendKind::kCpu ? std::max(at_bucket, call.count) : call.count;
    Entry& e = lookup(CacheKey{call.collective, k, call.type, call.op}, compile);
    target(e, call.count, true);
    run_entry(e, buffers, streams);
  } catch (const Error& err) {
    if (err.code() == ErrorCode::kTimeout || err.code() == ErrorCode::kBackendFailure) {
      broken = true;
      broken_timeout = err.code() == ErrorCode::kTimeout;
      broken_reason = err.what();
    }
    throw;
  }
}

void Communicator::Group::check_usable() const {
  if (!broken) return;
  const std::string text = fmt::format("communicator is broken by an earlier failure: {}", broken_reason);
  if (broken_timeout) throw Timeout(text);
  throw BackendFailure(text);
}

void Communicator::Group::call(int rank, const CallArgs& a) {
  const std::string_view what = collective_flag_name(a.collective);
  if (local == 1) {
    check_usable();
    if (a.count == 0) return;
    const void* one_send[1] = {a.send};
    void* one[1] = {a.recv};
    void* own_stream[1] = {a.stream};
    execute(a, one_send, one, own_stream);
    return;
  }
  // Local group: the last rank to arrive runs the plan for all; the others wait for its outcome.
  std::unique_lock<std::mutex> lock(mutex);
  check_usable();
  const std::uint64_t gen = generation;
  args[static_cast<std::size_t>(rank)] = a;
  if (++arrived == ranks) {
    arrived = 0;
    std::exception_ptr outcome;
    try {
      const CallArgs& b = args[0];
      for (int r = 1; r < ranks; ++r) {
        const CallArgs& o = args[static_cast<std::size_t>(r)];
        if (o.collective != b.collective) {
          throw InvalidInput(fmt::format("{}: rank {} called {} but rank 0 {}", what, r,
                                         collective_flag_name(o.collective), collective_flag_name(b.collective)));
        }
        if (o.count != b.count || o.type != b.type || o.op != b.op) {
          throw InvalidInput(fmt::format("{}: rank {} called with {} x {} {} but rank 0 with {} x {} {}", what, r,
                                         o.count, to_string(o.type), to_string(o.op), b.count, to_string(b.type),
                                         to_string(b.op)));
        }
      }
      if (a.count > 0) {
        std::vector<const void*> sends(args.size());
        std::vector<void*> buffers(args.size());
        std::vector<void*> streams(args.size());
        for (std::size_t r = 0; r < args.size(); ++r) {
          sends[r] = args[r].send;
          buffers[r] = args[r].recv;
          streams[r] = args[r].stream;
        }
        execute(a, sends, buffers, streams);
      }
    } catch (...) {
      outcome = std::current_exception();
    }
    result = outcome;
    ++generation;
    lock.unlock();
    cv.notify_all();
    if (outcome) std::rethrow_exception(outcome);
    return;
  }
  const auto timeout = std::chrono::duration<double>(options.timeout_s);
  if (!cv.wait_for(lock, timeout, [&] { return generation != gen || broken; })) {
    const int missing = ranks - arrived;
    broken = true;
    broken_timeout = true;
    broken_reason = fmt::format("{} of {} ranks did not call {} within {} s (a rank stopped, threw or died)", missing,
                                ranks, what, options.timeout_s);
    lock.unlock();
    cv.notify_all();
    throw Timeout(fmt::format("{}: rank {}: {}", what, rank, broken_reason));
  }
  if (generation == gen) {
    // Another waiter timed out: this call cannot complete either.
    const std::string text = fmt::format("{}: rank {}: {}", what, rank, broken_reason);
    if (broken_timeout) throw Timeout(text);
    throw BackendFailure(text);
  }
  if (result) std::rethrow_exception(result);
}

}  // namespace artune
