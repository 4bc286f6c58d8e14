// The nccl backend's watchdog (artune/executor/nccl/nccl_watchdog.hpp): what arming and disarming it costs the
// caller per run (the run's one section), with its thread running, against the target doing nothing. The GPU
// backends' per-run overhead on the host side; no GPU or NCCL needed.
//
//   build/bench/bench_watchdog
//
// BM_ArmDisarm: arm + disarm back to back (the thread stays awake between sections: the cheap case);
// BM_ArmDisarmIdle: each section starts with the thread asleep (arm wakes it: the futex case), as between runs
// that are further apart than the thread's period.

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <thread>

#include "artune/executor/nccl/nccl_watchdog.hpp"

namespace {

class Healthy final : public artune::nccl::WatchTarget {
 public:
  std::string async_error() override { return {}; }
  void abort() noexcept override {}
};

void BM_ArmDisarm(benchmark::State& state) {
  Healthy target;
  artune::nccl::Watchdog dog(target, std::chrono::milliseconds(1));
  for (auto _ : state) {
    dog.arm("rank 0: the run", 60);
    benchmark::DoNotOptimize(dog.disarm());
  }
}
BENCHMARK(BM_ArmDisarm);

void BM_ArmDisarmIdle(benchmark::State& state) {
  Healthy target;
  artune::nccl::Watchdog dog(target, std::chrono::milliseconds(1));
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::microseconds(1500));  // past its 1 ms period: asleep, idle
    state.ResumeTiming();
    dog.arm("rank 0: the run", 60);
    benchmark::DoNotOptimize(dog.disarm());
  }
}
BENCHMARK(BM_ArmDisarmIdle)->Iterations(1000);

}  // namespace

BENCHMARK_MAIN();
