// Calibration's report: the fit, its residuals and the validation table as text and JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "artune/core/sizes.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/calibration/detail.hpp"

namespace artune {

namespace calibration_detail {

double mape(const std::vector<ValidationRow>& rows, std::uint64_t min_bytes, bool defaults) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (r.bytes < min_bytes || !(r.measured_us > 0)) continue;
    const double p = defaults ? r.default_us : r.predicted_us;
    sum += std::abs(p - r.measured_us) / r.measured_us;
    ++n;
  }
  return n ? sum / n : 0.0;
}

}  // namespace calibration_detail

using namespace calibration_detail;

std::string CalibrationResult::summary() const {
  std::ostringstream out;
  out << fmt::format("# calibration of the {} backend on {}\n", backend, topology);
  auto fit_lines = [&](const std::string& name, const std::vector<TimingSample>& samples, const AlphaBetaFit& fit,
                       const std::string& extra) {
    out << fmt::format("{}: alpha {:.2f} us, {:.2f} GB/s{}; rms residual {:.2f} us, max rel. error {:.1f}%\n", name,
                       fit.alpha_us, fit.gbps, extra, fit.rms_residual_us, 100 * fit.max_rel_error);
    out << "    size       measured(us)  fitted(us)  residual(us)\n";
    for (std::size_t i = 0; i < samples.size(); ++i) {
      out << fmt::format("    {:>9}  {:>12.2f}  {:>10.2f}  {:>+12.2f}\n",
                         format_size(static_cast<std::uint64_t>(samples[i].bytes)), samples[i].time_us,
                         fit.predict_us(samples[i].bytes), fit.residual_us.at(i));
    }
  };
  out << "## copies, one at a time, per device-pair class (time = alpha + bytes / bandwidth)\n";
  for (const auto& c : copies) {
    fit_lines(c.name, c.samples, c.fit, fmt::format(" (nominal {:g} GB/s)", c.nominal_gbps));
  }
  out << "## concurrent copies\n";
  fit_lines(concurrent.name, concurrent.samples, concurrent.fit, "");
  fit_lines(concurrent_reduce.name, concurrent_reduce.samples, concurrent_reduce.fit, "");
  out << "## local copies (every device at once)\n";
  fit_lines("copy", local_copy.samples, local_copy.fit, "");
  out << "## local reductions per type (every device at once; bandwidth in bytes of src)\n";
  for (const auto& r : reduce) fit_lines(std::string(to_string(r.type)), r.samples, r.fit, "");
  out << fmt::format("## per-op cost: {:.2f} us per dependent op, overhead {:.2f} us after route latency\n", op_time_us,
                     op_overhead_us);
  if (host) {
    out << fmt::format("## host: run overhead {:.2f} us, {:g} cores; {} participants copying at once, by working set\n",
                       host->run_overhead_us, host->cores, host->threads);
    out << "    working set  measured(us)  aggregate(GB/s)\n";
    for (std::size_t i = 0; i < host->probe.size(); ++i) {
      out << fmt::format("    {:>7.1f} MiB  {:>12.2f}  {:>15.2f}\n", host->probe[i].bytes / kMiB,
                         host->probe[i].time_us, host->probe_gbps.at(i));
    }
    if (host->cache_bytes > 0) {
      out << fmt::format("cache {:.1f} MiB: {:.2f} GB/s while the working set fits, {:.2f} GB/s for the part beyond",
                         host->cache_bytes / kMiB, host->cache_gbps, host->dram_gbps);
    } else {
      out << fmt::format("no cache step: {:.2f} GB/s at every working set", host->dram_gbps);
    }
    out << fmt::format("; one thread (cache-resident): copy {:.2f} GB/s, reduce {:.2f} GB/s\n", host->thread_copy_gbps,
                       host->thread_reduce_gbps);
  }
  out << "## overlay from the microbenchmark fits\n" << micro_overlay.dump() << "\n";
  if (refined) {
    out << fmt::format(
        "## refined against whole-plan runs{} (Levenberg-Marquardt, {} iterations): RMS relative error "
        "{:.1f}% -> {:.1f}%\n",
        host ? " and the ring steps" : "", refined->iterations, 100 * refined->rms_rel_before,
        100 * refined->rms_rel_after);
    for (const auto& p : refined->parameters) out << "    " << p << "\n";
  }
  if (nccl) {
    out << fmt::format(
        "## NCCL fit against NCCL all-reduce runs (per link class: efficiency, per-step latency; "
        "{} iterations): RMS relative error {:.1f}% -> {:.1f}%\n",
        nccl->iterations, 100 * nccl->rms_rel_before, 100 * nccl->rms_rel_after);
    for (const auto& p : nccl->parameters) out << "    " << p << "\n";
  }
  if (!validation.empty()) {
    out << "## validation: predicted (calibrated) vs measured, per family and size (sizes not used for fitting)\n";
    out << fmt::format("{:<24} {:>9} {:>12} {:>12} {:>12} {:>12} {:>8} {:>6}\n", "plan", "size", "default(us)",
                       "micro(us)", "predicted", "measured", "error", "#wrong");
    for (const auto& r : validation) {
      out << fmt::format("{:<24} {:>9} {:>12.1f} {:>12.1f} {:>12.1f} {:>12.1f} {:>+7.1f}% {:>6}\n", r.label,
                         format_size(r.bytes), r.default_us, r.micro_us, r.predicted_us, r.measured_us, r.error_pct,
                         r.wrong);
    }
    out << fmt::format(
        "MAPE: {:.1f}% over all rows, {:.1f}% for sizes >= 64K (uncalibrated defaults: {:.1f}%, "
        "microbenchmark fit alone: {:.1f}%)\n",
        100 * mape_all, 100 * mape_64k, 100 * mape_default_64k, 100 * mape_micro_64k);
  }
  return out.str();
}

