#include "artune/executor/mpi/mpi_backend.hpp"

#include <fmt/format.h>
// The C++ bindings are deprecated and warn under -Wextra; only the C API is used.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/executor/mpi/launcher.hpp"
#include "artune/executor/mpi/mpi_init.hpp"
#include "artune/executor/mpi/peer_wait.hpp"
#include "artune/executor/mpi/root_notice.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/executor/test_fault.hpp"
#include "artune/executor/harness/verification.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

namespace {

using Clock = std::chrono::steady_clock;

// How long a rank other than 0 that gave up waits for rank 0's announcement that it reports (RootNotice)
// before it reports itself: ranks of one plan stall within milliseconds of one another, so rank 0, when
// it is alive, gives up and announces within this time; it is served in full only when rank 0 is the rank
// that stopped.
constexpr double kRootNoticeSeconds = 3.0;
// How long a rank that got rank 0's announcement waits, silent, for rank 0's MPI_Abort to end it (which
// can take a few seconds to reach every process on a loaded machine) before it ends the job itself.
constexpr double kRootAbortSeconds = 10.0;

void mpi_check(int rc, const char* call) { check_mpi(rc, call, "mpi backend: "); }

// MPI_Op bodies for the 16-bit floats (MPI has no such types): inout ⊕= in.
template <typename Tag, ReduceOp OP>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  kernels::reduce_loop<Tag, OP>(static_cast<typename Tag::T*>(inout), static_cast<const typename Tag::T*>(in), *len);
}

template <typename Tag>
MPI_User_function* user_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return &user_reduce<Tag, ReduceOp::kSum>;
    case ReduceOp::kProd: return &user_reduce<Tag, ReduceOp::kProd>;
    case ReduceOp::kMin: return &user_reduce<Tag, ReduceOp::kMin>;
    case ReduceOp::kMax: return &user_reduce<Tag, ReduceOp::kMax>;
  }
  return &user_reduce<Tag, ReduceOp::kSum>;
}

// Rethrows as the subclass of the code, so callers can catch InvalidInput, Timeout, ….
[[noreturn]] void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kInvalidInput: throw InvalidInput(message);
    case ErrorCode::kUnsupported: throw Unsupported(message);
    case ErrorCode::kBackendFailure: throw BackendFailure(message);
    case ErrorCode::kTimeout: throw Timeout(message);
    case ErrorCode::kWrongResult:
    case ErrorCode::kInternal: break;
  }
  throw Error(code, message);
}

int encode(ErrorCode code) { return static_cast<int>(code) + 1; }
ErrorCode decode(int v) { return static_cast<ErrorCode>(v - 1); }

/// Whether the ranks of `comm` on this machine outnumber its cores.
bool ranks_outnumber_cores(MPI_Comm comm) {
  MPI_Comm local = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) != MPI_SUCCESS) return false;
  int ranks = 1;
  MPI_Comm_size(local, &ranks);
  MPI_Comm_free(&local);
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 && static_cast<unsigned>(ranks) > cores;
}

