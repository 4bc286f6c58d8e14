// The simulator on all-gather and reduce-scatter plans (issue 17): held to the closed forms on
// uniform:p (see test_closed_form.cpp for the constants), nccl-tests' (n−1)/n bus factor, and the
// sparse all-reduce's crossover density against the dense ring all-reduce.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/sparse_allreduce.hpp"
#include "artune/core/error.hpp"
#include "artune/core/sizes.hpp"
#include "artune/simulator/closed_form.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/collective_tuning.hpp"

using namespace artune;

namespace {

void check_closed(Collective c, const char* spec, double (*closed)(int, double, const AlphaBetaGamma&),
                  std::initializer_list<int> ranks) {
  const CostModel model = CostModel::defaults();
  for (const int p : ranks) {
    const Topology t = load_topology("uniform:" + std::to_string(p));
    const AlphaBetaGamma abg = implied_alpha_beta_gamma(t, model, t.gpus()[0], t.gpus()[1]);
    for (const std::uint64_t bytes : size_sweep(1024, std::uint64_t{1} << 30, 4.0)) {
      BuildOptions options;
      options.count = static_cast<std::int64_t>(bytes / 4);
      options.collective = c;
      const SimResult r = simulate(build_collective_plan(t, spec, options), t, model, 4);
      const double expected = closed(p, static_cast<double>(bytes), abg);
      INFO(spec, " p=", p, " bytes=", bytes, " simulated=", r.time_us, " closed form=", expected);
      CHECK(std::abs(r.time_us - expected) <= 0.01 * expected);
      CHECK(r.busbw_gbps == doctest::Approx(r.algbw_gbps * (p - 1) / p));
    }
  }
}

}  // namespace

TEST_CASE("collective_sim.closed_forms") {
  const AlphaBetaGamma c{1.0, 0.01, 0.001};
  CHECK(ring_allgather_us(4, 1000, c) == doctest::Approx(3 + 7.5));
  CHECK(ring_reducescatter_us(4, 1000, c) == doctest::Approx(3 + 7.5 + 0.75));
  CHECK(bruck_allgather_us(5, 1000, c) == doctest::Approx(3 + 8));
  CHECK(halving_reducescatter_us(8, 1000, c) == doctest::Approx(3 + 8.75 + 0.875));
  CHECK(ring_allgather_us(1, 1000, c) == 0.0);
  CHECK_THROWS_AS(halving_reducescatter_us(6, 1000, c), InvalidInput);
}

TEST_CASE("collective_sim.simulator_matches_ring_allgather") {
  check_closed(Collective::kAllGather, "ring", ring_allgather_us, {2, 3, 4, 8});
}

TEST_CASE("collective_sim.simulator_matches_ring_reducescatter") {
  check_closed(Collective::kReduceScatter, "ring", ring_reducescatter_us, {2, 3, 4, 8});
}

TEST_CASE("collective_sim.simulator_matches_bruck_and_halving") {
  check_closed(Collective::kAllGather, "bruck", bruck_allgather_us, {2, 4, 8});
  check_closed(Collective::kReduceScatter, "halving", halving_reducescatter_us, {2, 4, 8});
}

TEST_CASE("collective_sim.registry_closed_forms") {
  // Every all-gather and reduce-scatter family's closed form through the registry (closed_form_time): equal to
  // the simulated time where the family says exact (uniform:p), never above it anywhere.
  const CostModel model = CostModel::defaults();
  int exact = 0, checked = 0;
  for (const char* name : {"uniform:2", "uniform:3", "uniform:4", "uniform:5", "uniform:8", "uniform:9", "dgx1-v100",
                           "pcie-8gpu", "uniform:2x4", "2xdgx1-v100"}) {
    const Topology t = load_topology(name);
    for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      for (const Family* f : families(c)) {
        const AlgToken token{f->specs.front().token, -1, ""};
        for (const std::uint64_t bytes : size_sweep(4096, std::uint64_t{1} << 28, 64.0)) {
          BuildOptions options;
          options.count = static_cast<std::int64_t>(bytes / 4);
          options.collective = c;
          Plan plan;
          try {
            plan = build_collective_plan(t, token.name, options);
          } catch (const InvalidInput&) {
            continue;  // 2d on machines of different sizes
          }
          const double simulated = simulate(plan, t, model, 4).time_us;
          const ClosedForm cf = closed_form_time(t, token, static_cast<double>(bytes), model, c);
          INFO(std::string(name), " ", to_string(c), " ", token.name, " bytes=", bytes, " simulated=", simulated,
               " closed form=", cf.time_us);
          CHECK(cf.time_us <= simulated * (1 + 1e-9));
          if (cf.exactness == Exactness::kExact && std::string_view(name).substr(0, 8) == "uniform:") {
            CHECK(cf.time_us == doctest::Approx(simulated).epsilon(0.01));
            ++exact;
          }
          ++checked;
        }
      }
    }
  }
  // Exact: ring, bruck, rd, halving and one-machine 2d on uniform:p. The nccl families are lower bounds under
  // the default (GPU) profile, where the simulator runs them through NCCL's model.
  CHECK(exact > 60);
  CHECK(checked > 250);
}

