#include "artune/executor/cpu/cpu_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "artune/core/error.hpp"
#include "artune/core/parallel.hpp"
#include "artune/core/parameters.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune/executor/test_fault.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune {

namespace {

// Written into every completion word when a run is abandoned, so sleepers wake.
constexpr std::uint32_t kAbandoned = 0xFFFFFFFFu;

// Runs fn(i) for i < n (fills and checks): on every core for large work, on this thread for small work (threads
// would cost more than they save). core's parallel_for, which also finishes on this thread when no thread can be
// started (resource limits).
template <typename F>
void parallel_for(int n, std::int64_t work, F&& fn) {
  artune::parallel_for(static_cast<std::size_t>(std::max(n, 0)), work < (1 << 18) ? 1 : 0,
                       [&](std::size_t i) { fn(static_cast<int>(i)); });
}

}  // namespace

struct CpuBackend::Task {
  ActionKind kind = ActionKind::kCopy;
  int op = -1;
  std::vector<int> deps;  // every dep of the plan op (the pull reads remote producers)
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  std::int64_t n = 0;
  int divisor = 1;
  // Group ops.
  Collective collective = Collective::kAllReduce;
  int member = 0;                                             // this thread's position in the group
  int root = -1;                                              // position of the root
  std::vector<std::byte*> regions;                            // every member's region, in group order
  std::vector<std::pair<std::int64_t, std::int64_t>> shards;  // even_piece split of the region
};

CpuBackend::CpuBackend(const BackendOptions& options) : options_(options) {
  // Saturate: a huge timeout must not overflow the clock arithmetic of wait_for.
  if (!(options_.timeout_s <= kMaxTimeoutSeconds)) options_.timeout_s = kMaxTimeoutSeconds;
  const TestFault fault = read_test_fault();
  if (fault.kind == "flip") {
    flip_rank_ = fault.rank;
    flip_run_ = fault.iteration;
  }
}

CpuBackend::~CpuBackend() { stop_workers(); }

CpuBackend::Prepared::Prepared() = default;
CpuBackend::Prepared::~Prepared() = default;
CpuBackend::Prepared::Prepared(Prepared&&) noexcept = default;
CpuBackend::Prepared& CpuBackend::Prepared::operator=(Prepared&&) noexcept = default;

void CpuBackend::swap_prepared(Prepared& other) noexcept {
  using std::swap;
  swap(plan_, other.plan_);
  swap(type_, other.type_);
  swap(op_, other.op_);
  swap(elem_, other.elem_);
  swap(prepared_, other.prepared_);
  swap(user_buffers_, other.user_buffers_);
  swap(buffers_, other.buffers_);
  swap(storage_, other.storage_);
  swap(tasks_, other.tasks_);
  swap(fixups_, other.fixups_);
  swap(done_, other.done_);
  swap(arrive_, other.arrive_);
  swap(finish_, other.finish_);
  swap(gen_, other.gen_);
}

void CpuBackend::stop_workers() {
  if (threads_.empty()) return;
  stop_.store(true);
  start_gen_.fetch_add(1, std::memory_order_release);
  start_gen_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  stop_.store(false);
}

std::byte* CpuBackend::address(const Location& l) const {
  return buffers_[static_cast<std::size_t>(l.device)][static_cast<std::size_t>(l.buffer)].data +
         static_cast<std::size_t>(l.offset) * elem_;
}

void* CpuBackend::buffer_data(int device, int buffer) {
  return buffers_.at(static_cast<std::size_t>(device)).at(static_cast<std::size_t>(buffer)).data;
}

void CpuBackend::check_plan(const Plan& plan, DataType type) const {
  if (plan.devices.size() > static_cast<std::size_t>(kMaxCpuDevices)) {
    throw InvalidInput(
        fmt::format("{}: the plan has {} devices; the cpu backend runs one thread per device "
                    "and takes at most {} (use a smaller topology or the mpi backend)",
                    parameter("topology"), plan.devices.size(), kMaxCpuDevices));
  }
  // Refuse before allocating anything: every device's buffers live in this process.
  {
    double needed = 0;
    for (const auto& device_buffers : plan.buffers) {
      for (std::int64_t elements : device_buffers) {
        needed +=
            static_cast<double>(std::max<std::int64_t>(elements, 1)) * static_cast<double>(element_size(type)) + 64;
      }
    }
    check_host_memory(needed, plan.count, type, fmt::format("cpu backend, {} devices", plan.devices.size()));
  }
}

void CpuBackend::prepare(const Plan& plan, DataType type, ReduceOp op) { prepare_impl(plan, type, op, false); }

