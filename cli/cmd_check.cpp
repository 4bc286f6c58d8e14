// `artune check -t TOPO RUN.log…`: nccl-tests output (and NCCL INFO lines) against the model, row by row
// (tuner/log_check): measured next to the model, the ratio, and for rows outside the band the likely cause.

#include <fmt/core.h>
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/core/error.hpp"
#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/topology/discovery.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/log_check.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/flag_names.hpp"
#include "cli/log_files.hpp"

namespace artune::cli {
namespace {

struct CheckFlags {
  std::string topo;
  std::vector<std::string> logs;
  std::string spec;
  std::string collective;
  std::string calibration;
  bool json = false;
};

Topology resolve_topology(const CheckFlags& f, std::vector<std::string>& notes) {
  if (!f.topo.empty()) return load_topology(f.topo);
  DiscoveryResult d = discover_local_machine();
  if (d.gpu_count == 0) {
    throw InvalidInput(fmt::format("-t/--topology: no GPU found on {}; name the topology the logs were measured on",
                                   d.hostname.empty() ? std::string("this machine") : d.hostname));
  }
  notes.push_back(fmt::format("topology discovered on {} ({} GPUs)", d.hostname, d.gpu_count));
  return std::move(d.topology);
}

void run_check(const CheckFlags& f) {
  if (f.logs.empty()) throw InvalidInput("RUN.log: name at least one nccl-tests output file");
  const CheckOptions options = log_model_options(f.spec, f.collective, f.calibration);
  const std::vector<LogFile> files = read_log_files(f.logs, "RUN.log");
  for (const LogFile& lf : files) {
    if (lf.runs.empty() && lf.info.empty()) {
      throw InvalidInput(fmt::format("{}: no nccl-tests table and no NCCL INFO line", lf.path));
    }
  }
  std::vector<std::string> notes;
  const Topology topo = resolve_topology(f, notes);
  // An INFO-only file belongs to the runs of the other files (the same job's NCCL_DEBUG=INFO output).
  const logs::InfoLog* shared_info = nullptr;
  for (const LogFile& lf : files) {
    if (lf.runs.empty() && !lf.info.empty() && shared_info == nullptr) shared_info = &lf.info;
  }
  CheckReport report;
  report.topology = topo.name();
  bool any_table = false;
  for (const LogFile& lf : files) {
    if (lf.runs.empty()) continue;
    any_table = true;
    const logs::InfoLog* info = !lf.info.empty() ? &lf.info : shared_info;
    CheckReport part = check_runs(topo, lf.runs, info, options);
    for (auto& r : part.runs) report.runs.push_back(std::move(r));
  }
  if (!any_table) throw InvalidInput("RUN.log: the files hold NCCL INFO lines but no nccl-tests table to check");
  // The library names its parameters ("parameter spec"); the command prints its flags in their place.
  for (auto& run : report.runs) {
    run.spec_from = with_flag_names(run.spec_from);
    run.collective_from = with_flag_names(run.collective_from);
    for (auto& finding : run.findings) finding = with_flag_names(finding);
  }
  if (f.json) {
    nlohmann::json doc = report.to_json();
    doc["notes"] = notes;
    print_json(doc);
  } else {
    for (const auto& n : notes) fmt::print("# {}\n", n);
    fmt::print("{}", report.text());
  }
  if (report.flagged() > 0) {
    throw Error(ErrorCode::kWrongResult,
                fmt::format("{} of {} rows outside the model's band (see above)", report.flagged(), report.rows()));
  }
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto cf = std::make_shared<CheckFlags>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Compare nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf; NCCL INFO lines in the same "
      "or another file) with the model: per row the measured and the model's busbw and time, their ratio, and for "
      "rows outside the band the likely cause (latency- or bandwidth-bound and by which links, the NICs or channels "
      "the figure implies, a forced NCCL_ALGO/NCCL_PROTO, what NCCL built against what the topology allows). Exit 1 "
      "when a row is outside the band or computed wrong results");
  cmd->add_option("-t,--topology", cf->topo,
                  "the machine or cluster the logs were measured on (default: discover this machine)");
  cmd->add_option("logs", cf->logs, "nccl-tests output files (RUN.log…)")->required();
  cmd->add_option("-s,--spec", cf->spec,
                  "what the runs forced when their logs do not show it: nccl (NCCL's choice), nccl.ALGO[.PROTO]");
  cmd->add_option("--collective", cf->collective,
                  "allreduce, allgather or reducescatter, for logs that do not name their program");
  cmd->add_option("--calibration", cf->calibration, "a calibration overlay (artune calibrate) to compare with");
  cmd->add_flag("--json", cf->json, "print the rows, ratios and causes as JSON");
  cmd->callback([cf] { run_check(*cf); });
}

}  // namespace artune::cli
