// The cuda backend's data movers on one GPU, against the GPU's own copy: what a plan's steps can reach.
//
//   build/bench/bench_cuda_kernels [--benchmark_filter=…]        (scripts/gpu_check.sh phase 3 runs it)
//
// BM_Memcpy: cudaMemcpyAsync device to device (the copy steps of every plan; the backend issues copies this way).
// BM_Reduce/<type>: reduce kernel dst[i] = dst[i] + src[i] (sum; the plans' reduce steps), 128-bit aligned.
// BM_Scale/<type>: the avg scale kernel dst[i] = dst[i] / 8.
// BM_HostReduce/<type>: the cpu backend's reduce loop (reduce_into) on one host thread, for comparison; the only
//   rows on a machine without a GPU.
//
// Every GPU row is timed with CUDA events around 10 launches on one stream (manual time per launch) after a
// warm-up, over buffers of 1 MiB to 1 GiB. bytes_per_second counts the bytes a launch must move through device
// memory: a copy reads and writes its size (2×), a reduce reads both operands and writes one (3×), a scale
// reads and writes (2×). Compare a kernel with BM_Memcpy at the same size: the copy is the device's practical
// memory bandwidth. Without a GPU the GPU rows are not registered and the program says so on stderr.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "artune/core/types.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune_config.hpp"

#if ARTUNE_HAVE_CUDA_BACKEND
#include "artune/executor/cuda/cuda_backend.hpp"
#include "artune/executor/cuda/cuda_check.hpp"
#include "artune/executor/cuda/kernel_dispatch.hpp"
#include "artune/executor/cuda/reduce_kernels.hpp"
#endif

namespace {

using artune::DataType;

/// Launches timed per benchmark iteration (one event pair around them).
constexpr int kLaunchesPerIteration = 10;

#if ARTUNE_HAVE_CUDA_BACKEND
namespace cu = artune::cuda;

/// Two device buffers of `bytes` on GPU 0 filled with a non-zero pattern (zeros can run faster than data).
struct DevicePair {
  explicit DevicePair(std::size_t bytes) : dst(0, bytes), src(0, bytes) {
    ARTUNE_CUDA_CHECK(cudaMemset(dst.get(), 0x3c, bytes));
    ARTUNE_CUDA_CHECK(cudaMemset(src.get(), 0x3b, bytes));
  }
  cu::DeviceBuffer dst, src;
};

/// Times `launch` (issued kLaunchesPerIteration times on `stream`) with events; one manual time per launch.
template <typename Launch>
void time_launches(benchmark::State& state, cudaStream_t stream, std::int64_t bytes_moved, Launch launch) {
  cu::Event start(0, true), stop(0, true);
  launch();  // warm-up: module load, first-touch
  ARTUNE_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (auto _ : state) {
    ARTUNE_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    for (int i = 0; i < kLaunchesPerIteration; ++i) launch();
    ARTUNE_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    ARTUNE_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    ARTUNE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    state.SetIterationTime(ms / 1e3 / kLaunchesPerIteration);
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved);
}

int sm_count() {
  int sms = 1;
  ARTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return sms;
}

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  DevicePair buf(bytes);
  cu::Stream stream(0);
  time_launches(state, stream.get(), 2 * static_cast<std::int64_t>(bytes), [&] {
    ARTUNE_CUDA_CHECK(
        cudaMemcpyAsync(buf.dst.get(), buf.src.get(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
  });
}

void BM_Reduce(benchmark::State& state, DataType type) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::int64_t count = static_cast<std::int64_t>(bytes / artune::element_size(type));
  DevicePair buf(bytes);
  cu::Stream stream(0);
  const cu::ReduceKernel k = cu::select_reduce_kernel(type, artune::ReduceOp::kSum);
  int per_sm = cu::kBlocksPerSm;
  ARTUNE_CUDA_CHECK(cu::reduce_blocks_per_sm(k.id, cu::kThreadsPerBlock, &per_sm));
  const cu::LaunchGeometry g =
      cu::launch_geometry(count, type, reinterpret_cast<std::uintptr_t>(buf.dst.get()),
                          reinterpret_cast<std::uintptr_t>(buf.src.get()), sm_count(), per_sm);
  time_launches(state, stream.get(), 3 * static_cast<std::int64_t>(bytes), [&] {
    ARTUNE_CUDA_CHECK(cu::launch_reduce(k.id, buf.dst.get(), buf.src.get(), g, stream.get()));
  });
}

void BM_Scale(benchmark::State& state, DataType type) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::int64_t count = static_cast<std::int64_t>(bytes / artune::element_size(type));
  DevicePair buf(bytes);
  cu::Stream stream(0);
  const int id = cu::scale_kernel_id(type);
  int per_sm = cu::kBlocksPerSm;
  ARTUNE_CUDA_CHECK(cu::scale_blocks_per_sm(id, cu::kThreadsPerBlock, &per_sm));
  const auto p = reinterpret_cast<std::uintptr_t>(buf.dst.get());
  const cu::LaunchGeometry g = cu::launch_geometry(count, type, p, p, sm_count(), per_sm);
  time_launches(state, stream.get(), 2 * static_cast<std::int64_t>(bytes),
                [&] { ARTUNE_CUDA_CHECK(cu::launch_scale(id, buf.dst.get(), 8, g, stream.get())); });
}
#endif

void BM_HostReduce(benchmark::State& state, DataType type) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::int64_t count = static_cast<std::int64_t>(bytes / artune::element_size(type));
  std::vector<unsigned char> dst(bytes, 0x3c), src(bytes, 0x3b);
  for (auto _ : state) {
    artune::reduce_into(dst.data(), src.data(), count, type, artune::ReduceOp::kSum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * static_cast<std::int64_t>(bytes));
}

/// Sizes from 1 MiB to 1 GiB by 8×, then 1 GiB.
void device_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t s = std::int64_t{1} << 20; s <= std::int64_t{1} << 30; s *= 8) b->Arg(s);
  b->Arg(std::int64_t{1} << 30);
}

