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

#include "algorithms/builders.hpp"
#include "core/error.hpp"
#include "core/sizes.hpp"
#include "simulator/closed_form.hpp"
#include "simulator/simulator.hpp"
#include "topology/io.hpp"

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
  m.op_overhead_us = 9.4;  // + 0.6 µs NVLink latency = α 10 µs
  m.link[LinkKind::kNvLink] = {0.0, 0.4};  // 25 · 0.4 = 10 GB/s
  m.reduce_gbps[NodeKind::kGpu] = 50.0;
  return m;
}

struct Family {
  const char* spec;
  double (*closed)(int, double, const AlphaBetaGamma&);
};

double shuffle_on_ranks(int p, double n, const AlphaBetaGamma& c) { return shuffle_us(p, p, n, c, true); }

void check_family(const Family& f, const CostModel& model) {
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
