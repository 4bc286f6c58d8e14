#pragma once
// What `artune check` and `artune calibrate --from` share: the logs read (every file before anything is
// simulated, so a damaged log is its one-line error whatever comes after it) and the model options built from
// --spec, --collective and --calibration.

#include <string>
#include <string_view>
#include <vector>

#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/tuner/log_check.hpp"

namespace artune::cli {

/// One file: its nccl-tests tables and its NCCL INFO lines.
struct LogFile {
  std::string path;
  std::vector<logs::TestRun> runs;
  logs::InfoLog info;
};

/// Reads and parses every file of `paths`; `flag` names the argument in errors ("RUN.log", "--from").
std::vector<LogFile> read_log_files(const std::vector<std::string>& paths, std::string_view flag);

/// The model the logs are held to: `spec` forced where a log does not show it, `collective` for logs that do not
/// name their program ("" = from the columns), `calibration` an overlay file ("" = none).
CheckOptions log_model_options(const std::string& spec, const std::string& collective,
                               const std::string& calibration);

}  // namespace artune::cli
