#include "artune/tuner/calibration/calibration.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/core/sizes.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/tuner/calibration/detail.hpp"
#include "artune/tuner/candidates.hpp"

namespace artune {

using namespace calibration_detail;

namespace {

using Progress = std::function<void(const std::string&)>;

// Sizes of the NCCL fit's all-reduce runs: latency-bound (8 B – 64 KiB) to bandwidth-bound (16 – 64 MiB).
constexpr std::uint64_t kNcclFitSizes[] = {8, 4096, 65536, 1u << 20, 16u << 20, 64u << 20};

std::int64_t count_of(std::uint64_t bytes, std::size_t es) { return std::max<std::int64_t>(1, bytes / es); }

/// The microbenchmarks on machine 0's GPUs: single copies per device-pair class, the concurrent ring step
/// (copying and reducing), local copies and reductions per type, and the per-op overhead.
void measure_microbenchmarks(const Topology& topo, const CalibrationOptions& options, HarnessBackend& be,
                             const std::vector<int>& gpus, const std::vector<std::uint64_t>& sizes,
                             const std::vector<DataType>& reduce_types, const Progress& progress,
                             CalibrationResult& result) {
  HarnessBackend* backend = &be;
  // One plan per size of the sweep, timed: (bytes, median µs) samples.
  const auto sweep = [&](const std::string& what, DataType type, const auto& plan_of) {
    decltype(result.local_copy.samples) samples;
    const std::size_t es = element_size(type);
    for (auto bytes : sizes) {
      progress(fmt::format("{} at {}", what, format_size(bytes)));
      const auto count = count_of(bytes, es);
      samples.push_back({static_cast<double>(count * es),
                         median_time_us(*backend, plan_of(count), type, options.warmup, options.iterations)});
    }
    return samples;
  };
  // Single copies per class.
  for (auto& c : result.copies) {
    c.samples = sweep("copy " + c.name, options.type,
                      [&](std::int64_t count) { return copy_plan(topo, gpus, c.src, c.dst, count); });
    c.fit = fit_alpha_beta(c.samples);
  }
  // Concurrent ring step over machine 0's GPUs (how all-reduce plans load the machine).
  result.concurrent.name = fmt::format("ring step, {} concurrent copies", gpus.size());
  result.concurrent.src = gpus.front();
  result.concurrent.dst = gpus.size() > 1 ? gpus[1] : gpus.front();
  result.concurrent.samples =
      sweep("concurrent copies", options.type, [&](std::int64_t count) { return ring_step_plan(topo, gpus, count); });
  result.concurrent.fit = fit_alpha_beta(result.concurrent.samples);
  result.concurrent_reduce.name = fmt::format("ring step, {} concurrent reduces", gpus.size());
  result.concurrent_reduce.src = result.concurrent.src;
  result.concurrent_reduce.dst = result.concurrent.dst;
  result.concurrent_reduce.samples = sweep("concurrent reducing copies", options.type,
                                           [&](std::int64_t count) { return ring_step_plan(topo, gpus, count, true); });
  result.concurrent_reduce.fit = fit_alpha_beta(result.concurrent_reduce.samples);
  // Local copies and reductions, every participant at once.
  result.local_copy.type = options.type;
  result.local_copy.samples =
      sweep("local copies", options.type, [&](std::int64_t count) { return local_plan(topo, gpus, count, false); });
  result.local_copy.fit = fit_alpha_beta(result.local_copy.samples);
  for (DataType t : reduce_types) {
    ReduceFit rf;
    rf.type = t;
    rf.samples = sweep(fmt::format("{} reductions", to_string(t)), t,
                       [&](std::int64_t count) { return local_plan(topo, gpus, count, true); });
    rf.fit = fit_alpha_beta(rf.samples);
    result.reduce.push_back(std::move(rf));
  }
  // Per-op cost: the slope of dependent one-element copies between the closest pair.
  {
    progress("per-op overhead");
    const int a = gpus[0], b = gpus[1];
    const int short_chain = 16, long_chain = 80;
    const double t_short = median_time_us(*backend, chain_plan(topo, gpus, a, b, short_chain), options.type,
                                          options.warmup, options.iterations);
    const double t_long = median_time_us(*backend, chain_plan(topo, gpus, a, b, long_chain), options.type,
                                         options.warmup, options.iterations);
    result.op_time_us = std::max(0.0, (t_long - t_short) / (long_chain - short_chain));
    const double latency = 0.5 * (topo.route(a, b).latency_us + topo.route(b, a).latency_us);
    result.op_overhead_us = std::max(0.0, result.op_time_us - latency);
    if (host_backend(options.backend)) {
      result.host.emplace();
      result.host->run_overhead_us = std::max(0.0, t_short - short_chain * result.op_time_us);
    }
  }
}

/// The host under a host backend: the aggregate copy rate by working set (the cache cliff) and one thread's
/// copy and reduce rates.
void probe_host(const Topology& topo, const CalibrationOptions& options, HarnessBackend& be, const std::vector<int>& gpus,
                const Progress& progress, CalibrationResult& result) {
  HarnessBackend* backend = &be;
  const std::size_t esize = element_size(options.type);
  HostFit& h = *result.host;
  const int n = static_cast<int>(gpus.size());
  h.threads = n;
  h.cores = std::max(1u, std::thread::hardware_concurrency());
  // Working sets from 4 MiB to 256 MiB, ×√2: the last-level caches of today's hosts (per socket or per
  // core complex) lie inside. Measured rather than read: what the OS reports (sysconf, a VM's cpuid) is
  // the nominal size, not the share the threads get.
  std::vector<double> ws;
  for (int k = 0; k < kHostProbePoints; ++k) ws.push_back(kHostProbeMinBytes * std::pow(2.0, 0.5 * k));
  // The fixed part of a ring step (run, op, latency) from its α-β fit over the microbenchmark sizes.
  const double alpha = result.concurrent.fit.alpha_us;
  std::vector<double> probe_ws;
  for (const double w : ws) {
    // A ring step: every participant holds its buffer and a scratch of `count` elements.
    const auto count = std::max<std::int64_t>(1024, static_cast<std::int64_t>(w / (2.0 * n * esize)));
    const double working_set = 2.0 * n * static_cast<double>(count * esize);
    progress(fmt::format("host memory, working set {}", format_size(static_cast<std::uint64_t>(working_set))));
    const double t =
        median_time_us(*backend, ring_step_plan(topo, gpus, count), options.type, options.warmup, options.iterations);
    h.probe.push_back({working_set, t});
    const double moving = t - alpha;
    h.probe_gbps.push_back(moving > 0 ? n * static_cast<double>(count * esize) / (moving * 1e3) : 0.0);
    probe_ws.push_back(working_set);
  }
  fit_cache_cliff(probe_ws, h.probe_gbps, h);
  // One thread's memcpy: single copies whose working set (every participant's two buffers) stays in cache.
  auto in_cache = [&](const std::vector<TimingSample>& samples) {
    std::vector<TimingSample> out;
    for (const auto& x : samples) {
      if (h.cache_bytes <= 0 || 2.0 * n * x.bytes <= h.cache_bytes) out.push_back(x);
    }
    return out.size() >= 2 ? out : samples;
  };
  h.thread_copy_gbps =
      result.copies.empty() ? result.concurrent.fit.gbps : fit_alpha_beta(in_cache(result.copies.front().samples)).gbps;
  // One thread's reduce kernel: the reducing ring step in cache ran min(threads, cores) of them at a time.
  const double running = std::min<double>(n, h.cores);
  h.thread_reduce_gbps = fit_alpha_beta(in_cache(result.concurrent_reduce.samples)).gbps * n / running;
}

/// Predicted (defaults, microbenchmark fit, calibrated model) vs measured for every validation run, and
/// the MAPEs.
template <typename WholeRuns>
void validate(const Topology& topo, const CalibrationOptions& options, const CostModel& micro, const WholeRuns& whole,
              CalibrationResult& result) {
  const std::size_t esize = element_size(options.type);
  const CostModel defaults = CostModel::defaults(profile_for(options.backend));
  for (const auto& w : whole) {
    if (w.training || !w.result) continue;
    const Plan& plan = w.result->first;
    ValidationRow row;
    row.label = w.cand->label();
    row.family = w.cand->family;
    row.bytes = static_cast<std::uint64_t>(plan.count) * esize;
    row.default_us = simulate(plan, topo, defaults, esize).time_us;
    row.micro_us = simulate(plan, topo, micro, esize).time_us;
    row.predicted_us = simulate(plan, topo, result.model, esize).time_us;
    row.measured_us = w.result->second.figures.time_us;
    row.wrong = w.result->second.wrong;
    row.error_pct = row.measured_us > 0 ? 100.0 * (row.predicted_us - row.measured_us) / row.measured_us : 0.0;
    result.validation.push_back(std::move(row));
  }
  result.mape_all = mape(result.validation, 0, false);
  result.mape_64k = mape(result.validation, 64 * 1024, false);
  result.mape_default_64k = mape(result.validation, 64 * 1024, true);
  double sum = 0;
  int n = 0;
  for (const auto& row : result.validation) {
    if (row.bytes < 64 * 1024 || !(row.measured_us > 0)) continue;
    sum += std::abs(row.micro_us - row.measured_us) / row.measured_us;
    ++n;
  }
  result.mape_micro_64k = n ? sum / n : 0.0;
}

}  // namespace

CalibrationResult calibrate(const Topology& topo, const CalibrationOptions& options) {
  CalibrationResult result;
  result.topology = topo.name();
  result.backend = std::string(to_string(options.backend));
  const auto gpus = topo.gpus_of_machine(0);
  if (gpus.size() < 2)
    throw InvalidInput(fmt::format("calibrate: topology '{}' needs at least 2 GPUs on machine 0", topo.name()));
  BackendOptions bo;
  bo.timeout_s = options.timeout_s;
  bo.topology = &topo;
  std::unique_ptr<HarnessBackend> backend = make_backend(options.backend, bo);
  result.root = backend->is_root();
  const auto sizes = options.sizes.empty() ? default_sizes() : options.sizes;
  std::vector<DataType> reduce_types = options.reduce_types;
  if (reduce_types.empty()) {
    reduce_types = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt32};
  }
  if (std::find(reduce_types.begin(), reduce_types.end(), options.type) == reduce_types.end()) {
    reduce_types.insert(reduce_types.begin(), options.type);
  }
  const std::size_t esize = element_size(options.type);
  result.copies = pair_classes(topo);
  // Whole-plan runs: the first (basic) candidate of every family, at the training and validation sizes.
  // Chosen here so that the progress counts them: they are a large share of the work (a plan run per family
  // and size), and a bar that left them out sat near 100 % while they ran.
  CandidateOptions co;
  co.max_cycles = 1;
  co.segments = {1};
  co.max_subchunks = 1;
  std::vector<Candidate> picks;
  {
    const CandidateSet set = generate_candidates(topo, co);
    std::set<std::string> families;
    for (const auto& c : set.candidates) {
      if (families.insert(c.family).second) picks.push_back(c);
    }
  }
  std::vector<std::uint64_t> tsizes;
  if (options.refine) {
    tsizes = options.training_sizes;
    if (tsizes.empty()) {
      // Geometric midpoints of the validation sizes: the fit never sees a validated size.
      const auto v = options.validation_sizes.empty() ? default_sizes() : options.validation_sizes;
      for (std::size_t i = 0; i + 1 < v.size(); ++i) {
        const auto mid =
            static_cast<std::uint64_t>(std::sqrt(static_cast<double>(v[i]) * static_cast<double>(v[i + 1])));
        if (mid / esize * esize > v[i]) tsizes.push_back(mid / esize * esize);
      }
    }
  }
  const auto vsizes = options.validate ? (options.validation_sizes.empty() ? default_sizes() : options.validation_sizes)
                                       : std::vector<std::uint64_t>{};
  const std::size_t micro_steps = sizes.size() * (result.copies.size() + 3 + reduce_types.size()) + 2 +
                                  (host_backend(options.backend) ? kHostProbePoints : 0);
  // nccl backend: NCCL's own all-reduce over machine 0's GPUs for the NCCL fit (fit_nccl).
  const bool nccl_runs = options.backend == BackendKind::kNccl;
  const std::size_t steps =
      micro_steps + picks.size() * (tsizes.size() + vsizes.size()) + (nccl_runs ? std::size(kNcclFitSizes) : 0);
  std::size_t done = 0;
  const Progress progress = [&](const std::string& what) {
    if (options.progress) options.progress(done, steps, what);
    ++done;
  };

