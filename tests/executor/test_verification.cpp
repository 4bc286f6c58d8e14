#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/core/types.hpp"
#include "artune/executor/harness/verification.hpp"

using namespace artune;

namespace {

// Reference float → bfloat16: the nearer of the two neighbours, ties to the even one (computed in double).
std::uint16_t bf16_reference(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t lo = bits & 0xffff0000u;
  const std::uint32_t hi = lo + 0x10000u;
  const double x = std::fabs(static_cast<double>(f));
  const double a = std::fabs(static_cast<double>(std::bit_cast<float>(lo)));
  const double b = std::isinf(std::bit_cast<float>(hi)) ? std::ldexp(1.0, 128)
                                                        : std::fabs(static_cast<double>(std::bit_cast<float>(hi)));
  if (x - a < b - x) return static_cast<std::uint16_t>(lo >> 16);
  if (x - a > b - x) return static_cast<std::uint16_t>(hi >> 16);
  return static_cast<std::uint16_t>(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

// Reference float → half by exhaustive nearest search over the 31744 finite non-negative halves
// (sorted by value, so a binary search finds the neighbours).
std::uint16_t half_reference(float f) {
  if (std::isnan(f)) return 0x7e00;
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double x = std::fabs(static_cast<double>(f));
  // Largest finite half 65504; halfway to the next power (65536) rounds to inf.
  if (x >= 65520.0) return sign | 0x7c00;
  std::uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) {  // last half ≤ x
    const std::uint16_t mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (static_cast<double>(half_to_float(mid)) <= x)
      lo = mid;
    else
      hi = static_cast<std::uint16_t>(mid - 1);
  }
  if (static_cast<double>(half_to_float(lo)) == x || lo == 0x7bff) {
    return static_cast<std::uint16_t>(sign | lo);
  }
  const double a = half_to_float(lo);
  const double b = half_to_float(static_cast<std::uint16_t>(lo + 1));
  std::uint16_t pick;
  if (x - a < b - x)
    pick = lo;
  else if (x - a > b - x)
    pick = static_cast<std::uint16_t>(lo + 1);
  else
    pick = (lo & 1u) ? static_cast<std::uint16_t>(lo + 1) : lo;
  return static_cast<std::uint16_t>(sign | pick);
}

double half_reference_value(std::uint16_t h) {
  // Decoded from the definition: (-1)^s · 2^(e-15) · 1.m, subnormals 2^-14 · 0.m.
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0)
    v = std::ldexp(m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

std::vector<float> interesting_floats() {
  std::vector<float> out = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            65504.0f,
                            65519.99f,
                            65520.0f,
                            65536.0f,
                            1e-8f,
                            5.96e-8f,
                            2.98e-8f,
                            2.99e-8f,
                            6.1e-5f,
                            6.103515625e-05f,
                            3e38f,
                            INFINITY,
                            -INFINITY,
                            NAN,
                            std::numeric_limits<float>::denorm_min(),
                            1.00048828125f,
                            1.000732421875f};
  // Every half and the midpoints around it, nudged by one float ulp either way.
  for (std::uint32_t h = 0; h < 0x7c00; h += 7) {
    const float v = half_to_float(static_cast<std::uint16_t>(h));
    const float next = half_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
    for (float f : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      out.push_back(f);
      out.push_back(-f);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  return out;
}

}  // namespace

TEST_CASE("verification.half_to_float_exhaustive") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float got = half_to_float(static_cast<std::uint16_t>(h));
    const double want = half_reference_value(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      REQUIRE_MESSAGE(static_cast<double>(got) == want, "half bits " << h);
      CHECK(std::signbit(got) == ((h & 0x8000u) != 0));
    }
  }
}

TEST_CASE("verification.float_to_half_round_to_nearest_even") {
  for (float f : interesting_floats()) {
    const std::uint16_t got = float_to_half(f);
    const std::uint16_t want = half_reference(f);
    if (std::isnan(f)) {
      CHECK((got & 0x7c00u) == 0x7c00u);
      CHECK((got & 0x03ffu) != 0);
    } else {
      REQUIRE_MESSAGE(got == want, "float " << f << " bits " << std::bit_cast<std::uint32_t>(f));
    }
  }
  // Round trip of every finite half.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaN payloads
    REQUIRE(float_to_half(half_to_float(static_cast<std::uint16_t>(h))) == h);
  }
  CHECK(float_to_half(2049.0f) == float_to_half(2048.0f));  // tie → even
  CHECK(float_to_half(2051.0f) == float_to_half(2052.0f));
}

TEST_CASE("verification.bfloat16_round_to_nearest_even") {
  for (float f : interesting_floats()) {
    const std::uint16_t got = float_to_bfloat16(f);
    if (std::isnan(f)) {
      CHECK(std::isnan(bfloat16_to_float(got)));
    } else {
      REQUIRE_MESSAGE(got == bf16_reference(f), "float " << f);
    }
  }
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bfloat16_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    REQUIRE(float_to_bfloat16(f) == b);
  }
  CHECK(bfloat16_to_float(float_to_bfloat16(257.0f)) == 256.0f);  // tie → even
  CHECK(bfloat16_to_float(float_to_bfloat16(259.0f)) == 260.0f);
}

