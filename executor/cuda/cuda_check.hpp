#pragma once
// Checked CUDA calls and RAII owners of device state. Every runtime call goes
// through ARTUNE_CUDA_CHECK, which turns a failure into a BackendFailure that
// carries the call's text and cudaGetErrorString. Destructors never throw: a
// failure while releasing is ignored (the process is usually unwinding already).

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.hpp"
#include "core/types.hpp"

namespace artune::cuda {

/// Throws BackendFailure("<call>: <error string> (<error name>)") unless `status` is cudaSuccess.
inline void check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw BackendFailure(std::string(call) + ": " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) +
                       ")");
}

/// Checks a CUDA runtime call, naming it in the error.
#define ARTUNE_CUDA_CHECK(call) ::artune::cuda::check((call), #call)

/// Reads a cudaStreamQuery / cudaEventQuery result: true when the work is done, false while it
/// runs (cudaErrorNotReady); throws BackendFailure on any other status. The runtime also records
/// cudaErrorNotReady as the thread's last error, where the next kernel launch's
/// cudaGetLastError() would report it as a launch failure: it is cleared here.
inline bool finished(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check(status, call);
  return false;
}

/// Clears the thread's last-error slot before a kernel launch, whose status is read with
/// cudaGetLastError(): a status some earlier call already returned (and was handled) must not be
/// reported as this launch's. Sticky errors are returned again by the launch itself.
inline void clear_last_error() noexcept { (void)cudaGetLastError(); }

/// InvalidInput naming -e/--maxbytes when `needed` bytes exceed 95 % of the free memory of CUDA device
/// `gpu` (the rest is kept for the CUDA context, NCCL's own buffers and allocation granularity);
/// `where` says whose buffers they are ("on cuda:0 (8 plan devices placed there)"). The caller makes
/// sure no allocation of its own is still held.
void require_free_gpu_memory(int gpu, std::uint64_t needed, std::int64_t count, DataType type, std::string_view where);

/// Makes `device` current for the guard's lifetime and restores the previous one.
class DeviceGuard {
 public:
  /// Switches to `device` (no call when it is already current).
  explicit DeviceGuard(int device) {
    ARTUNE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) ARTUNE_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/// Runs `release` with `device` current, then restores the previous device; never throws
/// (for destructors: a failure while releasing is ignored).
template <typename Release>
void release_on_device(int device, Release&& release) noexcept {
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  release();
  cudaSetDevice(previous);
}

/// A non-blocking stream owned on one device.
class Stream {
 public:
  Stream() = default;
  /// Creates a stream on `device` that does not synchronise with the legacy default stream.
  explicit Stream(int device) : device_(device) {
    DeviceGuard guard(device);
    ARTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~Stream() { reset(); }
  Stream(Stream&& o) noexcept : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      stream_ = std::exchange(o.stream_, nullptr);
    }
    return *this;
  }
  /// The raw handle.
  cudaStream_t get() const noexcept { return stream_; }
  /// The device the stream belongs to.
  int device() const noexcept { return device_; }

 private:
  void reset() noexcept {
    if (stream_ != nullptr) {
      release_on_device(device_, [this] { cudaStreamDestroy(stream_); });
      stream_ = nullptr;
    }
  }
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

/// An event without timing (cheapest to record and wait on), owned on one device.
class Event {
 public:
  Event() = default;
  /// Creates the event on `device`; `timing` enables cudaEventElapsedTime.
  explicit Event(int device, bool timing = false) : device_(device) {
    DeviceGuard guard(device);
    ARTUNE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { reset(); }
  Event(Event&& o) noexcept : device_(o.device_), event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      event_ = std::exchange(o.event_, nullptr);
    }
    return *this;
  }
  /// The raw handle.
  cudaEvent_t get() const noexcept { return event_; }

 private:
  void reset() noexcept {
    if (event_ != nullptr) {
      release_on_device(device_, [this] { cudaEventDestroy(event_); });
      event_ = nullptr;
    }
  }
  int device_ = -1;
  cudaEvent_t event_ = nullptr;
};

/// Device memory on one GPU (cudaMalloc), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` on `device` (nothing for 0 bytes).
  DeviceBuffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
    if (bytes == 0) return;
    DeviceGuard guard(device);
    ARTUNE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : device_(o.device_), bytes_(std::exchange(o.bytes_, 0)), ptr_(std::exchange(o.ptr_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      bytes_ = std::exchange(o.bytes_, 0);
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }
  /// Start of the allocation (nullptr when empty).
  void* get() const noexcept { return ptr_; }
  /// Size in bytes.
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void reset() noexcept {
    if (ptr_ != nullptr) {
      release_on_device(device_, [this] { cudaFree(ptr_); });
      ptr_ = nullptr;
    }
  }
  int device_ = -1;
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

/// Pinned host memory mapped into every device's address space (portable, mapped); with
/// unified addressing its pointer is valid in kernels on any GPU and in cudaMemcpyAsync.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  /// Allocates `bytes` of pinned, portable, mapped host memory.
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    ARTUNE_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  }
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : bytes_(std::exchange(o.bytes_, 0)), ptr_(std::exchange(o.ptr_, nullptr)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_ != nullptr) cudaFreeHost(ptr_);
      bytes_ = std::exchange(o.bytes_, 0);
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }
  /// Start of the allocation.
  void* get() const noexcept { return ptr_; }
  /// Size in bytes.
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

/// Usable CUDA devices; 0 when there is no GPU, no driver or an insufficient one. Never throws.
inline int usable_device_count() noexcept {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" status so later queries start clean
    return 0;
  }
  return n;
}

}  // namespace artune::cuda
