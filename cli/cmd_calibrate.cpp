// `artune calibrate`: microbenchmarks, fit and validation of a backend's cost model (tuner/calibration).

#include <fmt/core.h>
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/mpi_session.hpp"
#include "cli/log_files.hpp"
#include "cli/tuner_common.hpp"
#include "artune/core/error.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/sizes.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/calibration/from_logs.hpp"

namespace artune::cli {
namespace {

struct CalibrateFlags {
  std::string topo;
  std::string backend = "cpu";
  std::string output;
  std::string type = "float";
  SweepFlags sweep{"4K", "16M", 4};
  int iters = 7;
  int warmup = 2;
  bool no_validate = false;
  bool no_refine = false;
  std::string report;
  double timeout = 60;
  bool json = false;
  bool quiet = false;
  bool output_given = false;
  bool report_given = false;
  std::vector<std::string> from;  ///< --from: nccl-tests logs to fit instead of running anything
  std::string spec;               ///< --spec: what the logged runs forced (as check -s)
  std::string collective;         ///< --collective: for logs that do not name their program
  std::string calibration;        ///< --calibration: the start model
  std::vector<std::string> measuring;  ///< measurement flags given (refused with --from)
};

/// calibrate --from: the NCCL fit from nccl-tests tables, nothing run.
void run_calibrate_from(const CalibrateFlags& f) {
  if (!f.measuring.empty()) {
    throw InvalidInput(fmt::format("--from: fits logged runs; {} measure(s) a backend: not both", f.measuring.front()));
  }
  if (f.output_given && f.output.empty()) throw InvalidInput("--out: empty file name");
  if (!f.output.empty()) check_output_file(f.output, "--out");
  const CheckOptions options = log_model_options(f.spec, f.collective, f.calibration);
  const std::vector<LogFile> files = read_log_files(f.from, "--from");
  const Topology topo = load_topology(f.topo);
  std::vector<LoggedRun> runs;
  for (const LogFile& file : files) {
    for (const auto& r : file.runs) runs.push_back({&r, file.info.empty() ? nullptr : &file.info, f.spec});
  }
  if (runs.empty()) throw InvalidInput("--from: the files hold no nccl-tests table");
  const LogCalibration c = calibrate_from_logs(topo, runs, options);
  if (!f.output.empty()) write_output_file(f.output, c.overlay.dump(2) + "\n", "--out");
  if (f.json) {
    print_json(c.to_json());
  } else {
    fmt::print("{}", c.summary());
    if (!f.output.empty()) fmt::print("# overlay written to {} (use it with --calibration {})\n", f.output, f.output);
  }
}

void run_calibrate(const CalibrateFlags& f) {
  if (!f.from.empty()) {
    run_calibrate_from(f);
    return;
  }
  if (const auto world = launcher_world_size(); world && *world > 1)
    refuse_cpu_under_mpirun(f.backend, "--backend", *world);
  Progress progress(f.quiet || launcher_rank().value_or(0) != 0);
  // Every flag is checked before the first measurement, so that no progress line precedes an error.
  if (f.output_given && f.output.empty()) throw InvalidInput("--out: empty file name");
  if (f.report_given && f.report.empty()) throw InvalidInput("--report: empty folder name");
  check_measure_flags(f.iters, f.warmup, f.timeout);
  const Topology topo = load_topology(f.topo);
  CalibrationOptions co;
  co.backend = parse_backend_kind(f.backend, "--backend");
  check_backend_devices(co.backend, topo, "--backend cpu");
  co.type = parse_data_type(f.type, "-d/--datatype");
  co.sizes = sweep_sizes(f.sweep);
  if (co.sizes.size() < 2) throw InvalidInput("-b/-e/-f: calibration needs at least two sizes");
  const std::uint64_t esize = element_size(co.type);
  for (const auto bytes : co.sizes) {
    if (bytes % esize != 0) {
      throw InvalidInput(
          fmt::format("-b/-e/-f: size {} is not a multiple of the {}-byte element size of {}", bytes, esize, f.type));
    }
  }
  if (!f.output.empty()) check_output_file(f.output, "--out");
  if (!f.report.empty()) check_output_folder(f.report, "--report");
  co.validation_sizes = co.sizes;
  co.validate = !f.no_validate;
  co.refine = !f.no_refine;
  co.iterations = f.iters;
  co.warmup = f.warmup;
  co.timeout_s = f.timeout;
  co.progress = progress.fn();
  const CalibrationResult r = calibrate(topo, co);
  progress.finish();
  if (!r.root) return;  // under mpirun rank 0 writes and prints
  if (!f.output.empty()) write_output_file(f.output, r.overlay.dump(2) + "\n", "--out");
  if (!f.report.empty()) {
    namespace fs = std::filesystem;
    make_output_folder(f.report, "--report");
    const std::string cmd = fmt::format(
        "artune calibrate -t {} --backend {} -b {} -e {} -f {:g}{}{}{}", shell_word(f.topo), shell_word(f.backend),
        shell_word(f.sweep.min_bytes), shell_word(f.sweep.max_bytes), f.sweep.factor,
        f.type != "float" ? " -d " + shell_word(f.type) : std::string(),
        f.output.empty() ? std::string() : " --out " + shell_word(f.output), " --report " + shell_word(f.report));
    write_output_file((fs::path(f.report) / "CALIBRATION.md").string(),
                      fmt::format("# artune calibrate: {} on the {} backend\n\nRegenerate with:\n\n```\n{}\n```\n\n"
                                  "```\n{}```\n",
                                  topo.name(), f.backend, cmd, r.summary()),
                      "--report");
    nlohmann::json doc = r.to_json();
    doc["command"] = cmd;
    write_output_file((fs::path(f.report) / "calibration.json").string(), doc.dump(1) + "\n", "--report");
  }
  if (f.json) {
    print_json(r.to_json());
  } else {
    fmt::print("{}", r.summary());
    if (!f.output.empty()) fmt::print("# overlay written to {} (use it with --calibration {})\n", f.output, f.output);
  }
  std::int64_t wrong = r.training_wrong;
  for (const auto& row : r.validation) wrong += row.wrong;
  if (wrong != 0) throw Error(ErrorCode::kWrongResult, fmt::format("{} wrong elements in the whole-plan runs", wrong));
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto cf = std::make_shared<CalibrateFlags>();
  CLI::App* cal = app.add_subcommand(
      "calibrate",
      "Microbenchmark a backend (copies per device-pair class, concurrent copies, reductions per type, per-op "
      "overhead), fit alpha and bandwidth by least squares, refine the model against whole-plan runs of every family "
      "(Levenberg-Marquardt), write a cost-model overlay, and validate it on other sizes (predicted vs measured, "
      "MAPE)");
  cal->add_option("-t,--topology", cf->topo, "topology whose devices the backend runs")->required();
  cal->add_option("--backend", cf->backend, "backend to measure (cpu, mpi, cuda, nccl)")->capture_default_str();
  add_out_option(cal, cf->output,
                 fmt::format("write the overlay JSON here (load it with --calibration; {})", kOutputPathHelp));
  cal->add_option("-d,--datatype", cf->type, "element type of copies and validation runs")->capture_default_str();
  add_sweep_flags(cal, cf->sweep);
  cal->add_option("--iters", cf->iters, "timed runs per point (the median is kept)")->capture_default_str();
  cal->add_option("--warmup", cf->warmup, "warm-up runs per point")->capture_default_str();
  cal->add_option("--timeout", cf->timeout, "seconds before a stuck backend run fails")->capture_default_str();
  cal->add_flag("--no-validate", cf->no_validate, "skip the validation set");
  cal->add_flag("--no-refine", cf->no_refine, "keep the microbenchmark fit (no refinement against whole-plan runs)");
  cal->add_option("--report", cf->report, "also write CALIBRATION.md and calibration.json into this folder");
  cal->add_flag("--json", cf->json, "print the fits and validation as JSON");
  cal->add_flag("-q,--quiet", cf->quiet, "no progress output");
  cal->add_option("--from", cf->from,
                  "fit NCCL's model to these nccl-tests outputs instead of running anything (every other size of "
                  "each table held out for validation)");
  cal->add_option("-s,--spec", cf->spec, "with --from: what the logged runs forced, as check -s (nccl.ALGO[.PROTO])");
  cal->add_option("--collective", cf->collective, "with --from: the collective of logs that do not name it");
  cal->add_option("--calibration", cf->calibration, "with --from: the overlay to start from (default: the nccl profile)");
  cal->callback([cf, cal] {
    warn_deprecated_output(cal);
    cf->output_given = output_given(cal);
    cf->report_given = cal->count("--report") > 0;
    cf->measuring.clear();
    for (const char* flag : {"--backend", "-b", "-e", "-f", "--iters", "--warmup", "--timeout", "--report", "-d"}) {
      if (cal->count(flag) > 0) cf->measuring.emplace_back(flag);
    }
    run_calibrate(*cf);
  });
}

}  // namespace artune::cli
