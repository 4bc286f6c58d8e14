// Closed-form α-β-γ costs, and the simulator held to them on uniform topologies.
//
// What the simulator's constants imply on uniform:p (every GPU pair joined by
// one NVLink of 25 GB/s with 0.6 µs latency) under the nccl defaults:
//   α = op overhead 3.4 µs + route latency 0.6 µs + NVLink α 0 µs = 4.0 µs
//   β = 1 / (25 GB/s · efficiency 0.8) = 1 / 20 GB/s = 5e-5 µs per byte
//   γ = 1 / (GPU reduce 300 GB/s)                     = 3.33e-6 µs per byte
// A second model with round numbers (α 10 µs, β 1/10 GB/s, γ 1/50 GB/s) checks
// that the mapping is not a coincidence of the defaults.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"
#include "artune/core/sizes.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/simulator/closed_form.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;

TEST_CASE("closed_form.formulas") {
  const AlphaBetaGamma c{1.0, 0.01, 0.001};
  CHECK(ring_allreduce_us(4, 1000, c) == doctest::Approx(6 + 15 + 0.75));
  CHECK(ring_allreduce_us(1, 1000, c) == 0.0);
  CHECK(recursive_doubling_us(8, 1000, c) == doctest::Approx(3 * (1 + 10 + 1)));
  CHECK(recursive_doubling_us(6, 1000, c) == doctest::Approx(2 * 12 + 12 + 11));
  CHECK(halving_doubling_us(8, 1000, c) == doctest::Approx(6 + 17.5 + 0.875));
  // p = 6: the power-of-two core of 4 plus the fold in and out.
  CHECK(halving_doubling_us(6, 1000, c) == doctest::Approx(4 + 15 + 0.75 + 12 + 11));
  CHECK(halving_doubling_us(2, 1000, c) == doctest::Approx(ring_allreduce_us(2, 1000, c)));
  CHECK(shuffle_us(4, 4, 1000, c) == doctest::Approx(4 * (1 + 2.5) + 3 * 0.25));
  CHECK(shuffle_us(4, 1, 1000, c, false) == doctest::Approx(5 * (1 + 10) + 3 * 1));
  CHECK(allreduce_lower_bound_us(8, 1e9, 100) == doctest::Approx(17500));
  // Ring and halving-doubling meet the Patarasuk–Yuan bound in their bandwidth term.
  CHECK(ring_allreduce_us(8, 1e9, {0, 1.0 / 100e3, 0}) == doctest::Approx(allreduce_lower_bound_us(8, 1e9, 100)));
  CHECK_THROWS_AS(ring_allreduce_us(0, 1, c), InvalidInput);
  CHECK_THROWS_AS(shuffle_us(4, 0, 1, c), InvalidInput);
}

TEST_CASE("closed_form.implied_constants") {
  const Topology t = load_topology("uniform:8");
  const CostModel m = CostModel::defaults(BackendProfile::kNccl);
  const AlphaBetaGamma c = implied_alpha_beta_gamma(t, m, t.gpus()[0], t.gpus()[1]);
  CHECK(c.alpha_us == doctest::Approx(4.0));
  CHECK(c.beta_us_per_byte == doctest::Approx(1.0 / 20e3));
  CHECK(c.gamma_us_per_byte == doctest::Approx(1.0 / 300e3));
}

