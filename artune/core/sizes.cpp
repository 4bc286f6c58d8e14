#include "artune/core/sizes.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "artune/core/error.hpp"

namespace artune {

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  std::string_view body = text;
  if (!body.empty() && (body.back() == 'B' || body.back() == 'b')) body.remove_suffix(1);
  std::uint64_t multiplier = 1;
  if (!body.empty()) {
    switch (std::toupper(static_cast<unsigned char>(body.back()))) {
      case 'K': multiplier = 1ull << 10; break;
      case 'M': multiplier = 1ull << 20; break;
      case 'G': multiplier = 1ull << 30; break;
      case 'T': multiplier = 1ull << 40; break;
      default: break;
    }
    if (multiplier != 1) body.remove_suffix(1);
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (body.empty() || ec != std::errc() || end != body.data() + body.size()) {
    throw InvalidInput(fmt::format("{}: '{}' is not a size (a number with an optional K/M/G suffix)", what, text));
  }
  if (value > std::numeric_limits<std::uint64_t>::max() / multiplier) {
    throw InvalidInput(fmt::format("{}: '{}' is too large", what, text));
  }
  return value * multiplier;
}

std::string format_size(std::uint64_t bytes) {
  static const char* kSuffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return fmt::format("{}{}", bytes, kSuffix[i]);
}

std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, double factor) {
  if (min_bytes == 0) throw InvalidInput("-b/--minbytes: must be > 0");
  if (min_bytes > kMaxMessageBytes) {
    throw InvalidInput(
        fmt::format("-b/--minbytes: {} is above artune's limit of {} bytes (1P)", min_bytes, kMaxMessageBytes));
  }
  if (max_bytes > kMaxMessageBytes) {
    throw InvalidInput(
        fmt::format("-e/--maxbytes: {} is above artune's limit of {} bytes (1P)", max_bytes, kMaxMessageBytes));
  }
  if (max_bytes < min_bytes) {
    throw InvalidInput(fmt::format("-e/--maxbytes: {} is below -b/--minbytes {}", max_bytes, min_bytes));
  }
  if (!std::isfinite(factor)) {
    throw InvalidInput(fmt::format("-f/--stepfactor: must be a finite number > 1 (got {})", factor));
  }
  if (!(factor > 1.0) && min_bytes != max_bytes) throw InvalidInput("-f/--stepfactor: must be > 1");
  std::vector<std::uint64_t> sizes;
  for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes) * (1 + 1e-12); s *= factor) {
    sizes.push_back(static_cast<std::uint64_t>(s + 0.5));
    if (sizes.size() > 4096) throw InvalidInput("-f/--stepfactor: the sweep has more than 4096 sizes");
    if (min_bytes == max_bytes) break;
  }
  return sizes;
}

}  // namespace artune
