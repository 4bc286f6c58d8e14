#include "cli/flag_names.hpp"

#include <array>
#include <cctype>
#include <utility>

#include "artune/core/parameters.hpp"

namespace artune::cli {
namespace {

// One row per name of kParameterNames (tests/cli/test_flag_names.cpp checks that every name has one). The parts
// of --sparse ROWS,WIDTH,DENSITY read as the flag's own messages do ("--sparse: DENSITY 2 is not in (0, 1]").
constexpr std::array<std::pair<std::string_view, std::string_view>, kParameterNames.size()> kFlagOfParameter = {{
    {"backend", "--backend"},
    {"calibration", "--calibration"},
    {"check", "-c/--check"},
    {"collective", "--collective"},
    {"count", "--count"},
    {"datatype", "-d/--datatype"},
    {"density", "--sparse: DENSITY"},
    {"from_logs", "--from"},
    {"gather", "--gather"},
    {"gpu_perm", "--gpu-perm"},
    {"gpus", "--gpus"},
    {"gradient_list", "--fusion"},
    {"iterations", "-n/--iters"},
    {"lower_target", "--lower"},
    {"machine_index", "--machine-index"},
    {"max_bytes", "-e/--maxbytes"},
    {"measure", "--measure"},
    {"min_bytes", "-b/--minbytes"},
    {"op", "-o/--op"},
    {"participants", "--participants"},
    {"profile", "--profile"},
    {"report_dir", "--report"},
    {"rows", "--sparse: ROWS"},
    {"segments", "--segments"},
    {"spec", "--spec"},
    {"step_factor", "-f/--stepfactor"},
    {"target", "--target"},
    {"timeout_s", "--timeout"},
    {"topology", "-t/--topology"},
    {"warmup", "-w/--warmup_iters"},
    {"width", "--sparse: WIDTH"},
}};

bool name_char(char c) { return std::islower(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string_view flag_of_parameter(std::string_view name) {
  for (const auto& [parameter_name, flag] : kFlagOfParameter) {
    if (parameter_name == name) return flag;
  }
  return {};
}

std::string with_flag_names(std::string_view message) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t at = message.find(kParameterPhrase, pos);
    if (at == std::string_view::npos) break;
    // The phrase starts a word: "parameter count", not "the_parameter count".
    const bool word_start = at == 0 || !name_char(message[at - 1]);
    std::size_t end = at + kParameterPhrase.size();
    while (end < message.size() && name_char(message[end])) ++end;
    const std::string_view name = message.substr(at + kParameterPhrase.size(), end - at - kParameterPhrase.size());
    const std::string_view flag = word_start ? flag_of_parameter(name) : std::string_view();
    out.append(message.substr(pos, at - pos));
    out.append(flag.empty() ? message.substr(at, end - at) : flag);
    pos = end;
  }
  out.append(message.substr(pos));
  return out;
}

}  // namespace artune::cli
