#include "artune/comm/comm_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/topology/io/io.hpp"

#if ARTUNE_HAVE_CUDA_BACKEND
#include <cuda_runtime.h>
#endif

namespace artune {

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

namespace {

// The options as given, once their timeout is known good (checked before anything else is read).
const CommOptions& checked(const CommOptions& options) {
  if (!(options.timeout_s > 0)) throw InvalidInput("CommOptions::timeout_s: must be > 0");
  return options;
}

}  // namespace

Communicator::Group::Group(BackendKind kind_, const CommOptions& options_, int ranks_)
    : kind(kind_),
      options(checked(options_)),
      topo(load_topology(options_.topology.empty() ? fmt::format("uniform:{}", ranks_) : options_.topology)),
      source(kind, options, topo) {
  backend_options.timeout_s = effective_timeout_s(options.timeout_s);
  options.timeout_s = backend_options.timeout_s;
  backend_options.topology = &topo;
}

void Communicator::Group::bind(int ranks_, int local_, int rank_base_) {
  ranks = ranks_;
  local = local_;
  rank_base = rank_base_;
  const auto n = static_cast<std::size_t>(local);
  last.assign(n, PlanInfo{});
  queues.resize(n);
  rendezvous.args.assign(local > 1 ? n : 0, CallArgs{});
  cache = std::make_unique<PlanCache>(kind, backend_options);
  scratch = std::make_unique<Scratch>(n, gpu());
}

Communicator::Group::~Group() {
  // Calls in flight hold the group, so the queues are empty here: end their threads.
  for (auto& q : queues) {
    if (q) q->shutdown();
  }
  cache.reset();  // before the communicator the mpi backends duplicated theirs from
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

PlanCache::Entry& Communicator::Group::lookup(const CacheKey& key, std::int64_t compile_count) {
  if (PlanCache::Entry* e = cache->find(key)) return *e;
  const Plan plan = source.build(key.collective, compile_count, key.op, key.bucket);
  if (plan.ranks() != ranks) {
    throw InvalidInput(fmt::format("communicator: the plan has {} ranks but the group has {} (check the topology)",
                                   plan.ranks(), ranks));
  }
  PlanInfo info = source.describe(key.collective, key.bucket);
  info.type = key.type;
  info.op = key.op;
  info.runs_as = cache->runs_as(plan);
  return cache->insert(key, info, plan, options.cache_capacity);
}

bool Communicator::Group::target(PlanCache::Entry& e, std::int64_t count, bool recompile) {
  if (e.target == count) return true;
  const bool retargets = cache->retargets();
  if (!retargets && !recompile) return false;
  // Not verified again to re-target: a plan of the bucket's shape at another count is the builder's own
  // partition of it (the communicator_collectives test verifies many counts per family); compiled ones are.
  const Plan plan = source.build(e.key.collective, count, e.key.op, e.key.bucket, /*verify=*/false);
  if (retargets && cache->retarget(e, plan)) return true;
  if (!recompile) return false;
  verify_or_throw(plan);
  cache->prepare(e, plan);
  return true;
}

void Communicator::Group::run_entry(PlanCache::Entry& e, std::span<void* const> at, std::span<void* const> streams) {
  cache->run(e, at, streams);
  for (auto& l : last) l = e.info;
}

void Communicator::Group::execute_allreduce(const CallArgs& call, std::span<const void* const> send,
                                            std::span<void* const> recv, std::span<void* const> streams) {
  const std::size_t elem = element_size(call.type);
  const std::size_t n = recv.size();
  const std::vector<std::uint64_t>& buckets = source.tuning(Collective::kAllReduce).buckets;
  // A backend that re-targets (cpu) runs a bucket plan at any smaller count, so one run serves every count up to
  // the largest bucket; the others pad small counts and run large ones in parts (split_call).
  const std::uint64_t limit = cache->retargets() ? std::numeric_limits<std::uint64_t>::max() : options.pad_limit;
  std::vector<void*> at(n);
  for (const CallPiece& piece : split_call(buckets, limit, call.count, elem)) {
    PlanCache::Entry& e = lookup(CacheKey{Collective::kAllReduce, piece.bucket, call.type, call.op}, piece.compiled);
    const std::size_t offset = static_cast<std::size_t>(piece.offset) * elem;
    const std::size_t bytes = static_cast<std::size_t>(piece.count) * elem;
    // Exact when the plan re-targets to the piece; else padded to the bucket's count.
    const bool padded = !target(e, piece.count, false);
    if (padded && !target(e, piece.compiled, false)) {
      cache->prepare(e, source.build(Collective::kAllReduce, piece.compiled, call.op, piece.bucket));
    }
    for (std::size_t i = 0; i < n; ++i) {
      const auto* src = static_cast<const std::byte*>(send[i]) + offset;
      auto* dst = static_cast<std::byte*>(recv[i]) + offset;
      if (padded) {
        at[i] = scratch->acquire(i, static_cast<std::size_t>(piece.compiled) * elem, bytes, recv[i], streams[i]);
        scratch->copy(at[i], src, bytes, streams[i]);
      } else {
        scratch->copy(dst, src, bytes, streams[i]);
        at[i] = dst;
      }
    }
    run_entry(e, at, streams);
    if (padded) {
      for (std::size_t i = 0; i < n; ++i) {
        scratch->copy(static_cast<std::byte*>(recv[i]) + offset, at[i], bytes, streams[i]);
        scratch->release(i, bytes, streams[i]);
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
    const std::vector<std::uint64_t>& buckets = source.tuning(call.collective).buckets;
    const std::size_t elem = element_size(call.type);
    const auto rounded = [&](std::uint64_t b) { return (bucket_count(b, elem) + ranks - 1) / ranks * ranks; };
    int k = static_cast<int>(buckets.size()) - 1;
    while (k > 0 && rounded(buckets[static_cast<std::size_t>(k - 1)]) >= call.count) --k;
    const std::int64_t at_bucket = rounded(buckets[static_cast<std::size_t>(k)]);
    // Compiled at the bucket's count where the backend re-targets (below); else at the call's.
    const std::int64_t compile = cache->retargets() ? std::max(at_bucket, call.count) : call.count;
    PlanCache::Entry& e = lookup(CacheKey{call.collective, k, call.type, call.op}, compile);
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
  const std::uint64_t gen = rendezvous.generation;
  rendezvous.args[static_cast<std::size_t>(rank)] = a;
  if (++rendezvous.arrived == ranks) {
    rendezvous.arrived = 0;
    std::exception_ptr outcome;
    try {
      const CallArgs& b = rendezvous.args[0];
      for (int r = 1; r < ranks; ++r) {
        const CallArgs& o = rendezvous.args[static_cast<std::size_t>(r)];
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
        std::vector<const void*> sends(rendezvous.args.size());
        std::vector<void*> buffers(rendezvous.args.size());
        std::vector<void*> streams(rendezvous.args.size());
        for (std::size_t r = 0; r < rendezvous.args.size(); ++r) {
          sends[r] = rendezvous.args[r].send;
          buffers[r] = rendezvous.args[r].recv;
          streams[r] = rendezvous.args[r].stream;
        }
        execute(a, sends, buffers, streams);
      }
    } catch (...) {
      outcome = std::current_exception();
    }
    rendezvous.result = outcome;
    ++rendezvous.generation;
    lock.unlock();
    rendezvous.cv.notify_all();
    if (outcome) std::rethrow_exception(outcome);
    return;
  }
  const auto timeout = std::chrono::duration<double>(options.timeout_s);
  if (!rendezvous.cv.wait_for(lock, timeout, [&] { return rendezvous.generation != gen || broken; })) {
    const int missing = ranks - rendezvous.arrived;
    broken = true;
    broken_timeout = true;
    broken_reason = fmt::format("{} of {} ranks did not call {} within {} s (a rank stopped, threw or died)", missing,
                                ranks, what, options.timeout_s);
    lock.unlock();
    rendezvous.cv.notify_all();
    throw Timeout(fmt::format("{}: rank {}: {}", what, rank, broken_reason));
  }
  if (rendezvous.generation == gen) {
    // Another waiter timed out: this call cannot complete either.
    const std::string text = fmt::format("{}: rank {}: {}", what, rank, broken_reason);
    if (broken_timeout) throw Timeout(text);
    throw BackendFailure(text);
  }
  if (rendezvous.result) std::rethrow_exception(rendezvous.result);
}

}  // namespace artune
