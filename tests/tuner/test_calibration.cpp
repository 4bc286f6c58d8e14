// Calibration: the least-squares α-β fit recovers known parameters from
// synthetic measurements (exact, noisy, and produced by the simulator itself),
// and the overlay maps fits onto the cost model.

#include <doctest/doctest.h>

#include <random>

#include <cmath>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/fit.hpp"
#include "artune/tuner/candidates.hpp"

using namespace artune;

namespace {

std::vector<TimingSample> line(double alpha_us, double gbps, const std::vector<double>& noise = {}) {
  std::vector<TimingSample> out;
  int i = 0;
  for (double bytes = 4096; bytes <= 64.0 * 1024 * 1024; bytes *= 4, ++i) {
    const double t = alpha_us + bytes / (gbps * 1e3);
    const double f = noise.empty() ? 1.0 : 1.0 + noise[static_cast<std::size_t>(i) % noise.size()];
    out.push_back({bytes, t * f});
  }
  return out;
}

// Whole-plan "measurements" of each spec × count, simulated with the model `truth` (sum: an avg's final
// scale would trade its copy rate against the reduce rate, which is not identifiable).
std::vector<TrainingRun> simulated_runs(const Topology& topo, const CostModel& truth, std::vector<const char*> specs,
                                        std::vector<std::int64_t> counts) {
  std::vector<TrainingRun> runs;
  for (const char* spec : specs) {
    for (std::int64_t count : counts) {
      TrainingRun run;
      run.plan = build_candidate(topo, Candidate{"x", spec, {}, {}, 1}, count, ReduceOp::kSum);
      run.label = spec;
      run.measured_us = simulate(run.plan, topo, truth, 4).time_us;
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

}  // namespace

TEST_CASE("calibration.fit_exact") {
  const AlphaBetaFit fit = fit_alpha_beta(line(5.0, 12.0));
  CHECK(fit.alpha_us == doctest::Approx(5.0).epsilon(1e-9));
  CHECK(fit.gbps == doctest::Approx(12.0).epsilon(1e-9));
  CHECK(fit.rms_residual_us < 1e-6);
  CHECK(fit.samples == 8);
  CHECK(fit.predict_us(1e6) == doctest::Approx(5.0 + 1e6 / 12e3));
}

TEST_CASE("calibration.fit_noisy") {
  // ±3 % deterministic multiplicative noise: parameters within a few percent.
  const AlphaBetaFit fit = fit_alpha_beta(line(20.0, 6.0, {0.03, -0.02, 0.01, -0.03, 0.02}));
  CHECK(fit.alpha_us == doctest::Approx(20.0).epsilon(0.08));
  CHECK(fit.gbps == doctest::Approx(6.0).epsilon(0.05));
  CHECK(fit.max_rel_error < 0.06);
  CHECK(fit.residual_us.size() == 8);
}

TEST_CASE("calibration.fit_clamps_negative_alpha") {
  // Pure bandwidth with a slight super-linear bend: α would come out negative; it is clamped to 0.
  std::vector<TimingSample> s = {{1e6, 90}, {2e6, 200}, {4e6, 410}};
  const AlphaBetaFit fit = fit_alpha_beta(s);
  CHECK(fit.alpha_us == 0.0);
  CHECK(fit.gbps > 9.0);
  CHECK(fit.gbps < 11.0);
  CHECK_THROWS_AS(fit_alpha_beta({{100, 5}, {100, 6}}), InvalidInput);
  CHECK_THROWS_AS(fit_alpha_beta({{100, 5}, {200, 0}}), InvalidInput);  // a non-positive sample is bad input
  CHECK_THROWS_AS(fit_alpha_beta({{100, 10}, {200, 5}}), BackendFailure);
}

TEST_CASE("calibration.recovers_simulated_copies") {
  // "Measurements" produced by the simulator with a known model: the fit of a copy class returns
  // the model's per-transfer cost (overhead + route latency) and its per-transfer cap.
  const Topology topo = load_topology("uniform:4");
  CostModel model = CostModel::defaults(BackendProfile::kCpu);
  model.op_overhead_us = 3.0;
  model.transfer_cap_gbps = 7.0;
  const auto gpus = topo.gpus_of_machine(0);
  std::vector<TimingSample> samples;
  for (std::int64_t count = 1024; count <= (4 << 20); count *= 4) {
    const Plan plan = copy_plan(topo, gpus, gpus[0], gpus[1], count);
    samples.push_back({static_cast<double>(count * 4), simulate(plan, topo, model, 4).time_us});
  }
  const AlphaBetaFit fit = fit_alpha_beta(samples);
  const double latency = topo.route(gpus[0], gpus[1]).latency_us + model.link_for(LinkKind::kNvLink).alpha_us;
  CHECK(fit.alpha_us == doctest::Approx(3.0 + latency).epsilon(1e-6));
  CHECK(fit.gbps == doctest::Approx(7.0).epsilon(1e-6));
  // A ring step: every GPU copies to its neighbour at once over its own link: the same line.
  std::vector<TimingSample> ring;
  for (std::int64_t count = 1024; count <= (4 << 20); count *= 4) {
    ring.push_back(
        {static_cast<double>(count * 4), simulate(ring_step_plan(topo, gpus, count), topo, model, 4).time_us});
  }
  CHECK(fit_alpha_beta(ring).gbps == doctest::Approx(7.0).epsilon(1e-6));
}

TEST_CASE("calibration.overlay_host_backend") {
  CalibrationResult r;
  r.concurrent.fit.gbps = 4.5;
  r.local_copy.fit.gbps = 9.0;
  ReduceFit rf;
  rf.type = DataType::kFloat32;
  rf.fit.gbps = 3.0;
  r.reduce.push_back(rf);
  r.op_overhead_us = 2.5;
  const nlohmann::json o = make_overlay(r, BackendKind::kCpu, DataType::kFloat32);
  CHECK(o["profile"] == "cpu");
  CHECK(o["transfer_cap_gbps"] == 4.5);
  CHECK(o["op_overhead_us"] == 2.5);
  CHECK(o["links"]["nvlink"]["efficiency"] == 1.0);
  CHECK(o["devices"]["gpu"]["reduce_gbps"] == 3.0);  // no reducing ring step: the local reduce rate
  CHECK(o["devices"]["cpu"]["memory_gbps"] == 9.0);
  // A reducing ring step at 3 GB/s with copies at 4.5: 1/3 = 1/4.5 + 1/R gives R = 9 GB/s.
  r.concurrent_reduce.fit.gbps = 3.0;
  const nlohmann::json o2 = make_overlay(r, BackendKind::kCpu, DataType::kFloat32);
  CHECK(o2["devices"]["gpu"]["reduce_gbps"].get<double>() == doctest::Approx(9.0));
  CostModel m = CostModel::defaults(BackendProfile::kCpu);
  m.apply_overlay(o2, "overlay");
  CHECK(m.transfer_cap_gbps == 4.5);
  CHECK(m.reduce_for(NodeKind::kGpu) == doctest::Approx(9.0));
}

TEST_CASE("calibration.overlay_gpu_backend_alpha_per_kind") {
  // Three classes: NVLink only (α 2), PCIe only (α 5), PCIe + SMP (α 5 + 4): the NNLS recovers α per kind.
  CalibrationResult r;
  auto cls = [](std::vector<LinkKind> kinds, LinkKind bottleneck, double nominal, double fitted) {
    ClassFit c;
    c.kinds = std::move(kinds);
    c.bottleneck_kind = bottleneck;
    c.nominal_gbps = nominal;
    c.fit.gbps = fitted;
    return c;
  };
  r.copies = {cls({LinkKind::kNvLink}, LinkKind::kNvLink, 50, 45),
              cls({LinkKind::kNvLink}, LinkKind::kNvLink, 25, 22.5), cls({LinkKind::kPcie}, LinkKind::kPcie, 12, 10.8),
              cls({LinkKind::kPcie, LinkKind::kSmp}, LinkKind::kSmp, 10, 8)};
  r.link_alpha_us = {2.0, 2.0, 5.0, 9.0};
  const nlohmann::json o = make_overlay(r, BackendKind::kCuda, DataType::kFloat32);
  CHECK(o["transfer_cap_gbps"] == 0.0);
  CHECK(o["links"]["nvlink"]["efficiency"].get<double>() == doctest::Approx(0.9));
  CHECK(o["links"]["pcie"]["efficiency"].get<double>() == doctest::Approx(0.9));
  CHECK(o["links"]["smp"]["efficiency"].get<double>() == doctest::Approx(0.8));
  CHECK(o["links"]["nvlink"]["alpha_us"].get<double>() == doctest::Approx(2.0));
  CHECK(o["links"]["pcie"]["alpha_us"].get<double>() == doctest::Approx(5.0));
  CHECK(o["links"]["smp"]["alpha_us"].get<double>() == doctest::Approx(4.0));
}

TEST_CASE("calibration.microbenchmark_plans") {
  const Topology topo = load_topology("uniform:4");
  const auto gpus = topo.gpus_of_machine(0);
  const Plan copy = copy_plan(topo, gpus, gpus[0], gpus[2], 100);
  CHECK(copy.ops.size() == 1);
  CHECK(copy.ranks() == 4);
  CHECK(copy.ops[0].dst == Location{2, 1, 0, 100});
  // A CPU socket joins as a helper and receives into its buffer 0.
  const Plan to_cpu = copy_plan(topo, gpus, gpus[0], topo.find_node("cpu0"), 100);
  CHECK(to_cpu.devices.size() == 5);
  CHECK(!to_cpu.devices[4].participant);
  CHECK(to_cpu.ops[0].dst == Location{4, 0, 0, 100});
  const Plan ring = ring_step_plan(topo, gpus, 10);
  CHECK(ring.ops.size() == 4);
  CHECK(ring.ops[3].dst.device == 0);
  const Plan chain = chain_plan(topo, gpus, gpus[0], gpus[1], 6);
  CHECK(chain.ops.size() == 6);
  CHECK(chain.ops[5].deps == std::vector<int>{4});
  // A chain of k dependent ops costs k transfers in the model.
  CostModel model = CostModel::defaults(BackendProfile::kCpu);
  const double one = simulate(chain_plan(topo, gpus, gpus[0], gpus[1], 1), topo, model, 4).time_us;
  CHECK(simulate(chain, topo, model, 4).time_us == doctest::Approx(6 * one).epsilon(1e-3));
}

TEST_CASE("calibration.refine_recovers_whole_plan_model") {
  // Whole-plan "measurements" simulated with a known host model; refinement from a perturbed start recovers it.
  const Topology topo = load_topology("uniform:4");
  CostModel truth = CostModel::defaults(BackendProfile::kCpu);
  truth.op_overhead_us = 4.0;
  truth.transfer_cap_gbps = 6.0;
  truth.reduce_gbps[NodeKind::kGpu] = truth.reduce_gbps[NodeKind::kCpu] = 9.0;
  truth.memory_gbps[NodeKind::kGpu] = truth.memory_gbps[NodeKind::kCpu] = 12.0;
  const std::vector<TrainingRun> runs =
      simulated_runs(topo, truth, {"xring", "rechd", "mring#2", "tree"}, {2048, 65536, 1 << 20});
  CostModel start = truth;
  start.op_overhead_us = 1.0;
  start.transfer_cap_gbps = 10.0;
  start.reduce_gbps[NodeKind::kGpu] = start.reduce_gbps[NodeKind::kCpu] = 4.0;
  start.memory_gbps[NodeKind::kGpu] = start.memory_gbps[NodeKind::kCpu] = 20.0;
  const RefineResult r = refine_model(topo, start, runs, BackendKind::kCpu, 4);
  CHECK(r.rms_rel_before > 0.1);
  CHECK(r.rms_rel_after < 1e-3);
  CHECK(r.model.op_overhead_us == doctest::Approx(4.0).epsilon(0.01));
  CHECK(r.model.transfer_cap_gbps == doctest::Approx(6.0).epsilon(0.01));
  CHECK(r.model.reduce_for(NodeKind::kGpu) == doctest::Approx(9.0).epsilon(0.01));
  CHECK(r.parameters.size() == 4);
}

TEST_CASE("calibration.fit_cache_cliff_recovers_the_blend") {
  // Aggregate rates of HostModel's blend: 16 MiB of cache at 60 GB/s, DRAM at 12 GB/s, probed at 4 MiB … 256 MiB.
  HostModel truth;
  truth.cache_bytes = 16.0 * (1 << 20);
  truth.cache_gbps = 60;
  truth.dram_gbps = 12;
  std::vector<double> ws, gbps;
  for (int k = 0; k < 13; ++k) {
    ws.push_back(4.0 * (1 << 20) * std::exp2(k / 2.0));
    gbps.push_back(truth.memory_gbps(ws.back()));
  }
  HostFit fit;
  fit_cache_cliff(ws, gbps, fit);
  CHECK(fit.cache_bytes == doctest::Approx(truth.cache_bytes).epsilon(1e-9));
  CHECK(fit.cache_gbps == doctest::Approx(60.0).epsilon(1e-9));
  CHECK(fit.dram_gbps == doctest::Approx(12.0).epsilon(1e-9));
  // One level (no cliff): no cache size, both rates the level.
  HostFit flat;
  fit_cache_cliff(ws, std::vector<double>(ws.size(), 20.0), flat);
  CHECK(flat.cache_bytes == 0.0);
  CHECK(flat.dram_gbps == doctest::Approx(20.0).epsilon(1e-12));
  CHECK(flat.cache_gbps == flat.dram_gbps);
  // A 10 % step is noise, not a cliff.
  std::vector<double> step(ws.size(), 20.0);
  for (std::size_t i = 0; i < 4; ++i) step[i] = 22.0;
  HostFit small;
  fit_cache_cliff(ws, step, small);
  CHECK(small.cache_bytes == 0.0);
  CHECK_THROWS_AS(fit_cache_cliff({1.0, 2.0}, {3.0}, small), InvalidInput);
}

TEST_CASE("calibration.overlay_host_fit") {
  // With a host fit, a host backend's overlay carries the HostModel and one thread's rates.
  CalibrationResult r;
  r.concurrent.fit.gbps = 4.5;
  r.local_copy.fit.gbps = 9.0;
  r.op_overhead_us = 2.5;
  HostFit h;
  h.run_overhead_us = 12.0;
  h.cores = 2;
  h.cache_bytes = 8e6;
  h.cache_gbps = 40;
  h.dram_gbps = 10;
  h.thread_copy_gbps = 20;
  h.thread_reduce_gbps = 15;
  r.host = h;
  const nlohmann::json o = make_overlay(r, BackendKind::kCpu, DataType::kFloat32);
  CHECK(o["transfer_cap_gbps"] == 20.0);
  CHECK(o["devices"]["gpu"]["memory_gbps"] == 20.0);
  CHECK(o["devices"]["cpu"]["reduce_gbps"] == 15.0);
  CHECK(o["links"]["pcie"]["efficiency"] == 1.0);
  CostModel m = CostModel::defaults(BackendProfile::kCpu);
  m.apply_overlay(o, "overlay");
  CHECK(m.host == HostModel{12.0, true, 2.0, 8e6, 40.0, 10.0});  // serial devices: the cpu profile's
  CHECK(m.op_overhead_us == 2.5);
}

TEST_CASE("calibration.refine_recovers_the_host_model") {
  // Whole-plan "measurements" simulated with a known host (2 cores, 4 MB cache at 15 GB/s, DRAM at 6 GB/s,
  // 10 µs per run) on both sides of the cache; refinement from a perturbed start recovers it.
  const Topology topo = load_topology("uniform:4");
  CostModel truth = CostModel::defaults(BackendProfile::kCpu);
  truth.op_overhead_us = 2.0;
  truth.transfer_cap_gbps = 10.0;
  truth.reduce_gbps[NodeKind::kGpu] = truth.reduce_gbps[NodeKind::kCpu] = 8.0;
  truth.memory_gbps[NodeKind::kGpu] = truth.memory_gbps[NodeKind::kCpu] = 10.0;
  truth.host = {10.0, true, 2.0, 4e6, 15.0, 6.0};
  const std::vector<TrainingRun> runs =
      simulated_runs(topo, truth, {"xring", "rechd", "tree"}, {1024, 32768, 131072, 1 << 20, 4 << 20});
  CostModel start = truth;
  start.op_overhead_us = 1.0;
  start.transfer_cap_gbps = 14.0;
  start.reduce_gbps[NodeKind::kGpu] = start.reduce_gbps[NodeKind::kCpu] = 5.0;
  start.host.run_overhead_us = 20.0;
  start.host.cache_gbps = 25.0;
  start.host.dram_gbps = 4.0;
  const RefineResult r = refine_model(topo, start, runs, BackendKind::kCpu, 4);
  CHECK(r.rms_rel_before > 0.1);
  CHECK(r.rms_rel_after < 1e-3);
  CHECK(r.model.host.run_overhead_us == doctest::Approx(10.0).epsilon(0.01));
  CHECK(r.model.host.cache_gbps == doctest::Approx(15.0).epsilon(0.01));
  CHECK(r.model.host.dram_gbps == doctest::Approx(6.0).epsilon(0.01));
  CHECK(r.model.op_overhead_us == doctest::Approx(2.0).epsilon(0.01));
  // (One thread's copy rate barely shows: four threads on two cores are held by the memory rates.)
  CHECK(r.model.host.cores == 2.0);  // measured, not refined
  CHECK(r.model.host.cache_bytes == 4e6);
  REQUIRE(r.parameters.size() == 7);
  CHECK(r.parameters[4].rfind("host.run_overhead_us", 0) == 0);
}

namespace {

// NCCL all-reduce "measurements" (NCCL's own choice) simulated with a known model, from 8 B to 64 MiB.
std::vector<TrainingRun> nccl_runs(const Topology& topo, const CostModel& truth, const std::vector<int>& participants) {
  std::vector<TrainingRun> runs;
  for (const std::int64_t bytes : {8LL, 4096LL, 65536LL, 1LL << 20, 16LL << 20, 64LL << 20}) {
    BuildOptions o;
    o.count = bytes / 4 > 0 ? bytes / 4 : 1;
    o.participants = participants;
    Plan plan = build_plan(topo, parse_spec("nccl"), o);
    const double t = simulate(plan, topo, truth, 4).time_us;
    runs.push_back({std::move(plan), "nccl", t});
  }
  return runs;
}

}  // namespace

TEST_CASE("calibration.nccl_fit_recovers_lane_efficiency_and_hop_latency") {
  // A DGX-1 whose NVLink lanes reach 65 % of NCCL's per-lane rate (default 80 %) and whose NCCL steps take
  // 1.5 µs more than NCCL's defaults: the fit from NCCL's defaults recovers both.
  const Topology v100 = load_topology("dgx1-v100");
  const CostModel defaults = CostModel::defaults(BackendProfile::kNccl);
  CostModel truth = defaults;
  truth.link[LinkKind::kNvLink].efficiency = 0.65;
  truth.link[LinkKind::kNvLink].alpha_us = defaults.link_for(LinkKind::kNvLink).alpha_us + 1.5;
  const std::vector<TrainingRun> runs = nccl_runs(v100, truth, {});
  const RefineResult r = fit_nccl(v100, defaults, runs, 4);
  CHECK(r.rms_rel_before > 0.05);
  CHECK(r.rms_rel_after < 1e-3);
  CHECK(r.parameters.size() == 2);  // NVLink only: one machine
  CHECK(r.model.link_for(LinkKind::kNvLink).efficiency == doctest::Approx(0.65).epsilon(0.01));
  CHECK(r.model.link_for(LinkKind::kNvLink).alpha_us - defaults.link_for(LinkKind::kNvLink).alpha_us ==
        doctest::Approx(1.5).epsilon(0.02));
  // Other link classes stay NCCL's defaults.
  CHECK(r.model.link_for(LinkKind::kNetwork) == defaults.link_for(LinkKind::kNetwork));

  // Across machines the network class joins: 4 machines of H100, network steps 4 µs faster than NCCL's
  // default and the NICs at 70 % of their rate; machine GPUs as NCCL's defaults.
  const Topology c4 = load_topology("4xdgx-h100");
  CostModel net = defaults;
  net.link[LinkKind::kNetwork].alpha_us = defaults.link_for(LinkKind::kNetwork).alpha_us - 4.0;
  net.link[LinkKind::kNetwork].efficiency = 0.7;
  const RefineResult n = fit_nccl(c4, defaults, nccl_runs(c4, net, {}), 4);
  CHECK(n.parameters.size() == 4);  // NVLink and network
  CHECK(n.rms_rel_after < 1e-3);
  CHECK(n.model.link_for(LinkKind::kNetwork).efficiency == doctest::Approx(0.7).epsilon(0.01));
  CHECK(n.model.link_for(LinkKind::kNetwork).alpha_us ==
        doctest::Approx(defaults.link_for(LinkKind::kNetwork).alpha_us - 4.0).epsilon(0.02));

  // The calibrated overlay reproduces the measured machine in the simulator.
  CostModel applied = defaults;
  applied.apply_overlay(r.model.to_json(), "calib.json");
  for (const TrainingRun& run : runs) {
    CHECK(simulate(run.plan, v100, applied, 4).time_us == doctest::Approx(run.measured_us).epsilon(1e-3));
  }
  // calibrate's runs: NCCL over machine 0's GPUs of a cluster (its participants) cross NVLink only.
  const RefineResult m0 = fit_nccl(c4, defaults, nccl_runs(c4, truth, c4.gpus_of_machine(0)), 4);
  CHECK(m0.parameters.size() == 2);
  CHECK(m0.model.link_for(LinkKind::kNvLink).efficiency == doctest::Approx(0.65).epsilon(0.01));
  // Runs without an NCCL all-reduce: bad input, not a fit of nothing.
  CHECK_THROWS_AS(fit_nccl(v100, defaults, {}, 4), InvalidInput);
  std::vector<TrainingRun> copies = {
      {copy_plan(v100, v100.gpus(), v100.gpus()[0], v100.gpus()[1], 1024), "copy", 10.0}};
  CHECK_THROWS_AS(fit_nccl(v100, defaults, copies, 4), InvalidInput);
}

namespace {

// Measurements are never exact: each run's time multiplied by 1 + ε, ε uniform in ±`spread`, drawn from a fixed
// seed (the same noise on every run of the test).
std::vector<TrainingRun> with_noise(std::vector<TrainingRun> runs, double spread, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> eps(-spread, spread);
  for (TrainingRun& r : runs) r.measured_us *= 1.0 + eps(rng);
  return runs;
}

}  // namespace

TEST_CASE("calibration.refine_on_noisy_runs_predicts_held_out_runs") {
  // The host model's whole-plan fit on runs with ±5 % noise. Its four parameters are not separately identified by
  // these runs (with three seeds the fitted reduce rate ranged 5.6–10.6 GB/s for a truth of 9, the per-transfer cap
  // 6–7.6 for 6): what holds is what calibration is for, the fitted model predicting runs it was not fitted to
  // (other sizes, noise-free truth) within the noise, and the per-op overhead it is most sensitive to.
  const Topology topo = load_topology("uniform:4");
  CostModel truth = CostModel::defaults(BackendProfile::kCpu);
  truth.op_overhead_us = 4.0;
  truth.transfer_cap_gbps = 6.0;
  truth.reduce_gbps[NodeKind::kGpu] = truth.reduce_gbps[NodeKind::kCpu] = 9.0;
  truth.memory_gbps[NodeKind::kGpu] = truth.memory_gbps[NodeKind::kCpu] = 12.0;
  for (const unsigned seed : {1U, 2U, 3U}) {
    CAPTURE(seed);
    const std::vector<TrainingRun> runs = with_noise(
        simulated_runs(topo, truth, {"xring", "rechd", "mring#2", "tree"}, {2048, 65536, 1 << 20}), 0.05, seed);
    CostModel start = truth;
    start.op_overhead_us = 1.0;
    start.transfer_cap_gbps = 10.0;
    start.reduce_gbps[NodeKind::kGpu] = start.reduce_gbps[NodeKind::kCpu] = 4.0;
    start.memory_gbps[NodeKind::kGpu] = start.memory_gbps[NodeKind::kCpu] = 20.0;
    const RefineResult r = refine_model(topo, start, runs, BackendKind::kCpu, 4);
    CHECK(r.rms_rel_after < 0.05);
    CHECK(r.rms_rel_after < r.rms_rel_before);
    CHECK(r.model.op_overhead_us == doctest::Approx(4.0).epsilon(0.15));
    for (const TrainingRun& held : simulated_runs(topo, truth, {"xring", "rechd", "mring#2", "tree"},
                                                  {8192, 262144, 4 << 20})) {
      CAPTURE(held.label);
      const double predicted = simulate(held.plan, topo, r.model, 4).time_us;
      CHECK(std::abs(predicted / held.measured_us - 1.0) < 0.08);
    }
  }
}

TEST_CASE("calibration.nccl_fit_on_noisy_runs_stays_near_the_truth") {
  // NCCL's two NVLink parameters from runs with ±5 % noise: within a few percent of the truth.
  const Topology v100 = load_topology("dgx1-v100");
  const CostModel defaults = CostModel::defaults(BackendProfile::kNccl);
  CostModel truth = defaults;
  truth.link[LinkKind::kNvLink].efficiency = 0.65;
  truth.link[LinkKind::kNvLink].alpha_us = defaults.link_for(LinkKind::kNvLink).alpha_us + 1.5;
  for (const unsigned seed : {1U, 2U, 3U}) {
    CAPTURE(seed);
    const RefineResult r = fit_nccl(v100, defaults, with_noise(nccl_runs(v100, truth, {}), 0.05, seed), 4);
    CHECK(r.rms_rel_after < 0.05);
    CHECK(r.model.link_for(LinkKind::kNvLink).efficiency == doctest::Approx(0.65).epsilon(0.05));
    CHECK(r.model.link_for(LinkKind::kNvLink).alpha_us - defaults.link_for(LinkKind::kNvLink).alpha_us ==
          doctest::Approx(1.5).epsilon(0.5));
  }
}
