#include "cli/log_files.hpp"

#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/algorithms/plan.hpp"  // parse_collective_kind

namespace artune::cli {

std::vector<LogFile> read_log_files(const std::vector<std::string>& paths, std::string_view flag) {
  std::vector<LogFile> files;
  for (const std::string& path : paths) {
    LogFile lf;
    lf.path = path;
    const std::string text = read_input_file(path, flag);
    lf.runs = logs::parse_nccl_tests(text, path);
    lf.info = logs::parse_nccl_info(text, path);
    files.push_back(std::move(lf));
  }
  return files;
}

CheckOptions log_model_options(const std::string& spec, const std::string& collective,
                               const std::string& calibration) {
  CheckOptions options;
  options.spec = spec;
  if (!collective.empty()) options.collective = parse_collective_kind(collective, "--collective");
  if (!calibration.empty()) options.model.apply_overlay(read_json_input(calibration, "--calibration"), calibration);
  return options;
}

}  // namespace artune::cli
