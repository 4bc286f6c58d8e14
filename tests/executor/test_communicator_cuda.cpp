// artune::Communicator on the cuda backend with the caller's device memory: every type and op in and out of
// place, on the legacy default stream and on the caller's own streams, all-gather and reduce-scatter, plans
// from a spec and tuned in memory. The ranks are threads of this process; with one GPU every rank's buffers
// live on it (the backend places plan devices modulo the GPU count). Exits 77 (skip) without a GPU.

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/executor/cuda/cuda_backend.hpp"
#include "artune/executor/cuda/cuda_check.hpp"
#include "artune/executor/harness/verification.hpp"
#include "tests/executor/comm_threads.hpp"

using namespace artune;
using artune_test::on_threads;
using artune_test::require_no_errors;

namespace {

const int kGpus = [] {
  int gpus = 0;
  try {
    gpus = cuda_device_count();
  } catch (const std::exception& e) {
    std::printf("test_communicator_cuda: %s\n", e.what());
    std::exit(1);
  }
  if (gpus == 0) {
    std::puts("test_communicator_cuda: no CUDA device available: skipping");
    std::exit(77);
  }
  // What one GPU cannot check says so on a line of its own (scripts/gpu_bundle.py counts the test as reduced).
  if (gpus == 1) std::puts("REDUCED: one GPU: every plan device shares it, so no peer copies or P2P access run");
  return gpus;
}();

CommOptions options(const std::string& topology, const std::string& spec) {
  CommOptions o;
  o.topology = topology;
  o.spec = spec;
  o.timeout_s = 60;
  o.tune_sizes = {64, 4096, 65536, 1 << 20};
  return o;
}

void copy_in(void* device, const std::vector<std::byte>& host) {
  ARTUNE_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice));
}
std::vector<std::byte> copy_out(const void* device, std::size_t bytes) {
  std::vector<std::byte> host(bytes);
  ARTUNE_CUDA_CHECK(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
  return host;
}

/// Rank r's device buffers on GPU r mod kGpus.
struct RankBuffers {
  int gpu = 0;
  cuda::DeviceBuffer send, recv;
  cuda::Stream stream;
};

/// All-reduces nccl-tests inputs of `count` elements on every rank `calls` times through device buffers and
/// returns the mismatching elements over all ranks (out of place, a changed send buffer counts 1000000).
/// `own_streams`: each rank passes its own cudaStream_t and synchronises it; else the legacy default stream.
std::int64_t wrong_elements(std::vector<Communicator>& comms, std::int64_t count, DataType type, ReduceOp op,
                            bool in_place, bool own_streams, int calls = 2) {
  const int ranks = static_cast<int>(comms.size());
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
  std::vector<RankBuffers> buf(comms.size());
  for (int r = 0; r < ranks; ++r) {
    auto& b = buf[static_cast<std::size_t>(r)];
    b.gpu = r % kGpus;
    b.send = cuda::DeviceBuffer(b.gpu, bytes);
    b.recv = cuda::DeviceBuffer(b.gpu, bytes);
    b.stream = cuda::Stream(b.gpu);
  }
  std::vector<std::byte> expected(bytes);
  std::atomic<std::int64_t> wrong{0};
  for (int it = 0; it < calls; ++it) {
    fill_expected(expected.data(), type, op, ranks, 0, count, it);
    std::vector<std::vector<std::byte>> input(comms.size(), std::vector<std::byte>(bytes));
    for (int r = 0; r < ranks; ++r) {
      auto& b = buf[static_cast<std::size_t>(r)];
      cuda::DeviceGuard guard(b.gpu);
      fill_input(input[static_cast<std::size_t>(r)].data(), type, op, ranks, r, 0, count, it);
      copy_in(b.send.get(), input[static_cast<std::size_t>(r)]);
      ARTUNE_CUDA_CHECK(cudaMemset(b.recv.get(), 0x5a, bytes));
    }
    const auto errors = on_threads(comms, [&](int r) {
      auto& b = buf[static_cast<std::size_t>(r)];
      cuda::DeviceGuard guard(b.gpu);
      void* out = in_place ? b.send.get() : b.recv.get();
      comms[static_cast<std::size_t>(r)].allreduce(b.send.get(), out, count, type, op,
                                                   own_streams ? b.stream.get() : nullptr);
      ARTUNE_CUDA_CHECK(own_streams ? cudaStreamSynchronize(b.stream.get()) : cudaStreamSynchronize(nullptr));
      wrong += count_mismatches(copy_out(out, bytes).data(), expected.data(), type, op, count);
      if (!in_place && copy_out(b.send.get(), bytes) != input[static_cast<std::size_t>(r)]) wrong += 1000000;
    });
    require_no_errors(errors);
  }
  return wrong.load();
}

}  // namespace

