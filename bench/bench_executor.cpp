// Speed of the cpu backend against Open MPI's MPI_Allreduce, side by side in
// one program (Google Benchmark; reported, never asserted).
//
//   cpu/<spec>/<size>      the cpu backend, 8 devices (xring and rechd on uniform:8,
//                          2d on uniform:2x4), float sum, one in-place all-reduce per iteration
//   mpi_allreduce/<size>   MPI_Allreduce(MPI_IN_PLACE, float, MPI_SUM) with 8 ranks on this
//                          machine: the program re-launches itself as
//                          `mpirun -np 8 bench_executor --mpi-allreduce-worker BYTES ITERS`,
//                          whose rank 0 reports the median over ITERS iterations of the
//                          slowest rank's time (the same statistic `artune run` reports)
//
// Sizes 64 KiB, 4 MiB, 64 MiB; busbw = bytes/time · 2(n−1)/n as nccl-tests. After the
// benchmarks a summary prints busbw per size and the cpu/MPI ratio (goal: ≥ 1.5× at 64 MiB).
// Run: build/bench/bench_executor

#include <benchmark/benchmark.h>
#include <fmt/format.h>
// The C++ bindings are deprecated and warn under -Wextra; only the C API is used.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/sizes.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/topology/io/io.hpp"

namespace {

using namespace artune;

constexpr int kRanks = 8;
const std::uint64_t kSizes[] = {64ull << 10, 4ull << 20, 64ull << 20};

struct Case {
  std::string spec;
  std::string topology;
};
const Case kCases[] = {{"xring", "uniform:8"}, {"rechd", "uniform:8"}, {"2d", "uniform:2x4"}};

// busbw per (name, bytes), filled by the benchmarks for the summary.
std::map<std::string, std::map<std::uint64_t, double>> g_busbw;

double busbw_gbps(std::uint64_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9 * allreduce_bus_factor(kRanks);
}

void BM_Cpu(benchmark::State& state, const Case& c, std::uint64_t bytes) {
  static std::map<std::string, Topology> topologies;
  auto it = topologies.find(c.topology);
  if (it == topologies.end()) it = topologies.emplace(c.topology, load_topology(c.topology)).first;
  BuildOptions options;
  options.count = static_cast<std::int64_t>(bytes / sizeof(float));
  Plan plan = build_plan(it->second, c.spec, options);
  verify_or_throw(plan);
  auto backend = make_backend(BackendKind::kCpu, BackendOptions{});
  backend->prepare(plan, DataType::kFloat32, ReduceOp::kSum);
  backend->fill_inputs(0);
  for (int i = 0; i < 3; ++i) backend->run();
  std::vector<double> times;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    backend->run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // Check once more after timing: a fast wrong answer is no answer.
  backend->fill_inputs(1);
  backend->run();
  if (backend->count_wrong(1) != 0) state.SkipWithError("wrong results");
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  state.counters["busbw_GBps"] = busbw_gbps(bytes, median);
  state.counters["median_us"] = median * 1e6;
  g_busbw["cpu/" + c.spec][bytes] = busbw_gbps(bytes, median);
}

// Iterations the MPI worker times per size (fewer for large sizes: 8 ranks may share few cores).
int mpi_iterations(std::uint64_t bytes) { return bytes >= (16ull << 20) ? 10 : bytes >= (1ull << 20) ? 30 : 200; }

void BM_MpiAllreduce(benchmark::State& state, std::uint64_t bytes) {
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) {
    state.SkipWithError("cannot find /proc/self/exe");
    return;
  }
  // Busy-polling ranks starve each other when they outnumber the cores.
  const bool oversubscribed = std::thread::hardware_concurrency() < static_cast<unsigned>(kRanks);
  const std::string command = fmt::format(
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle={} "
      "mpirun -np {} --oversubscribe {} --mpi-allreduce-worker {} {} 2>&1",
      oversubscribed ? 1 : 0, kRanks, self, bytes, mpi_iterations(bytes));
  for (auto _ : state) {
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      state.SkipWithError("popen failed");
      return;
    }
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
    const int status = pclose(pipe);
    const auto pos = out.find("median_us ");
    if (status != 0 || pos == std::string::npos) {
      state.SkipWithError(("mpirun failed: " + out).c_str());
      return;
    }
    const double median_us = std::strtod(out.c_str() + pos + 10, nullptr);
    state.SetIterationTime(median_us * 1e-6);
    state.counters["busbw_GBps"] = busbw_gbps(bytes, median_us * 1e-6);
    state.counters["median_us"] = median_us;
    g_busbw["mpi_allreduce"][bytes] = busbw_gbps(bytes, median_us * 1e-6);
  }
}

// Runs as one rank of `mpirun -np 8 bench_executor --mpi-allreduce-worker BYTES ITERS`.
int mpi_worker(std::uint64_t bytes, int iterations) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto count = static_cast<int>(bytes / sizeof(float));
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) data[static_cast<std::size_t>(i)] = static_cast<float>((rank + i) % 4 + 1);
  for (int i = 0; i < 5; ++i) MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(dt);
  }
  std::sort(times.begin(), times.end());
  if (rank == 0) std::printf("median_us %.3f\n", times[times.size() / 2] * 1e6);
  MPI_Finalize();
  return 0;
}

void print_summary() {
  if (g_busbw.empty()) return;
  std::printf("\nbusbw (GB/s), %d ranks, float sum, median iteration:\n", kRanks);
  std::printf("%-10s", "size");
  for (const auto& [name, _] : g_busbw) std::printf(" %16s", name.c_str());
  std::printf("  %s\n", "best cpu / mpi");
  for (std::uint64_t bytes : kSizes) {
    std::printf("%-10s", format_size(bytes).c_str());
    double best_cpu = 0;
    for (const auto& [name, by_size] : g_busbw) {
      const auto it = by_size.find(bytes);
      std::printf(" %16.3f", it == by_size.end() ? 0.0 : it->second);
      if (name.rfind("cpu/", 0) == 0 && it != by_size.end()) best_cpu = std::max(best_cpu, it->second);
    }
    const auto mpi = g_busbw.find("mpi_allreduce");
    const double m = mpi == g_busbw.end() || mpi->second.count(bytes) == 0 ? 0 : mpi->second.at(bytes);
    if (m > 0) std::printf("  %.2fx", best_cpu / m);
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--mpi-allreduce-worker") == 0) {
    return mpi_worker(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]));
  }
  for (std::uint64_t bytes : kSizes) {
    for (const Case& c : kCases) {
      benchmark::RegisterBenchmark(("cpu/" + c.spec + "/" + format_size(bytes)).c_str(),
                                   [c, bytes](benchmark::State& s) { BM_Cpu(s, c, bytes); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime()
          ->MinTime(bytes >= (16ull << 20) ? 2.0 : 0.5);
    }
    benchmark::RegisterBenchmark(("mpi_allreduce/" + format_size(bytes)).c_str(),
                                 [bytes](benchmark::State& s) { BM_MpiAllreduce(s, bytes); })
        ->Unit(benchmark::kMicrosecond)
        ->UseManualTime()
        ->Iterations(1);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
