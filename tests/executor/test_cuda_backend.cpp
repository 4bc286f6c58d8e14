// The cuda backend on a real GPU: the reduction kernels against the host
// reference bit for bit, and every plan family × every type × every op through
// the backend with #wrong = 0, with the plan's CUDA graph and without. Exits 77 (skip) on machines without a GPU.
// With one GPU, all plan devices share it (the backend says so on stderr).

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/cuda/cuda_backend.hpp"
#include "artune/executor/cuda/cuda_check.hpp"
#include "artune/executor/cuda/kernel_dispatch.hpp"
#include "artune/executor/cuda/reduce_kernels.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune/executor/harness/verification.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

using namespace artune;

namespace {

// Runs before doctest's main: no GPU → skip the whole program; any other device error fails it.
const int kGpuCheck = [] {
  int gpus = 0;
  try {
    gpus = cuda_device_count();
  } catch (const std::exception& e) {
    std::printf("test_cuda_backend: %s\n", e.what());
    std::exit(1);
  }
  if (gpus == 0) {
    std::puts("test_cuda_backend: no CUDA device available: skipping");
    std::exit(77);
  }
  // What one GPU cannot check says so on a line of its own (scripts/gpu_bundle.py counts the test as reduced).
  if (gpus == 1) std::puts("REDUCED: one GPU: every plan device shares it, so no peer copies or P2P access run");
  return 0;
}();

std::vector<unsigned char> random_values(DataType type, std::int64_t n, std::mt19937& rng) {
  std::vector<unsigned char> out(static_cast<std::size_t>(n) * element_size(type));
  std::uniform_int_distribution<int> dist(1, 4);
  for (std::int64_t i = 0; i < n; ++i) store_from_double(out.data(), type, i, dist(rng));
  return out;
}

}  // namespace

TEST_CASE("cuda_kernels.tables_are_complete") {
  CHECK(cuda::device_reduce_kernel_count() == cuda::kReduceKernelCount);
  CHECK(cuda::device_scale_kernel_count() == cuda::kKernelTypes);
}

TEST_CASE("cuda_kernels.match_the_host_reference") {
  std::mt19937 rng(7);
  int sms = 1;
  ARTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cuda::Stream stream(0);
  for (DataType type : all_data_types()) {
    const std::size_t es = element_size(type);
    for (ReduceOp op : all_reduce_ops()) {
      for (std::int64_t n : {1, 5, 4099, 1 << 20}) {
        for (std::int64_t shift : {0, 1}) {  // shift 1 element: misaligned, scalar path
          CAPTURE(to_string(type));
          CAPTURE(to_string(op));
          CAPTURE(n);
          CAPTURE(shift);
          auto a = random_values(type, n + shift, rng);
          const auto b = random_values(type, n + shift, rng);
          cuda::DeviceBuffer da(0, a.size()), db(0, b.size());
          ARTUNE_CUDA_CHECK(cudaMemcpy(da.get(), a.data(), a.size(), cudaMemcpyHostToDevice));
          ARTUNE_CUDA_CHECK(cudaMemcpy(db.get(), b.data(), b.size(), cudaMemcpyHostToDevice));
          // A copy from pageable memory may return before its DMA has landed, and `stream` is non-blocking (it
          // does not wait for the legacy stream): without this the kernel read stale inputs now and then (H200
          // run 4: 8 of 11,855 checks, none in run 3 of the same bundle).
          ARTUNE_CUDA_CHECK(cudaDeviceSynchronize());
          void* dst = static_cast<char*>(da.get()) + shift * es;
          const void* src = static_cast<const char*>(db.get()) + shift * es;
          const auto kernel = cuda::select_reduce_kernel(type, op);
          const auto g = cuda::launch_geometry(n, type, reinterpret_cast<std::uintptr_t>(dst),
                                               reinterpret_cast<std::uintptr_t>(src), sms);
          ARTUNE_CUDA_CHECK(cuda::launch_reduce(kernel.id, dst, src, g, stream.get()));
          if (kernel.scale_after) {
            ARTUNE_CUDA_CHECK(cuda::launch_scale(cuda::scale_kernel_id(type), dst, 3, g, stream.get()));
          }
          ARTUNE_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
          std::vector<unsigned char> got(a.size());
          ARTUNE_CUDA_CHECK(cudaMemcpy(got.data(), da.get(), got.size(), cudaMemcpyDeviceToHost));
          reduce_into(a.data() + shift * es, b.data() + shift * es, n, type, op);
          if (kernel.scale_after) scale_down(a.data() + shift * es, n, type, 3);
          CHECK(std::memcmp(got.data(), a.data(), a.size()) == 0);
        }
      }
    }
  }
}

namespace {

struct Case {
  const char* topo;
  const char* spec;
};

const Case kCases[] = {
    {"uniform:2", "xring"},        {"uniform:2", "nccl"},         {"uniform:8", "xring"},
    {"uniform:8", "xring#2"},      {"uniform:8", "rechd"},        {"uniform:8", "pscpu"},
    {"uniform:8", "psgpu#2"},      {"uniform:8", "nccl"},         {"uniform:8", "tree"},
    {"dgx1-v100", "hiercopy"},     {"dgx1-v100", "mring#2"},      {"uniform:2x4", "nccl/xring"},
    {"uniform:2x4", "nccl/rechd"}, {"uniform:2x4", "nccl/pscpu"}, {"uniform:2x4", "pscpu/pscpu"},
    {"uniform:2x4", "2d"},         {"uniform:3", "rechd"},        {"uniform:5", "xring"},
};

}  // namespace

