#pragma once
// Host entry points of the reduction kernels in reduce_kernels.cu (compiled by
// nvcc). Callers pick the kernel with kernel_dispatch.hpp and pass the
// geometry it computed; the launch is asynchronous on `stream`.

#include <cstdint>

#include <cuda_runtime.h>

#include "executor/cuda/kernel_dispatch.hpp"

namespace artune::cuda {

/// dst[i] = dst[i] ⊕ src[i] for i < geometry.count with reduce kernel `kernel_id`; returns the launch status.
/// Pointers may be device, peer (P2P enabled) or mapped pinned host memory of the current device.
cudaError_t launch_reduce(int kernel_id, void* dst, const void* src, const LaunchGeometry& geometry,
                          cudaStream_t stream);
/// dst[i] = dst[i] / divisor in the type's arithmetic (integers truncate) with scale kernel `kernel_id`.
cudaError_t launch_scale(int kernel_id, void* dst, std::int64_t divisor, const LaunchGeometry& geometry,
                         cudaStream_t stream);
/// Number of reduce kernels the device code instantiated (= kReduceKernelCount).
int device_reduce_kernel_count() noexcept;
/// Number of scale kernels the device code instantiated (= kKernelTypes).
int device_scale_kernel_count() noexcept;

}  // namespace artune::cuda