void CpuBackend::prepare_for_user_buffers(const Plan& plan, DataType type, ReduceOp op) {
  prepare_impl(plan, type, op, true);
}

void CpuBackend::prepare_impl(const Plan& plan, DataType type, ReduceOp op, bool user_buffers) {
  if (broken_) throw BackendFailure("cpu backend: a previous run timed out; create a new backend");
  prepared_ = false;
  check_plan(plan, type);
  const auto schedules = split_by_device(plan);  // validates the plan's shape
  plan_ = plan;
  type_ = type;
  op_ = op;
  elem_ = element_size(type);
  user_buffers_ = user_buffers;

  // Buffers: one zeroed, 64-byte aligned allocation each (the ranks' buffer 0 is the caller's in user mode,
  // bound by run_on).
  buffers_.assign(plan.devices.size(), {});
  storage_.clear();
  fixups_.clear();
  const auto ranks = static_cast<std::size_t>(plan.ranks());
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    for (std::int64_t elements : plan.buffers[d]) {
      if (user_buffers && d < ranks && buffers_[d].empty()) {
        buffers_[d].push_back(Buffer{nullptr, elements, 0});
        continue;
      }
      const std::size_t bytes = std::max<std::size_t>(static_cast<std::size_t>(elements) * elem_, 1);
      const std::size_t rounded = (bytes + 63) / 64 * 64;
      void* p = std::aligned_alloc(64, rounded);
      if (p == nullptr) {
        // A runtime failure naming what was asked for (exit 3), not a bare std::bad_alloc.
        throw BackendFailure(fmt::format("cpu backend: out of memory allocating {} bytes for buffer {} of device {}",
                                         rounded, buffers_[d].size(), d));
      }
      std::memset(p, 0, rounded);
      storage_.emplace_back(static_cast<std::byte*>(p), &std::free);
      buffers_[d].push_back(Buffer{static_cast<std::byte*>(p), elements, elements});
    }
  }

  build_tasks(schedules);

  const std::size_t ops = plan.ops.size();
  done_ = std::make_unique<std::atomic<std::uint32_t>[]>(ops);
  arrive_ = std::make_unique<std::atomic<std::uint32_t>[]>(ops);
  finish_ = std::make_unique<std::atomic<std::uint32_t>[]>(ops);
  for (std::size_t i = 0; i < ops; ++i) {
    done_[i].store(0);
    arrive_[i].store(0);
    finish_[i].store(0);
  }
  gen_ = 0;
  aborted_.store(false);

  // Workers are idle between runs and read their task list only inside one, so every plan reuses
  // them; a plan with more devices adds workers, and workers beyond a plan's devices idle through its runs.
  threads_.reserve(plan.devices.size());
  const std::uint32_t first_seen = start_gen_.load();
  for (std::size_t d = threads_.size(); d < plan.devices.size(); ++d) {
    threads_.emplace_back([this, d, first_seen] { worker(static_cast<int>(d), first_seen); });
  }
  prepared_ = true;
}

// Tasks: every action except sends (the receiver pulls), over plan_ and buffers_.
void CpuBackend::build_tasks(const std::vector<DeviceSchedule>& schedules) {
  const Plan& plan = plan_;
  const auto ranks = static_cast<std::size_t>(plan.ranks());
  fixups_.clear();
  tasks_.assign(plan.devices.size(), {});
  for (const DeviceSchedule& s : schedules) {
    auto& list = tasks_[static_cast<std::size_t>(s.device)];
    for (const Action& a : s.actions) {
      if (a.kind == ActionKind::kSend) continue;
      const Op& pop = plan.ops[static_cast<std::size_t>(a.op)];
      // Pointers into a rank's buffer 0 are noted so run_on can rebind them to caller memory.
      auto note = [&](int field, const Location& l) {
        if (l.buffer == 0 && l.device >= 0 && static_cast<std::size_t>(l.device) < ranks) {
          fixups_.push_back(Fixup{s.device, static_cast<int>(list.size()), field, l.device,
                                  static_cast<std::size_t>(l.offset) * elem_});
        }
      };
      Task t;
      t.kind = a.kind;
      t.op = a.op;
      t.deps = pop.deps;
      t.dst = address(a.local);
      note(-1, a.local);
      t.n = a.local.count;
      if (a.kind == ActionKind::kRecv || a.kind == ActionKind::kCopy || a.kind == ActionKind::kReduce) {
        t.src = address(a.remote);
        note(-2, a.remote);
        if (a.kind == ActionKind::kRecv) t.kind = a.reduce ? ActionKind::kReduce : ActionKind::kCopy;
      }
      if (a.kind == ActionKind::kScale) t.divisor = pop.divisor;
      if (a.kind == ActionKind::kGroup) {
        t.collective = pop.collective;
        const int m = static_cast<int>(pop.group.size());
        for (int k = 0; k < m; ++k) {
          const int dev = pop.group[static_cast<std::size_t>(k)];
          if (dev == s.device) t.member = k;
          if (dev == pop.root) t.root = k;
          const Location region{dev, pop.dst.buffer, pop.dst.offset, pop.dst.count};
          note(k, region);
          t.regions.push_back(address(region));
          t.shards.push_back(even_piece(pop.dst.count, m, k));
        }
      }
      list.push_back(std::move(t));
    }
  }

}

