#pragma once
// Verification of all-reduce results, nccl-tests style: every rank's input is
// a small integer derived from (rank, index, iteration), chosen so that the
// exact result of every op is representable in every type and no reduction
// order can round. Expected results are computed here, on the host, from the
// input formula alone: they never look at the plan.
//
// Value choices (R = ranks, all values are small positive integers):
//  * sum, min, max: v = 1 + hash(rank, index, iteration) % m with m = clamp(256 / R, 1, 4).
//    Every partial sum is ≤ m·R ≤ 256, and every integer ≤ 256 is exact in
//    bfloat16 (8 significand bits), float16 (11) and wider types, so the sum is
//    exact in any order for R ≤ 256 (R ≤ 2048 for float16). Integer types wrap
//    modulo 2^bits (uint8 only can reach 256 = 0), which is order independent.
//  * prod: mostly 1, with 2 on exactly k(index, iteration) ≤ min(R, 7) ranks, so the
//    product is 2^k ≤ 128: exact in every type, uint8 included, and no
//    partial product can overflow float16 (max 65504).
//  * avg: a base b ∈ {2, 3} per element plus zero-sum perturbations in {-1, 0, 1}
//    (rank r and its mirror R-1-r get +s and -s), so every value is in 1..4,
//    the sum is exactly R·b and the average exactly b. Partial sums stay ≤ 4R,
//    exact in bfloat16 for R ≤ 64 and in float16 for R ≤ 512. Integer avg is exact
//    too. Floating-point avg is compared with a tolerance of a few units in the
//    last place because a backend may multiply by a rounded 1/R instead of
//    dividing (NCCL's ncclAvg premultiplies), which is off by up to ~2 ulps.
//
// The values hash the index instead of repeating with a short period, so a
// region read at a shifted offset is caught (3 in 4 elements differ).

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"

namespace artune {

// ---------------------------------------------------------------------------
// float16 / bfloat16 conversions, bit exact, round to nearest even. Written
// branch-light so that the reduction loops around them vectorise.

/// IEEE binary16 bits → float (exact: every half is a float).
inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Normal numbers: re-bias the exponent (15 → 127) and widen the mantissa;
  // inf/NaN (exponent all ones) get the rest of the way to float's all-ones exponent.
  const std::uint32_t normal = (em << 13) + ((127u - 15u) << 23) + (em >= 0x7c00u ? (128u - 16u) << 23 : 0u);
  // Zero and subnormals: em · 2^-24, exact in float.
  const float subnormal = static_cast<float>(static_cast<std::int32_t>(em)) * 5.9604644775390625e-8f;
  const std::uint32_t magnitude = em < 0x0400u ? std::bit_cast<std::uint32_t>(subnormal) : normal;
  return std::bit_cast<float>(magnitude | sign);
}

/// float → IEEE binary16 bits, round to nearest even; overflow → inf, NaN stays NaN (quiet).
inline std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7fffffffu;
  // All three cases are computed and one is selected, so loops over this vectorise.
  // Normal: re-bias and round the 13 dropped bits to nearest, ties to even; a carry out
  // of the mantissa correctly bumps the exponent (65520 and up reach inf this way).
  const std::uint32_t odd = (abs >> 13) & 1u;
  const std::uint32_t normal = (abs + (static_cast<std::uint32_t>(15 - 127) << 23) + 0x0fffu + odd) >> 13;
  // Below 2^-14 the result is subnormal (or zero): adding 0.5 lines the half's last
  // mantissa bit up with float's, so the FPU's own rounding is RNE.
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(std::bit_cast<float>(abs) + 0.5f) - 0x3f000000u;
  // ≥ 65536, inf or NaN.
  const std::uint32_t special = abs > 0x7f800000u ? 0x7e00u : 0x7c00u;
  const std::uint32_t out = abs >= 0x47800000u ? special : abs < 0x38800000u ? subnormal : normal;
  return static_cast<std::uint16_t>(out | sign);
}