nlohmann::json CalibrationResult::to_json() const {
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : copies) {
    classes.push_back({{"class", c.name},
                       {"alpha_us", c.fit.alpha_us},
                       {"gbps", c.fit.gbps},
                       {"nominal_gbps", c.nominal_gbps},
                       {"rms_residual_us", c.fit.rms_residual_us}});
  }
  nlohmann::json reduces = nlohmann::json::array();
  for (const auto& r : reduce) {
    reduces.push_back({{"type", std::string(to_string(r.type))}, {"alpha_us", r.fit.alpha_us}, {"gbps", r.fit.gbps}});
  }
  std::vector<double> probe_ws, probe_us;
  if (host) {
    for (const auto& x : host->probe) {
      probe_ws.push_back(x.bytes);
      probe_us.push_back(x.time_us);
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : validation) {
    rows.push_back({{"plan", r.label},
                    {"family", r.family},
                    {"bytes", r.bytes},
                    {"default_us", r.default_us},
                    {"micro_us", r.micro_us},
                    {"predicted_us", r.predicted_us},
                    {"measured_us", r.measured_us},
                    {"error_pct", r.error_pct},
                    {"wrong", r.wrong}});
  }
  return {{"topology", topology},
          {"backend", backend},
          {"copies", classes},
          {"concurrent", {{"alpha_us", concurrent.fit.alpha_us}, {"gbps", concurrent.fit.gbps}}},
          {"concurrent_reduce", {{"alpha_us", concurrent_reduce.fit.alpha_us}, {"gbps", concurrent_reduce.fit.gbps}}},
          {"local_copy", {{"alpha_us", local_copy.fit.alpha_us}, {"gbps", local_copy.fit.gbps}}},
          {"reduce", reduces},
          {"op_time_us", op_time_us},
          {"op_overhead_us", op_overhead_us},
          {"host", host ? nlohmann::json{{"run_overhead_us", host->run_overhead_us},
                                         {"cores", host->cores},
                                         {"threads", host->threads},
                                         {"probe_working_set_bytes", probe_ws},
                                         {"probe_us", probe_us},
                                         {"probe_gbps", host->probe_gbps},
                                         {"cache_bytes", host->cache_bytes},
                                         {"cache_gbps", host->cache_gbps},
                                         {"dram_gbps", host->dram_gbps},
                                         {"thread_copy_gbps", host->thread_copy_gbps},
                                         {"thread_reduce_gbps", host->thread_reduce_gbps}}
                        : nlohmann::json()},
          {"overlay", overlay},
          {"micro_overlay", micro_overlay},
          {"refined", refined ? nlohmann::json{{"rms_rel_before", refined->rms_rel_before},
                                               {"rms_rel_after", refined->rms_rel_after},
                                               {"iterations", refined->iterations},
                                               {"parameters", refined->parameters}}
                              : nlohmann::json()},
          {"nccl", nccl ? nlohmann::json{{"rms_rel_before", nccl->rms_rel_before},
                                         {"rms_rel_after", nccl->rms_rel_after},
                                         {"iterations", nccl->iterations},
                                         {"parameters", nccl->parameters}}
                        : nlohmann::json()},
          {"mape_micro_64k", mape_micro_64k},
          {"validation", rows},
          {"mape_all", mape_all},
          {"mape_64k", mape_64k},
          {"mape_default_64k", mape_default_64k},
          {"summary", summary()}};
}

}  // namespace artune