bool CpuBackend::retarget(const Plan& plan) {
  if (!prepared_ || !user_buffers_ || broken_ || !same_shape(plan_, plan)) return false;
  const auto ranks = static_cast<std::size_t>(plan.ranks());
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    for (std::size_t b = d < ranks ? 1 : 0; b < plan.buffers[d].size(); ++b) {
      if (plan.buffers[d][b] > buffers_[d][b].capacity) return false;
    }
  }
  const auto schedules = split_by_device(plan);  // validates the plan's shape
  plan_ = plan;
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    for (std::size_t b = 0; b < plan.buffers[d].size(); ++b) buffers_[d][b].elements = plan.buffers[d][b];
  }
  build_tasks(schedules);
  return true;
}

void CpuBackend::worker(int device, std::uint32_t seen) {
  // `seen` was read before the thread started, so a run begun before it got here is not missed.
  for (;;) {
    std::uint32_t g;
    while ((g = start_gen_.load(std::memory_order_acquire)) == seen) start_gen_.wait(seen, std::memory_order_acquire);
    seen = g;
    if (stop_.load()) return;
    const std::uint32_t gen = gen_;
    // Re-read per run: prepare() and swap_prepared() replace the task lists between runs.
    static const std::vector<Task> kNone;
    const auto& tasks =
        static_cast<std::size_t>(device) < tasks_.size() ? tasks_[static_cast<std::size_t>(device)] : kNone;
    for (const Task& t : tasks) {
      bool ok = true;
      for (int dep : t.deps) {
        if (!wait_done(dep, gen)) {
          ok = false;
          break;
        }
      }
      if (!ok) break;
      execute(t, gen);
      if (aborted_.load(std::memory_order_relaxed)) break;
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_cv_.notify_all();
    }
  }
}

bool CpuBackend::wait_done(int op, std::uint32_t gen) {
  auto& word = done_[static_cast<std::size_t>(op)];
  for (;;) {
    const std::uint32_t v = word.load(std::memory_order_acquire);
    if (v == gen) return true;
    if (aborted_.load()) return false;
    word.wait(v, std::memory_order_acquire);
  }
}

void CpuBackend::finish(int op, std::uint32_t gen) {
  auto& word = done_[static_cast<std::size_t>(op)];
  word.store(gen, std::memory_order_release);
  word.notify_all();
  progress_.fetch_add(1, std::memory_order_relaxed);
}

void CpuBackend::execute(const Task& t, std::uint32_t gen) {
  switch (t.kind) {
    case ActionKind::kCopy:
      if (t.n > 0) std::memcpy(t.dst, t.src, static_cast<std::size_t>(t.n) * elem_);
      finish(t.op, gen);
      break;
    case ActionKind::kReduce:
      reduce_into(t.dst, t.src, t.n, type_, op_);
      finish(t.op, gen);
      break;
    case ActionKind::kScale:
      scale_down(t.dst, t.n, type_, t.divisor);
      finish(t.op, gen);
      break;
    case ActionKind::kGroup: run_group(t, gen); break;
    case ActionKind::kSend:
    case ActionKind::kRecv: break;  // never queued: receives become copies/reduces, sends are pulled
  }
}

