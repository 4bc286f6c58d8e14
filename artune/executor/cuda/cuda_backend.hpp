#pragma once
// The cuda backend: one process drives every plan device on the GPUs it sees.
// Plan device d runs on CUDA device (local GPU index mod cudaGetDeviceCount()),
// so a machine with one GPU can still run a multi-device plan (the devices then
// share it). Helper devices (a CPU gather shard) live in pinned host memory.
//
// Only declared when the build found CUDA (ARTUNE_HAVE_CUDA_BACKEND in
// artune_config.hpp); make_backend() calls it for BackendKind::kCuda.

#include <memory>

#include "artune/executor/harness/harness.hpp"

namespace artune {

/// Creates the cuda backend; throws Unsupported("no CUDA device available") when the machine has no GPU,
/// BackendFailure naming the CUDA error when the device query fails otherwise (e.g. an insufficient driver).
std::unique_ptr<HarnessBackend> make_cuda_backend(const BackendOptions& options);

/// Number of CUDA devices usable by this process: 0 when the machine has no GPU (no device or no driver);
/// throws BackendFailure naming the error for any other failure (an insufficient driver, …).
int cuda_device_count();

}  // namespace artune
