// Elementwise reduction and scale kernels for every DataType × combine.
// Memory bound: the body moves 128 bits per access once a scalar head has
// brought both pointers to a 16-byte boundary (launch_geometry decides whether
// they can get there together), a scalar tail takes the rest, and
// the grid loops grid-stride so a capped grid covers any count. Half and
// bfloat16 combine in float and round once, which gives the correctly rounded
// result (float carries more than 2·p+2 bits of either format). Integer sum and
// prod wrap (computed unsigned) instead of overflowing into undefined behaviour.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <type_traits>

#include "artune/executor/cuda/reduce_kernels.hpp"

namespace artune::cuda {
namespace {

template <typename T>
struct Arith {  // integers and native floating point
  using Wide = T;
  __host__ __device__ static Wide load(T v) { return v; }
  __host__ __device__ static T store(Wide v) { return v; }
};
template <>
struct Arith<__half> {
  using Wide = float;
  __host__ __device__ static float load(__half v) { return __half2float(v); }
  __host__ __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct Arith<__nv_bfloat16> {
  using Wide = float;
  __host__ __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <typename W>
__host__ __device__ W wrap_add(W a, W b) {
  if constexpr (std::is_integral_v<W>) {
    using U = std::make_unsigned_t<W>;
    return static_cast<W>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename W>
__host__ __device__ W wrap_mul(W a, W b) {
  if constexpr (std::is_integral_v<W>) {
    // uint8 promotes to int before multiplying; widen to unsigned of at least 32 bits.
    using U = std::conditional_t<(sizeof(W) < 4), unsigned int, std::make_unsigned_t<W>>;
    return static_cast<W>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <KernelOp Op, typename W>
__host__ __device__ W combine(W a, W b) {
  if constexpr (Op == KernelOp::kSum)
    return wrap_add(a, b);
  else if constexpr (Op == KernelOp::kProd)
    return wrap_mul(a, b);
  else if constexpr (Op == KernelOp::kMin)
    return b < a ? b : a;
  else
    return a < b ? b : a;
}

template <typename T>
struct alignas(kVectorBytes) Vec {
  static constexpr int kWidth = kVectorBytes / sizeof(T);
  T v[kWidth];
};

// One lane of the reduce kernel: lane `first` of `stride` takes every stride-th head element,
// vector access and tail element (see LaunchGeometry). The kernel runs it per thread; run_reduce_on_host runs it per
// lane on the host, so the arithmetic and the split are the same code on both sides.
template <typename T, KernelOp Op>
__host__ __device__ void reduce_lane(T* dst, const T* src, std::int64_t head, std::int64_t vector_count,
                                     std::int64_t tail_begin, std::int64_t count, std::int64_t first,
                                     std::int64_t stride) {
  using A = Arith<T>;
  for (std::int64_t i = first; i < head; i += stride) {
    dst[i] = A::store(combine<Op>(A::load(dst[i]), A::load(src[i])));
  }
  auto* dv = reinterpret_cast<Vec<T>*>(dst + head);
  const auto* sv = reinterpret_cast<const Vec<T>*>(src + head);
  for (std::int64_t k = first; k < vector_count; k += stride) {
    Vec<T> a = dv[k];
    const Vec<T> b = sv[k];
#pragma unroll
    for (int j = 0; j < Vec<T>::kWidth; ++j) {
      a.v[j] = A::store(combine<Op>(A::load(a.v[j]), A::load(b.v[j])));
    }
    dv[k] = a;
  }
  for (std::int64_t i = tail_begin + first; i < count; i += stride) {
    dst[i] = A::store(combine<Op>(A::load(dst[i]), A::load(src[i])));
  }
}

template <typename T, KernelOp Op>
__global__ void reduce_kernel(T* dst, const T* src, std::int64_t head, std::int64_t vector_count,
                              std::int64_t tail_begin, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  reduce_lane<T, Op>(dst, src, head, vector_count, tail_begin, count, first, stride);
}

template <typename T>
__host__ __device__ T divide(T x, std::int64_t divisor) {
  using A = Arith<T>;
  using W = typename A::Wide;
  if constexpr (std::is_integral_v<W>) {
    // In 64 bits: a uint8 divisor of 256 ranks must not wrap to 0. Truncates toward zero.
    return static_cast<T>(static_cast<std::int64_t>(x) / divisor);
  } else {
    return A::store(A::load(x) / static_cast<W>(divisor));
  }
}

// One lane of the scale kernel (see reduce_lane).
template <typename T>
__host__ __device__ void scale_lane(T* dst, std::int64_t divisor, std::int64_t head, std::int64_t vector_count,
                                    std::int64_t tail_begin, std::int64_t count, std::int64_t first,
                                    std::int64_t stride) {
  for (std::int64_t i = first; i < head; i += stride) dst[i] = divide(dst[i], divisor);
  auto* dv = reinterpret_cast<Vec<T>*>(dst + head);
  for (std::int64_t k = first; k < vector_count; k += stride) {
    Vec<T> a = dv[k];
#pragma unroll
    for (int j = 0; j < Vec<T>::kWidth; ++j) a.v[j] = divide(a.v[j], divisor);
    dv[k] = a;
  }
  for (std::int64_t i = tail_begin + first; i < count; i += stride) dst[i] = divide(dst[i], divisor);
}

template <typename T>
__global__ void scale_kernel(T* dst, std::int64_t divisor, std::int64_t head, std::int64_t vector_count,
                             std::int64_t tail_begin, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  scale_lane<T>(dst, divisor, head, vector_count, tail_begin, count, first, stride);
}

using ReduceLauncher = cudaError_t (*)(void*, const void*, const LaunchGeometry&, cudaStream_t);
using ScaleLauncher = cudaError_t (*)(void*, std::int64_t, const LaunchGeometry&, cudaStream_t);

template <typename T, KernelOp Op>
cudaError_t launch_reduce_as(void* dst, const void* src, const LaunchGeometry& g, cudaStream_t stream) {
  reduce_kernel<T, Op><<<g.blocks, g.threads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(src), g.head,
                                                           g.vector_count, g.tail_begin, g.count);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_scale_as(void* dst, std::int64_t divisor, const LaunchGeometry& g, cudaStream_t stream) {
  scale_kernel<T><<<g.blocks, g.threads, 0, stream>>>(static_cast<T*>(dst), divisor, g.head, g.vector_count,
                                                      g.tail_begin, g.count);
  return cudaGetLastError();
}

// Resident blocks per SM of a kernel at `threads` per block on the current device (occupancy API).
using Occupancy = cudaError_t (*)(int*, int);

template <typename T, KernelOp Op>
cudaError_t reduce_occupancy_as(int* blocks, int threads) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reduce_kernel<T, Op>, threads, 0);
}

template <typename T>
cudaError_t scale_occupancy_as(int* blocks, int threads) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, scale_kernel<T>, threads, 0);
}

// Host twins of the launchers: every lane of the grid, one after the other.
using HostReduce = void (*)(void*, const void*, const LaunchGeometry&);
using HostScale = void (*)(void*, std::int64_t, const LaunchGeometry&);

template <typename T, KernelOp Op>
void reduce_on_host_as(void* dst, const void* src, const LaunchGeometry& g) {
  const std::int64_t lanes = static_cast<std::int64_t>(g.blocks) * g.threads;
  for (std::int64_t lane = 0; lane < lanes; ++lane) {
    reduce_lane<T, Op>(static_cast<T*>(dst), static_cast<const T*>(src), g.head, g.vector_count, g.tail_begin, g.count,
                       lane, lanes);
  }
}

template <typename T>
void scale_on_host_as(void* dst, std::int64_t divisor, const LaunchGeometry& g) {
  const std::int64_t lanes = static_cast<std::int64_t>(g.blocks) * g.threads;
  for (std::int64_t lane = 0; lane < lanes; ++lane) {
    scale_lane<T>(static_cast<T*>(dst), divisor, g.head, g.vector_count, g.tail_begin, g.count, lane, lanes);
  }
}

template <typename T>
constexpr DataType kTypeOf = DataType::kFloat32;
template <>
constexpr DataType kTypeOf<double> = DataType::kFloat64;
template <>
constexpr DataType kTypeOf<__half> = DataType::kFloat16;
template <>
constexpr DataType kTypeOf<__nv_bfloat16> = DataType::kBFloat16;
template <>
constexpr DataType kTypeOf<std::int32_t> = DataType::kInt32;
template <>
constexpr DataType kTypeOf<std::int64_t> = DataType::kInt64;
template <>
constexpr DataType kTypeOf<std::uint8_t> = DataType::kUInt8;

struct Tables {
  std::array<ReduceLauncher, kReduceKernelCount> reduce{};
  std::array<ScaleLauncher, kKernelTypes> scale{};
  std::array<HostReduce, kReduceKernelCount> host_reduce{};
  std::array<HostScale, kKernelTypes> host_scale{};
  std::array<Occupancy, kReduceKernelCount> reduce_occupancy{};
  std::array<Occupancy, kKernelTypes> scale_occupancy{};

  template <typename T, KernelOp Op>
  void add_combine() {
    const int id = reduce_kernel_id(kTypeOf<T>, Op);
    reduce[id] = &launch_reduce_as<T, Op>;
    host_reduce[id] = &reduce_on_host_as<T, Op>;
    reduce_occupancy[id] = &reduce_occupancy_as<T, Op>;
  }
  template <typename T>
  void add_type() {
    add_combine<T, KernelOp::kSum>();
    add_combine<T, KernelOp::kProd>();
    add_combine<T, KernelOp::kMin>();
    add_combine<T, KernelOp::kMax>();
    scale[scale_kernel_id(kTypeOf<T>)] = &launch_scale_as<T>;
    host_scale[scale_kernel_id(kTypeOf<T>)] = &scale_on_host_as<T>;
    scale_occupancy[scale_kernel_id(kTypeOf<T>)] = &scale_occupancy_as<T>;
  }
  Tables() {
    add_type<float>();
    add_type<double>();
    add_type<__half>();
    add_type<__nv_bfloat16>();
    add_type<std::int32_t>();
    add_type<std::int64_t>();
    add_type<std::uint8_t>();
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

cudaError_t reduce_blocks_per_sm(int kernel_id, int threads, int* blocks) {
  if (kernel_id < 0 || kernel_id >= kReduceKernelCount || tables().reduce_occupancy[kernel_id] == nullptr) {
    return cudaErrorInvalidValue;
  }
  return tables().reduce_occupancy[kernel_id](blocks, threads);
}

cudaError_t scale_blocks_per_sm(int kernel_id, int threads, int* blocks) {
  if (kernel_id < 0 || kernel_id >= kKernelTypes || tables().scale_occupancy[kernel_id] == nullptr) {
    return cudaErrorInvalidValue;
  }
  return tables().scale_occupancy[kernel_id](blocks, threads);
}

cudaError_t launch_reduce(int kernel_id, void* dst, const void* src, const LaunchGeometry& geometry,
                          cudaStream_t stream) {
  if (kernel_id < 0 || kernel_id >= kReduceKernelCount || tables().reduce[kernel_id] == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (geometry.blocks == 0) return cudaSuccess;
  // The launch's status is read with cudaGetLastError(): first clear whatever an earlier call left
  // there (a polled cudaErrorNotReady, an already-enabled peer), which its caller handled already.
  // Sticky errors (a faulted context) are reported by the launch itself again.
  (void)cudaGetLastError();
  return tables().reduce[kernel_id](dst, src, geometry, stream);
}

cudaError_t launch_scale(int kernel_id, void* dst, std::int64_t divisor, const LaunchGeometry& geometry,
                         cudaStream_t stream) {
  if (kernel_id < 0 || kernel_id >= kKernelTypes || tables().scale[kernel_id] == nullptr || divisor == 0) {
    return cudaErrorInvalidValue;
  }
  if (geometry.blocks == 0) return cudaSuccess;
  (void)cudaGetLastError();  // as in launch_reduce
  return tables().scale[kernel_id](dst, divisor, geometry, stream);
}

cudaError_t run_reduce_on_host(int kernel_id, void* dst, const void* src, const LaunchGeometry& geometry) {
  if (kernel_id < 0 || kernel_id >= kReduceKernelCount || tables().host_reduce[kernel_id] == nullptr) {
    return cudaErrorInvalidValue;
  }
  tables().host_reduce[kernel_id](dst, src, geometry);
  return cudaSuccess;
}

cudaError_t run_scale_on_host(int kernel_id, void* dst, std::int64_t divisor, const LaunchGeometry& geometry) {
  if (kernel_id < 0 || kernel_id >= kKernelTypes || tables().host_scale[kernel_id] == nullptr || divisor == 0) {
    return cudaErrorInvalidValue;
  }
  tables().host_scale[kernel_id](dst, divisor, geometry);
  return cudaSuccess;
}

int device_reduce_kernel_count() noexcept {
  int n = 0;
  for (auto f : tables().reduce) n += f != nullptr;
  return n;
}

int device_scale_kernel_count() noexcept {
  int n = 0;
  for (auto f : tables().scale) n += f != nullptr;
  return n;
}

}  // namespace artune::cuda
