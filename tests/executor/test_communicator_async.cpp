// artune::Communicator's asynchronous calls (Request) on the cpu backend, and the options of issue 29: the cost
// profile that follows the backend (profile, calibration, tune_sizes; one warning line for a table or overlay of
// another profile), what a plan's library ops run as (PlanInfo::runs_as, dump_cache), and plan labels as specs.

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/search.hpp"
#include "artune/topology/io/io.hpp"
#include "tests/executor/comm_threads.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using artune_test::code_of;
using artune_test::message_of;
using artune_test::on_threads;
using artune_test::require_no_errors;

namespace {

CommOptions spec_options(const std::string& topology, const std::string& spec) {
  CommOptions o;
  o.topology = topology;
  o.spec = spec;
  return o;
}

// What `fn` writes to stderr (file descriptor 2, where the communicator warns).
template <typename F>
std::string stderr_of(F&& fn) {
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = dup(2);
  dup2(fileno(capture), 2);
  try {
    fn();
  } catch (...) {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::fclose(capture);
    throw;
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  std::rewind(capture);
  for (int c = std::fgetc(capture); c != EOF; c = std::fgetc(capture)) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}

}  // namespace

TEST_CASE("communicator_async.requests_run_in_call_order_with_synchronous_calls_between") {
  auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:4", "rechd"), 4);
  constexpr std::int64_t n = 1001;
  std::vector<std::vector<double>> a(4, std::vector<double>(n)), b(4, std::vector<double>(n)), c(4);
  std::vector<std::vector<std::int32_t>> gathered(4, std::vector<std::int32_t>(4 * 3));
  std::vector<std::vector<std::int32_t>> blocks(4);
  require_no_errors(on_threads(comms, [&](int r) {
    auto& comm = comms[static_cast<std::size_t>(r)];
    const auto i = static_cast<std::size_t>(r);
    for (std::int64_t k = 0; k < n; ++k) {
      a[i][static_cast<std::size_t>(k)] = static_cast<double>(r + k);
      b[i][static_cast<std::size_t>(k)] = static_cast<double>(r);
    }
    c[i].assign(n, static_cast<double>(10 * r));
    blocks[i] = {3 * r, 3 * r + 1, 3 * r + 2};
    Request ra = comm.allreduce_async(a[i].data(), a[i].data(), n, DataType::kFloat64, ReduceOp::kSum);
    Request rb = comm.allreduce_async(b[i].data(), b[i].data(), n, DataType::kFloat64, ReduceOp::kMax);
    // A synchronous call queues behind the rank's calls in flight: same order on every rank.
    comm.allreduce(c[i].data(), c[i].data(), n, DataType::kFloat64, ReduceOp::kMin);
    CHECK(ra.done());
    CHECK(rb.done());
    Request rg = comm.allgather_async(blocks[i].data(), gathered[i].data(), 3, DataType::kInt32);
    CHECK(rg.wait_for(60));
    ra.wait();
    rb.wait();
    rb.wait();  // waiting again returns at once
  }));
  for (std::size_t r = 0; r < 4; ++r) {
    CHECK(a[r][7] == 4 * 7 + 6);
    CHECK(b[r][n - 1] == 3);
    CHECK(c[r][0] == 0);
    for (int k = 0; k < 12; ++k) CHECK(gathered[r][static_cast<std::size_t>(k)] == k);
  }
  CHECK(Request().done());
  Request().wait();
}

TEST_CASE("communicator_async.a_synchronous_call_in_on_done_runs_at_once") {
  // Rank 0's second call is made from the first one's callback, on its progress thread (queued, it would wait for
  // itself); rank 1 makes both synchronously.
  CommOptions o = spec_options("uniform:2", "xring");
  o.timeout_s = 20;
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 2);
  std::vector<std::vector<float>> first(2, std::vector<float>(8, 1.0f)), second(2, std::vector<float>(8, 5.0f));
  std::atomic<bool> nested_done{false};
  std::exception_ptr nested_error;
  require_no_errors(on_threads(comms, [&](int r) {
    auto& comm = comms[static_cast<std::size_t>(r)];
    const auto i = static_cast<std::size_t>(r);
    if (r == 0) {
      Request req = comm.allreduce_async(first[i].data(), first[i].data(), 8, DataType::kFloat32, ReduceOp::kSum);
      req.on_done([&](std::exception_ptr) {
        try {
          comm.allreduce(second[i].data(), second[i].data(), 8, DataType::kFloat32, ReduceOp::kSum);
        } catch (...) {
          nested_error = std::current_exception();
        }
        nested_done = true;
      });
      req.wait();
      while (!nested_done) std::this_thread::yield();
    } else {
      comm.allreduce(first[i].data(), first[i].data(), 8, DataType::kFloat32, ReduceOp::kSum);
      comm.allreduce(second[i].data(), second[i].data(), 8, DataType::kFloat32, ReduceOp::kSum);
    }
  }));
  CHECK_FALSE(nested_error);
  CHECK(first[0][0] == 2.0f);
  CHECK(second[0][7] == 10.0f);
  CHECK(second[1][0] == 10.0f);
}