/// bfloat16 bits → float (exact: the upper half of a float).
inline float bfloat16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// float → bfloat16 bits, round to nearest even; NaN stays NaN (quiet).
inline std::uint16_t float_to_bfloat16(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t odd = (bits >> 16) & 1u;
  const std::uint32_t rounded = (bits + 0x7fffu + odd) >> 16;
  const std::uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// ---------------------------------------------------------------------------
// Inputs and expected results.

/// The input of `rank` at element `index` in iteration `iteration` (a small integer, see above).
std::int64_t input_value(ReduceOp op, int ranks, int rank, std::int64_t index, int iteration) noexcept;
/// The exact all-reduce result at `index` (before conversion to the element type; integer
/// types then wrap, e.g. a uint8 sum of 256 is 0).
std::int64_t expected_value(ReduceOp op, int ranks, std::int64_t index, int iteration) noexcept;

/// Writes input_value(op, ranks, rank, first + i, iteration) for i < count into `data` as `type`.
void fill_input(void* data, DataType type, ReduceOp op, int ranks, int rank, std::int64_t first, std::int64_t count,
                int iteration);
/// Writes the expected result for elements first .. first+count-1 into `data` as `type`.
void fill_expected(void* data, DataType type, ReduceOp op, int ranks, std::int64_t first, std::int64_t count,
                   int iteration);
/// Counts elements of `data` (elements first .. first+count-1 of a result) that differ from the
/// expected result; avg on floating types allows avg_tolerance_ulps() units in the last place.
std::int64_t count_wrong(const void* data, DataType type, ReduceOp op, int ranks, std::int64_t first,
                         std::int64_t count, int iteration);
/// Counts elements of `data` that differ from `expected` (as written by fill_expected for the same
/// type, op and elements), with the same avg tolerance as count_wrong; cheaper when several
/// ranks check against one expected array.
std::int64_t count_mismatches(const void* data, const void* expected, DataType type, ReduceOp op, std::int64_t count);
/// Units in the last place an avg result may be off on a floating type (see above); 0 otherwise.
int avg_tolerance_ulps(DataType type, ReduceOp op) noexcept;
/// The most ranks for which `op` on `type` has an exact expected result under the value choices
/// above (sum: bfloat16 256, float16 2048; avg: bfloat16 64, float16 512, uint8 85 — its sum of
/// 3·R must not wrap; prod, min, max and the wider types: no limit below the plan limits).
int max_verifiable_ranks(DataType type, ReduceOp op) noexcept;
/// InvalidInput naming -d/--datatype and -o/--op when `ranks` exceed max_verifiable_ranks (a check
/// would report correct results as wrong); callers skip it when nothing is checked.
void require_verifiable(DataType type, ReduceOp op, int ranks);

// ---------------------------------------------------------------------------
// Plan-level collectives (issue 17). Buffer 0 of every rank holds `count` elements cut into
// blocks collective_block(count, ranks, k, blocks) (see Plan: even blocks, or the plan's per-rank
// sizes `blocks` when it has them).

/// Writes rank `rank`'s buffer 0 before collective `c`: all-reduce and reduce-scatter, the inputs
/// above over every element; all-gather, the inputs of its own block and 0 elsewhere (no input is
/// 0, so a block that never arrives is caught).
void fill_collective_input(void* data, DataType type, ReduceOp op, Collective c, int ranks, int rank,
                           std::int64_t count, int iteration, const std::vector<std::int64_t>& blocks = {});
/// Wrong elements of rank `rank`'s buffer 0 after collective `c`: all-reduce, every element against
/// the reduced result; reduce-scatter, block `rank` only; all-gather, every block k against rank k's
/// input (exact, no avg tolerance: nothing is reduced).
std::int64_t count_collective_wrong(const void* data, DataType type, ReduceOp op, Collective c, int ranks, int rank,
                                    std::int64_t count, int iteration, const std::vector<std::int64_t>& blocks = {});

/// Reads element `index` of a buffer of `type` as a double (tests and diagnostics).
double load_as_double(const void* data, DataType type, std::int64_t index) noexcept;
/// Writes `value` (rounded to nearest even, integers wrapping) into element `index` of a buffer of `type`.
void store_from_double(void* data, DataType type, std::int64_t index, double value) noexcept;

}  // namespace artune
