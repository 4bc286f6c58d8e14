#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "artune/core/types.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune/executor/harness/verification.hpp"

using namespace artune;

namespace {

bool is_float(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// Reference: combine in double, then store with the type's rounding (exact for the values used).
double combine_ref(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return a + b;
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
  }
  return 0;
}

// Values: small integers and, for floats, binary fractions, so the reference is exact.
std::vector<std::byte> random_buffer(DataType type, std::int64_t n, std::mt19937& rng) {
  std::vector<std::byte> buf(static_cast<std::size_t>(n) * element_size(type));
  std::uniform_int_distribution<int> small(-8, 8);
  for (std::int64_t i = 0; i < n; ++i) {
    double v = small(rng);
    if (is_float(type)) v += small(rng) / 16.0;
    if (type == DataType::kUInt8) v = std::abs(v);
    store_from_double(buf.data(), type, i, v);
  }
  return buf;
}

}  // namespace

TEST_CASE("reduce_kernels.every_type_and_op") {
  std::mt19937 rng(3);
  for (DataType type : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      for (std::int64_t n : {0, 1, 7, 64, 1000, 4099}) {
        auto dst = random_buffer(type, n, rng);
        const auto src = random_buffer(type, n, rng);
        const auto before = dst;
        reduce_into(dst.data(), src.data(), n, type, op);
        for (std::int64_t i = 0; i < n; ++i) {
          std::vector<std::byte> want(element_size(type));
          store_from_double(
              want.data(), type, 0,
              combine_ref(op, load_as_double(before.data(), type, i), load_as_double(src.data(), type, i)));
          REQUIRE_MESSAGE(load_as_double(dst.data(), type, i) == load_as_double(want.data(), type, 0),
                          to_string(type) << " " << to_string(op) << " i=" << i);
        }
        // reduce_pair writes the same into a third buffer.
        std::vector<std::byte> out(before.size());
        reduce_pair(out.data(), before.data(), src.data(), n, type, op);
        CHECK(out == dst);
      }
    }
  }
}

TEST_CASE("reduce_kernels.16_bit_floats_round_to_nearest_even") {
  // 2048 + 1 is a tie in half (spacing 2 above 2048): RNE keeps 2048; 2050 + 1 → 2052.
  std::uint16_t a[2] = {float_to_half(2048.0f), float_to_half(2050.0f)};
  const std::uint16_t one[2] = {float_to_half(1.0f), float_to_half(1.0f)};
  reduce_into(a, one, 2, DataType::kFloat16, ReduceOp::kSum);
  CHECK(half_to_float(a[0]) == 2048.0f);
  CHECK(half_to_float(a[1]) == 2052.0f);
  std::uint16_t b[2] = {float_to_bfloat16(256.0f), float_to_bfloat16(258.0f)};
  const std::uint16_t bone[2] = {float_to_bfloat16(1.0f), float_to_bfloat16(1.0f)};
  reduce_into(b, bone, 2, DataType::kBFloat16, ReduceOp::kSum);
  CHECK(bfloat16_to_float(b[0]) == 256.0f);
  CHECK(bfloat16_to_float(b[1]) == 260.0f);
  // Overflow goes to infinity.
  std::uint16_t big = float_to_half(60000.0f);
  const std::uint16_t more = float_to_half(10000.0f);
  reduce_into(&big, &more, 1, DataType::kFloat16, ReduceOp::kSum);
  CHECK(std::isinf(half_to_float(big)));
}

TEST_CASE("reduce_kernels.integers_wrap") {
  std::int32_t a[2] = {INT_MAX, 1 << 20};
  const std::int32_t b[2] = {1, 1 << 12};
  reduce_into(a, b, 2, DataType::kInt32, ReduceOp::kSum);
  CHECK(a[0] == INT_MIN);
  std::int32_t p[1] = {1 << 20};
  const std::int32_t q[1] = {1 << 12};
  reduce_into(p, q, 1, DataType::kInt32, ReduceOp::kProd);
  CHECK(p[0] == 0);  // 2^32 wraps to 0
  std::uint8_t u[1] = {200};
  const std::uint8_t v[1] = {100};
  reduce_into(u, v, 1, DataType::kUInt8, ReduceOp::kSum);
  CHECK(u[0] == 44);
  std::int64_t m[2] = {-5, 7};
  const std::int64_t w[2] = {3, -9};
  reduce_into(m, w, 2, DataType::kInt64, ReduceOp::kMin);
  CHECK(m[0] == -5);
  CHECK(m[1] == -9);
}

