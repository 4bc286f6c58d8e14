#pragma once
// The cpu backend: one process, one worker thread per plan device (helpers
// included), host buffers, real reductions. It is the correctness reference
// of the executor and is built to be fast:
//
//  * Pull model. Every copy/reduce runs on the thread of its destination
//    device, reading the source straight from the other device's memory (one
//    pass, no staging copy — what MPI's shared-memory transports cannot do).
//    A send therefore costs its sender nothing.
//  * Dependencies without barriers. Each op has a completion word holding the
//    run generation it last finished in; a thread runs its ops in plan order,
//    each after all its deps (local and remote) carry the current generation,
//    sleeping on the word (futex through std::atomic::wait) rather than
//    spinning. Threads never meet at a global barrier inside a run.
//  * Group ops run cooperatively on the member threads as direct pulls:
//    all-reduce = every member reduces its shard from all others, then a
//    member-only barrier, then every member copies the other shards;
//    reduce-scatter, all-gather, reduce and broadcast are the halves of that.
//
// Running ops in plan order on every thread cannot deadlock: the smallest
// unfinished op has all its deps done and every member thread waiting at it.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "artune/executor/harness/harness.hpp"
#include "artune/executor/schedule.hpp"

namespace artune {

/// The most plan devices the cpu backend runs: it starts one thread per device, and beyond a few hundred
/// threads the OS refuses more (or the run only measures the scheduler). Larger plans: the mpi backend.
inline constexpr int kMaxCpuDevices = 256;

/// The cpu backend (exposed so tests can reach buffers to plant faults).
class CpuBackend final : public HarnessBackend {
 public:
  /// A backend with no plan yet; options.timeout_s bounds a run without progress.
  explicit CpuBackend(const BackendOptions& options);
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  /// Checks the plan's shape, allocates buffers and starts one worker per device.
  void prepare(const Plan& plan, DataType type, ReduceOp op) override;
  /// Refuses plans over kMaxCpuDevices devices (naming -t) or whose buffers exceed host memory (naming -e).
  void check_plan(const Plan& plan, DataType type) const override;
  /// Writes every participant's inputs for `iteration` (in parallel).
  void fill_inputs(int iteration) override;
  /// Runs the plan once; Timeout when no op completes for options.timeout_s.
  void run() override;
  /// Mismatching elements over all participants' buffer 0.
  std::int64_t count_wrong(int iteration) override;
  /// All participants (0 .. ranks-1).
  std::vector<int> local_ranks() const override;
  /// "cpu".
  std::string_view name() const override { return "cpu"; }
  /// "cpu group op": group ops run cooperatively on the member threads.
  std::string_view group_op_name(Collective) const override { return "cpu group op"; }
  /// True: retarget() rebuilds the task lists in place.
  bool retargets() const override { return true; }

  /// Like prepare(), without allocating the ranks' buffer 0: the plan runs only through run_on.
  void prepare_for_user_buffers(const Plan& plan, DataType type, ReduceOp op) override;
  /// Rebuilds the task lists for `plan` (same_shape as the prepared one, its scratch within the allocated
  /// buffers) over the same buffers and workers.
  bool retarget(const Plan& plan) override;
  /// Runs the prepared plan on caller memory: rank r's buffer 0 is user[r] (pulls read it directly).
  void run_on(std::span<void* const> user) override;

  /// Start of buffer `buffer` of plan device `device` (tests plant faults through it).
  void* buffer_data(int device, int buffer);

  struct Task;
  /// Where a task's pointer into a rank's buffer 0 sits, so run_on can rebind it (field: -1 dst, -2 src,
  /// k >= 0 group region k).
  struct Fixup {
    int device = 0;
    int task = 0;
    int field = 0;
    int rank = 0;
    std::size_t offset = 0;  ///< bytes from the start of the rank's buffer 0
  };
  struct Buffer {
    std::byte* data = nullptr;
    std::int64_t elements = 0;
    std::int64_t capacity = 0;  ///< elements allocated (a re-targeted plan may use fewer)
  };
  /// A prepared plan held outside the backend: swap_prepared() exchanges it with the backend's current one,
  /// so several plans share one set of workers (the Communicator's plan cache). Empty when default-built.
  class Prepared final : public PlanSlot {
   public:
    Prepared();
    ~Prepared() override;
    Prepared(Prepared&&) noexcept;
    Prepared& operator=(Prepared&&) noexcept;
    /// The plan prepared in it (empty plan when none).
    const Plan& plan() const noexcept { return plan_; }

