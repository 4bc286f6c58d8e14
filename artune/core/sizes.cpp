#include "artune/core/sizes.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

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

std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, double step_factor) {
  if (min_bytes == 0) throw InvalidInput(parameter("min_bytes") + ": must be > 0");
  if (min_bytes > kMaxMessageBytes) {
    throw InvalidInput(fmt::format("{}: {} is above artune's limit of {} bytes (1P)", parameter("min_bytes"), min_bytes,
                                   kMaxMessageBytes));
  }
  if (max_bytes > kMaxMessageBytes) {
    throw InvalidInput(fmt::format("{}: {} is above artune's limit of {} bytes (1P)", parameter("max_bytes"), max_bytes,
                                   kMaxMessageBytes));
  }
  if (max_bytes < min_bytes) {
    throw InvalidInput(
        fmt::format("{}: {} is below {} {}", parameter("max_bytes"), max_bytes, parameter("min_bytes"), min_bytes));
  }
  if (!std::isfinite(step_factor)) {
    throw InvalidInput(fmt::format("{}: must be a finite number > 1 (got {})", parameter("step_factor"), step_factor));
  }
  if (!(step_factor > 1.0) && min_bytes != max_bytes) throw InvalidInput(parameter("step_factor") + ": must be > 1");
  std::vector<std::uint64_t> sizes;
  for (double s = static_cast<double>(min_bytes); s <= static_cast<double>(max_bytes) * (1 + 1e-12); s *= step_factor) {
    sizes.push_back(static_cast<std::uint64_t>(s + 0.5));
    if (sizes.size() > 4096) throw InvalidInput(parameter("step_factor") + ": the sweep has more than 4096 sizes");
    if (min_bytes == max_bytes) break;
  }
  return sizes;
}

}  // namespace artune
