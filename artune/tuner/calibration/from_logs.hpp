#pragma once
// `artune calibrate --from RUN.log…`: the NCCL fit of calibrate --backend nccl (fit_nccl: per link class NCCL's
// channels cross, the efficiency and the per-step latency, least squares on relative residuals) from
// nccl-tests tables alone, nothing run. Every other size of each table is held out of the fit, and the
// per-row error before and after is printed for both halves: the held-out rows are the validation.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/log_check.hpp"

namespace artune {

/// One row of the fit: measured, and the model before and after.
struct LogFitRow {
  std::string source;
  int line = 0;
  std::uint64_t bytes = 0;
  bool held_out = false;  ///< not used by the fit
  double measured_us = 0;
  double before_us = 0;   ///< the start model (the NCCL profile, or --calibration)
  double after_us = 0;    ///< the fitted model
};

/// What calibrate --from found.
struct LogCalibration {
  std::string topology;
  RefineResult fit;       ///< fit_nccl over the fitted rows
  std::vector<LogFitRow> rows;
  std::vector<std::string> notes;
  double mape_fit_before = 0, mape_fit_after = 0;    ///< fractions, fitted rows
  double mape_held_before = 0, mape_held_after = 0;  ///< fractions, held-out rows
  nlohmann::json overlay;  ///< the fitted model as a calibration overlay (--calibration, ARTUNE_TUNER_CALIBRATION)

  std::string summary() const;
  nlohmann::json to_json() const;
};

/// A run, the NCCL INFO log of its job (nullptr without one) and what it forced where its log does not show it
/// (check's spec grammar; "" = the log, else NCCL's own choice).
struct LoggedRun {
  const logs::TestRun* run = nullptr;
  const logs::InfoLog* info = nullptr;
  std::string spec;
};

/// Fits on every other size of each run (sizes ranked per run; the odd ranks held out), validates on the rest.
/// `options.model` is the start model (options.spec is ignored: each run carries its own). InvalidInput when fewer than two rows per half remain, or as check_runs.
LogCalibration calibrate_from_logs(const Topology& topo, const std::vector<LoggedRun>& runs,
                                   const CheckOptions& options);

}  // namespace artune