   private:
    friend class CpuBackend;
    Plan plan_;
    DataType type_ = DataType::kFloat32;
    ReduceOp op_ = ReduceOp::kSum;
    std::size_t elem_ = 4;
    bool prepared_ = false;
    bool user_buffers_ = false;
    std::vector<std::vector<Buffer>> buffers_;
    std::vector<std::unique_ptr<std::byte[], void (*)(void*)>> storage_;
    std::vector<std::vector<Task>> tasks_;
    std::vector<Fixup> fixups_;
    std::unique_ptr<std::atomic<std::uint32_t>[]> done_;
    std::unique_ptr<std::atomic<std::uint32_t>[]> arrive_;
    std::unique_ptr<std::atomic<std::uint32_t>[]> finish_;
    std::uint32_t gen_ = 0;
  };
  /// Exchanges the backend's prepared plan with `other` (between runs only; workers are kept).
  void swap_prepared(Prepared& other) noexcept;
  /// The communicator's plan cache keeps every plan in a Prepared of its own, on this backend's workers.
  bool holds_slots() const override { return true; }
  /// An empty Prepared.
  std::unique_ptr<PlanSlot> new_slot() override { return std::make_unique<Prepared>(); }
  /// swap_prepared() on a slot new_slot() made.
  void swap_slot(PlanSlot& slot) override { swap_prepared(static_cast<Prepared&>(slot)); }
  /// Worker threads the backend owns now (the most devices of any plan prepared so far).
  std::size_t worker_count() const override { return threads_.size(); }

 private:
  void prepare_impl(const Plan& plan, DataType type, ReduceOp op, bool user_buffers);
  void build_tasks(const std::vector<DeviceSchedule>& schedules);

  void stop_workers();
  void worker(int device, std::uint32_t seen);
  bool wait_done(int op, std::uint32_t gen);
  void execute(const Task& task, std::uint32_t gen);
  void run_group(const Task& task, std::uint32_t gen);
  void finish(int op, std::uint32_t gen);
  std::byte* address(const Location& l) const;

  BackendOptions options_;
  Plan plan_;
  DataType type_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  std::size_t elem_ = 4;
  bool prepared_ = false;
  bool broken_ = false;  // a run timed out: workers may be stuck, no further runs
  int runs_ = 0;         // run() calls over the backend's lifetime (test faults count them)
  int flip_rank_ = -1;   // ARTUNE_TEST_FAULT=flip:rankR:iterN (tests only)
  int flip_run_ = -1;
  bool user_buffers_ = false;  // prepared by prepare_for_user_buffers: ranks' buffer 0 is the caller's

  std::vector<std::vector<Buffer>> buffers_;  // [device][buffer]
  std::vector<std::unique_ptr<std::byte[], void (*)(void*)>> storage_;
  std::vector<std::vector<Task>> tasks_;  // [device]
  std::vector<Fixup> fixups_;             // pointers into ranks' buffer 0

  std::unique_ptr<std::atomic<std::uint32_t>[]> done_;    // [op] generation of last completion
  std::unique_ptr<std::atomic<std::uint32_t>[]> arrive_;  // [op] group phase barrier
  std::unique_ptr<std::atomic<std::uint32_t>[]> finish_;  // [op] group members finished
  std::atomic<std::uint32_t> start_gen_{0};
  std::uint32_t gen_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<std::uint64_t> progress_{0};
  std::atomic<int> remaining_{0};
  std::mutex mutex_;
  std::condition_variable finished_cv_;
  std::vector<std::thread> threads_;
};

/// Creates the cpu backend.
std::unique_ptr<HarnessBackend> make_cpu_backend(const BackendOptions& options);

}  // namespace artune
