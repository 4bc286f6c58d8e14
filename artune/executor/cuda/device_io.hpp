#pragma once
// Input filling and result checking of participant buffers in GPU memory, shared by the cuda and
// nccl backends: values from verification.hpp, moved through one pinned host buffer (message-sized)
// with a synchronous cudaMemcpy on the buffer's GPU.

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "artune/core/types.hpp"
#include "artune/executor/cuda/cuda_check.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune::cuda {

/// One participant's buffer 0: the rank it holds, where it lives, and the GPU to make current for the copy.
struct RankBuffer {
  int rank = 0;
  void* data = nullptr;
  int gpu = -1;  ///< -1: the current device
};

/// What every participant buffer holds: `count` elements of `type`, the result of `collective` with `op`
/// over `ranks` ranks (all-gather / reduce-scatter: per-rank blocks, verification.hpp).
struct DeviceIo {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int ranks = 0;
  std::int64_t count = 0;
  void* host = nullptr;  ///< pinned staging of count elements
  Collective collective = Collective::kAllReduce;
  std::vector<std::int64_t> blocks = {};  ///< the plan's per-rank block sizes (empty: even blocks)

  /// Writes the inputs of `iteration` into every buffer.
  void fill(std::span<const RankBuffer> buffers, int iteration) const {
    const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
    for (const RankBuffer& b : buffers) {
      fill_collective_input(host, type, op, collective, ranks, b.rank, count, iteration, blocks);
      copy(b.data, host, bytes, b.gpu);
    }
  }

  /// Elements of every buffer that differ from the expected result of `iteration` (nccl-tests #wrong).
  std::int64_t wrong(std::span<const RankBuffer> buffers, int iteration) const {
    const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
    std::int64_t n = 0;
    for (const RankBuffer& b : buffers) {
      copy(host, b.data, bytes, b.gpu);
      n += count_collective_wrong(host, type, op, collective, ranks, b.rank, count, iteration, blocks);
    }
    return n;
  }

 private:
  static void copy(void* dst, const void* src, std::size_t bytes, int gpu) {
    if (bytes == 0) return;
    if (gpu < 0) {
      ARTUNE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
      return;
    }
    DeviceGuard guard(gpu);
    ARTUNE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  }
};

}  // namespace artune::cuda
