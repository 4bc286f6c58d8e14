// The nccl backend's host-side machinery, without NCCL or a GPU: the watchdog that bounds blocking NCCL
// calls (executor/nccl/nccl_watchdog.hpp), the buffer registration bookkeeping (nccl_registry.hpp) and the
// order in which runs are issued, alone and back to back (nccl_issue.hpp).

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/executor/nccl/nccl_issue.hpp"
#include "artune/executor/nccl/nccl_registry.hpp"
#include "artune/executor/nccl/nccl_watchdog.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using nccl::WatchVerdict;

namespace {

// A target with a settable clock, a settable asynchronous error and a counting abort that notes any abort
// coming after the test marked the section as disarmed.
class FakeTarget final : public nccl::WatchTarget {
 public:
  Clock::time_point now() const override { return Clock::time_point(std::chrono::nanoseconds(clock_ns.load())); }
  std::string async_error() override {
    const std::lock_guard lock(error_mutex);
    return error;
  }
  void abort() noexcept override {
    aborts.fetch_add(1);
    if (disarmed.load()) late_aborts.fetch_add(1);
  }
  void advance(double seconds) { clock_ns.fetch_add(static_cast<std::int64_t>(seconds * 1e9)); }

  std::atomic<std::int64_t> clock_ns{1'000'000'000};
  std::atomic<int> aborts{0};
  std::atomic<int> late_aborts{0};
  std::atomic<bool> disarmed{false};
  std::mutex error_mutex;
  std::string error;
};

using std::chrono::microseconds;
using std::chrono::milliseconds;

nccl::Program ring_program(int rank) {
  BuildOptions o;
  o.count = 1000;
  const Plan plan = build_plan(load_topology("uniform:4"), "xring", o);
  return nccl::lower_rank(plan, host_processes(plan, nccl::machines_from_names(plan)),
                          nccl::host_devices_from_names(plan), rank);
}

}  // namespace

TEST_CASE("nccl_watchdog.completes_before_the_deadline_without_abort") {
  FakeTarget t;
  nccl::Watchdog dog(t, milliseconds(1), /*threaded=*/false);
  dog.arm("rank 0: the run", 5);
  t.advance(4.9);
  CHECK_FALSE(dog.check());
  const WatchVerdict v = dog.disarm();
  CHECK(v.kind == WatchVerdict::Kind::kCompleted);
  CHECK(v.message.empty());
  t.advance(100);  // long past the deadline, but disarmed
  CHECK_FALSE(dog.check());
  CHECK(t.aborts == 0);
}

TEST_CASE("nccl_watchdog.a_stall_aborts_once_and_names_the_timeout") {
  FakeTarget t;
  nccl::Watchdog dog(t, milliseconds(1), false);
  dog.arm("rank 1: the run", 5);
  t.advance(4.999);
  CHECK_FALSE(dog.check());
  t.advance(0.001);  // exactly at the deadline
  CHECK(dog.check());
  CHECK(t.aborts == 1);
  CHECK_FALSE(dog.check());  // already fired: never a second abort
  CHECK(t.aborts == 1);
  const WatchVerdict v = dog.disarm();
  CHECK(v.kind == WatchVerdict::Kind::kTimedOut);
  CHECK(v.message ==
        "nccl backend: rank 1: the run did not complete within 5 s (a peer is stuck or gone); communicators aborted");
  // The next section starts clean.
  dog.arm("rank 1: the run", 5);
  CHECK_FALSE(dog.check());
  CHECK(dog.disarm().kind == WatchVerdict::Kind::kCompleted);
  CHECK(t.aborts == 1);
}

TEST_CASE("nccl_watchdog.an_asynchronous_error_aborts_before_the_deadline") {
  FakeTarget t;
  nccl::Watchdog dog(t, milliseconds(1), false);
  dog.arm("rank 2: ncclCommSplit", 60);
  CHECK_FALSE(dog.check());
  t.error = "remote process exited or there was a network error";
  CHECK(dog.check());
  CHECK(t.aborts == 1);
  const WatchVerdict v = dog.disarm();
  CHECK(v.kind == WatchVerdict::Kind::kFailed);
  CHECK(v.message ==
        "nccl backend: rank 2: ncclCommSplit: asynchronous NCCL error: remote process exited or there was a network "
        "error; communicators aborted");
}

TEST_CASE("nccl_watchdog.its_thread_aborts_a_stalled_section") {
  FakeTarget t;
  nccl::Watchdog dog(t, microseconds(200));
  dog.arm("rank 0: the run", 1);
  t.advance(2);
  // The caller would be blocked in a NCCL call or an event wait here; the thread ends it.
  for (int i = 0; i < 100000 && t.aborts == 0; ++i) std::this_thread::sleep_for(microseconds(100));
  CHECK(t.aborts == 1);
  CHECK(dog.disarm().kind == WatchVerdict::Kind::kTimedOut);
}

TEST_CASE("nccl_watchdog.abort_and_disarm_race") {
  // Sections that end right at their deadline while the thread checks every 20 us: either the section
  // completed (no abort) or it fired (exactly one abort, reported by disarm); never an abort after disarm.
  FakeTarget t;
  nccl::Watchdog dog(t, microseconds(20));
  int fired = 0;
  for (int i = 0; i < 300; ++i) {
    t.disarmed = false;
    const int before = t.aborts;
    dog.arm("rank 0: the run", 1);
    t.advance(1);
    for (int k = 0; k < i % 7; ++k) std::this_thread::yield();
    if (i % 10 == 0) std::this_thread::sleep_for(microseconds(200));  // mostly late: the thread fires first
    const WatchVerdict v = dog.disarm();
    t.disarmed = true;
    CHECK(t.aborts - before == (v.fired() ? 1 : 0));
    fired += v.fired() ? 1 : 0;
  }
  std::this_thread::sleep_for(milliseconds(2));
  CHECK(t.late_aborts == 0);
  MESSAGE(fired << " of 300 sections fired");
}

TEST_CASE("nccl_watchdog.teardown_while_armed_never_aborts_afterwards") {
  FakeTarget t;
  for (int i = 0; i < 100; ++i) {
    const int before = t.aborts;
    {
      nccl::Watchdog dog(t, microseconds(10));
      dog.arm("rank 0: teardown", 1);
      t.advance(i % 2 == 0 ? 2.0 : 0.0);  // half of them already late
      for (int k = 0; k < i % 5; ++k) std::this_thread::yield();
    }
    t.disarmed = true;  // destroyed: any abort from now on is late
    CHECK(t.aborts - before <= 1);
    t.disarmed = false;
  }
  CHECK(t.late_aborts == 0);
}

namespace {

struct RegistryLog {
  std::vector<std::string> calls;
  int next_handle = 1;
  bool refuse = false;
  nccl::Registry::Hooks hooks() {
    return {[this](void* comm, void* buffer, std::size_t bytes) -> void* {
              calls.push_back("register c" + std::to_string(reinterpret_cast<std::uintptr_t>(comm)) + " b" +
                              std::to_string(reinterpret_cast<std::uintptr_t>(buffer)) + " " + std::to_string(bytes));
              if (refuse) return nullptr;
              return reinterpret_cast<void*>(static_cast<std::uintptr_t>(100 + next_handle++));
            },
            [this](void* comm, void* handle) {
              calls.push_back("deregister c" + std::to_string(reinterpret_cast<std::uintptr_t>(comm)) + " h" +
                              std::to_string(reinterpret_cast<std::uintptr_t>(handle)));
            }};
  }
};

void* p(std::uintptr_t v) { return reinterpret_cast<void*>(v); }

}  // namespace

TEST_CASE("nccl_registry.each_key_once_deregistered_newest_first") {
  RegistryLog log;
  nccl::Registry reg(log.hooks());
  CHECK(reg.add(p(1), p(10), 100));
  CHECK_FALSE(reg.add(p(1), p(10), 100));  // same communicator, address, bytes: nothing to do
  CHECK(reg.add(p(2), p(10), 100));        // another communicator
  CHECK(reg.add(p(1), p(20), 50));         // another buffer
  CHECK(reg.add(p(1), p(10), 200));        // same address, another size (a reallocation): another key
  CHECK_FALSE(reg.add(p(1), nullptr, 8));  // nothing to register: an empty staging buffer
  CHECK_FALSE(reg.add(p(1), p(30), 0));
  CHECK_FALSE(reg.add(nullptr, p(30), 8));  // no communicator on this rank
  CHECK(reg.size() == 4);
  CHECK(reg.registered() == 4);
  reg.release_all();
  CHECK(reg.size() == 0);
  reg.release_all();  // twice: nothing left
  CHECK(log.calls == std::vector<std::string>{"register c1 b10 100", "register c2 b10 100", "register c1 b20 50",
                                              "register c1 b10 200", "deregister c1 h104", "deregister c1 h103",
                                              "deregister c2 h102", "deregister c1 h101"});
}

TEST_CASE("nccl_registry.refused_aborted_and_destroyed") {
  RegistryLog log;
  {
    nccl::Registry reg(log.hooks());
    log.refuse = true;  // NCCL declined: kept as a key, not retried, nothing to deregister
    CHECK(reg.add(p(1), p(10), 100));
    CHECK_FALSE(reg.add(p(1), p(10), 100));
    CHECK(reg.registered() == 0);
    log.refuse = false;
    CHECK(reg.add(p(1), p(20), 100));
    reg.forget_all();  // the communicators were aborted: their registrations went with them
    CHECK(reg.size() == 0);
    CHECK(reg.add(p(3), p(30), 8));
  }  // the destructor deregisters what is left
  CHECK(log.calls == std::vector<std::string>{"register c1 b10 100", "register c1 b20 100", "register c3 b30 8",
                                              "deregister c3 h102"});
}

TEST_CASE("nccl_registry.buffer_uses_of_a_program") {
  using U = nccl::BufferUse;
  // A ring: every send reads the rank's buffer 0, every receive reduces through staging or lands in buffer 0;
  // all on the all-ranks communicator.
  CHECK(nccl::buffer_uses(ring_program(0)) == std::vector<U>{{U::kPeers, -1, nccl::Ref::kStaging}, {U::kPeers, 0, 0}});
  CHECK(nccl::buffer_uses(ring_program(3)) == std::vector<U>{{U::kPeers, -1, nccl::Ref::kStaging}, {U::kPeers, 3, 0}});
  // A hybrid: the group collective's region on its group's communicator, the ring between machines on the
  // all-ranks one.
  BuildOptions o;
  o.count = 1000;
  const Plan plan = build_plan(load_topology("uniform:2x2"), "nccl/xring", o);
  const std::vector<int> host_of = host_processes(plan, nccl::machines_from_names(plan));
  const nccl::Program leader = nccl::lower_rank(plan, host_of, nccl::host_devices_from_names(plan), 0);
  REQUIRE(leader.comms.size() == 1);
  CHECK(nccl::buffer_uses(leader) ==
        std::vector<U>{{U::kPeers, -1, nccl::Ref::kStaging}, {U::kPeers, 0, 0}, {leader.comms[0], 0, 0}});
  // Its machine's other GPU takes part in the group collectives only.
  const nccl::Program member = nccl::lower_rank(plan, host_of, nccl::host_devices_from_names(plan), 1);
  CHECK(nccl::buffer_uses(member) == std::vector<U>{{member.comms[0], 1, 0}});
  // CPU helpers' buffers never reach NCCL: a parameter server on a CPU stages through the GPU.
  const Plan ps = build_plan(load_topology("uniform:4"), "pscpu", o);
  const std::vector<bool> host = nccl::host_devices_from_names(ps);
  const std::vector<int> ps_host_of = host_processes(ps, nccl::machines_from_names(ps));
  for (int r = 0; r < ps.ranks(); ++r) {
    for (const U& u : nccl::buffer_uses(nccl::lower_rank(ps, ps_host_of, host, r))) {
      CHECK((u.device < 0 || !host[static_cast<std::size_t>(u.device)]));
    }
  }
}

namespace {

// Records what the backend would issue: one line per step ("send op3"), "wait", and the graph calls.
class Recorder final : public nccl::StepIssuer {
 public:
  void issue(const nccl::Step& step) override {
    if (fail_at_op == step.op) throw std::runtime_error("injected");
    calls.push_back("op" + std::to_string(step.op) + " " + std::to_string(static_cast<int>(step.kind)));
  }
  void wait() override { calls.push_back("wait"); }
  bool captured() const override { return have_graph; }
  void begin_capture() override { calls.push_back("capture"); }
  void end_capture() override {
    calls.push_back("end capture");
    have_graph = true;
  }
  void cancel_capture() noexcept override { calls.push_back("cancel capture"); }
  void launch_captured() override { calls.push_back("launch"); }
  std::vector<std::string> calls;
  bool have_graph = false;
  int fail_at_op = -2;
};

std::vector<std::string> one_run(const nccl::Program& prog) {
  Recorder r;
  nccl::issue_steps(prog, r);
  return r.calls;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("nccl_issue.run_and_back_to_back_order") {
  const nccl::Program prog = ring_program(1);
  const std::vector<std::string> steps = one_run(prog);
  REQUIRE(steps.size() == prog.steps.size());
  REQUIRE(steps.size() > 10);
  {
    Recorder r;
    nccl::issue_run(prog, r);
    CHECK(r.calls == steps + std::vector<std::string>{"wait"});
  }
  {
    // Back to back: the n runs' calls one after the other, one wait at the end (none in between).
    Recorder r;
    nccl::issue_back_to_back(prog, 3, /*graph=*/false, r);
    CHECK(r.calls == steps + steps + steps + std::vector<std::string>{"wait"});
  }
  {
    // With a graph: one run captured once, launched n times, one wait; the next call reuses the capture.
    Recorder r;
    nccl::issue_back_to_back(prog, 3, /*graph=*/true, r);
    CHECK(r.calls == std::vector<std::string>{"capture"} + steps +
                         std::vector<std::string>{"end capture", "launch", "launch", "launch", "wait"});
    r.calls.clear();
    nccl::issue_back_to_back(prog, 2, true, r);
    CHECK(r.calls == std::vector<std::string>{"launch", "launch", "wait"});
  }
  {
    // A step failing during the capture cancels it and passes the error on; nothing is launched.
    Recorder r;
    r.fail_at_op = prog.steps.at(3).op;
    CHECK_THROWS_AS(nccl::issue_back_to_back(prog, 3, true, r), std::runtime_error);
    CHECK(r.calls.back() == "cancel capture");
    CHECK_FALSE(r.captured());
  }
}