namespace {

// The plan's ops for which `keep` holds, renumbered; deps on dropped ops are dropped (simulation only).
Plan only_ops(const Plan& plan, const std::function<bool(const Op&)>& keep) {
  Plan out = plan;
  out.ops.clear();
  std::vector<int> id(plan.ops.size(), -1);
  for (const Op& op : plan.ops) {
    if (!keep(op)) continue;
    Op copy = op;
    copy.deps.clear();
    for (const int d : op.deps) {
      if (id[static_cast<std::size_t>(d)] >= 0) copy.deps.push_back(id[static_cast<std::size_t>(d)]);
    }
    id[static_cast<std::size_t>(op.id)] = out.add(std::move(copy));
  }
  return out;
}

}  // namespace

TEST_CASE("collective_sim.hybrids_between_their_phases") {
  // A hybrid all-gather or reduce-scatter runs its two levels (the library's group ops in each machine, the
  // point-to-point columns across machines) as the data allows: never faster than either level alone, never
  // slower than one after the other.
  const CostModel model = CostModel::defaults();
  for (const char* name : {"uniform:2x4", "uniform:3x2", "2xdgx1-v100"}) {
    const Topology t = load_topology(name);
    for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      const std::vector<std::string> specs = c == Collective::kAllGather
                                                 ? std::vector<std::string>{"nccl/ring", "nccl/bruck", "nccl/rd"}
                                                 : std::vector<std::string>{"nccl/ring", "nccl/halving"};
      for (const std::string& spec : specs) {
        for (const std::uint64_t bytes : {std::uint64_t{1} << 16, std::uint64_t{1} << 26}) {
          BuildOptions options;
          options.count = static_cast<std::int64_t>(bytes / 4);
          options.collective = c;
          const Plan plan = build_collective_plan(t, spec, options);
          const double whole = simulate(plan, t, model, 4).time_us;
          const double groups =
              simulate(only_ops(plan, [](const Op& op) { return op.kind == OpKind::kGroup; }), t, model, 4).time_us;
          const double columns =
              simulate(only_ops(plan, [](const Op& op) { return op.kind != OpKind::kGroup; }), t, model, 4).time_us;
          INFO(name, " ", to_string(c), " ", spec, " bytes=", bytes, " whole=", whole, " groups=", groups,
               " columns=", columns);
          CHECK(groups > 0);
          CHECK(columns > 0);
          CHECK(whole >= std::max(groups, columns) * (1 - 1e-9));
          CHECK(whole <= (groups + columns) * (1 + 1e-9));
        }
      }
    }
  }
}

TEST_CASE("collective_sim.hybrids_on_two_dgx1") {
  // 2xdgx1-v100, 64 MiB: across machines each GPU sends one block (two machines: ring, Bruck and rd are the
  // same one step), inside NCCL's rings over NVLink; the flat ring and 2d run every in-machine step over
  // the DGX-1's rank-order ring, which crosses the sockets, so the hybrids are several times faster.
  const CostModel model = CostModel::defaults();
  const Topology t = load_topology("2xdgx1-v100");
  BuildOptions options;
  options.count = std::int64_t{1} << 24;
  options.collective = Collective::kAllGather;
  auto time = [&](const char* spec) { return simulate(build_collective_plan(t, spec, options), t, model, 4).time_us; };
  const double hybrid = time("nccl/ring");
  CHECK(time("nccl/bruck") == doctest::Approx(hybrid).epsilon(1e-9));
  CHECK(time("nccl/rd") == doctest::Approx(hybrid).epsilon(1e-9));
  CHECK(hybrid * 4 < time("ring"));
  CHECK(hybrid * 4 < time("2d"));
  options.collective = Collective::kReduceScatter;
  CHECK(time("nccl/halving") == doctest::Approx(time("nccl/ring")).epsilon(1e-9));
  CHECK(time("nccl/ring") * 4 < time("ring"));
}