TEST_CASE("reduce_kernels.reduce_many_matches_pairwise") {
  std::mt19937 rng(5);
  for (DataType type : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      const std::int64_t n = 20000;  // several blocks
      auto dst = random_buffer(type, n, rng);
      std::vector<std::vector<std::byte>> srcs;
      for (int j = 0; j < 3; ++j) srcs.push_back(random_buffer(type, n, rng));
      auto want = dst;
      for (const auto& s : srcs) reduce_into(want.data(), s.data(), n, type, op);
      const void* ptrs[3] = {srcs[0].data(), srcs[1].data(), srcs[2].data()};
      reduce_many_into(dst.data(), ptrs, 3, n, type, op);
      CHECK(dst == want);
    }
  }
}

TEST_CASE("reduce_kernels.scale_down") {
  float f[3] = {7, 9, -3};
  scale_down(f, 3, DataType::kFloat32, 2);
  CHECK(f[0] == 3.5f);
  CHECK(f[1] == 4.5f);
  CHECK(f[2] == -1.5f);
  std::int32_t i[3] = {7, -7, 8};
  scale_down(i, 3, DataType::kInt32, 2);
  CHECK(i[0] == 3);
  CHECK(i[1] == -3);
  CHECK(i[2] == 4);
  std::uint16_t h[1] = {float_to_half(24.0f)};
  scale_down(h, 1, DataType::kFloat16, 8);
  CHECK(half_to_float(h[0]) == 3.0f);
  std::uint16_t b[1] = {float_to_bfloat16(1.0f)};
  scale_down(b, 1, DataType::kBFloat16, 3);
  CHECK(bfloat16_to_float(b[0]) == bfloat16_to_float(float_to_bfloat16(1.0f / 3.0f)));
  double d[1] = {1.0};
  scale_down(d, 1, DataType::kFloat64, 3);
  CHECK(d[0] == 1.0 / 3.0);
}

TEST_CASE("reduce_kernels.vectorised_16_bit_conversions_match_scalar") {
  // The library's loops are vectorised (compiled without trapping math); feed every bit
  // pattern through them and compare with the scalar conversions used by the tests.
  for (DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<std::uint16_t> all(0x10000), ones(0x10000), out(0x10000);
    const bool half = type == DataType::kFloat16;
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
      all[i] = static_cast<std::uint16_t>(i);
      ones[i] = half ? float_to_half(1.0f) : float_to_bfloat16(1.0f);
    }
    auto to_f = [&](std::uint16_t v) { return half ? half_to_float(v) : bfloat16_to_float(v); };
    auto from_f = [&](float v) { return half ? float_to_half(v) : float_to_bfloat16(v); };
    reduce_pair(out.data(), all.data(), ones.data(), 0x10000, type, ReduceOp::kProd);  // x · 1
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
      if (std::isnan(to_f(all[i]))) {
        REQUIRE(std::isnan(to_f(out[i])));
      } else {
        REQUIRE_MESSAGE(out[i] == all[i], to_string(type) << " bits " << i);
      }
    }
    reduce_pair(out.data(), all.data(), ones.data(), 0x10000, type, ReduceOp::kSum);  // x + 1, rounded
    for (std::uint32_t i = 0; i < 0x10000; ++i) {
      const float want = to_f(all[i]) + 1.0f;
      if (std::isnan(want)) continue;
      REQUIRE_MESSAGE(out[i] == from_f(want), to_string(type) << " bits " << i);
    }
  }
}