  measure_microbenchmarks(topo, options, *backend, gpus, sizes, reduce_types, progress, result);
  if (result.host) probe_host(topo, options, *backend, gpus, progress, result);
  for (const auto& c : result.copies) {
    result.link_alpha_us.push_back(c.fit.alpha_us - result.op_overhead_us - c.route_latency_us);
  }
  result.overlay = make_overlay(result, options.backend, options.type);
  result.model = CostModel::defaults(profile_for(options.backend));
  result.model.apply_overlay(result.overlay, "calibration");

  result.micro_overlay = result.overlay;
  const CostModel micro = result.model;

  auto run_family = [&](const Candidate& cand, std::uint64_t bytes,
                        const char* what) -> std::optional<std::pair<Plan, Measurement>> {
    if (options.progress)
      options.progress(done, steps, fmt::format("{} {} at {}", what, cand.label(), format_size(bytes)));
    ++done;
    const auto count = count_of(bytes, esize);
    Plan plan;
    try {
      plan = build_candidate(topo, cand, count, ReduceOp::kSum);
    } catch (const InvalidInput&) {
      return std::nullopt;
    }
    Measurement m =
        measure_plan(*backend, plan, options.type, ReduceOp::kSum, options.warmup, std::max(3, options.iterations));
    return std::make_pair(std::move(plan), m);
  };
  std::int64_t training_wrong = 0;
  // Training and validation runs of a family interleaved by size: a host whose speed drifts while calibrate
  // runs (other tenants, frequency) then shifts the runs the fit sees and the runs it is judged on alike.
  struct WholeRun {
    const Candidate* cand;
    std::uint64_t bytes;
    bool training;
    std::optional<std::pair<Plan, Measurement>> result;
  };
  std::vector<WholeRun> whole;
  done = std::max(done, micro_steps);  // the microbenchmarks are over, whatever they counted
  for (const auto& cand : picks) {
    std::vector<std::pair<std::uint64_t, bool>> order;
    for (auto bytes : tsizes) order.emplace_back(bytes, true);
    for (auto bytes : vsizes) order.emplace_back(bytes, false);
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [bytes, training] : order) {
      whole.push_back({&cand, bytes, training, run_family(cand, bytes, training ? "training" : "validating")});
    }
  }
  std::vector<TrainingRun> runs;
  for (auto& w : whole) {
    if (!w.training || !w.result) continue;
    training_wrong += w.result->second.wrong;
    if (w.result->second.figures.time_us > 0) {
      runs.push_back({std::move(w.result->first), w.cand->label(), w.result->second.figures.time_us});
    }
  }
  if (!runs.empty() && result.host) {
    // On a host the ring steps (every thread copying, or reducing, at once) pin down what one thread does
    // against what the threads do together, which the whole-plan runs alone leave loose.
    for (const auto& x : result.concurrent.samples) {
      runs.push_back(
          {ring_step_plan(topo, gpus, count_of(static_cast<std::uint64_t>(x.bytes), esize)), "ring step", x.time_us});
    }
    for (const auto& x : result.concurrent_reduce.samples) {
      runs.push_back({ring_step_plan(topo, gpus, count_of(static_cast<std::uint64_t>(x.bytes), esize), true),
                      "reducing ring step", x.time_us});
    }
  }
  if (!runs.empty()) {
    result.refined = refine_model(topo, result.model, runs, options.backend, esize);
    result.model = result.refined->model;
    result.overlay = result.model.to_json();
  }

  if (nccl_runs) {
    // NCCL's all-reduce from latency- to bandwidth-bound sizes; the fit moves the per-lane efficiency and the
    // per-step latency of the link classes its channels cross, on top of the refined model.
    std::vector<TrainingRun> nccl;
    for (const std::uint64_t bytes : kNcclFitSizes) {
      progress(fmt::format("nccl all-reduce at {}", format_size(bytes)));
      BuildOptions bo_nccl;
      bo_nccl.count = count_of(bytes, esize);
      bo_nccl.participants = gpus;
      Plan plan = build_plan(topo, parse_spec("nccl"), bo_nccl);
      const Measurement m =
          measure_plan(*backend, plan, options.type, ReduceOp::kSum, options.warmup, std::max(3, options.iterations));
      training_wrong += m.wrong;
      if (m.figures.time_us > 0) nccl.push_back({std::move(plan), "nccl", m.figures.time_us});
    }
    if (!nccl.empty()) {
      result.nccl = fit_nccl(topo, result.model, nccl, esize);
      result.model = result.nccl->model;
      result.overlay = result.model.to_json();
      result.overlay["nccl_intra"] = nccl_intra_class(topo, gpus);
    }
  }

  if (options.validate) validate(topo, options, micro, whole, result);
  result.training_wrong = training_wrong;
  if (options.progress) options.progress(steps, steps, "calibration done");
  return result;
}

}  // namespace artune
