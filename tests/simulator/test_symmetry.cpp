// Machines a plan treats alike, simulated once (simulator/simulation_symmetry.cpp, issue 18): the folded
// simulation must give what the whole one gives, and fold exactly where the symmetry holds.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/core/error.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/plan_scaling.hpp"

#include <nlohmann/json.hpp>

using namespace artune;

namespace {

Plan build(const Topology& topo, const std::string& spec, std::int64_t count, int segments = 1,
           std::vector<int> perm = {}, Collective collective = Collective::kAllReduce) {
  BuildOptions o;
  o.count = count;
  o.segments = segments;
  o.gpu_perm = std::move(perm);
  o.collective = collective;
  o.verify = false;
  return build_plan(topo, spec, o);
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)); }

// Folded and whole runs agree on the time, every link's load and the lower bound; returns the folding's order.
int check_fold(const Plan& plan, const Topology& topo, const CostModel& model) {
  CompiledPlan folded(plan, topo, model, 4);
  CompiledPlan whole(plan, topo, model, 4, CompiledPlan::Machines::kWhole);
  CHECK(whole.symmetry_order() == 1);
  const SimResult a = folded.run();
  const SimResult b = whole.run();
  INFO(plan.spec, " on ", topo.name(), ": folded ", a.time_us, " us, whole ", b.time_us, " us");
  CHECK(close(a.time_us, b.time_us));
  CHECK(a.bytes == b.bytes);
  CHECK(a.busbw_gbps == doctest::Approx(b.busbw_gbps).epsilon(1e-9));
  REQUIRE(a.links.size() == b.links.size());
  for (std::size_t k = 0; k < a.links.size(); ++k) {
    CHECK(a.links[k].link == b.links[k].link);
    CHECK(close(a.links[k].bytes, b.links[k].bytes));
    CHECK(close(a.links[k].busy_us, b.links[k].busy_us));
    CHECK(close(a.links[k].first_busy_us, b.links[k].first_busy_us));
    CHECK(close(a.links[k].last_busy_us, b.links[k].last_busy_us));
  }
  CHECK(a.groups.size() == b.groups.size());
  CHECK(close(folded.lower_bound(), whole.lower_bound()));
  CHECK(folded.lower_bound() <= a.time_us);
  return folded.symmetry_order();
}

}  // namespace

TEST_CASE("symmetric plans on clusters of identical machines fold to one machine and simulate the same") {
  const CostModel nccl = CostModel::defaults(BackendProfile::kNccl);
  const Topology h100 = load_topology("4xdgx-h100");
  const Topology v100 = load_topology("4xdgx1-v100");
  const std::int64_t count = 1 << 20;
  // Rings through the machines in order: rotation by one machine.
  CHECK(check_fold(build(h100, "xring", count), h100, nccl) == 4);
  CHECK(check_fold(build(h100, "xring#4", count, 2), h100, nccl) == 4);
  CHECK(check_fold(build(h100, "xring#2", count, 1, {0, 1, 2, 3, 4, 5, 7, 6}), h100, nccl) == 4);
  CHECK(check_fold(build(v100, "xring#2", count), v100, nccl) == 4);
  // Per-machine phases and rings across machines per local GPU.
  CHECK(check_fold(build(h100, "2d", count), h100, nccl) == 4);
  // Recursive halving-doubling: xor with a power of two.
  CHECK(check_fold(build(h100, "rechd", count), h100, nccl) == 4);
  CHECK(check_fold(build(v100, "rechd", count), v100, nccl) == 4);
  // Hybrids: NCCL inside each machine, point-to-point across.
  CHECK(check_fold(build(h100, "nccl/xring", count), h100, nccl) == 4);
  CHECK(check_fold(build(v100, "nccl/rechd", count), v100, nccl) == 4);
  CHECK(check_fold(build(v100, "pscpu/xring", count), v100, nccl) == 4);
  CHECK(check_fold(build(h100, "pscpu/rechd", count), h100, nccl) == 4);
  // The tuner's costliest candidates on 16 machines: 8 pipelined rings over 128 GPUs.
  const Topology h100x16 = load_topology("16xdgx-h100");
  CHECK(check_fold(build(h100x16, "xring#8", 1 << 22, 2), h100x16, nccl) == 16);
  CHECK(check_fold(build(h100x16, "nccl/rechd", 1 << 22), h100x16, nccl) == 16);
  CHECK(check_fold(build(h100x16, "2d", 1 << 22), h100x16, nccl) == 16);
  // All-gather and reduce-scatter.
  CHECK(check_fold(build(h100, "ring", count, 1, {}, Collective::kAllGather), h100, nccl) == 4);
  CHECK(check_fold(build(h100, "2d", count, 1, {}, Collective::kAllGather), h100, nccl) == 4);
  CHECK(check_fold(build(h100, "ring", count, 1, {}, Collective::kReduceScatter), h100, nccl) == 4);
}

