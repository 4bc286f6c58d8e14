// Speed of the cost-model simulator (Google Benchmark). Goals from the
// simulator issue (reported, never asserted):
//   one 8-GPU ring at 1 GiB with 64 pipeline segments on dgx1-v100   < 10 ms
//   every algorithm family on dgx1-v100 over 21 sizes (1 KiB–1 GiB)   < 1 s
//   a 2d plan on 128xdgx-h100 (1024 GPUs)                              < 5 s
//   nccl (NCCL's channels, algorithm, protocol) on 512xdgx-h100, 4096 GPUs < 5 s, < 1 GiB peak memory
// Run: build-X/bench/bench_simulator --benchmark_min_time=1 (or a --benchmark_filter).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/core/sizes.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"

namespace {

using namespace artune;

const Topology& dgx1() {
  static const Topology t = load_topology("dgx1-v100");
  return t;
}

// Every family on dgx1-v100 (hybrids need several machines).
const std::vector<std::string> kFamilies = {"xring",    "xring#2", "rechd", "pscpu", "psgpu#4", "shuffle",
                                            "hiercopy", "nccl",    "mring", "tree",  "2d"};

// Results go here rather than through benchmark::DoNotOptimize(double&), whose
// "+m,r" constraint lets GCC 12 hand back a corrupted double (benchmark 1.7).
volatile double g_sink = 0;

std::vector<std::uint64_t> sweep21() { return size_sweep(1024, std::uint64_t{1} << 30, 2.0); }

Plan ring_plan(int segments) {
  BuildOptions o;
  o.count = (std::int64_t{1} << 30) / 4;
  o.gpu_perm = {0, 3, 2, 1, 5, 6, 7, 4};
  o.segments = segments;
  return build_plan(dgx1(), "xring", o);
}

// One 8-GPU ring at 1 GiB with 64 pipeline segments (simulation only; the plan is built once).
void BM_Ring8_1GiB_64Segments(benchmark::State& state) {
  const Plan plan = ring_plan(static_cast<int>(state.range(0)));
  const CostModel model = CostModel::defaults();
  double t = 0;
  for (auto _ : state) {
    t = simulate(plan, dgx1(), model, 4).time_us;
    g_sink = t;
  }
  state.counters["ops"] = static_cast<double>(plan.ops.size());
  state.counters["predicted_us"] = t;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(plan.ops.size()));
}
BENCHMARK(BM_Ring8_1GiB_64Segments)->Arg(1)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond);

// Every family over 21 sizes, building each plan and simulating it (what `artune simulate` does).
void BM_AllFamilies_21Sizes_BuildAndSimulate(benchmark::State& state) {
  const CostModel model = CostModel::defaults();
  const auto sizes = sweep21();
  std::int64_t ops = 0;
  for (auto _ : state) {
    ops = 0;
    for (const std::string& spec : kFamilies) {
      for (const std::uint64_t bytes : sizes) {
        BuildOptions o;
        o.count = static_cast<std::int64_t>(bytes / 4);
        const Plan plan = build_plan(dgx1(), spec, o);
        ops += static_cast<std::int64_t>(plan.ops.size());
        g_sink = simulate(plan, dgx1(), model, 4).time_us;
      }
    }
  }
  state.counters["plans"] = static_cast<double>(kFamilies.size() * sizes.size());
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_AllFamilies_21Sizes_BuildAndSimulate)->Unit(benchmark::kMillisecond);

// The same plans prebuilt: the simulator's share.
void BM_AllFamilies_21Sizes_SimulateOnly(benchmark::State& state) {
  const CostModel model = CostModel::defaults();
  std::vector<Plan> plans;
  for (const std::string& spec : kFamilies) {
    for (const std::uint64_t bytes : sweep21()) {
      BuildOptions o;
      o.count = static_cast<std::int64_t>(bytes / 4);
      plans.push_back(build_plan(dgx1(), spec, o));
    }
  }
  for (auto _ : state) {
    for (const Plan& plan : plans) g_sink = simulate(plan, dgx1(), model, 4).time_us;
  }
  state.counters["plans"] = static_cast<double>(plans.size());
}
BENCHMARK(BM_AllFamilies_21Sizes_SimulateOnly)->Unit(benchmark::kMillisecond);

// A 2d plan on 128 DGX H100 machines (1024 GPUs) at 1 GiB.
const Topology& h100_cluster() {
  static const Topology t = load_topology("128xdgx-h100");
  return t;
}

void BM_2d_128xDgxH100_Build(benchmark::State& state) {
  BuildOptions o;
  o.count = (std::int64_t{1} << 30) / 4;
  std::size_t ops = 0;
  for (auto _ : state) {
    const Plan plan = build_plan(h100_cluster(), "2d", o);
    ops = plan.ops.size();
    g_sink = static_cast<double>(ops);
  }
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_2d_128xDgxH100_Build)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_2d_128xDgxH100_Simulate(benchmark::State& state) {
  BuildOptions o;
  o.count = (std::int64_t{1} << 30) / 4;
  const Plan plan = build_plan(h100_cluster(), "2d", o);
  const CostModel model = CostModel::defaults();
  double t = 0;
  for (auto _ : state) {
    t = simulate(plan, h100_cluster(), model, 4).time_us;
    g_sink = t;
  }
  state.counters["ops"] = static_cast<double>(plan.ops.size());
  state.counters["predicted_us"] = t;
}
BENCHMARK(BM_2d_128xDgxH100_Simulate)->Unit(benchmark::kMillisecond)->Iterations(3);

// NCCL's own choice on 512 DGX H100 machines (4,096 GPUs): channel search per machine shape, NCCL's pick,
// every channel's flows; at 8 B (Tree/LL, log-depth latency) and 1 GiB (NVLSTree/Simple, NIC bound).
// Peak memory: /usr/bin/time -v build/bench/bench_simulator --benchmark_filter=Nccl_512.
const Topology& h100_512() {
  static const Topology t = load_topology("512xdgx-h100");
  return t;
}

void BM_Nccl_512xDgxH100_BuildAndSimulate(benchmark::State& state) {
  BuildOptions o;
  o.count = state.range(0) / 4;
  const CostModel model = CostModel::defaults();
  double t = 0;
  for (auto _ : state) {
    const Plan plan = build_plan(h100_512(), "nccl", o);
    t = simulate(plan, h100_512(), model, 4).time_us;
    g_sink = t;
  }
  state.counters["predicted_us"] = t;
}
BENCHMARK(BM_Nccl_512xDgxH100_BuildAndSimulate)
    ->Arg(8)
    ->Arg(std::int64_t{1} << 30)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