class MpiBackend final : public HarnessBackend {
 public:
  explicit MpiBackend(const BackendOptions& options) : options_(options) {
    // Saturate: a huge timeout must not overflow `now + timeout` deadline arithmetic.
    options_.timeout_s = effective_timeout_s(options_.timeout_s);
    own_mpi_ = ensure_mpi();
    const MPI_Comm parent =
        options.mpi_comm != nullptr ? *static_cast<const MPI_Comm*>(options.mpi_comm) : MPI_COMM_WORLD;
    mpi_check(MPI_Comm_dup(parent, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int flag = 0;
    int* ub = nullptr;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag && ub != nullptr ? *ub : 32767;
    mpi_check(MPI_Type_contiguous(2, MPI_BYTE, &type16_), "MPI_Type_contiguous");
    mpi_check(MPI_Type_commit(&type16_), "MPI_Type_commit");
    notice_ = std::make_unique<RootNotice>(comm_);
    fault_ = read_test_fault();
    machine_index_ = declared_machine_index(options.machine_index);
    waiter_.set_oversubscribed(ranks_outnumber_cores(comm_));
  }

  ~MpiBackend() override {
    if (failed_) {
      // A peer is stuck or gone: collectives would hang, so end the whole job. Rank 0 reports (its caller
      // prints the exception) after announcing it; another rank waits for that announcement, then silently
      // for rank 0's MPI_Abort, and speaks only when none came (rank 0 is the one stuck).
      if (rank_ != 0) {
        if (notice_->wait(kRootNoticeSeconds)) {
          std::this_thread::sleep_for(std::chrono::duration<double>(kRootAbortSeconds));
        } else {
          // One survivor at a time: rank r waits r − 1 s, so that the lowest one's MPI_Abort usually ends the job
          // before the next calls it. Aborts from several ranks at once could crash Open MPI 4.1's mpirun in its
          // PMIx log handler (orte_rml_oob_send_buffer_nb: exit 139 instead of the ranks' 3).
          std::this_thread::sleep_for(std::chrono::seconds(rank_ - 1));
          std::fprintf(stderr, "artune: rank %d: %s (rank 0 did not report within %g s)\n", rank_,
                       failure_message_.c_str(), kRootNoticeSeconds);
        }
      }
      std::fflush(stdout);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, exit_status(failure_code_));
    }
    // A backend outliving MPI (a Python program whose objects go after MPI_Finalize) has nothing to free.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& [members, comm] : comms_) {
      if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
    for (auto& [key, op] : user_ops_) MPI_Op_free(&op);
    MPI_Type_free(&type16_);
    notice_.reset();
    MPI_Comm_free(&comm_);
    if (own_mpi_) MPI_Finalize();
  }

  void prepare(const Plan& plan, DataType type, ReduceOp op) override { prepare_impl(plan, type, op, false); }
  void prepare_for_user_buffers(const Plan& plan, DataType type, ReduceOp op) override {
    prepare_impl(plan, type, op, true);
  }

  // Rebinds the slots that touch this rank's buffer 0 to the caller's memory, then runs.
  void run_on(std::span<void* const> user) override {
    require_prepared("run_on");
    if (user.size() != 1)
      throw InvalidInput(fmt::format("mpi backend: run_on() got {} buffers for 1 rank", user.size()));
    auto* base = static_cast<std::byte*>(user[0]);
    if (base == nullptr && plan_.count > 0) throw InvalidInput("mpi backend: null buffer");
    if (base != user0_) {
      user0_ = base;
      for (Slot& s : slots_) {
        if (s.local0 >= 0) s.local = base + s.local0;
        if (s.remote0 >= 0) s.remote = base + s.remote0;
      }
    }
    run();
  }

  void prepare_impl(const Plan& plan, DataType type, ReduceOp op, bool user_buffers) {
    prepared_ = false;
    ErrorCode code = ErrorCode::kInvalidInput;
    std::string message;
    bool local_ok = true;
    try {
      prepare_local(plan, type, op, user_buffers);
    } catch (const Error& e) {
      local_ok = false;
      code = e.code();
      message = e.what();
    }
    agree(local_ok, code, message, "prepare");
    create_communicators();
    prepared_ = true;
  }

  void fill_inputs(int iteration) override {
    require_prepared("fill_inputs");
    if (plan_.collective != Collective::kAllReduce) {  // all-gather, reduce-scatter (issue 17)
      fill_collective_input(rank_buffer0(), type_, op_, plan_.collective, plan_.ranks(), rank_, plan_.count, iteration,
                            plan_.blocks);
      return;
    }
    fill_input(rank_buffer0(), type_, op_, plan_.ranks(), rank_, 0, plan_.count, iteration);
  }

  void run() override;

  std::int64_t count_wrong(int iteration) override {
    require_prepared("count_wrong");
    if (plan_.collective != Collective::kAllReduce) {  // all-gather, reduce-scatter (issue 17)
      return count_collective_wrong(rank_buffer0(), type_, op_, plan_.collective, plan_.ranks(), rank_, plan_.count,
                                    iteration, plan_.blocks);
    }
    std::vector<std::byte> expected(static_cast<std::size_t>(std::max<std::int64_t>(plan_.count, 1)) * elem_);
    fill_expected(expected.data(), type_, op_, plan_.ranks(), 0, plan_.count, iteration);
    return count_mismatches(rank_buffer0(), expected.data(), type_, op_, plan_.count);
  }

  // Every rank sees the same plan and world size, so every rank refuses alike before anything is printed or
  // communicated, and the job ends with MPI finalised instead of an abort.
  void check_plan(const Plan& plan, DataType type) const override {
    (void)type;
    check_rank_count(plan);
  }

  std::vector<int> local_ranks() const override { return {rank_}; }
  bool is_root() const override { return rank_ == 0; }
  double all_sum(double value) override { return reduce_scalar(value, MPI_SUM, "all_sum"); }
  double all_max(double value) override { return reduce_scalar(value, MPI_MAX, "all_max"); }
  std::string_view name() const override { return "mpi"; }
  std::string_view group_op_name(Collective c) const override {
    switch (c) {
      case Collective::kAllReduce: return "MPI_Iallreduce";
      case Collective::kBroadcast: return "MPI_Ibcast";
      case Collective::kReduce: return "MPI_Ireduce";
      case Collective::kReduceScatter: return "MPI_Ireduce_scatter";
      case Collective::kAllGather: return "MPI_Iallgatherv";
    }
    return "MPI";
  }

 private:
  enum class State { kWaiting, kStarted, kDone };

  struct Slot {
    Action action;
    std::byte* local = nullptr;
    const std::byte* remote = nullptr;  // local copy/reduce source
    std::ptrdiff_t local0 = -1;         // byte offsets into this rank's buffer 0 (-1: elsewhere), for run_on
    std::ptrdiff_t remote0 = -1;
    int peer_rank = -1;
    int count = 0;
    std::vector<std::byte> staging;  // received reduce / reduce-scatter result
    // Group ops.
    int comm_index = -1;
    int position = -1;  // this rank's position in the group
    int root_position = -1;
    std::vector<int> counts, displs;  // shards
    std::vector<int> dependents;      // slots waiting on this one
    int deps_total = 0;
    // Per run.
    int deps_left = 0;
    State state = State::kWaiting;
  };

  void check_rank_count(const Plan& plan) const {
    if (plan.ranks() != size_) {
      throw InvalidInput(
          fmt::format("mpi backend: the plan has {} ranks but mpirun started {} processes (use mpirun -np {})",
                      plan.ranks(), size_, plan.ranks()));
    }
  }

  void require_prepared(const char* what) const {
    if (!prepared_) throw InvalidInput(fmt::format("mpi backend: {}() before prepare()", what));
  }

  // This rank's buffer 0: the caller's (bound by run_on) for a plan prepared for user buffers.
  std::byte* rank_buffer0() {
    if (user_buffers_) {
      if (user0_ == nullptr && plan_.count > 0) throw InvalidInput("mpi backend: no caller buffer bound (run_on)");
      return user0_;
    }
    return buffers_.at(static_cast<std::size_t>(rank_)).at(0).data();
  }

  template <typename E>
  [[noreturn]] void fail(const E& e) {
    failed_ = true;
    failure_code_ = e.code();
    failure_message_ = e.what();  // printed by the destructor, only if rank 0 does not end the job first
    if (rank_ == 0) notice_->announce();
    throw e;
  }

  // Waits for one request, polling, with the backend's timeout.
  void wait_request(MPI_Request& req, const char* what) {
    const auto since = Clock::now();
    const auto deadline = since + std::chrono::duration<double>(options_.timeout_s);
    waiter_.progress();
    for (;;) {
      int done = 0;
      mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (Clock::now() > deadline) {
        fail(Timeout(fmt::format("mpi backend: {} did not complete within {} s (a peer stopped or died)", what,
                                 options_.timeout_s)));
      }
      waiter_.idle(since);
    }
  }

  double reduce_scalar(double value, MPI_Op op, const char* what) {
    double out = 0;
    MPI_Request req;
    mpi_check(MPI_Iallreduce(&value, &out, 1, MPI_DOUBLE, op, comm_, &req), "MPI_Iallreduce");
    wait_request(req, what);
    return out;
  }

  // Every rank learns whether all ranks succeeded; the first failing rank's message reaches
  // rank 0, so exactly one process reports it. Throws on every rank when any failed.
  void agree(bool ok, ErrorCode code, const std::string& message, const char* what) {
    int in[2] = {ok ? 0 : encode(code), ok ? INT_MAX : rank_};
    int worst = 0;
    int first = INT_MAX;
    MPI_Request reqs[2];
    mpi_check(MPI_Iallreduce(&in[0], &worst, 1, MPI_INT, MPI_MAX, comm_, &reqs[0]), "MPI_Iallreduce");
    wait_request(reqs[0], what);
    mpi_check(MPI_Iallreduce(&in[1], &first, 1, MPI_INT, MPI_MIN, comm_, &reqs[1]), "MPI_Iallreduce");
    wait_request(reqs[1], what);
    if (worst == 0) return;
    std::string text = message;
    const int agree_tag = tag_ub_;  // above every op id (prepare_local checks ops ≤ tag_ub_)
    if (first != 0) {
      if (rank_ == first) {
        MPI_Request req;
        mpi_check(MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, agree_tag, comm_, &req),
                  "MPI_Isend");
        wait_request(req, what);
      } else if (rank_ == 0) {
        MPI_Status status;
        int arrived = 0;
        const auto deadline = Clock::now() + std::chrono::duration<double>(options_.timeout_s);
        while (!arrived) {
          mpi_check(MPI_Iprobe(first, agree_tag, comm_, &arrived, &status), "MPI_Iprobe");
          if (!arrived && Clock::now() > deadline) break;
          if (!arrived) sched_yield();
        }
        if (arrived) {
          int len = 0;
          MPI_Get_count(&status, MPI_CHAR, &len);
          text.assign(static_cast<std::size_t>(len), '\0');
          mpi_check(MPI_Recv(text.data(), len, MPI_CHAR, first, agree_tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
        }
        text = fmt::format("rank {}: {}", first, text);
      }
    }
    if (!ok) throw_error(code, message);
    throw_error(decode(worst), rank_ == 0 ? text : fmt::format("mpi backend: {} failed on rank {}", what, first));
  }

  void prepare_local(const Plan& plan, DataType type, ReduceOp op, bool user_buffers);
  void create_communicators();
  MPI_Datatype datatype() const;
  MPI_Op reduction();
  void start(int slot);
  void finish(int slot);
  void start_group(Slot& s);
  std::string describe(const Slot& s) const;
  [[noreturn]] void stuck();

  BackendOptions options_;
  bool own_mpi_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  MPI_Datatype type16_ = MPI_DATATYPE_NULL;
  TestFault fault_;
  int machine_index_ = -1;
  int runs_ = 0;
  bool failed_ = false;
  ErrorCode failure_code_ = ErrorCode::kBackendFailure;
  std::string failure_message_;
  std::unique_ptr<RootNotice> notice_;  // who reports a failure (see the destructor)
  PeerWaiter waiter_;                    // how run() and wait_request() wait for peers

  bool prepared_ = false;
  bool user_buffers_ = false;  // buffer 0 of this rank is the caller's (run_on)
  std::byte* user0_ = nullptr;
  Plan plan_;
  DataType type_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  std::size_t elem_ = 4;
  std::vector<int> host_;                                     // process of every plan device
  std::vector<std::vector<std::vector<std::byte>>> buffers_;  // [device][buffer], hosted devices only
  std::vector<Slot> slots_;
  std::vector<std::vector<int>> group_members_;  // distinct groups as process lists
  std::vector<std::vector<int>> comm_queue_;     // [comm] slots in plan order
  std::vector<std::size_t> comm_next_;           // [comm] per run: next slot to start
  std::vector<MPI_Comm> plan_comms_;             // [comm] for this plan
  std::map<std::vector<int>, MPI_Comm> comms_;   // cache over plans: process list → communicator
  std::map<std::pair<int, int>, MPI_Op> user_ops_;

  // Run state.
  std::vector<int> ready_;
  std::vector<MPI_Request> requests_;
  std::vector<int> request_slot_;
  int completed_ = 0;
  Clock::time_point last_progress_;
};

void MpiBackend::prepare_local(const Plan& plan, DataType type, ReduceOp op, bool user_buffers) {
  check_plan_shape(plan);
  check_rank_count(plan);
  std::vector<int> machines(plan.devices.size(), 0);
  if (options_.topology != nullptr) machines = device_machines(plan, *options_.topology);
  if (machine_index_ >= 0 && options_.topology != nullptr &&
      machines[static_cast<std::size_t>(rank_)] != machine_index_) {
    throw InvalidInput(
        fmt::format("mpi backend: this rank declares machine {} ({} / ARTUNE_MACHINE_INDEX) but the topology puts "
                    "its device {} on machine {}",
                    machine_index_, parameter("machine_index"), plan.devices[static_cast<std::size_t>(rank_)].name,
                    machines[static_cast<std::size_t>(rank_)]));
  }
  if (static_cast<long long>(plan.ops.size()) > tag_ub_) {
    throw Unsupported(fmt::format("mpi backend: {} ops exceed this MPI's largest tag {}", plan.ops.size(), tag_ub_));
  }
  plan_ = plan;
  type_ = type;
  op_ = op;
  elem_ = element_size(type);
  user_buffers_ = user_buffers;
  user0_ = nullptr;
  host_ = host_processes(plan, machines);
  const ProcessSchedule schedule = split_for_process(plan, host_, rank_);

  {
    // Refuse before allocating: this process holds its own devices' buffers.
    double needed = 0;
    for (int d : schedule.devices) {
      for (std::int64_t n : plan.buffers[static_cast<std::size_t>(d)])
        needed += static_cast<double>(n) * static_cast<double>(elem_);
    }
    check_host_memory(needed, plan.count, type, fmt::format("mpi backend, rank {}", rank_));
  }
  buffers_.assign(plan.devices.size(), {});
  for (int d : schedule.devices) {
    for (std::int64_t n : plan.buffers[static_cast<std::size_t>(d)]) {
      const bool caller_owned = user_buffers && d == rank_ && buffers_[static_cast<std::size_t>(d)].empty();
      buffers_[static_cast<std::size_t>(d)].emplace_back(caller_owned ? 0 : static_cast<std::size_t>(n) * elem_);
    }
  }
  auto offset0 = [&](const Location& l) -> std::ptrdiff_t {
    return user_buffers && l.device == rank_ && l.buffer == 0
               ? static_cast<std::ptrdiff_t>(l.offset) * static_cast<std::ptrdiff_t>(elem_)
               : -1;
  };
  auto address = [&](const Location& l) {
    if (offset0(l) >= 0) return static_cast<std::byte*>(nullptr);  // bound by run_on
    return buffers_[static_cast<std::size_t>(l.device)][static_cast<std::size_t>(l.buffer)].data() +
           static_cast<std::size_t>(l.offset) * elem_;
  };

  // Group member lists as processes; a process holding two members of one group cannot
  // take part in an MPI collective twice.
  const auto groups = distinct_groups(plan);
  group_members_.clear();
  for (const auto& g : groups) {
    std::vector<int> procs;
    for (int d : g) procs.push_back(host_[static_cast<std::size_t>(d)]);
    std::vector<int> sorted = procs;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      throw Unsupported("mpi backend: a group op has two members on one process (a helper inside a group)");
    }
    group_members_.push_back(std::move(procs));
  }
  const auto group_of_op = group_index_of_ops(plan);

  slots_.clear();
  slots_.reserve(schedule.actions.size());
  std::vector<int> slot_of_op(plan.ops.size(), -1);
  comm_queue_.assign(groups.size(), {});
  for (const Action& a : schedule.actions) {
    Slot s;
    s.action = a;
    const std::int64_t n = a.local.count;
    if (n > INT_MAX)
      throw Unsupported(fmt::format("mpi backend: op {} moves {} elements (more than INT_MAX)", a.op, n));
    s.count = static_cast<int>(n);
    s.local = address(a.local);
    s.local0 = offset0(a.local);
    switch (a.kind) {
      case ActionKind::kCopy:
      case ActionKind::kReduce:
        s.remote = address(a.remote);
        s.remote0 = offset0(a.remote);
        break;
      case ActionKind::kSend:
      case ActionKind::kRecv:
        s.peer_rank = host_[static_cast<std::size_t>(a.peer)];
        if (a.kind == ActionKind::kRecv && a.reduce) s.staging.resize(static_cast<std::size_t>(n) * elem_);
        break;
      case ActionKind::kScale: break;
      case ActionKind::kGroup: {
        const Op& op_ref = plan.ops[static_cast<std::size_t>(a.op)];
        s.comm_index = group_of_op[static_cast<std::size_t>(a.op)];
        const int m = static_cast<int>(op_ref.group.size());
        for (int k = 0; k < m; ++k) {
          if (op_ref.group[static_cast<std::size_t>(k)] == a.device) s.position = k;
          if (op_ref.group[static_cast<std::size_t>(k)] == op_ref.root) s.root_position = k;
          const auto [off, cnt] = even_piece(op_ref.dst.count, m, k);
          s.displs.push_back(static_cast<int>(off));
          s.counts.push_back(static_cast<int>(cnt));
        }
        if (op_ref.collective == Collective::kReduceScatter) {
          s.staging.resize(static_cast<std::size_t>(s.counts[static_cast<std::size_t>(s.position)]) * elem_);
        }
        comm_queue_[static_cast<std::size_t>(s.comm_index)].push_back(static_cast<int>(slots_.size()));
        break;
      }
    }
    slot_of_op[static_cast<std::size_t>(a.op)] = static_cast<int>(slots_.size());
    slots_.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    for (int dep : slots_[i].action.deps) {
      const int from = slot_of_op[static_cast<std::size_t>(dep)];
      if (from < 0)
        throw InvalidInput(fmt::format("plan: op {}: local dependency {} has no part here", slots_[i].action.op, dep));
      slots_[static_cast<std::size_t>(from)].dependents.push_back(static_cast<int>(i));
      ++slots_[i].deps_total;
    }
  }
}

void MpiBackend::create_communicators() {
  plan_comms_.clear();
  for (const auto& procs : group_members_) {
    auto it = comms_.find(procs);
    if (it == comms_.end()) {
      // Collective over all ranks, called in the same order everywhere (same plan).
      const auto pos = std::find(procs.begin(), procs.end(), rank_);
      const int color = pos == procs.end() ? MPI_UNDEFINED : 0;
      const int key = pos == procs.end() ? 0 : static_cast<int>(pos - procs.begin());
      MPI_Comm c = MPI_COMM_NULL;
      mpi_check(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split");
      if (c != MPI_COMM_NULL) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
      it = comms_.emplace(procs, c).first;
    }
    plan_comms_.push_back(it->second);
  }
  comm_next_.assign(plan_comms_.size(), 0);
}

MPI_Datatype MpiBackend::datatype() const {
  switch (type_) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kFloat16:
    case DataType::kBFloat16: return type16_;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
    case DataType::kUInt8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op MpiBackend::reduction() {
  if (type_ == DataType::kFloat16 || type_ == DataType::kBFloat16) {
    const auto key =
        std::make_pair(static_cast<int>(type_), static_cast<int>(op_ == ReduceOp::kAvg ? ReduceOp::kSum : op_));
    auto it = user_ops_.find(key);
    if (it == user_ops_.end()) {
      MPI_Op created;
      MPI_User_function* fn =
          type_ == DataType::kFloat16 ? user_function<kernels::F16>(op_) : user_function<kernels::BF16>(op_);
      mpi_check(MPI_Op_create(fn, 1, &created), "MPI_Op_create");
      it = user_ops_.emplace(key, created).first;
    }
    return it->second;
  }
  switch (op_) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

void MpiBackend::start(int index) {
  Slot& s = slots_[static_cast<std::size_t>(index)];
  const Action& a = s.action;
  auto post = [&](MPI_Request req) {
    s.state = State::kStarted;
    requests_.push_back(req);
    request_slot_.push_back(index);
  };
  switch (a.kind) {
    case ActionKind::kCopy:
      if (s.count > 0) std::memcpy(s.local, s.remote, static_cast<std::size_t>(s.count) * elem_);
      finish(index);
      break;
    case ActionKind::kReduce:
      reduce_into(s.local, s.remote, s.count, type_, op_);
      finish(index);
      break;
    case ActionKind::kScale:
      scale_down(s.local, s.count, type_, plan_.ops[static_cast<std::size_t>(a.op)].divisor);
      finish(index);
      break;
    case ActionKind::kSend: {
      MPI_Request req;
      mpi_check(MPI_Isend(s.local, s.count, datatype(), s.peer_rank, a.op, comm_, &req), "MPI_Isend");
      post(req);
      break;
    }
    case ActionKind::kRecv: {
      MPI_Request req;
      void* into = a.reduce ? static_cast<void*>(s.staging.data()) : static_cast<void*>(s.local);
      mpi_check(MPI_Irecv(into, s.count, datatype(), s.peer_rank, a.op, comm_, &req), "MPI_Irecv");
      post(req);
      break;
    }
    case ActionKind::kGroup: {
      // Collectives on one communicator must start in the same order on every member.
      auto& queue = comm_queue_[static_cast<std::size_t>(s.comm_index)];
      auto& next = comm_next_[static_cast<std::size_t>(s.comm_index)];
      if (queue[next] != index) return;  // started when its predecessors are
      for (;;) {
        Slot& g = slots_[static_cast<std::size_t>(queue[next])];
        ++next;
        start_group(g);
        if (next >= queue.size()) break;
        const Slot& following = slots_[static_cast<std::size_t>(queue[next])];
        if (following.deps_left != 0 || following.state != State::kWaiting) break;
      }
      break;
    }
  }
}

void MpiBackend::start_group(Slot& s) {
  const Op& op = plan_.ops[static_cast<std::size_t>(s.action.op)];
  MPI_Comm c = plan_comms_[static_cast<std::size_t>(s.comm_index)];
  const MPI_Datatype dt = datatype();
  MPI_Request req = MPI_REQUEST_NULL;
  switch (op.collective) {
    case Collective::kAllReduce:
      mpi_check(MPI_Iallreduce(MPI_IN_PLACE, s.local, s.count, dt, reduction(), c, &req), "MPI_Iallreduce");
      break;
    case Collective::kBroadcast:
      mpi_check(MPI_Ibcast(s.local, s.count, dt, s.root_position, c, &req), "MPI_Ibcast");
      break;
    case Collective::kReduce:
      if (s.position == s.root_position) {
        mpi_check(MPI_Ireduce(MPI_IN_PLACE, s.local, s.count, dt, reduction(), s.root_position, c, &req),
                  "MPI_Ireduce");
      } else {
        mpi_check(MPI_Ireduce(s.local, nullptr, s.count, dt, reduction(), s.root_position, c, &req), "MPI_Ireduce");
      }
      break;
    case Collective::kReduceScatter:
      mpi_check(MPI_Ireduce_scatter(s.local, s.staging.data(), s.counts.data(), dt, reduction(), c, &req),
                "MPI_Ireduce_scatter");
      break;
    case Collective::kAllGather:
      mpi_check(
          MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s.local, s.counts.data(), s.displs.data(), dt, c, &req),
          "MPI_Iallgatherv");
      break;
  }
  s.state = State::kStarted;
  requests_.push_back(req);
  request_slot_.push_back(static_cast<int>(&s - slots_.data()));
}

void MpiBackend::finish(int index) {
  Slot& s = slots_[static_cast<std::size_t>(index)];
  const Action& a = s.action;
  if (a.kind == ActionKind::kRecv && a.reduce) reduce_into(s.local, s.staging.data(), s.count, type_, op_);
  if (a.kind == ActionKind::kGroup &&
      plan_.ops[static_cast<std::size_t>(a.op)].collective == Collective::kReduceScatter) {
    const auto k = static_cast<std::size_t>(s.position);
    if (s.counts[k] > 0) {
      std::memcpy(s.local + static_cast<std::size_t>(s.displs[k]) * elem_, s.staging.data(),
                  static_cast<std::size_t>(s.counts[k]) * elem_);
    }
  }
  s.state = State::kDone;
  ++completed_;
  last_progress_ = Clock::now();
  for (int d : s.dependents) {
    if (--slots_[static_cast<std::size_t>(d)].deps_left == 0) ready_.push_back(d);
  }
}

std::string MpiBackend::describe(const Slot& s) const {
  const Action& a = s.action;
  const Op& op = plan_.ops[static_cast<std::size_t>(a.op)];
  switch (a.kind) {
    case ActionKind::kSend: return fmt::format("op {} (send to rank {})", a.op, s.peer_rank);
    case ActionKind::kRecv: return fmt::format("op {} (recv from rank {})", a.op, s.peer_rank);
    case ActionKind::kGroup: {
      std::string members;
      for (int p : group_members_[static_cast<std::size_t>(s.comm_index)]) {
        if (!members.empty()) members += ',';
        members += std::to_string(p);
      }
      return fmt::format("op {} ({} with ranks {})", a.op, to_string(op.collective), members);
    }
    default: return fmt::format("op {} ({})", a.op, to_string(a.kind));
  }
}

void MpiBackend::stuck() {
  std::string started;
  std::string waiting;
  int listed = 0;
  for (const Slot& s : slots_) {
    if (s.state == State::kStarted && listed < 4) {
      if (!started.empty()) started += ", ";
      started += describe(s);
      ++listed;
    }
  }
  for (const Slot& s : slots_) {
    if (s.state == State::kWaiting) {
      waiting = describe(s);
      break;
    }
  }
  fail(Timeout(fmt::format("mpi backend: no progress for {} s (a peer stopped or died); waiting on {}{}",
                           options_.timeout_s, started.empty() ? "nothing posted" : started,
                           waiting.empty() ? "" : fmt::format("; next unstarted: {}", waiting))));
}

void MpiBackend::run() {
  require_prepared("run");
  if (user_buffers_ && user0_ == nullptr && plan_.count > 0) {
    throw InvalidInput("mpi backend: a plan prepared for caller buffers runs through run_on()");
  }
  ++runs_;
  if (fault_.fires("stop", rank_, runs_)) std::raise(SIGSTOP);
  if (fault_.fires("kill", rank_, runs_)) std::raise(SIGKILL);
  if (fault_.fires("flip", rank_, runs_) && plan_.count > 0) {
    std::byte* data = rank_buffer0();
    store_from_double(data, type_, 0, load_as_double(data, type_, 0) + 1);
  }

  ready_.clear();
  requests_.clear();
  request_slot_.clear();
  completed_ = 0;
  std::fill(comm_next_.begin(), comm_next_.end(), 0);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].deps_left = slots_[i].deps_total;
    slots_[i].state = State::kWaiting;
  }
  for (std::size_t i = slots_.size(); i-- > 0;) {
    if (slots_[i].deps_total == 0) ready_.push_back(static_cast<int>(i));
  }
  last_progress_ = Clock::now();
  const auto timeout = std::chrono::duration<double>(options_.timeout_s);
  const int total = static_cast<int>(slots_.size());
  std::vector<int> indices;
  waiter_.progress();
  while (completed_ < total) {
    while (!ready_.empty()) {
      const int i = ready_.back();
      ready_.pop_back();
      if (slots_[static_cast<std::size_t>(i)].state == State::kWaiting) start(i);
    }
    if (completed_ == total) break;
    int outcount = 0;
    if (!requests_.empty()) {
      indices.resize(requests_.size());
      mpi_check(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &outcount, indices.data(),
                             MPI_STATUSES_IGNORE),
                "MPI_Testsome");
      if (outcount == MPI_UNDEFINED) outcount = 0;
      for (int j = 0; j < outcount; ++j)
        finish(request_slot_[static_cast<std::size_t>(indices[static_cast<std::size_t>(j)])]);
      if (outcount > 0) {
        // Drop finished requests (Testsome set them to MPI_REQUEST_NULL).
        std::size_t w = 0;
        for (std::size_t r = 0; r < requests_.size(); ++r) {
          if (requests_[r] != MPI_REQUEST_NULL) {
            requests_[w] = requests_[r];
            request_slot_[w] = request_slot_[r];
            ++w;
          }
        }
        requests_.resize(w);
        request_slot_.resize(w);
      }
    }
    if (outcount == 0 && ready_.empty()) {
      if (waiter_.idle(last_progress_) && Clock::now() - last_progress_ > timeout) stuck();
    } else {
      waiter_.progress();
    }
  }
}

}  // namespace

std::unique_ptr<HarnessBackend> make_mpi_backend(const BackendOptions& options) {
  return std::make_unique<MpiBackend>(options);
}

}  // namespace artune
