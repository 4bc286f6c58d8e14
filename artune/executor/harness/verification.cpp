#include "artune/executor/harness/verification.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

namespace {

// splitmix64's finaliser over a combination of the three coordinates: cheap,
// and neighbouring indices get unrelated values.
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
  std::uint64_t x =
      a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full ^ (c + 1) * 0x165667B19E3779F9ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Coordinate used for per-element (rank independent) draws.
constexpr std::uint64_t kElementSalt = 0xFFFFFFFFull;

inline int sum_value_range(int ranks) noexcept { return std::clamp(256 / std::max(ranks, 1), 1, 4); }

inline std::int64_t generic_value(int ranks, int rank, std::int64_t index, int iteration) noexcept {
  const auto h =
      mix(static_cast<std::uint64_t>(index), static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(iteration));
  return 1 + static_cast<std::int64_t>(h % static_cast<std::uint64_t>(sum_value_range(ranks)));
}

struct ProdDraw {
  int twos;   // how many ranks contribute a 2
  int start;  // the first of them (the others follow cyclically)
};
inline ProdDraw prod_draw(int ranks, std::int64_t index, int iteration) noexcept {
  const auto h = mix(static_cast<std::uint64_t>(index), kElementSalt, static_cast<std::uint64_t>(iteration));
  const int kmax = std::min(ranks, 7);
  return {static_cast<int>(h % static_cast<std::uint64_t>(kmax + 1)),
          static_cast<int>((h >> 20) % static_cast<std::uint64_t>(std::max(ranks, 1)))};
}

inline std::int64_t avg_base(std::int64_t index, int iteration) noexcept {
  return 2 +
         static_cast<std::int64_t>(
             (mix(static_cast<std::uint64_t>(index), kElementSalt + 1, static_cast<std::uint64_t>(iteration)) >> 7) &
             1u);
}

template <typename T>
struct Storage {
  using type = T;
};

// Calls f(Storage<T>{}) with T the storage type of `type` (uint16_t for float16 and bfloat16).
template <typename F>
decltype(auto) with_storage(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32: return f(Storage<float>{});
    case DataType::kFloat64: return f(Storage<double>{});
    case DataType::kFloat16:
    case DataType::kBFloat16: return f(Storage<std::uint16_t>{});
    case DataType::kInt32: return f(Storage<std::int32_t>{});
    case DataType::kInt64: return f(Storage<std::int64_t>{});
    case DataType::kUInt8: return f(Storage<std::uint8_t>{});
  }
  return f(Storage<float>{});
}

bool is_floating(DataType type) noexcept {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
}

int significand_bits(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat16: return 11;
    case DataType::kBFloat16: return 8;
    case DataType::kFloat32: return 24;
    case DataType::kFloat64: return 53;
    default: return 64;
  }
}

// Integers go through int64 so they wrap like the element type does.
template <typename T>
inline T integer_as(std::int64_t v) noexcept {
  return static_cast<T>(static_cast<std::uint64_t>(v));
}

template <typename T>
inline void store_integer(void* data, DataType type, std::int64_t i, std::int64_t v) noexcept {
  T* out = static_cast<T*>(data);
  if constexpr (std::is_same_v<T, std::uint16_t>) {
    out[i] =
        type == DataType::kFloat16 ? float_to_half(static_cast<float>(v)) : float_to_bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    out[i] = static_cast<T>(v);
  } else {
    out[i] = integer_as<T>(v);
  }
}

}  // namespace

std::int64_t input_value(ReduceOp op, int ranks, int rank, std::int64_t index, int iteration) noexcept {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax: return generic_value(ranks, rank, index, iteration);
    case ReduceOp::kProd: {
      const ProdDraw d = prod_draw(ranks, index, iteration);
      const int pos = ((rank - d.start) % ranks + ranks) % ranks;
      return pos < d.twos ? 2 : 1;
    }
    case ReduceOp::kAvg: {
      const std::int64_t base = avg_base(index, iteration);
      const int mirror = ranks - 1 - rank;
      if (mirror == rank) return base;
      const int low = std::min(rank, mirror);
      const auto s =
          static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(index), static_cast<std::uint64_t>(low) + 0x10000,
                                        static_cast<std::uint64_t>(iteration)) %
                                    3) -
          1;
      return rank == low ? base + s : base - s;
    }
  }
  return 1;
}