void CpuBackend::run_group(const Task& t, std::uint32_t gen) {
  const int m = static_cast<int>(t.regions.size());
  const int k = t.member;
  std::byte* own = t.regions[static_cast<std::size_t>(k)];
  auto shard_ptr = [&](int member, int shard) {
    return t.regions[static_cast<std::size_t>(member)] +
           static_cast<std::size_t>(t.shards[static_cast<std::size_t>(shard)].first) * elem_;
  };
  auto shard_len = [&](int shard) { return t.shards[static_cast<std::size_t>(shard)].second; };
  // Shard k of every member except `skip`, reduced into `into`.
  auto reduce_shard = [&](std::byte* into, int skip_a, int skip_b) {
    std::vector<const void*> srcs;
    for (int j = 0; j < m; ++j) {
      if (j != skip_a && j != skip_b) srcs.push_back(shard_ptr(j, k));
    }
    reduce_many_into(into, srcs.data(), static_cast<int>(srcs.size()), shard_len(k), type_, op_);
  };
  auto gather_others = [&] {
    for (int j = 0; j < m; ++j) {
      if (j != k && shard_len(j) > 0) {
        std::memcpy(own + static_cast<std::size_t>(t.shards[static_cast<std::size_t>(j)].first) * elem_,
                    shard_ptr(j, j), static_cast<std::size_t>(shard_len(j)) * elem_);
      }
    }
  };

  switch (t.collective) {
    case Collective::kAllReduce: {
      reduce_shard(shard_ptr(k, k), k, k);
      // Members only: every shard must be final before anyone copies it.
      auto& word = arrive_[static_cast<std::size_t>(t.op)];
      std::uint32_t v = word.fetch_add(1, std::memory_order_acq_rel) + 1;
      if (v == static_cast<std::uint32_t>(m)) {
        word.notify_all();
      } else {
        while ((v = word.load(std::memory_order_acquire)) < static_cast<std::uint32_t>(m)) {
          if (aborted_.load()) return;
          word.wait(v, std::memory_order_acquire);
        }
      }
      gather_others();
      break;
    }
    case Collective::kReduceScatter: reduce_shard(shard_ptr(k, k), k, k); break;
    case Collective::kAllGather: gather_others(); break;
    case Collective::kReduce:
      // Member k reduces shard k of every non-root member into the root's shard k.
      reduce_shard(shard_ptr(t.root, k), t.root, t.root);
      break;
    case Collective::kBroadcast:
      if (k != t.root && t.n > 0)
        std::memcpy(own, t.regions[static_cast<std::size_t>(t.root)], static_cast<std::size_t>(t.n) * elem_);
      break;
  }
  if (finish_[static_cast<std::size_t>(t.op)].fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<std::uint32_t>(m)) {
    finish(t.op, gen);
  }
}

void CpuBackend::run_on(std::span<void* const> user) {
  if (!prepared_) throw InvalidInput("cpu backend: run_on() before prepare()");
  const auto ranks = static_cast<std::size_t>(plan_.ranks());
  if (user.size() != ranks) {
    throw InvalidInput(fmt::format("cpu backend: run_on() got {} buffers for {} ranks", user.size(), ranks));
  }
  bool changed = false;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (user[r] == nullptr && plan_.count > 0) throw InvalidInput(fmt::format("cpu backend: rank {}: null buffer", r));
    auto* p = static_cast<std::byte*>(user[r]);
    if (buffers_[r][0].data != p) {
      buffers_[r][0].data = p;
      changed = true;
    }
  }
  if (changed) {
    for (const Fixup& f : fixups_) {
      Task& t = tasks_[static_cast<std::size_t>(f.device)][static_cast<std::size_t>(f.task)];
      std::byte* p = buffers_[static_cast<std::size_t>(f.rank)][0].data + f.offset;
      if (f.field == -1) {
        t.dst = p;
      } else if (f.field == -2) {
        t.src = p;
      } else {
        t.regions[static_cast<std::size_t>(f.field)] = p;
      }
    }
  }
  run();
}

void CpuBackend::run() {
  if (!prepared_) throw InvalidInput("cpu backend: run() before prepare()");
  if (user_buffers_ && plan_.count > 0 && buffers_[0][0].data == nullptr) {
    throw InvalidInput("cpu backend: a plan prepared for caller buffers runs through run_on()");
  }
  if (broken_) throw BackendFailure("cpu backend: a previous run timed out; create a new backend");
  ++runs_;
  if (runs_ == flip_run_ && flip_rank_ >= 0 && flip_rank_ < plan_.ranks() && plan_.count > 0) {
    void* data = buffers_[static_cast<std::size_t>(flip_rank_)][0].data;
    store_from_double(data, type_, 0, load_as_double(data, type_, 0) + 1);
  }
  ++gen_;
  if (gen_ == kAbandoned || gen_ == 0) {
    // Wrapped after 2^32 runs: restart the generations from a clean slate.
    for (std::size_t i = 0; i < plan_.ops.size(); ++i) done_[i].store(0);
    gen_ = 1;
  }
  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    if (plan_.ops[i].kind == OpKind::kGroup) {
      arrive_[i].store(0, std::memory_order_relaxed);
      finish_[i].store(0, std::memory_order_relaxed);
    }
  }
  remaining_.store(static_cast<int>(threads_.size()), std::memory_order_relaxed);
  start_gen_.fetch_add(1, std::memory_order_release);
  start_gen_.notify_all();

  const auto timeout = std::chrono::duration<double>(options_.timeout_s);
  std::unique_lock<std::mutex> lock(mutex_);
  std::uint64_t seen_progress = progress_.load();
  while (!finished_cv_.wait_for(lock, timeout, [&] { return remaining_.load() == 0; })) {
    const std::uint64_t now = progress_.load();
    if (now != seen_progress) {
      seen_progress = now;
      continue;
    }
    // No op finished for a whole timeout: find the first unfinished op, abandon the run.
    int stuck = -1;
    for (std::size_t i = 0; i < plan_.ops.size() && stuck < 0; ++i) {
      if (done_[i].load() != gen_) stuck = static_cast<int>(i);
    }
    aborted_.store(true);
    for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
      done_[i].store(kAbandoned);
      done_[i].notify_all();
      arrive_[i].store(kAbandoned);
      arrive_[i].notify_all();
    }
    finished_cv_.wait_for(lock, std::chrono::seconds(2), [&] { return remaining_.load() == 0; });
    broken_ = true;
    throw Timeout(fmt::format("cpu backend: no op completed for {} s (op {} unfinished)", options_.timeout_s, stuck));
  }
}