TEST_CASE("communicator_async.on_done_and_wait_see_a_missing_rank_as_a_timeout") {
  CommOptions o = spec_options("uniform:2", "xring");
  o.timeout_s = 0.3;
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 2);
  std::vector<float> data(16, 1.0f);
  Request r = comms[0].allreduce_async(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  std::atomic<int> calls{0};
  std::exception_ptr seen;
  std::atomic<bool> seen_set{false};
  r.on_done([&](std::exception_ptr e) {
    seen = e;
    seen_set = true;
    ++calls;
  });
  CHECK_FALSE(r.wait_for(0.0));  // still waiting for rank 1 (for 0.3 s)
  std::exception_ptr waited;
  try {
    r.wait();
  } catch (...) {
    waited = std::current_exception();
  }
  REQUIRE(waited);
  CHECK(code_of(waited) == ErrorCode::kTimeout);
  CHECK(message_of(waited).find("1 of 2 ranks did not call allreduce within 0.3 s") != std::string::npos);
  while (!seen_set) std::this_thread::yield();
  CHECK(code_of(seen) == ErrorCode::kTimeout);
  // A callback added after the end runs at once, on this thread.
  r.on_done([&](std::exception_ptr e) {
    CHECK(e);
    ++calls;
  });
  CHECK(calls == 2);
  // The group is broken: the next call, asynchronous or not, fails at once with the reason.
  Request next = comms[1].allreduce_async(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  CHECK_THROWS_AS(next.wait(), Timeout);
  CHECK_THROWS_AS(comms[1].allreduce(data.data(), data.data(), 16, DataType::kFloat32, ReduceOp::kSum), Timeout);
  CHECK_THROWS_WITH_AS(r.wait_for(-1), "Request::wait_for: -1 s is not >= 0", InvalidInput);
}

TEST_CASE("communicator_async.bad_input_throws_at_submission") {
  auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:1", "xring"), 1);
  std::vector<float> a(8, 1.0f);
  using artune_test::error_of;
  CHECK(error_of([&] { (void)comms[0].allreduce_async(a.data(), a.data(), -1, DataType::kFloat32, ReduceOp::kSum); }) ==
        "allreduce: count -1 is negative");
  CHECK(error_of([&] {
          (void)comms[0].allreduce_async(a.data(), a.data() + 2, 4, DataType::kFloat32, ReduceOp::kSum);
        }) == "allreduce: send and recv overlap without being the same buffer");
  CHECK(error_of([&] {
          (void)comms[0].reducescatter_async(a.data(), a.data() + 1, 4, DataType::kFloat32, ReduceOp::kSum);
        }) == "reducescatter: recv overlaps send without being this rank's block of it");
  int fake_stream = 0;
  CHECK(error_of([&] { (void)comms[0].allgather_async(a.data(), a.data(), 4, DataType::kFloat32, &fake_stream); }) ==
        "allgather: a stream is for the cuda and nccl backends");
}

TEST_CASE("communicator_async.a_dropped_communicator_finishes_its_call") {
  std::vector<std::vector<float>> data(2, std::vector<float>(100, 2.0f));
  Request pending;
  {
    auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:2", "xring"), 2);
    pending = comms[0].allreduce_async(data[0].data(), data[0].data(), 100, DataType::kFloat32, ReduceOp::kSum);
    Communicator keep = std::move(comms[1]);
    comms.clear();  // rank 0's handle goes; its call in flight holds the group
    keep.allreduce(data[1].data(), data[1].data(), 100, DataType::kFloat32, ReduceOp::kSum);
  }  // the last handle goes: the group ends on the progress thread that finishes the call, or here
  pending.wait();
  CHECK(data[0][99] == 4.0f);
  CHECK(data[1][0] == 4.0f);
}

TEST_CASE("communicator_options.the_cost_profile_follows_the_backend") {
  CommOptions o;
  o.topology = "uniform:2";
  o.tune_sizes = {64, 4096};
  auto cpu = Communicator::create_local(BackendKind::kCpu, o, 2);
  CHECK(cpu[0].profile() == "cpu");
  CHECK(cpu[0].size_buckets() == std::vector<std::uint64_t>{64, 4096});
  o.profile = "nccl";
  CHECK(Communicator::create_local(BackendKind::kCpu, o, 2)[0].profile() == "nccl");
  CHECK(Communicator::create_local(BackendKind::kCpu, spec_options("uniform:2", "xring"), 2)[0].profile().empty());
  o.profile = "gpu";
  CHECK_THROWS_WITH_AS(Communicator::create_local(BackendKind::kCpu, o, 2), doctest::Contains("parameter profile"),
                       InvalidInput);

  artune_test::ScratchDir dir("artune-comm-profile");
  const std::string overlay = (dir.path() / "mpi-calibration.json").string();
  std::ofstream(overlay) << R"({"profile": "mpi", "op_overhead_us": 7.5})";
  o.profile = "";
  o.calibration = overlay;
  // An mpi calibration on the cpu backend: used (its profile), with one warning line.
  std::string warned =
      stderr_of([&] { CHECK(Communicator::create_local(BackendKind::kCpu, o, 2)[0].profile() == "mpi"); });
  CHECK(warned == "artune: warning: the calibration " + overlay +
                      " was priced with the mpi cost profile (host threads), not the cpu backend's (host threads): its "
                      "picks may not be the fastest here (tune for the cpu profile, or measure on the cpu backend)\n");
  o.profile = "cuda";
  CHECK_THROWS_WITH_AS(Communicator::create_local(BackendKind::kCpu, o, 2),
                       doctest::Contains("its profile is mpi, not cuda (parameter profile)"), InvalidInput);
  o.profile = "";
  o.calibration = (dir.path() / "missing.json").string();
  CHECK_THROWS_WITH_AS(Communicator::create_local(BackendKind::kCpu, o, 2), doctest::Contains("parameter calibration"),
                       InvalidInput);

  // A table priced for GPUs (autotune's default profile) on the cpu backend: one warning line per group, however
  // many collectives read it.
  const Topology topo = load_topology("uniform:2");
  SearchOptions s;
  s.sizes = {1024, 65536};
  const std::string table = (dir.path() / "nccl-table.json").string();
  write_decision_table(table, search(topo, s).table);
  CommOptions t;
  t.topology = "uniform:2";
  t.table = table;
  warned = stderr_of([&] {
    auto comms = Communicator::create_local(BackendKind::kCpu, t, 2);
    CHECK(comms[0].profile() == "nccl");
  });
  CHECK(warned == "artune: warning: the table " + table +
                      " was priced with the nccl cost profile (GPUs), not the cpu backend's (host threads): its picks "
                      "may not be the fastest here (tune for the cpu profile, or measure on the cpu backend)\n");
  s.model = CostModel::defaults(BackendProfile::kCpu);
  write_decision_table(table, search(topo, s).table);
  CHECK(stderr_of([&] { (void)Communicator::create_local(BackendKind::kCpu, t, 2); }).empty());
}

TEST_CASE("communicator_options.what_library_ops_run_as_and_plan_labels_as_specs") {
  auto nccl = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:4", "nccl"), 4);
  std::vector<std::vector<float>> data(4, std::vector<float>(10, 1.0f));
  require_no_errors(on_threads(nccl, [&](int r) {
    nccl[static_cast<std::size_t>(r)].allreduce(data[static_cast<std::size_t>(r)].data(),
                                                data[static_cast<std::size_t>(r)].data(), 10, DataType::kFloat32,
                                                ReduceOp::kSum);
  }));
  CHECK(data[3][9] == 4.0f);
  CHECK(nccl[0].last_plan().runs_as == "cpu group op");
  CHECK(nccl[0].dump_cache().rfind("allreduce nccl [runs as cpu group op]  spec  bucket", 0) == 0);

  // A label as tables print it pins the ring order; plain specs have no library ops.
  auto pinned = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:4", "xring perm=0,3,2,1 seg=2"), 4);
  require_no_errors(on_threads(pinned, [&](int r) {
    pinned[static_cast<std::size_t>(r)].allreduce(data[static_cast<std::size_t>(r)].data(),
                                                  data[static_cast<std::size_t>(r)].data(), 10, DataType::kFloat32,
                                                  ReduceOp::kSum);
  }));
  CHECK(data[0][0] == 16.0f);
  CHECK(pinned[0].last_plan().label == "xring perm=0,3,2,1 seg=2");
  CHECK(pinned[0].last_plan().runs_as.empty());
  for (const char* bad : {"xring perm=0,x", "xring colour=red", "xring seg=0"}) {
    INFO(bad);
    auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:1", bad), 1);
    std::vector<float> one(4, 1.0f);
    CHECK_THROWS_WITH_AS(comms[0].allreduce(one.data(), one.data(), 4, DataType::kFloat32, ReduceOp::kSum),
                         doctest::Contains("parameter spec '"), InvalidInput);
  }
}