std::int64_t expected_value(ReduceOp op, int ranks, std::int64_t index, int iteration) noexcept {
  switch (op) {
    case ReduceOp::kSum: {
      std::int64_t s = 0;
      for (int r = 0; r < ranks; ++r) s += generic_value(ranks, r, index, iteration);
      return s;
    }
    case ReduceOp::kMin: {
      std::int64_t m = std::numeric_limits<std::int64_t>::max();
      for (int r = 0; r < ranks; ++r) m = std::min(m, generic_value(ranks, r, index, iteration));
      return m;
    }
    case ReduceOp::kMax: {
      std::int64_t m = std::numeric_limits<std::int64_t>::min();
      for (int r = 0; r < ranks; ++r) m = std::max(m, generic_value(ranks, r, index, iteration));
      return m;
    }
    case ReduceOp::kProd: return std::int64_t{1} << prod_draw(ranks, index, iteration).twos;
    case ReduceOp::kAvg: return avg_base(index, iteration);
  }
  return 0;
}

void fill_input(void* data, DataType type, ReduceOp op, int ranks, int rank, std::int64_t first, std::int64_t count,
                int iteration) {
  with_storage(type, [&](auto s) {
    using T = typename decltype(s)::type;
    for (std::int64_t i = 0; i < count; ++i) {
      store_integer<T>(data, type, i, input_value(op, ranks, rank, first + i, iteration));
    }
  });
}

void fill_expected(void* data, DataType type, ReduceOp op, int ranks, std::int64_t first, std::int64_t count,
                   int iteration) {
  with_storage(type, [&](auto s) {
    using T = typename decltype(s)::type;
    for (std::int64_t i = 0; i < count; ++i) {
      store_integer<T>(data, type, i, expected_value(op, ranks, first + i, iteration));
    }
  });
}

int max_verifiable_ranks(DataType type, ReduceOp op) noexcept {
  constexpr int kUnlimited = std::numeric_limits<int>::max();
  // Largest R whose partial sums (≤ 256 for sum once m = 1, ≤ 4R for avg) stay exact.
  if (op == ReduceOp::kSum) {
    if (type == DataType::kBFloat16) return 256;
    if (type == DataType::kFloat16) return 2048;
  } else if (op == ReduceOp::kAvg) {
    if (type == DataType::kBFloat16) return 64;
    if (type == DataType::kFloat16) return 512;
    if (type == DataType::kUInt8) return 85;  // the sum (≤ 3R) is divided after the fact: it must not wrap
  }
  return kUnlimited;
}

void require_verifiable(DataType type, ReduceOp op, int ranks) {
  const int most = max_verifiable_ranks(type, op);
  if (ranks <= most) return;
  throw InvalidInput(fmt::format(
      "{} {} with {} {}: results over {} ranks cannot be checked exactly (at most {} ranks: "
      "the reduction's partial sums are not exact in {}); use a wider type, or {} 0 to time without checking",
      parameter("datatype"), to_string(type), parameter("op"), to_string(op), ranks, most, to_string(type),
      parameter("check")));
}

int avg_tolerance_ulps(DataType type, ReduceOp op) noexcept {
  return op == ReduceOp::kAvg && is_floating(type) ? 2 : 0;
}

std::int64_t count_wrong(const void* data, DataType type, ReduceOp op, int ranks, std::int64_t first,
                         std::int64_t count, int iteration) {
  const int ulps = avg_tolerance_ulps(type, op);
  const int bits = significand_bits(type);
  std::int64_t wrong = 0;
  if (is_floating(type)) {
    for (std::int64_t i = 0; i < count; ++i) {
      const double got = load_as_double(data, type, i);
      // Expected values are integers ≤ 2^15 here, exact in every floating type.
      const auto want = static_cast<double>(expected_value(op, ranks, first + i, iteration));
      if (got == want) continue;
      if (ulps > 0 && std::isfinite(got)) {
        // One ulp of `want` in a type with `bits` significand bits.
        const double ulp = std::ldexp(1.0, std::ilogb(want) - (bits - 1));
        if (std::fabs(got - want) <= ulps * ulp) continue;
      }
      ++wrong;
    }
    return wrong;
  }
  with_storage(type, [&](auto s) {
    using T = typename decltype(s)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, std::uint16_t>) {
      const T* in = static_cast<const T*>(data);
      for (std::int64_t i = 0; i < count; ++i) {
        if (in[i] != integer_as<T>(expected_value(op, ranks, first + i, iteration))) ++wrong;
      }
    }
  });
  return wrong;
}

