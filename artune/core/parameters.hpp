#pragma once
// How library messages name a parameter of artune's API: the fixed phrase "parameter NAME", NAME as the
// API spells it ("parameter max_bytes: 4 is below parameter min_bytes 8"). The C++, C and Python APIs pass
// messages on as they are; a front end with its own names for the parameters puts them in place of the
// phrase where it prints a message (the CLI puts its flags: cli/flag_names.hpp).

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "artune/core/error.hpp"

namespace artune {

/// The phrase before a parameter's name in a message.
inline constexpr std::string_view kParameterPhrase = "parameter ";

/// Every parameter a library message may name, sorted.
inline constexpr std::array<std::string_view, 31> kParameterNames = {
    "backend", "calibration", "check",  "collective",    "count",      "datatype",     "density",       "from_logs",
    "gather",  "gpu_perm",    "gpus",   "gradient_list", "iterations", "lower_target", "machine_index", "max_bytes",
    "measure", "min_bytes",   "op",     "participants",  "profile",    "report_dir",   "rows",          "segments",
    "spec",    "step_factor", "target", "timeout_s",     "topology",   "warmup",       "width",
};

/// "parameter NAME"; NAME must be one of kParameterNames (a misspelt name is artune's bug: ARTUNE_CHECK).
inline std::string parameter(std::string_view name) {
  ARTUNE_CHECK(std::binary_search(kParameterNames.begin(), kParameterNames.end(), name),
               "parameter(): '" + std::string(name) + "' is not in kParameterNames");
  return std::string(kParameterPhrase) + std::string(name);
}

}  // namespace artune
