#include "artune/comm/scratch.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "artune/core/error.hpp"
#include "artune_config.hpp"

#if ARTUNE_HAVE_CUDA_BACKEND
#include <cuda_runtime.h>
#endif

namespace artune {

Scratch::Scratch(std::size_t ranks, bool device) : pads_(ranks), device_(device) {}

void Scratch::Pad::free() {
  if (data != nullptr || event != nullptr) {
    if (device < 0) {
      std::free(data);
    } else {
#if ARTUNE_HAVE_CUDA_BACKEND
      int previous = 0;
      cudaGetDevice(&previous);
      cudaSetDevice(device);
      if (event != nullptr) cudaEventSynchronize(static_cast<cudaEvent_t>(event));
      if (data != nullptr) cudaFree(data);
      if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
      cudaSetDevice(previous);
#endif
    }
  }
  data = nullptr;
  event = nullptr;
  bytes = 0;
  dirty = 0;
  device = -1;
  used = false;
}

void Scratch::copy(void* dst, const void* src, std::size_t bytes, void* stream) const {
  if (bytes == 0 || dst == src) return;
  if (!device_) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if ARTUNE_HAVE_CUDA_BACKEND
  if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    throw BackendFailure("communicator: cudaMemcpyAsync failed");
  }
#else
  (void)stream;
#endif
}

void* Scratch::acquire(std::size_t i, std::size_t bytes, std::size_t keep, const void* user, void* stream) {
  Pad& p = pads_[i];
  if (p.bytes < bytes) {
    p.free();
    if (!device_) {
      const std::size_t rounded = (bytes + 63) / 64 * 64;
      p.data = std::aligned_alloc(64, rounded);
      if (p.data == nullptr) throw BackendFailure(fmt::format("communicator: out of memory ({} B of scratch)", bytes));
    } else {
#if ARTUNE_HAVE_CUDA_BACKEND
      // On the device of the caller's buffer.
      cudaPointerAttributes attr{};
      if (cudaPointerGetAttributes(&attr, user) != cudaSuccess ||
          (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
        (void)cudaGetLastError();
        throw InvalidInput("communicator: the buffers of a cuda/nccl communicator must be device memory");
      }
      int previous = 0;
      cudaGetDevice(&previous);
      cudaSetDevice(attr.device);
      p.device = attr.device;  // free() frees on it, even after a failure below
      const bool ok =
          cudaMalloc(&p.data, bytes) == cudaSuccess &&
          cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(&p.event), cudaEventDisableTiming) == cudaSuccess;
      cudaSetDevice(previous);
      if (!ok) {
        p.free();
        throw BackendFailure(fmt::format("communicator: cannot allocate {} B of device scratch", bytes));
      }
#else
      (void)user;
#endif
    }
    p.bytes = bytes;
    p.dirty = bytes;  // not zeroed yet: the tail is zeroed below (on the caller's stream for GPU memory)
  }
#if ARTUNE_HAVE_CUDA_BACKEND
  // The scratch's previous use (maybe on another stream) comes first.
  if (device_ && p.used &&
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(p.event), 0) != cudaSuccess) {
    throw BackendFailure("communicator: cudaStreamWaitEvent failed");
  }
#endif
  if (p.dirty > keep) {
    auto* tail = static_cast<std::byte*>(p.data) + keep;
    if (!device_) {
      std::memset(tail, 0, p.dirty - keep);
    } else {
#if ARTUNE_HAVE_CUDA_BACKEND
      if (cudaMemsetAsync(tail, 0, p.dirty - keep, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
        throw BackendFailure("communicator: cudaMemsetAsync failed");
      }
#endif
    }
  }
  // Until the run completes the whole buffer counts as written (a failed run leaves it unknown).
  p.dirty = p.bytes;
  return p.data;
}

void Scratch::release(std::size_t i, std::size_t keep, void* stream) {
  Pad& p = pads_[i];
  p.dirty = keep;
#if ARTUNE_HAVE_CUDA_BACKEND
  if (device_) {
    if (cudaEventRecord(static_cast<cudaEvent_t>(p.event), static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      throw BackendFailure("communicator: cudaEventRecord failed");
    }
    p.used = true;
  }
#else
  (void)stream;
#endif
}

}  // namespace artune