TEST_CASE("cuda_backend.every_family_type_and_op") {
  for (const Case& c : kCases) {
    const Topology topo = load_topology(c.topo);
    for (std::int64_t count : {std::int64_t{1}, std::int64_t{3}, std::int64_t{4099}, std::int64_t{1000003}}) {
      for (ReduceOp op : all_reduce_ops()) {
        // The large count (pipelined, several blocks per kernel) for a few pairs only: the host
        // side of fill and check dominates otherwise.
        const bool large = count > 100000;
        if (large && op != ReduceOp::kSum && op != ReduceOp::kAvg) continue;
        BuildOptions o;
        o.count = count;
        o.reduce_op = op;
        o.segments = count > 1000 ? 2 : 1;
        const Plan plan = build_plan(topo, c.spec, o);
        for (DataType type : all_data_types()) {
          if (large && type != DataType::kFloat32 && type != DataType::kBFloat16) continue;
          CAPTURE(c.topo);
          CAPTURE(c.spec);
          CAPTURE(count);
          CAPTURE(to_string(op));
          CAPTURE(to_string(type));
          // The plan's CUDA graph (the default) and its calls issued one by one; the large count with the graph.
          for (bool graph : {true, false}) {
            if (large && !graph) continue;
            CAPTURE(graph);
            BackendOptions bo;
            bo.timeout_s = 30;
            bo.topology = (count % 2) ? &topo : nullptr;  // both placement paths
            bo.cuda_graph = graph;
            auto backend = make_cuda_backend(bo);
            backend->prepare(plan, type, op);
            for (int iteration : {0, 1}) {
              backend->fill_inputs(iteration);
              backend->run();
              CHECK(backend->count_wrong(iteration) == 0);
            }
            CHECK(backend->local_ranks().size() == static_cast<std::size_t>(plan.ranks()));
          }
        }
      }
    }
  }
}

TEST_CASE("cuda_backend.wrong_results_are_counted") {
  const Topology topo = load_topology("uniform:4");
  BuildOptions o;
  o.count = 4096;
  const Plan plan = build_plan(topo, "xring", o);
  auto backend = make_cuda_backend(BackendOptions{});
  backend->prepare(plan, DataType::kFloat32, ReduceOp::kSum);
  backend->fill_inputs(0);
  backend->run();
  CHECK(backend->count_wrong(0) == 0);
  // Checked against another iteration's expectation, most elements differ on every rank.
  CHECK(backend->count_wrong(5) > 4 * 4096 / 2);
  // Run twice without refilling: the buffers hold sums of sums, wrong for iteration 0.
  backend->run();
  CHECK(backend->count_wrong(0) > 0);
}

TEST_CASE("cuda_backend.run_on_caller_buffers_and_streams") {
  // Caller device memory, bound synchronously (run_on) and asynchronously on caller streams
  // (run_on_streams); moving the buffers between calls rebinds the plan's calls.
  const Topology topo = load_topology("uniform:3");
  const std::int64_t count = 4099;
  const DataType type = DataType::kFloat32;
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
  for (const char* spec : {"xring", "rechd"}) {
    BuildOptions o;
    o.count = count;
    BackendOptions bo;
    bo.timeout_s = 30;
    bo.topology = &topo;
    auto backend = make_cuda_backend(bo);
    backend->prepare_for_user_buffers(build_plan(topo, spec, o), type, ReduceOp::kSum);
    const auto ranks = backend->local_ranks();
    REQUIRE(ranks.size() == 3);
    std::vector<unsigned char> expected(bytes), host(bytes);
    for (int round = 0; round < 2; ++round) {
      std::vector<cuda::DeviceBuffer> buffers;
      std::vector<void*> user;
      for (int r = 0; r < 3; ++r) {
        buffers.emplace_back(0, bytes);
        fill_input(host.data(), type, ReduceOp::kSum, 3, r, 0, count, round);
        ARTUNE_CUDA_CHECK(cudaMemcpy(buffers.back().get(), host.data(), bytes, cudaMemcpyDefault));
        user.push_back(buffers.back().get());
      }
      fill_expected(expected.data(), type, ReduceOp::kSum, 3, 0, count, round);
      cuda::Stream caller(0);
      if (round == 0) {
        backend->run_on(user);
      } else {
        std::vector<void*> streams(3, static_cast<void*>(caller.get()));
        backend->run_on_streams(user, streams);
        ARTUNE_CUDA_CHECK(cudaStreamSynchronize(caller.get()));
      }
      for (int r = 0; r < 3; ++r) {
        CAPTURE(spec);
        CAPTURE(round);
        CAPTURE(r);
        ARTUNE_CUDA_CHECK(cudaMemcpy(host.data(), user[static_cast<std::size_t>(r)], bytes, cudaMemcpyDefault));
        CHECK(count_mismatches(host.data(), expected.data(), type, ReduceOp::kSum, count) == 0);
      }
    }
  }
}
