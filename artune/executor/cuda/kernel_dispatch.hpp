#pragma once
// Host-side dispatch for the CUDA reduction kernels: which kernel serves a
// (DataType, ReduceOp) pair, how it is launched, and how types and ops map to
// NCCL's enums. Pure host code with no CUDA header, so it builds and is tested
// on every machine; reduce_kernels.cu instantiates its table from the same
// constexpr ids, which keeps host and device in step by construction.

#include <cstddef>
#include <cstdint>

#include "artune/core/types.hpp"

namespace artune::cuda {

/// The elementwise combine a reduce kernel applies (avg reduces with kSum, then scales).
enum class KernelOp : std::uint8_t { kSum, kProd, kMin, kMax };

/// Number of element types with kernels (every DataType).
inline constexpr int kKernelTypes = 7;
/// Number of elementwise combines.
inline constexpr int kKernelOps = 4;
/// Number of reduce kernels: one per type × combine.
inline constexpr int kReduceKernelCount = kKernelTypes * kKernelOps;
/// Threads per block of every kernel (a multiple of the warp size).
inline constexpr int kThreadsPerBlock = 512;
/// Resident blocks per SM the grid is capped at when the occupancy API gave nothing (host tests); the
/// backends pass the kernel's own figure (reduce_blocks_per_sm). The kernels loop grid-stride beyond.
inline constexpr int kBlocksPerSm = 4;
/// Bytes one vectorised access moves (a 128-bit load/store).
inline constexpr int kVectorBytes = 16;

/// Dense index of a type in the kernel tables (the DataType enumerator's position).
constexpr int type_index(DataType type) noexcept { return static_cast<int>(type); }
/// Dense index of a combine.
constexpr int op_index(KernelOp op) noexcept { return static_cast<int>(op); }
/// Id of the reduce kernel for a type and combine: type_index·kKernelOps + op_index.
constexpr int reduce_kernel_id(DataType type, KernelOp op) noexcept {
  return type_index(type) * kKernelOps + op_index(op);
}
/// Id of the scale (divide) kernel of a type: type_index.
constexpr int scale_kernel_id(DataType type) noexcept { return type_index(type); }

/// What it takes to apply one ReduceOp to one DataType on the GPU.
struct ReduceKernel {
  int id = -1;  ///< reduce_kernel_id(type, combine)
  DataType type = DataType::kFloat32;
  KernelOp combine = KernelOp::kSum;
  bool scale_after = false;  ///< avg: divide by the participant count after the last reduce
  int vector_width = 1;      ///< elements per 128-bit access
};

/// The kernel for a (type, op) pair; every pair has one.
ReduceKernel select_reduce_kernel(DataType type, ReduceOp op) noexcept;
/// The combine a ReduceOp reduces with (avg → sum).
KernelOp combine_of(ReduceOp op) noexcept;
/// Elements per 128-bit access for a type (16 / element size).
int vector_width(DataType type) noexcept;
/// Name of a combine ("sum", "prod", "min", "max").
const char* to_string(KernelOp op) noexcept;

/// How one elementwise kernel is launched over `count` elements: a scalar head [0, head), a
/// 128-bit body [head, tail_begin) of vector_count accesses, a scalar tail [tail_begin, count).
struct LaunchGeometry {
  std::int64_t count = 0;          ///< elements in all
  int vector_width = 1;            ///< elements per access in the vector body (1 = scalar only)
  std::int64_t head = 0;           ///< elements before the body, one at a time (to a 16-byte boundary)
  std::int64_t vector_count = 0;   ///< accesses in the vector body
  std::int64_t tail_begin = 0;     ///< first element after the body (= head + vector_count·vector_width)
  int blocks = 0;                  ///< grid size (0 = nothing to launch)
  int threads = kThreadsPerBlock;  ///< block size
};

/// Grid for `count` elements of `type`. The 128-bit body is used when every pointer (dst, src;
/// pass src = dst for single-operand kernels) sits at the same offset from a 16-byte boundary:
/// a scalar head of up to 15 bytes' worth of elements brings both to the boundary (plan regions
/// at odd element offsets of aligned buffers, e.g. ring shards, still vectorise); pointers at
/// different offsets run scalar. The grid covers the work once up to sm_count·blocks_per_sm
/// blocks and loops grid-stride beyond that.
LaunchGeometry launch_geometry(std::int64_t count, DataType type, std::uintptr_t dst, std::uintptr_t src, int sm_count,
                               int blocks_per_sm = kBlocksPerSm) noexcept;

/// Value of ncclDataType_t for a type (ncclFloat32 = 7, ncclBfloat16 = 9, …); nccl_backend.cpp
/// static_asserts these against nccl.h.
int nccl_data_type_code(DataType type) noexcept;
/// Value of ncclRedOp_t for an op (ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4).
int nccl_red_op_code(ReduceOp op) noexcept;

}  // namespace artune::cuda
