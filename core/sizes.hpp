#pragma once
// Size arguments as nccl-tests takes them: plain numbers with optional
// K/M/G/T suffixes meaning powers of 1024.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace artune {

/// Parses "64", "4K", "1M", "2G" (powers of 1024; a trailing B is allowed); throws InvalidInput naming `what`.
std::uint64_t parse_size(std::string_view text, std::string_view what);
/// Formats a byte count compactly ("1K", "64M", "1000").
std::string format_size(std::uint64_t bytes);
/// The geometric size sweep min, min·factor, … ≤ max (nccl-tests -b/-e/-f); validates the range.
std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, double factor);

}  // namespace artune