namespace {

CostModel round_model() {
  CostModel m = CostModel::defaults(BackendProfile::kNccl);
  m.op_overhead_us = 9.4;                  // + 0.6 µs NVLink latency = α 10 µs
  m.link[LinkKind::kNvLink] = {0.0, 0.4};  // 25 · 0.4 = 10 GB/s
  m.reduce_gbps[NodeKind::kGpu] = 50.0;
  return m;
}

struct FormulaCase {
  const char* spec;
  double (*closed)(int, double, const AlphaBetaGamma&);
};

double shuffle_on_ranks(int p, double n, const AlphaBetaGamma& c) { return shuffle_us(p, p, n, c, true); }

void check_family(const FormulaCase& f, const CostModel& model) {
  for (const int p : {2, 4, 8, 16}) {
    const Topology t = load_topology("uniform:" + std::to_string(p));
    const AlphaBetaGamma c = implied_alpha_beta_gamma(t, model, t.gpus()[0], t.gpus()[1]);
    for (const std::uint64_t bytes : size_sweep(1024, std::uint64_t{1} << 30, 2.0)) {
      BuildOptions options;
      options.count = static_cast<std::int64_t>(bytes / 4);
      const Plan plan = build_plan(t, f.spec, options);
      const SimResult r = simulate(plan, t, model, 4);
      const double expected = f.closed(p, static_cast<double>(bytes), c);
      INFO(f.spec, " p=", p, " bytes=", bytes, " simulated=", r.time_us, " closed form=", expected);
      CHECK(std::abs(r.time_us - expected) <= 0.01 * expected);
    }
  }
}

}  // namespace

TEST_CASE("closed_form.simulator_matches_ring") {
  check_family({"xring", ring_allreduce_us}, CostModel::defaults());
  check_family({"xring", ring_allreduce_us}, round_model());
}

TEST_CASE("closed_form.simulator_matches_halving_doubling") {
  check_family({"rechd", halving_doubling_us}, CostModel::defaults());
  check_family({"rechd", halving_doubling_us}, round_model());
}

TEST_CASE("closed_form.simulator_matches_shuffle") {
  check_family({"shuffle", shuffle_on_ranks}, CostModel::defaults());
  check_family({"shuffle", shuffle_on_ranks}, round_model());
}

TEST_CASE("closed_form.simulated_ring_respects_lower_bound") {
  const CostModel model = CostModel::defaults();
  for (const int p : {4, 8}) {
    const Topology t = load_topology("uniform:" + std::to_string(p));
    for (const std::uint64_t bytes : {std::uint64_t{1} << 20, std::uint64_t{1} << 28}) {
      BuildOptions options;
      options.count = static_cast<std::int64_t>(bytes / 4);
      const SimResult r = simulate(build_plan(t, "xring", options), t, model, 4);
      CHECK(r.time_us >= allreduce_lower_bound_us(p, static_cast<double>(bytes), 25.0 * 0.8));
    }
  }
}

// ---------------------------------------------------------------------------
// Every registered family's closed form against the simulator on uniform machines (every GPU pair its
// own NVLink): equal (within 0.1%) where the family says exact, never above (and within the stated
// factor) where it says lower bound.

namespace {

struct Expectation {
  const char* spec;
  CostModel model;
  Exactness exactness;
  double max_ratio;  // simulated / closed form at most this (1.001 for exact forms)
};

CostModel library_ring_model() {
  // A host profile's library ring (group ops as one ring) with the host's threads left out, so that every
  // op is an uncontended transfer as on the GPU profiles.
  CostModel m = CostModel::defaults(BackendProfile::kMpi);
  m.host = HostModel{};
  return m;
}

void check_against_simulator(const Expectation& x, const std::vector<int>& ranks) {
  for (const int p : ranks) {
    const Topology t = load_topology("uniform:" + std::to_string(p));
    const AlgToken token = parse_spec(x.spec).ranges[0].intra;
    for (const std::uint64_t bytes : size_sweep(4096, std::uint64_t{1} << 28, 8.0)) {
      BuildOptions options;
      options.count = static_cast<std::int64_t>(bytes / 4);
      const SimResult r = simulate(build_plan(t, x.spec, options), t, x.model, 4);
      const ClosedForm f = closed_form_time(t, token, static_cast<double>(bytes), x.model);
      INFO(std::string(x.spec), " p=", p, " bytes=", bytes, " simulated=", r.time_us, " closed form=", f.time_us);
      CHECK(f.exactness == x.exactness);
      CHECK(f.time_us > 0);
      CHECK(r.time_us >= f.time_us * (1 - 1e-9));
      CHECK(r.time_us <= f.time_us * x.max_ratio);
    }
  }
}

}  // namespace