std::int64_t count_mismatches(const void* data, const void* expected, DataType type, ReduceOp op, std::int64_t count) {
  const int ulps = avg_tolerance_ulps(type, op);
  if (ulps == 0) {
    // Bit equality: expected values are never NaN or -0, so this is value equality.
    std::int64_t wrong = 0;
    with_storage(type, [&](auto s) {
      using T = typename decltype(s)::type;
      const T* a = static_cast<const T*>(data);
      const T* b = static_cast<const T*>(expected);
      for (std::int64_t i = 0; i < count; ++i) wrong += std::memcmp(&a[i], &b[i], sizeof(T)) != 0 ? 1 : 0;
    });
    return wrong;
  }
  const int bits = significand_bits(type);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double got = load_as_double(data, type, i);
    const double want = load_as_double(expected, type, i);
    if (got == want) continue;
    if (std::isfinite(got) && want != 0) {
      const double ulp = std::ldexp(1.0, std::ilogb(want) - (bits - 1));
      if (std::fabs(got - want) <= ulps * ulp) continue;
    }
    ++wrong;
  }
  return wrong;
}

void fill_collective_input(void* data, DataType type, ReduceOp op, Collective c, int ranks, int rank,
                           std::int64_t count, int iteration, const std::vector<std::int64_t>& blocks) {
  if (c != Collective::kAllGather) {
    fill_input(data, type, op, ranks, rank, 0, count, iteration);
    return;
  }
  const std::size_t es = element_size(type);
  std::memset(data, 0, static_cast<std::size_t>(count) * es);
  const auto [off, n] = collective_block(count, ranks, rank, blocks);
  fill_input(static_cast<std::byte*>(data) + static_cast<std::size_t>(off) * es, type, op, ranks, rank, off, n,
             iteration);
}

std::int64_t count_collective_wrong(const void* data, DataType type, ReduceOp op, Collective c, int ranks, int rank,
                                    std::int64_t count, int iteration, const std::vector<std::int64_t>& blocks) {
  const std::size_t es = element_size(type);
  const auto* bytes = static_cast<const std::byte*>(data);
  switch (c) {
    case Collective::kAllGather: {
      std::int64_t wrong = 0;
      std::vector<std::byte> want;
      for (int k = 0; k < ranks; ++k) {
        const auto [off, n] = collective_block(count, ranks, k, blocks);
        want.resize(static_cast<std::size_t>(n) * es);
        fill_input(want.data(), type, op, ranks, k, off, n, iteration);
        // Exact: an all-gather moves inputs and rounds nothing (sum has no avg tolerance).
        wrong += count_mismatches(bytes + static_cast<std::size_t>(off) * es, want.data(), type, ReduceOp::kSum, n);
      }
      return wrong;
    }
    case Collective::kReduceScatter: {
      const auto [off, n] = collective_block(count, ranks, rank, blocks);
      return count_wrong(bytes + static_cast<std::size_t>(off) * es, type, op, ranks, off, n, iteration);
    }
    default: return count_wrong(data, type, op, ranks, 0, count, iteration);
  }
}

double load_as_double(const void* data, DataType type, std::int64_t index) noexcept {
  switch (type) {
    case DataType::kFloat32: return static_cast<const float*>(data)[index];
    case DataType::kFloat64: return static_cast<const double*>(data)[index];
    case DataType::kFloat16: return half_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DataType::kBFloat16: return bfloat16_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DataType::kInt32: return static_cast<double>(static_cast<const std::int32_t*>(data)[index]);
    case DataType::kInt64: return static_cast<double>(static_cast<const std::int64_t*>(data)[index]);
    case DataType::kUInt8: return static_cast<const std::uint8_t*>(data)[index];
  }
  return 0;
}

void store_from_double(void* data, DataType type, std::int64_t index, double value) noexcept {
  switch (type) {
    case DataType::kFloat32: static_cast<float*>(data)[index] = static_cast<float>(value); break;
    case DataType::kFloat64: static_cast<double*>(data)[index] = value; break;
    // double → float → half double-rounds only for values that are not already
    // floats; callers store small integers and converted floats.
    case DataType::kFloat16: static_cast<std::uint16_t*>(data)[index] = float_to_half(static_cast<float>(value)); break;
    case DataType::kBFloat16:
      static_cast<std::uint16_t*>(data)[index] = float_to_bfloat16(static_cast<float>(value));
      break;
    case DataType::kInt32:
      static_cast<std::int32_t*>(data)[index] = integer_as<std::int32_t>(static_cast<std::int64_t>(value));
      break;
    case DataType::kInt64: static_cast<std::int64_t*>(data)[index] = static_cast<std::int64_t>(value); break;
    case DataType::kUInt8:
      static_cast<std::uint8_t*>(data)[index] = integer_as<std::uint8_t>(static_cast<std::int64_t>(value));
      break;
  }
}

}  // namespace artune
