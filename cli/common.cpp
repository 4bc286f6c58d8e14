#include "cli/common.hpp"

#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <string_view>

#include "core/error.hpp"
#include "core/sizes.hpp"

namespace artune::cli {

void add_sweep_flags(CLI::App* cmd, SweepFlags& flags) {
  cmd->add_option("-b,--minbytes", flags.min_bytes, "smallest message size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", flags.max_bytes, "largest message size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", flags.factor, "multiplication factor between sizes")->capture_default_str();
}

std::vector<std::uint64_t> sweep_sizes(const SweepFlags& flags) {
  return size_sweep(parse_size(flags.min_bytes, "-b/--minbytes"), parse_size(flags.max_bytes, "-e/--maxbytes"),
                    flags.factor);
}

void print_json(const nlohmann::json& doc) { std::cout << doc.dump(2) << '\n'; }

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    int value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      throw InvalidInput(fmt::format("{}: '{}' is not a comma-separated list of integers", flag, text));
    }
    out.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace artune::cli
