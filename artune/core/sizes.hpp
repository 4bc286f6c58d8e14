#pragma once
// Size arguments as nccl-tests takes them: plain numbers with optional
// K/M/G/T suffixes meaning powers of 1024.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace artune {

/// The largest message artune plans, simulates or runs: 2^50 bytes (1 PiB). Far beyond any real
/// all-reduce, and small enough that element offsets, byte counts and pipeline pieces cannot
/// overflow 64-bit arithmetic anywhere downstream. Plan element counts are held to the same figure.
inline constexpr std::uint64_t kMaxMessageBytes = std::uint64_t{1} << 50;

/// Parses "64", "4K", "1M", "2G" (powers of 1024; a trailing B is allowed); throws InvalidInput naming `what`.
std::uint64_t parse_size(std::string_view text, std::string_view what);
/// Formats a byte count compactly ("1K", "64M", "1000").
std::string format_size(std::uint64_t bytes);
/// The geometric size sweep min, min·step_factor, … ≤ max (nccl-tests -b/-e/-f); validates the range
/// (min ≥ 1, max ≤ kMaxMessageBytes, a finite step_factor > 1 unless min = max, at most 4096 sizes).
std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, double step_factor);

}  // namespace artune
