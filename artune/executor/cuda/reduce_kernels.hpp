#pragma once
// Host entry points of the reduction kernels in reduce_kernels.cu (compiled by
// nvcc). Callers pick the kernel with kernel_dispatch.hpp and pass the
// geometry it computed; the launch is asynchronous on `stream`.

#include <cstdint>

#include <cuda_runtime.h>

#include "artune/executor/cuda/kernel_dispatch.hpp"

namespace artune::cuda {

/// dst[i] = dst[i] ⊕ src[i] for i < geometry.count with reduce kernel `kernel_id`; returns the launch status
/// (the thread's last-error slot is cleared first, so an earlier call's handled status is not reported).
/// Pointers may be device, peer (P2P enabled) or mapped pinned host memory of the current device.
cudaError_t launch_reduce(int kernel_id, void* dst, const void* src, const LaunchGeometry& geometry,
                          cudaStream_t stream);
/// dst[i] = dst[i] / divisor in the type's arithmetic (integers truncate) with scale kernel `kernel_id`.
cudaError_t launch_scale(int kernel_id, void* dst, std::int64_t divisor, const LaunchGeometry& geometry,
                         cudaStream_t stream);
/// Resident blocks per SM of reduce kernel `kernel_id` at `threads` threads per block on the current device
/// (cudaOccupancyMaxActiveBlocksPerMultiprocessor: registers and shared memory decide it); the grid is
/// sized from it so no block waits for a second wave. cudaErrorInvalidValue for a bad id.
cudaError_t reduce_blocks_per_sm(int kernel_id, int threads, int* blocks);
/// The same for scale kernel `kernel_id`.
cudaError_t scale_blocks_per_sm(int kernel_id, int threads, int* blocks);
/// Runs reduce kernel `kernel_id` on the host over host memory: the kernel's own lane body for each of the
/// geometry's blocks × threads lanes in turn (same vector/tail split and grid-stride walk as on the GPU), so
/// its arithmetic and coverage are tested on machines without a GPU. cudaErrorInvalidValue for a bad id.
cudaError_t run_reduce_on_host(int kernel_id, void* dst, const void* src, const LaunchGeometry& geometry);
/// The scale kernel's body on the host, as run_reduce_on_host.
cudaError_t run_scale_on_host(int kernel_id, void* dst, std::int64_t divisor, const LaunchGeometry& geometry);
/// Number of reduce kernels the device code instantiated (= kReduceKernelCount).
int device_reduce_kernel_count() noexcept;
/// Number of scale kernels the device code instantiated (= kKernelTypes).
int device_scale_kernel_count() noexcept;

}  // namespace artune::cuda
