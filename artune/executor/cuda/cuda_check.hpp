#pragma once
// Checked CUDA calls and RAII owners of device state. Every runtime call goes
// through ARTUNE_CUDA_CHECK, which turns a failure into a BackendFailure that
// carries the call's text and cudaGetErrorString. Destructors never throw: a
// failure while releasing is ignored (the process is usually unwinding already).

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "artune/core/error.hpp"
#include "artune/core/types.hpp"

namespace artune::cuda {

/// Throws BackendFailure("<call>: <error string> (<error name>)") unless `status` is cudaSuccess.
inline void check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  throw BackendFailure(std::string(call) + ": " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
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

/// unique_ptr deleter that releases a CUDA handle with the device it belongs to current.
template <typename Handle, cudaError_t (*Release)(Handle)>
struct ReleaseOnDevice {
  int device = -1;
  void operator()(Handle handle) const noexcept {
    release_on_device(device, [handle] { Release(handle); });
  }
};

/// unique_ptr deleter for pinned host memory (no device to switch to).
struct FreePinned {
  void operator()(void* ptr) const noexcept { cudaFreeHost(ptr); }
};

/// A non-blocking stream owned on one device.
class Stream {
 public:
  Stream() = default;
  /// Creates a stream on `device` that does not synchronise with the legacy default stream.
  explicit Stream(int device) : stream_(nullptr, {device}) {
    DeviceGuard guard(device);
    cudaStream_t s = nullptr;
    ARTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_.reset(s);
  }
  /// The raw handle.
  cudaStream_t get() const noexcept { return stream_.get(); }

 private:
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, ReleaseOnDevice<cudaStream_t, cudaStreamDestroy>> stream_;
};

/// An event without timing (cheapest to record and wait on), owned on one device.
class Event {
 public:
  Event() = default;
  /// Creates the event on `device`; `timing` enables cudaEventElapsedTime.
  explicit Event(int device, bool timing = false) : event_(nullptr, {device}) {
    DeviceGuard guard(device);
    cudaEvent_t e = nullptr;
    ARTUNE_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    event_.reset(e);
  }
  /// The raw handle.
  cudaEvent_t get() const noexcept { return event_.get(); }

 private:
  std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, ReleaseOnDevice<cudaEvent_t, cudaEventDestroy>> event_;
};

/// Device memory on one GPU (cudaMalloc), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` on `device` (nothing for 0 bytes).
  DeviceBuffer(int device, std::size_t bytes) : ptr_(nullptr, {device}) {
    if (bytes == 0) return;
    DeviceGuard guard(device);
    void* p = nullptr;
    ARTUNE_CUDA_CHECK(cudaMalloc(&p, bytes));
    ptr_.reset(p);
  }
  /// Start of the allocation (nullptr when empty).
  void* get() const noexcept { return ptr_.get(); }

 private:
  std::unique_ptr<void, ReleaseOnDevice<void*, cudaFree>> ptr_;
};

/// Pinned host memory mapped into every device's address space (portable, mapped); with
/// unified addressing its pointer is valid in kernels on any GPU and in cudaMemcpyAsync.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  /// Allocates `bytes` of pinned, portable, mapped host memory.
  explicit PinnedBuffer(std::size_t bytes) {
    if (bytes == 0) return;
    void* p = nullptr;
    ARTUNE_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    ptr_.reset(p);
  }
  /// Start of the allocation.
  void* get() const noexcept { return ptr_.get(); }

 private:
  std::unique_ptr<void, FreePinned> ptr_;
};

/// What a device-count query says about this machine.
enum class DeviceQuery {
  kDevices,   ///< the query succeeded (the count may still be 0)
  kNoDevice,  ///< no GPU: cudaErrorNoDevice, or no CUDA driver installed at all
  kError,     ///< anything else (a driver older than the runtime, a broken install, …): a failure to report
};

/// Classifies the status of cudaGetDeviceCount. `driver_version` is cudaDriverGetVersion's value: 0
/// means no driver is installed (libcuda absent), which cudart reports as cudaErrorInsufficientDriver
/// (or cudaErrorStubLibrary when only the toolkit's stub is found): no GPU, not an error. A real
/// driver that is too old for this runtime is an error, as is every other status. Pure function.
constexpr DeviceQuery classify_device_query(cudaError_t status, int driver_version) noexcept {
  if (status == cudaSuccess) return DeviceQuery::kDevices;
  if (status == cudaErrorNoDevice) return DeviceQuery::kNoDevice;
  if ((status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary) && driver_version == 0) {
    return DeviceQuery::kNoDevice;
  }
  return DeviceQuery::kError;
}

/// The message of a device-count query that failed (kError): the call, CUDA's name and text for the
/// status, and the driver and runtime versions ("driver 12.2, runtime 13.0").
inline std::string device_query_error(cudaError_t status, int driver_version, int runtime_version) {
  const auto version = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  return fmt::format("cudaGetDeviceCount: {} ({}); CUDA driver {}, runtime {}", cudaGetErrorString(status),
                     cudaGetErrorName(status), driver_version == 0 ? std::string("none") : version(driver_version),
                     version(runtime_version));
}

/// Usable CUDA devices; 0 only when the machine has no GPU (no device, no driver). Any other
/// failure of the query (an insufficient driver, a broken install) throws BackendFailure naming
/// it, so that callers report it (exit 3) instead of running as if there were no GPU.
inline int usable_device_count() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status == cudaSuccess) return n;
  cudaGetLastError();  // clear the status so later queries start clean
  int driver = 0;
  int runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  switch (classify_device_query(status, driver)) {
    case DeviceQuery::kDevices: return n;
    case DeviceQuery::kNoDevice: return 0;
    case DeviceQuery::kError: break;
  }
  throw BackendFailure(device_query_error(status, driver, runtime));
}

}  // namespace artune::cuda