TEST_CASE("verification.inputs_small_and_results_exact") {
  for (int ranks : {1, 2, 3, 5, 7, 8, 16, 31, 32, 64}) {
    for (ReduceOp op : all_reduce_ops()) {
      for (int it = 0; it < 3; ++it) {
        for (std::int64_t i = 0; i < 500; ++i) {
          std::int64_t sum = 0, prod = 1, mn = 1 << 30, mx = -(1 << 30);
          for (int r = 0; r < ranks; ++r) {
            const std::int64_t v = input_value(op, ranks, r, i, it);
            REQUIRE(v >= 1);
            REQUIRE(v <= 4);
            sum += v;
            if (op == ReduceOp::kProd) prod *= v;  // other ops' inputs reach 4^64: no signed overflow
            mn = std::min(mn, v);
            mx = std::max(mx, v);
          }
          const std::int64_t e = expected_value(op, ranks, i, it);
          switch (op) {
            case ReduceOp::kSum:
              REQUIRE(e == sum);
              REQUIRE(sum <= 256);
              break;
            case ReduceOp::kProd:
              REQUIRE(e == prod);
              REQUIRE(prod <= 128);
              break;
            case ReduceOp::kMin: REQUIRE(e == mn); break;
            case ReduceOp::kMax: REQUIRE(e == mx); break;
            case ReduceOp::kAvg: REQUIRE(sum == e * ranks); break;
          }
        }
      }
    }
  }
}

TEST_CASE("verification.sums_exact_in_any_order_in_16_bit_floats") {
  // Reduce 64 ranks' inputs in bfloat16 and half in shuffled orders: always the expected value.
  std::mt19937 rng(11);
  const int ranks = 64;
  for (std::int64_t i = 0; i < 300; ++i) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kAvg}) {
      std::vector<int> order(ranks);
      for (int r = 0; r < ranks; ++r) order[static_cast<std::size_t>(r)] = r;
      std::shuffle(order.begin(), order.end(), rng);
      std::uint16_t h = float_to_half(static_cast<float>(input_value(op, ranks, order[0], i, 0)));
      std::uint16_t b = float_to_bfloat16(static_cast<float>(input_value(op, ranks, order[0], i, 0)));
      for (int k = 1; k < ranks; ++k) {
        const float v = static_cast<float>(input_value(op, ranks, order[static_cast<std::size_t>(k)], i, 0));
        if (op == ReduceOp::kProd) {
          h = float_to_half(half_to_float(h) * v);
          b = float_to_bfloat16(bfloat16_to_float(b) * v);
        } else {
          h = float_to_half(half_to_float(h) + v);
          b = float_to_bfloat16(bfloat16_to_float(b) + v);
        }
      }
      const std::int64_t e = expected_value(op, ranks, i, 0) * (op == ReduceOp::kAvg ? ranks : 1);
      REQUIRE(half_to_float(h) == static_cast<float>(e));
      REQUIRE(bfloat16_to_float(b) == static_cast<float>(e));
    }
  }
}

TEST_CASE("verification.verifiable_rank_limits") {
  // At the limit, a sum or avg of every type is exact whichever order the ranks are reduced in
  // (integers wrap like the backends do); at twice the limit some element is not, which is why the
  // runner refuses to check such runs instead of reporting correct results as wrong.
  std::mt19937 rng(5);
  const auto reduce_in_order = [&](DataType type, ReduceOp op, int ranks, std::int64_t i) {
    std::vector<int> order(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) order[static_cast<std::size_t>(r)] = r;
    std::shuffle(order.begin(), order.end(), rng);
    double acc = 0;
    std::vector<unsigned char> cell(8);
    for (int r : order) {
      acc += static_cast<double>(input_value(op, ranks, r, i, 0));
      store_from_double(cell.data(), type, 0, acc);  // round (or wrap) every partial sum to the type
      acc = load_as_double(cell.data(), type, 0);
    }
    if (op == ReduceOp::kAvg) {
      const double avg = acc / ranks;
      store_from_double(cell.data(), type, 0, type == DataType::kUInt8 ? std::trunc(avg) : avg);
    }
    return count_wrong(cell.data(), type, op, ranks, i, 1, 0);
  };
  for (DataType type : {DataType::kBFloat16, DataType::kFloat16, DataType::kUInt8}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      const int most = max_verifiable_ranks(type, op);
      CAPTURE(to_string(type));
      CAPTURE(to_string(op));
      if (type == DataType::kUInt8 && op == ReduceOp::kSum) {
        CHECK(most == std::numeric_limits<int>::max());  // wraps modulo 256 like the expected value
        continue;
      }
      std::int64_t wrong_at_limit = 0, wrong_above = 0;
      for (std::int64_t i = 0; i < 64; ++i) {
        wrong_at_limit += reduce_in_order(type, op, most, i);
        wrong_above += reduce_in_order(type, op, 2 * most, i);
      }
      CHECK(wrong_at_limit == 0);
      CHECK(wrong_above > 0);
      CHECK_NOTHROW(require_verifiable(type, op, most));
      const std::string flags = "parameter datatype " + std::string(to_string(type));
      CHECK_THROWS_WITH_AS(require_verifiable(type, op, most + 1), doctest::Contains(flags.c_str()), InvalidInput);
    }
  }
  for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    for (ReduceOp op : all_reduce_ops()) CHECK(max_verifiable_ranks(type, op) >= 8192);
  }
}