void register_all() {
  const std::vector<std::pair<const char*, DataType>> types = {
      {"float", DataType::kFloat32}, {"bfloat16", DataType::kBFloat16}, {"half", DataType::kFloat16},
      {"double", DataType::kFloat64}, {"int32", DataType::kInt32}};
  for (const auto& [name, type] : types) {
    benchmark::RegisterBenchmark((std::string("BM_HostReduce/") + name).c_str(), BM_HostReduce, type)
        ->Arg(std::int64_t{1} << 20)
        ->Arg(std::int64_t{1} << 26)
        ->Unit(benchmark::kMicrosecond);
  }
#if ARTUNE_HAVE_CUDA_BACKEND
  int gpus = 0;
  try {
    gpus = artune::cuda_device_count();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_kernels: %s: GPU rows not run\n", e.what());
  }
  if (gpus == 0) {
    std::fprintf(stderr, "bench_cuda_kernels: no CUDA device available: GPU rows not run (host rows only)\n");
    return;
  }
  benchmark::RegisterBenchmark("BM_Memcpy", BM_Memcpy)->Apply(device_sizes)->UseManualTime()->Unit(
      benchmark::kMicrosecond);
  for (const auto& [name, type] : types) {
    benchmark::RegisterBenchmark((std::string("BM_Reduce/") + name).c_str(), BM_Reduce, type)
        ->Apply(device_sizes)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (const auto& [name, type] : types) {
    if (type != DataType::kFloat32 && type != DataType::kBFloat16) continue;
    benchmark::RegisterBenchmark((std::string("BM_Scale/") + name).c_str(), BM_Scale, type)
        ->Apply(device_sizes)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
#else
  std::fprintf(stderr, "bench_cuda_kernels: built without CUDA: host rows only\n");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