TEST_CASE("collective_sim.tuner_candidates_per_collective") {
  // The tuner asks each family of the collective for candidates: ring all-gather over dgx1-v100's NVLink
  // ring orders (--gpu-perm), as the all-reduce ring; 2d only on clusters; nccl once, unpipelined.
  CandidateOptions o;
  o.collective = Collective::kAllGather;
  o.segments = {1, 2};
  const CandidateSet set = generate_candidates(load_topology("dgx1-v100"), o);
  CHECK(set.rejected.empty());
  std::set<std::string> families_seen;
  int permuted_rings = 0;
  for (const Candidate& c : set.candidates) {
    CHECK(c.collective == Collective::kAllGather);
    families_seen.insert(c.family);
    if (c.family == "ring" && !c.gpu_perm.empty()) ++permuted_rings;
    if (c.family == "nccl") CHECK(c.segments == 1);
  }
  CHECK(families_seen == std::set<std::string>{"ring", "bruck", "rd", "nccl", "trees"});
  CHECK(permuted_rings >= 2);
  o.collective = Collective::kReduceScatter;
  o.include_nccl = false;
  std::set<std::string> rs;
  for (const Candidate& c : generate_candidates(load_topology("uniform:2x4"), o).candidates) rs.insert(c.family);
  // The hybrids need the library; trees come as their in-machine trees with rings across.
  CHECK(rs == std::set<std::string>{"ring", "halving", "2d", "trees"});
  // On a cluster the library's hybrids come in too (the library inside machines, a point-to-point family across).
  for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    o.collective = c;
    o.include_nccl = true;
    const CandidateSet cluster = generate_candidates(load_topology("2xdgx1-v100"), o);
    CHECK(cluster.rejected.empty());
    std::set<std::string> hybrids;
    for (const Candidate& k : cluster.candidates) {
      if (k.family == "hybrid") hybrids.insert(k.spec);
    }
    CHECK(hybrids == (c == Collective::kAllGather ? std::set<std::string>{"nccl/ring", "nccl/bruck", "nccl/rd"}
                                                  : std::set<std::string>{"nccl/ring", "nccl/halving"}));
  }
}

TEST_CASE("collective_sim.sparse_crossover_uniform_8") {
  // Ring against ring: all-gathering the touched rows sends (n−1)·ρR rows of d floats and one int64 index
  // per rank, the dense ring all-reduce 2(n−1)/n·R rows: bandwidth terms equal at ρ = 2/n · 4d/(4d + 8)
  // (≈ 2/n for wide rows; the gathered result n·ρR outgrows the table above ρ = 1/n).
  const Topology t = load_topology("uniform:8");
  const CostModel model = CostModel::defaults();
  const std::int64_t rows = 1 << 20, width = 64;
  const std::vector<std::string> dense = {"xring"}, sparse = {"ring"};
  auto decide = [&](double density) {
    return decide_sparse(t, model, rows, width, density, DataType::kFloat32, dense, sparse);
  };
  const SparseDecision low = decide(0.01);
  CHECK(low.sparse);
  CHECK(low.dense_spec == "xring");
  CHECK(low.sparse_spec == "ring");
  CHECK(low.sparse_us < low.dense_us);
  const SparseDecision high = decide(0.5);
  CHECK_FALSE(high.sparse);
  // With the dense ring's reduction term (p−1)/p·Sγ too: ρ* = (2 + γ/β)/p · 4d/(4d + 8); the sparse side's
  // extra latencies (three all-gathers of p−1 steps against 2(p−1) steps) pull it down a little.
  const AlphaBetaGamma abg = implied_alpha_beta_gamma(t, model, t.gpus()[0], t.gpus()[1]);
  const double closed = (2.0 + abg.gamma_us_per_byte / abg.beta_us_per_byte) / 8 * (4.0 * width) / (8.0 + 4.0 * width);
  CHECK(low.crossover == high.crossover);
  CHECK(low.crossover <= closed);
  CHECK(low.crossover >= closed * 0.99);
  CHECK(low.crossover > 1.0 / 8);
  // Just below the crossover sparse wins, just above it dense does.
  CHECK(decide(low.crossover * 0.98).sparse);
  CHECK_FALSE(decide(low.crossover * 1.02).sparse);
  // Over every family (NCCL's multi-channel dense all-reduce included) the answer is still a density in (0, 1).
  const SparseDecision any = decide_sparse(t, model, rows, width, 0.01, DataType::kFloat32);
  CHECK(any.crossover > 0);
  CHECK(any.crossover < 1);
}

TEST_CASE("collective_sim.sparse_costs_real_sizes") {
  // The simulator prices the sparse all-reduce by each rank's real nnz (all-gather-v). One rank with 4096
  // rows, seven empty: Bruck's rows reach the last ranks in lg 8 = 3 dependent copies of that one block,
  // where blocks padded to 4096 rows would move 1 + 2 + 4 = 7 blocks' worth one after another.
  const Topology t = load_topology("uniform:8");
  const CostModel model = CostModel::defaults();
  const std::vector<std::int64_t> one = {4096, 0, 0, 0, 0, 0, 0, 0}, all(8, 4096);
  const double lone = simulate_sparse_us(t, model, "bruck", one, 64, DataType::kFloat32);
  const double full = simulate_sparse_us(t, model, "bruck", all, 64, DataType::kFloat32);
  CHECK(lone < full / 2);
  const AlphaBetaGamma abg = implied_alpha_beta_gamma(t, model, t.gpus()[0], t.gpus()[1]);
  const double block_us = abg.alpha_us + 4096.0 * 64 * 4 * abg.beta_us_per_byte;
  CHECK(simulate(sparse_payload_plan(t, "bruck", one, 64, {}), t, model, 4).time_us ==
        doctest::Approx(3 * block_us).epsilon(0.01));
  CHECK(simulate(sparse_payload_plan(t, "bruck", all, 64, {}), t, model, 4).time_us ==
        doctest::Approx(bruck_allgather_us(8, 8 * 4096.0 * 64 * 4, abg)).epsilon(0.01));
}
