#include "artune/executor/reduce_kernels.hpp"

#include <algorithm>

namespace artune {

namespace {

using namespace kernels;

// Calls f(Tag{}, std::integral_constant<ReduceOp, OP>{}) for the runtime (type, op); avg → sum.
template <typename F>
void dispatch(DataType type, ReduceOp op, F&& f) {
  auto with_op = [&](auto tag) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: f(tag, std::integral_constant<ReduceOp, ReduceOp::kSum>{}); break;
      case ReduceOp::kProd: f(tag, std::integral_constant<ReduceOp, ReduceOp::kProd>{}); break;
      case ReduceOp::kMin: f(tag, std::integral_constant<ReduceOp, ReduceOp::kMin>{}); break;
      case ReduceOp::kMax: f(tag, std::integral_constant<ReduceOp, ReduceOp::kMax>{}); break;
    }
  };
  switch (type) {
    case DataType::kFloat32: with_op(F32{}); break;
    case DataType::kFloat64: with_op(F64{}); break;
    case DataType::kFloat16: with_op(F16{}); break;
    case DataType::kBFloat16: with_op(BF16{}); break;
    case DataType::kInt32: with_op(I32{}); break;
    case DataType::kInt64: with_op(I64{}); break;
    case DataType::kUInt8: with_op(U8{}); break;
  }
}

// Elements per block of reduce_many_into: 16 KiB of float, well inside L1/L2.
constexpr std::int64_t kBlockBytes = 16 * 1024;

}  // namespace

void reduce_into(void* dst, const void* src, std::int64_t n, DataType type, ReduceOp op) {
  if (n <= 0) return;
  dispatch(type, op, [&](auto tag, auto o) {
    using T = typename decltype(tag)::T;
    reduce_loop<decltype(tag), decltype(o)::value>(static_cast<T*>(dst), static_cast<const T*>(src), n);
  });
}

void reduce_pair(void* out, const void* a, const void* b, std::int64_t n, DataType type, ReduceOp op) {
  if (n <= 0) return;
  dispatch(type, op, [&](auto tag, auto o) {
    using T = typename decltype(tag)::T;
    reduce3_loop<decltype(tag), decltype(o)::value>(static_cast<T*>(out), static_cast<const T*>(a),
                                                    static_cast<const T*>(b), n);
  });
}

void reduce_many_into(void* dst, const void* const* srcs, int m, std::int64_t n, DataType type, ReduceOp op) {
  if (n <= 0 || m <= 0) return;
  dispatch(type, op, [&](auto tag, auto o) {
    using Tag = decltype(tag);
    using T = typename Tag::T;
    constexpr std::int64_t block = std::max<std::int64_t>(kBlockBytes / static_cast<std::int64_t>(sizeof(T)), 64);
    T* d = static_cast<T*>(dst);
    for (std::int64_t start = 0; start < n; start += block) {
      const std::int64_t len = std::min(block, n - start);
      for (int j = 0; j < m; ++j) {
        reduce_loop<Tag, decltype(o)::value>(d + start, static_cast<const T*>(srcs[j]) + start, len);
      }
    }
  });
}

void scale_down(void* dst, std::int64_t n, DataType type, int divisor) {
  if (n <= 0 || divisor == 1) return;
  dispatch(type, ReduceOp::kSum, [&](auto tag, auto) {
    using T = typename decltype(tag)::T;
    scale_loop<decltype(tag)>(static_cast<T*>(dst), n, divisor);
  });
}

}  // namespace artune