TEST_CASE("closed_form.every_family_has_one") {
  const Topology t = load_topology("uniform:4");
  for (const Family* f : families()) {
    for (const SpecName& n : f->specs) {
      CAPTURE(n.token);
      const ClosedForm c = closed_form_time(t, parse_spec(n.token).ranges[0].intra, 1 << 20, CostModel::defaults());
      CHECK(c.time_us > 0);
    }
  }
}

TEST_CASE("closed_form.exact_families") {
  const CostModel nccl = CostModel::defaults();
  for (const auto& x :
       {Expectation{"xring", nccl, Exactness::kExact, 1.001},
        Expectation{"xring", round_model(), Exactness::kExact, 1.001},
        Expectation{"rechd", nccl, Exactness::kExact, 1.001}, Expectation{"shuffle", nccl, Exactness::kExact, 1.001},
        Expectation{"shuffle#2", nccl, Exactness::kExact, 1.001}, Expectation{"psgpu", nccl, Exactness::kExact, 1.001},
        Expectation{"pscpu", nccl, Exactness::kExact, 1.001}, Expectation{"hiercopy", nccl, Exactness::kExact, 1.001},
        Expectation{"hiercopy#2", nccl, Exactness::kExact, 1.001},
        Expectation{"hiercopy#16", round_model(), Exactness::kExact, 1.001},
        Expectation{"mring#2", nccl, Exactness::kExact, 1.001}, Expectation{"2d", nccl, Exactness::kExact, 1.001},
        Expectation{"nccl", library_ring_model(), Exactness::kExact, 1.001}}) {
    check_against_simulator(x, {4, 8});
  }
}

TEST_CASE("closed_form.lower_bounds") {
  const CostModel nccl = CostModel::defaults();
  // The factors are what these sweeps give (uniform: the two trees and the shards on one rank never
  // meet on a link, so those bounds are met exactly; two subchunk rings share links; nccl's simulated time
  // also pays NCCL's kernel launch, nccl::launch_us, which its bound leaves out).
  for (const auto& x : {Expectation{"xring#2", nccl, Exactness::kLowerBound, 2.0},
                        Expectation{"tree", nccl, Exactness::kLowerBound, 1.001},
                        Expectation{"shuffle#16", nccl, Exactness::kLowerBound, 1.001},
                        Expectation{"nccl", nccl, Exactness::kLowerBound, 2.7}}) {
    check_against_simulator(x, {4, 8});
  }
}

TEST_CASE("closed_form.below_the_simulator_elsewhere") {
  // Off the uniform machine the constants are the best pair's, so every family's closed form stays at or
  // below the simulated time (what the tuner may prune with).
  int checked = 0;
  for (const char* name : {"dgx1-v100", "dgx2", "pcie-8gpu", "uniform:2x4", "2xdgx1-v100"}) {
    const Topology t = load_topology(name);
    for (const BackendProfile profile : {BackendProfile::kNccl, BackendProfile::kCuda}) {
      const CostModel model = CostModel::defaults(profile);
      for (const Family* f : families()) {
        for (const SpecName& n : f->specs) {
          const AlgToken token = parse_spec(n.token).ranges[0].intra;
          for (const std::uint64_t bytes : size_sweep(4096, std::uint64_t{1} << 28, 64.0)) {
            BuildOptions options;
            options.count = static_cast<std::int64_t>(bytes / 4);
            Plan plan;
            try {
              plan = build_plan(t, n.token, options);
            } catch (const InvalidInput&) {
              continue;  // the family does not apply here (hiercopy without NVLink cliques, …)
            }
            const SimResult r = simulate(plan, t, model, 4);
            const ClosedForm c = closed_form_time(t, token, static_cast<double>(bytes), model);
            INFO(std::string(name), " ", std::string(n.token), " bytes=", bytes, " simulated=", r.time_us,
                 " closed form=", c.time_us);
            CHECK(c.time_us <= r.time_us * (1 + 1e-9));
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked > 250);
}