TEST_CASE("verification.inputs_vary_with_rank_index_and_iteration") {
  // A region read at a shifted offset must be visible: neighbouring inputs mostly differ.
  int same_index = 0, same_rank = 0, same_iter = 0;
  for (std::int64_t i = 0; i < 1000; ++i) {
    same_index += input_value(ReduceOp::kSum, 8, 3, i, 0) == input_value(ReduceOp::kSum, 8, 3, i + 1, 0);
    same_rank += input_value(ReduceOp::kSum, 8, 3, i, 0) == input_value(ReduceOp::kSum, 8, 4, i, 0);
    same_iter += input_value(ReduceOp::kSum, 8, 3, i, 0) == input_value(ReduceOp::kSum, 8, 3, i, 1);
  }
  CHECK(same_index < 350);
  CHECK(same_rank < 350);
  CHECK(same_iter < 350);
}

TEST_CASE("verification.count_wrong_every_type") {
  const int ranks = 8;
  const std::int64_t n = 1000;
  for (DataType type : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      std::vector<std::byte> buf(static_cast<std::size_t>(n) * element_size(type));
      std::vector<std::byte> expected(buf.size());
      fill_expected(buf.data(), type, op, ranks, 5, n, 2);
      fill_expected(expected.data(), type, op, ranks, 5, n, 2);
      CHECK(count_wrong(buf.data(), type, op, ranks, 5, n, 2) == 0);
      CHECK(count_mismatches(buf.data(), expected.data(), type, op, n) == 0);
      // Shifted by one element: most elements differ.
      CHECK(count_wrong(buf.data(), type, op, ranks, 6, n, 2) >
            (op == ReduceOp::kMin || op == ReduceOp::kMax ? 0 : n / 4));
      // One element off by one.
      store_from_double(buf.data(), type, 17, load_as_double(buf.data(), type, 17) + 1);
      CHECK(count_wrong(buf.data(), type, op, ranks, 5, n, 2) == 1);
      CHECK(count_mismatches(buf.data(), expected.data(), type, op, n) == 1);
    }
  }
}

TEST_CASE("verification.avg_tolerance_only_for_floating_avg") {
  CHECK(avg_tolerance_ulps(DataType::kFloat16, ReduceOp::kAvg) == 2);
  CHECK(avg_tolerance_ulps(DataType::kFloat32, ReduceOp::kSum) == 0);
  CHECK(avg_tolerance_ulps(DataType::kInt32, ReduceOp::kAvg) == 0);
  // 3 · (1/3 rounded) is one ulp off 1 in float: accepted for avg, rejected for sum.
  const int ranks = 3;
  std::vector<float> buf(64);
  std::int64_t found = -1;
  for (std::int64_t i = 0; i < 64 && found < 0; ++i) {
    if (expected_value(ReduceOp::kAvg, ranks, i, 0) == 2) found = i;
  }
  REQUIRE(found >= 0);
  fill_expected(buf.data(), DataType::kFloat32, ReduceOp::kAvg, ranks, 0, 64, 0);
  buf[static_cast<std::size_t>(found)] = std::nextafter(2.0f, 3.0f);
  CHECK(count_wrong(buf.data(), DataType::kFloat32, ReduceOp::kAvg, ranks, 0, 64, 0) == 0);
  buf[static_cast<std::size_t>(found)] = 2.01f;
  CHECK(count_wrong(buf.data(), DataType::kFloat32, ReduceOp::kAvg, ranks, 0, 64, 0) == 1);
  buf[static_cast<std::size_t>(found)] = NAN;
  CHECK(count_wrong(buf.data(), DataType::kFloat32, ReduceOp::kAvg, ranks, 0, 64, 0) == 1);
}

TEST_CASE("verification.fill_input_writes_typed_values") {
  for (DataType type : all_data_types()) {
    std::vector<std::byte> buf(100 * element_size(type));
    fill_input(buf.data(), type, ReduceOp::kSum, 4, 2, 10, 100, 1);
    for (std::int64_t i = 0; i < 100; ++i) {
      REQUIRE(load_as_double(buf.data(), type, i) == static_cast<double>(input_value(ReduceOp::kSum, 4, 2, 10 + i, 1)));
    }
  }
}
