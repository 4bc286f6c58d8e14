#include "cli/common.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "artune/algorithms/plan.hpp"
#include "artune/core/error.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/sizes.hpp"
#include "cli/flag_names.hpp"

namespace artune::cli {

CostModel cost_model_from_flags(const std::string& backend, bool has_backend, const std::string& calibration,
                                bool has_calibration) {
  nlohmann::json overlay;
  if (has_calibration) overlay = read_json_input(calibration, "--calibration");
  BackendProfile profile = BackendProfile::kNccl;
  if (has_backend) profile = parse_backend_profile(backend, "--backend");
  if (overlay.is_object() && overlay.contains("profile") && overlay["profile"].is_string()) {
    const BackendProfile file_profile =
        parse_backend_profile(overlay["profile"].get<std::string>(), calibration + ": profile");
    if (!has_backend) {
      profile = file_profile;
    } else if (file_profile != profile) {
      throw InvalidInput(fmt::format("--calibration: {} was fitted for backend '{}', not --backend {}", calibration,
                                     to_string(file_profile), backend));
    }
  }
  CostModel model = CostModel::defaults(profile);
  if (has_calibration) model.apply_overlay(overlay, calibration);
  return model;
}

void add_sweep_flags(CLI::App* cmd, SweepFlags& flags) {
  cmd->add_option("-b,--minbytes", flags.min_bytes, "smallest message size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", flags.max_bytes, "largest message size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", flags.factor, "multiplication factor between sizes")->capture_default_str();
}

std::string size_flag(std::uint64_t size, const std::vector<std::uint64_t>& sizes) {
  if (size == sizes.front()) return "-b/--minbytes";
  if (size == sizes.back()) return "-e/--maxbytes";
  return "-b/-e/-f";
}

std::vector<std::uint64_t> sweep_sizes(const SweepFlags& flags) {
  return size_sweep(parse_size(flags.min_bytes, "-b/--minbytes"), parse_size(flags.max_bytes, "-e/--maxbytes"),
                    flags.factor);
}

std::string shell_word(std::string_view text) {
  const std::string shown = escape_control(text);
  const bool safe = !shown.empty() && shown.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_@%+=:,./-#") == std::string::npos;
  if (safe && shown.front() != '#') return shown;
  std::string out = "'";
  for (const char c : shown) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string plan_limits_help() {
  return fmt::format(
      "Limits (refused up front with exit status 2): at most {} ranks and {} ops per plan (after --segments, at most "
      "{}), messages of at most {} bytes (1P) per rank, input files of at most {} MiB.",
      kMaxPlanRanks, kMaxPlanOps, kMaxSegments, kMaxMessageBytes, kMaxInputFileBytes >> 20);
}

void print_json(const nlohmann::json& doc) { std::cout << doc.dump(2) << '\n'; }

namespace {

// The items of a comma-separated list; InvalidInput naming `flag` when the list or an item is empty.
std::vector<std::string_view> split_list(std::string_view text, const std::string& flag, std::string_view what) {
  if (text.empty()) throw InvalidInput(fmt::format("{}: empty list (expected {})", flag, what));
  std::vector<std::string_view> items;
  while (true) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (item.empty()) {
      throw InvalidInput(
          fmt::format("{}: empty item in the list (expected {}, no spaces or extra commas)", flag, what));
    }
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

}  // namespace

std::vector<int> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  for (const std::string_view item : split_list(text, flag, "comma-separated integers")) {
    int value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || end != item.data() + item.size()) {
      throw InvalidInput(
          fmt::format("{}: '{}' is not a comma-separated list of integers ('{}' is not an integer)", flag, text, item));
    }
    out.push_back(value);
  }
  return out;
}

std::vector<int> parse_node_list(const Topology& topo, const std::string& text, const std::string& flag) {
  std::vector<int> out;
  for (const std::string_view item : split_list(text, flag, "comma-separated node ids such as cpu0,cpu1 or gpu2")) {
    const int node = topo.find_node(item);
    if (node < 0) {
      throw InvalidInput(
          fmt::format("{}: topology '{}' has no device '{}' (give node ids such as gpu0 or cpu0, "
                      "see `artune topo show`)",
                      flag, topo.name(), item));
    }
    out.push_back(node);
  }
  return out;
}

CLI::Option* add_out_option(CLI::App* cmd, std::string& target, const std::string& help) {
  CLI::Option* out = cmd->add_option("--out", target, help);
  // The old spelling, kept out of --help; it writes the same variable.
  cmd->add_option("-o,--output", target, "deprecated spelling of --out")->group("");
  return out;
}

void warn_deprecated_output(CLI::App* cmd) {
  const std::size_t old_count = cmd->count("--output");
  if (old_count == 0) return;
  if (cmd->count("--out") > 0) throw InvalidInput("--out: also given as -o/--output; use --out only");
  // Under mpirun only the first rank warns.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0' && std::string_view(v) != "0") return;
  }
  fmt::print(stderr,
             "artune: warning: -o/--output for the output file of `{}` is deprecated; use --out (-o is the "
             "reduction op in run, plan and simulate)\n",
             cmd->get_name());
}

bool output_given(CLI::App* cmd) { return cmd->count("--out") > 0 || cmd->count("--output") > 0; }

namespace {
// Error lines longer than this are cut: a message that echoes a huge argument stays readable.
constexpr std::size_t kMaxErrorChars = 1000;

}  // namespace

// The error as exactly one line on stderr, whatever the message holds: the CLI's flags where the library
// names a parameter (flag_names.hpp), control characters (a newline inside a quoted argument, a tab) written
// as escapes, and overlong text cut.
void print_error(std::string_view message) {
  std::string line = escape_control(with_flag_names(message));
  if (line.size() > kMaxErrorChars) {
    std::size_t cut = kMaxErrorChars;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    line = line.substr(0, cut) + "… (message cut)";
  }
  fmt::print(stderr, "artune: {}\n", line);
}

}  // namespace artune::cli
