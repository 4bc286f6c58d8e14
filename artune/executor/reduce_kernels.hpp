#pragma once
// Host reduction loops for every element type × reduce op. Plain loops over
// restrict pointers so g++ vectorises them; float16 and bfloat16 compute in
// float (float's 24 significand bits ≥ 2·11 + 2, so rounding the float result
// to half/bfloat16 equals rounding the exact result: no double-rounding error).
// Signed integers add and multiply through their unsigned twins so overflow
// wraps instead of being undefined. avg accumulates as sum; scale_down()
// finalises it.

#include <cstdint>
#include <type_traits>

#include "artune/core/types.hpp"
#include "artune/executor/harness/verification.hpp"

namespace artune {

namespace kernels {

/// Element storage tags: how a type is held in memory and converted for arithmetic.
struct F32 {
  using T = float;
};
struct F64 {
  using T = double;
};
struct F16 {
  using T = std::uint16_t;
};
struct BF16 {
  using T = std::uint16_t;
};
struct I32 {
  using T = std::int32_t;
};
struct I64 {
  using T = std::int64_t;
};
struct U8 {
  using T = std::uint8_t;
};

/// Arithmetic type of a storage tag (float for the 16-bit floats).
template <typename Tag>
struct Compute {
  using type = typename Tag::T;
};
template <>
struct Compute<F16> {
  using type = float;
};
template <>
struct Compute<BF16> {
  using type = float;
};

/// Storage → arithmetic value.
template <typename Tag>
inline typename Compute<Tag>::type load(typename Tag::T v) noexcept {
  if constexpr (std::is_same_v<Tag, F16>)
    return half_to_float(v);
  else if constexpr (std::is_same_v<Tag, BF16>)
    return bfloat16_to_float(v);
  else
    return v;
}
/// Arithmetic value → storage (round to nearest even for the 16-bit floats).
template <typename Tag>
inline typename Tag::T store(typename Compute<Tag>::type v) noexcept {
  if constexpr (std::is_same_v<Tag, F16>)
    return float_to_half(v);
  else if constexpr (std::is_same_v<Tag, BF16>)
    return float_to_bfloat16(v);
  else
    return v;
}

/// a ⊕ b in the arithmetic type; OP is a ReduceOp (avg adds).
template <ReduceOp OP, typename C>
inline C combine(C a, C b) noexcept {
  if constexpr (OP == ReduceOp::kMin)
    return b < a ? b : a;
  else if constexpr (OP == ReduceOp::kMax)
    return a < b ? b : a;
  else if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    if constexpr (OP == ReduceOp::kProd)
      return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    else
      return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    if constexpr (OP == ReduceOp::kProd)
      return a * b;
    else
      return a + b;
  }
}

/// dst[i] = dst[i] ⊕ src[i], i < n.
template <typename Tag, ReduceOp OP>
inline void reduce_loop(typename Tag::T* __restrict dst, const typename Tag::T* __restrict src,
                        std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = store<Tag>(combine<OP>(load<Tag>(dst[i]), load<Tag>(src[i])));
}

/// out[i] = a[i] ⊕ b[i], i < n (out may not alias a or b).
template <typename Tag, ReduceOp OP>
inline void reduce3_loop(typename Tag::T* __restrict out, const typename Tag::T* __restrict a,
                         const typename Tag::T* __restrict b, std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) out[i] = store<Tag>(combine<OP>(load<Tag>(a[i]), load<Tag>(b[i])));
}

/// dst[i] = dst[i] / divisor, i < n (integers truncate toward zero).
template <typename Tag>
inline void scale_loop(typename Tag::T* __restrict dst, std::int64_t n, int divisor) noexcept {
  using C = typename Compute<Tag>::type;
  if constexpr (std::is_integral_v<C> && sizeof(C) < sizeof(int)) {
    // Divide in int: a uint8 divisor of 256 ranks must not wrap to 0 (a division by zero).
    for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<C>(static_cast<int>(dst[i]) / divisor);
  } else {
    const C d = static_cast<C>(divisor);
    for (std::int64_t i = 0; i < n; ++i) dst[i] = store<Tag>(static_cast<C>(load<Tag>(dst[i]) / d));
  }
}

}  // namespace kernels

/// dst[i] = dst[i] ⊕ src[i] for i < n (avg accumulates as sum); dst and src must not overlap.
void reduce_into(void* dst, const void* src, std::int64_t n, DataType type, ReduceOp op);
/// out[i] = a[i] ⊕ b[i] for i < n; out must not overlap a or b.
void reduce_pair(void* out, const void* a, const void* b, std::int64_t n, DataType type, ReduceOp op);
/// dst[i] = dst[i] ⊕ srcs[0][i] ⊕ … ⊕ srcs[m-1][i], blocked so dst stays in cache across sources.
void reduce_many_into(void* dst, const void* const* srcs, int m, std::int64_t n, DataType type, ReduceOp op);
/// dst[i] = dst[i] / divisor for i < n (finalises avg; integers truncate).
void scale_down(void* dst, std::int64_t n, DataType type, int divisor);

}  // namespace artune