TEST_CASE("plans that do not treat machines alike are simulated whole") {
  const CostModel nccl = CostModel::defaults(BackendProfile::kNccl);
  const Topology h100 = load_topology("4xdgx-h100");
  // One library collective over every machine: σ fixes it.
  CHECK(check_fold(build(h100, "nccl", 1 << 20), h100, nccl) == 1);
  // Pipelined rechd and 2d: the emitter's dependencies between segments differ from machine to machine (which
  // half a machine sends decides which segment its next step waits for), so no renaming maps the plan to itself.
  CHECK(check_fold(build(h100, "rechd", 1 << 20, 2), h100, nccl) == 1);
  CHECK(check_fold(build(h100, "2d", 1 << 20, 4), h100, nccl) == 1);
  // Shards gathered on machine 0's CPU.
  CHECK(check_fold(build(h100, "pscpu/pscpu", 1 << 20), h100, nccl) == 1);
  // Pieces of unequal sizes: machine 0's ops move one element more than machine 3's.
  CHECK(check_fold(build(h100, "xring", 32 * 1000 + 7), h100, nccl) == 1);
  // Three machines: no power of two for rechd's xor, and its fold of the extra machine is not a rotation.
  const Topology three = load_topology("3xdgx-h100");
  CHECK(check_fold(build(three, "rechd", 1 << 20), three, nccl) == 1);
  CHECK(check_fold(build(three, "xring", 3 << 20), three, nccl) == 3);
  // A single machine: nothing to fold.
  const Topology one = load_topology("dgx-h100");
  CHECK(check_fold(build(one, "ring", 1 << 20), one, nccl) == 1);
  // Host models share the host's cores between machines' threads: whole.
  const CostModel cpu = CostModel::defaults(BackendProfile::kCpu);
  CHECK(check_fold(build(h100, "xring", 1 << 20), h100, cpu) == 1);
  // The same links, but machine 1's NICs on another fabric (EFA: its network steps cost more) or its GPUs of
  // another architecture (the NCCL model's choice inside it): not alike, simulated whole.
  nlohmann::json efa = topology_to_json(one);
  for (auto& d : efa["devices"]) {
    if (d["kind"] == "nic") d["fabric"] = "efa";
  }
  const Topology mixed_net = join_machines({one, topology_from_json(efa, "efa.json")}, NetworkSpec{}, "ib+efa");
  CHECK(check_fold(build(mixed_net, "xring", 1 << 20), mixed_net, nccl) == 1);
  nlohmann::json sm100 = topology_to_json(one);
  for (auto& d : sm100["devices"]) {
    if (d["kind"] == "gpu") d["arch"] = "sm100";
  }
  const Topology mixed_gpus = join_machines({one, topology_from_json(sm100, "sm100.json")}, NetworkSpec{}, "h+b");
  CHECK(check_fold(build(mixed_gpus, "nccl/xring", 1 << 20), mixed_gpus, nccl) == 1);
  const Topology twins = join_machines({one, topology_from_json(topology_to_json(one), "same.json")}, NetworkSpec{},
                                       "twins");
  CHECK(check_fold(build(twins, "nccl/xring", 1 << 20), twins, nccl) == 2);
}

TEST_CASE("a compiled plan run at a factor is the scaled plan simulated") {
  const CostModel nccl = CostModel::defaults(BackendProfile::kNccl);
  const Topology h100 = load_topology("2xdgx-h100");
  for (const std::string spec : {"xring#2", "rechd", "2d"}) {
    const Plan base = build(h100, spec, 16 * 1024, 2);
    CompiledPlan compiled(base, h100, nccl, 4);
    REQUIRE(compiled.scalable());
    for (const std::int64_t factor : {1, 2, 8, 1024}) {
      const Plan scaled = scale_plan(base, factor);
      const SimResult direct = simulate(scaled, h100, nccl, 4);
      const SimResult reused = compiled.run(factor);
      INFO(spec, " ×", factor);
      CHECK(close(reused.time_us, direct.time_us));
      CHECK(reused.bytes == direct.bytes);
      CHECK(close(compiled.lower_bound(factor), simulate_lower_bound(scaled, h100, nccl, 4)));
    }
  }
  // NCCL's model picks its algorithm by size: not scalable, and a factor is refused.
  const Plan library = build(h100, "nccl", 1 << 20);
  CompiledPlan compiled(library, h100, nccl, 4);
  CHECK_FALSE(compiled.scalable());
  CHECK(compiled.run().time_us == simulate(library, h100, nccl, 4).time_us);
  CHECK_THROWS_AS(compiled.run(2), InternalError);
}

TEST_CASE("every tuner candidate on a cluster simulates the same folded and whole") {
  const CostModel nccl = CostModel::defaults(BackendProfile::kNccl);
  for (const char* name : {"4xdgx1-v100", "2xdgx-h100"}) {
    const Topology topo = load_topology(name);
    CandidateOptions options;
    options.max_cycles = 2;
    const CandidateSet set = generate_candidates(topo, options);
    int folded = 0;
    for (const Candidate& candidate : set.candidates) {
      INFO(name, ": ", candidate.label());
      const Plan plan = build_candidate(topo, candidate, 1 << 20, ReduceOp::kSum, false);
      if (check_fold(plan, topo, nccl) > 1) ++folded;
    }
    MESSAGE(std::string(name), ": ", folded, " of ", set.candidates.size(), " candidates folded");
    CHECK(folded * 2 >= static_cast<int>(set.candidates.size()));  // 44 of 69 and 31 of 55 when written
  }
}