void CpuBackend::fill_inputs(int iteration) {
  if (!prepared_) throw InvalidInput("cpu backend: fill_inputs() before prepare()");
  if (user_buffers_ && plan_.count > 0 && buffers_[0][0].data == nullptr) {
    throw InvalidInput("cpu backend: fill_inputs() before run_on() bound the caller buffers");
  }
  const int ranks = plan_.ranks();
  if (plan_.collective != Collective::kAllReduce) {  // all-gather, reduce-scatter (issue 17)
    parallel_for(ranks, plan_.count * ranks, [&](int r) {
      fill_collective_input(buffers_[static_cast<std::size_t>(r)][0].data, type_, op_, plan_.collective, ranks, r,
                            plan_.count, iteration, plan_.blocks);
    });
    return;
  }
  // Split each rank's buffer into pieces so both a few large and many small ranks parallelise.
  constexpr int kPieces = 4;
  parallel_for(ranks * kPieces, plan_.count * ranks, [&](int i) {
    const int r = i / kPieces;
    const auto [off, n] = even_piece(plan_.count, kPieces, i % kPieces);
    fill_input(buffers_[static_cast<std::size_t>(r)][0].data + static_cast<std::size_t>(off) * elem_, type_, op_, ranks,
               r, off, n, iteration);
  });
}

std::int64_t CpuBackend::count_wrong(int iteration) {
  if (!prepared_) throw InvalidInput("cpu backend: count_wrong() before prepare()");
  if (user_buffers_ && plan_.count > 0 && buffers_[0][0].data == nullptr) {
    throw InvalidInput("cpu backend: count_wrong() before run_on() bound the caller buffers");
  }
  const int ranks = plan_.ranks();
  const std::int64_t count = plan_.count;
  if (plan_.collective != Collective::kAllReduce) {  // all-gather, reduce-scatter (issue 17)
    std::vector<std::int64_t> wrong(static_cast<std::size_t>(ranks), 0);
    parallel_for(ranks, count * ranks, [&](int r) {
      wrong[static_cast<std::size_t>(r)] =
          count_collective_wrong(buffers_[static_cast<std::size_t>(r)][0].data, type_, op_, plan_.collective, ranks, r,
                                 count, iteration, plan_.blocks);
    });
    std::int64_t total = 0;
    for (std::int64_t w : wrong) total += w;
    return total;
  }
  std::vector<std::byte> expected(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * elem_);
  constexpr int kPieces = 16;
  parallel_for(kPieces, count * ranks, [&](int i) {
    const auto [off, n] = even_piece(count, kPieces, i);
    fill_expected(expected.data() + static_cast<std::size_t>(off) * elem_, type_, op_, ranks, off, n, iteration);
  });
  std::vector<std::int64_t> wrong(static_cast<std::size_t>(ranks), 0);
  parallel_for(ranks, count * ranks, [&](int r) {
    wrong[static_cast<std::size_t>(r)] =
        count_mismatches(buffers_[static_cast<std::size_t>(r)][0].data, expected.data(), type_, op_, count);
  });
  std::int64_t total = 0;
  for (std::int64_t w : wrong) total += w;
  return total;
}

std::vector<int> CpuBackend::local_ranks() const {
  std::vector<int> out(static_cast<std::size_t>(prepared_ ? plan_.ranks() : 0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int>(i);
  return out;
}

std::unique_ptr<HarnessBackend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace artune