TEST_CASE("communicator_cuda.every_type_and_op_in_and_out_of_place") {
  for (const auto& [topology, spec, ranks] :
       {std::tuple{"uniform:2", "xring", 2}, std::tuple{"uniform:4", "rechd", 4}, std::tuple{"uniform:3", "nccl", 3}}) {
    auto comms = Communicator::create_local(BackendKind::kCuda, options(topology, spec), ranks);
    for (DataType type : all_data_types()) {
      for (ReduceOp op : all_reduce_ops()) {
        if (max_verifiable_ranks(type, op) < ranks) continue;
        for (std::int64_t count : {std::int64_t{1}, std::int64_t{4099}, std::int64_t{300001}}) {
          for (bool in_place : {true, false}) {
            INFO(topology << " " << spec << " " << to_string(type) << " " << to_string(op) << " count " << count
                          << (in_place ? " in place" : " out of place"));
            CHECK(wrong_elements(comms, count, type, op, in_place, false) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("communicator_cuda.caller_streams_and_tuned_plans") {
  // No spec and no table: plans tuned in memory for the cuda backend at the first call of each size bucket.
  CommOptions o = options("uniform:4", "");
  auto comms = Communicator::create_local(BackendKind::kCuda, o, 4);
  for (std::int64_t count : {std::int64_t{7}, std::int64_t{1000}, std::int64_t{100000}, std::int64_t{1} << 20}) {
    for (bool in_place : {true, false}) {
      INFO("count " << count << (in_place ? " in place" : " out of place"));
      CHECK(wrong_elements(comms, count, DataType::kFloat32, ReduceOp::kSum, in_place, true, 3) == 0);
      CHECK(wrong_elements(comms, count, DataType::kBFloat16, ReduceOp::kAvg, in_place, true, 1) == 0);
    }
  }
}

TEST_CASE("communicator_cuda.allgather_and_reducescatter") {
  auto comms = Communicator::create_local(BackendKind::kCuda, options("uniform:4", "xring"), 4);
  const int ranks = 4;
  for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt32, DataType::kFloat64}) {
    for (std::int64_t per_rank : {std::int64_t{1}, std::int64_t{333}, std::int64_t{65537}}) {
      const std::int64_t total = per_rank * ranks;
      const std::size_t elem = element_size(type);
      const std::size_t block = static_cast<std::size_t>(per_rank) * elem;
      const std::size_t whole = static_cast<std::size_t>(total) * elem;
      INFO(to_string(type) << " per rank " << per_rank);
      // All-gather, out of place: each rank sends its block, receives the whole buffer.
      std::atomic<std::int64_t> wrong{0};
      auto errors = on_threads(comms, [&](int r) {
        cuda::DeviceGuard guard(r % kGpus);
        std::vector<std::byte> full(whole);
        fill_collective_input(full.data(), type, ReduceOp::kSum, Collective::kAllGather, ranks, r, total, 0);
        cuda::DeviceBuffer send(r % kGpus, block), recv(r % kGpus, whole);
        ARTUNE_CUDA_CHECK(cudaMemcpy(send.get(), full.data() + block * static_cast<std::size_t>(r), block,
                                     cudaMemcpyHostToDevice));
        comms[static_cast<std::size_t>(r)].allgather(send.get(), recv.get(), per_rank, type);
        ARTUNE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        wrong += count_collective_wrong(copy_out(recv.get(), whole).data(), type, ReduceOp::kSum,
                                        Collective::kAllGather, ranks, r, total, 0);
      });
      require_no_errors(errors);
      CHECK(wrong.load() == 0);
      // Reduce-scatter, in place (NCCL's convention: the result is block `rank` of the whole buffer).
      wrong = 0;
      errors = on_threads(comms, [&](int r) {
        cuda::DeviceGuard guard(r % kGpus);
        std::vector<std::byte> full(whole);
        fill_collective_input(full.data(), type, ReduceOp::kSum, Collective::kReduceScatter, ranks, r, total, 1);
        cuda::DeviceBuffer buf(r % kGpus, whole);
        ARTUNE_CUDA_CHECK(cudaMemcpy(buf.get(), full.data(), whole, cudaMemcpyHostToDevice));
        auto* base = static_cast<std::byte*>(buf.get());
        comms[static_cast<std::size_t>(r)].reducescatter(base, base + block * static_cast<std::size_t>(r), per_rank,
                                                         type, ReduceOp::kSum);
        ARTUNE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
        wrong += count_collective_wrong(copy_out(buf.get(), whole).data(), type, ReduceOp::kSum,
                                        Collective::kReduceScatter, ranks, r, total, 1);
      });
      require_no_errors(errors);
      CHECK(wrong.load() == 0);
    }
  }
}
