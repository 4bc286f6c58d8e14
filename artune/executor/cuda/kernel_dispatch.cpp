#include "artune/executor/cuda/kernel_dispatch.hpp"

#include <algorithm>

namespace artune::cuda {

KernelOp combine_of(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return KernelOp::kSum;
    case ReduceOp::kProd: return KernelOp::kProd;
    case ReduceOp::kMin: return KernelOp::kMin;
    case ReduceOp::kMax: return KernelOp::kMax;
    case ReduceOp::kAvg: return KernelOp::kSum;
  }
  return KernelOp::kSum;
}

int vector_width(DataType type) noexcept { return kVectorBytes / static_cast<int>(element_size(type)); }

ReduceKernel select_reduce_kernel(DataType type, ReduceOp op) noexcept {
  ReduceKernel k;
  k.type = type;
  k.combine = combine_of(op);
  k.id = reduce_kernel_id(type, k.combine);
  k.scale_after = op == ReduceOp::kAvg;
  k.vector_width = vector_width(type);
  return k;
}

const char* to_string(KernelOp op) noexcept {
  switch (op) {
    case KernelOp::kSum: return "sum";
    case KernelOp::kProd: return "prod";
    case KernelOp::kMin: return "min";
    case KernelOp::kMax: return "max";
  }
  return "?";
}

LaunchGeometry launch_geometry(std::int64_t count, DataType type, std::uintptr_t dst, std::uintptr_t src, int sm_count,
                               int blocks_per_sm) noexcept {
  LaunchGeometry g;
  g.count = std::max<std::int64_t>(count, 0);
  const auto es = static_cast<std::uintptr_t>(element_size(type));
  const std::uintptr_t phase = dst % kVectorBytes;
  // Same phase and element-aligned: peeling the head aligns both pointers at once.
  const bool vectorise = phase == src % kVectorBytes && phase % es == 0;
  if (vectorise) {
    g.vector_width = vector_width(type);
    g.head = std::min<std::int64_t>(g.count, static_cast<std::int64_t>((kVectorBytes - phase) % kVectorBytes / es));
    g.vector_count = (g.count - g.head) / g.vector_width;
  }
  g.tail_begin = g.head + g.vector_count * g.vector_width;
  // Each thread takes one head element, one vector access or one tail element per pass.
  const std::int64_t items = g.head + g.vector_count + (g.count - g.tail_begin);
  if (items == 0) {
    g.blocks = 0;
    return g;
  }
  const std::int64_t needed = (items + g.threads - 1) / g.threads;
  const std::int64_t cap = static_cast<std::int64_t>(std::max(sm_count, 1)) * std::max(blocks_per_sm, 1);
  g.blocks = static_cast<int>(std::min(needed, cap));
  return g;
}

int nccl_data_type_code(DataType type) noexcept {
  // ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3, ncclInt64 4, ncclUint64 5,
  // ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9.
  switch (type) {
    case DataType::kFloat32: return 7;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 6;
    case DataType::kBFloat16: return 9;
    case DataType::kInt32: return 2;
    case DataType::kInt64: return 4;
    case DataType::kUInt8: return 1;
  }
  return 7;
}

int nccl_red_op_code(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return 0;
    case ReduceOp::kProd: return 1;
    case ReduceOp::kMax: return 2;
    case ReduceOp::kMin: return 3;
    case ReduceOp::kAvg: return 4;
  }
  return 0;
}

}  // namespace artune::cuda
