// Forcing NCCL's algorithm, protocol and channels per communicator (executor/nccl/nccl_forced_choice.hpp):
// the pure mapping from a plan's nccl.ALGO.PROTO ops to NCCL's settings and the scoped environment.
// No GPU needed.

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/nccl/nccl_forced_choice.hpp"
#include "tests/test_support.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;

namespace {

Plan plan_of(const std::string& topology, const std::string& spec) {
  BuildOptions b;
  b.count = 1000;
  return build_plan(load_topology(topology), spec, b);
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

}  // namespace

TEST_CASE("nccl_forced_choice.parse_into_nccl_names") {
  CHECK(parse_nccl_forced_choice("", "x").empty());
  CHECK(parse_nccl_forced_choice("ring", "x") == NcclForcedChoice{"Ring", "", 0});
  CHECK(parse_nccl_forced_choice("tree.ll", "x") == NcclForcedChoice{"Tree", "LL", 0});
  CHECK(parse_nccl_forced_choice("nvlstree.simple.c8", "x") == NcclForcedChoice{"NVLSTree", "Simple", 8});
  CHECK(parse_nccl_forced_choice("pat.ll128.c64", "x") == NcclForcedChoice{"PAT", "LL128", 64});
  CHECK(parse_nccl_forced_choice("ring.c2", "x") == NcclForcedChoice{"Ring", "", 2});
  using artune_test::error_of;
  CHECK(error_of([] { (void)parse_nccl_forced_choice("collnet", "op 3"); }) ==
        "op 3: unknown NCCL algorithm 'collnet' (tree, ring, nvls, nvlstree, pat)");
  CHECK(error_of([] { (void)parse_nccl_forced_choice("ring.ll64", "op 3"); }) ==
        "op 3: unknown NCCL protocol 'll64' (ll, ll128, simple)");
  CHECK(error_of([] { (void)parse_nccl_forced_choice("ring.c65", "op 3"); }) ==
        "op 3: NCCL channel count 'c65' is not c1..c64 (e.g. nccl.ring.simple.c8)");
  CHECK(error_of([] { (void)parse_nccl_forced_choice("ring.c0", "op 3"); }) ==
        "op 3: NCCL channel count 'c0' is not c1..c64 (e.g. nccl.ring.simple.c8)");
  CHECK(error_of([] { (void)parse_nccl_forced_choice("ring.simple.c8.ll", "op 3"); }) ==
        "op 3: 'ring.simple.c8.ll' after the NCCL choice (expected ALGO[.PROTO][.cN], e.g. ring.ll128.c8)");
}

TEST_CASE("nccl_forced_choice.environment_and_channels") {
  CHECK(nccl_forced_environment(NcclForcedChoice{}).empty());
  using Env = std::vector<std::pair<std::string, std::string>>;
  CHECK(nccl_forced_environment(NcclForcedChoice{"Tree", "LL128", 4}) ==
        Env{{"NCCL_ALGO", "Tree"}, {"NCCL_PROTO", "LL128"}});
  CHECK(nccl_forced_environment(NcclForcedChoice{"Ring", "", 0}) == Env{{"NCCL_ALGO", "Ring"}});
  int min_ctas = -7;  // NCCL_CONFIG_UNDEF_INT stands for "NCCL's choice"; left alone without channels
  int max_ctas = -7;
  apply_nccl_forced_channels(NcclForcedChoice{"Ring", "", 0}, min_ctas, max_ctas);
  CHECK(min_ctas == -7);
  CHECK(max_ctas == -7);
  apply_nccl_forced_channels(NcclForcedChoice{"Ring", "", 12}, min_ctas, max_ctas);
  CHECK(min_ctas == 12);
  CHECK(max_ctas == 12);
}

TEST_CASE("nccl_forced_choice.per_group_of_a_plan") {
  // nccl.ALGO.PROTO: one group op over every rank, forced.
  auto forced = nccl_forced_choices(plan_of("uniform:4", "nccl.tree.ll"));
  REQUIRE(forced.size() == 1);
  CHECK(forced[0] == NcclForcedChoice{"Tree", "LL", 0});
  forced = nccl_forced_choices(plan_of("uniform:4", "nccl.ring"));
  REQUIRE(forced.size() == 1);
  CHECK(forced[0] == NcclForcedChoice{"Ring", "", 0});
  // nccl.ALGO.PROTO.cN: the channel count goes with the algorithm and protocol (minCTAs = maxCTAs = N).
  forced = nccl_forced_choices(plan_of("uniform:4", "nccl.ring.simple.c2"));
  REQUIRE(forced.size() == 1);
  CHECK(forced[0] == NcclForcedChoice{"Ring", "Simple", 2});
  // Plain nccl: NCCL's own choice; a plan without group ops: no communicator to force.
  forced = nccl_forced_choices(plan_of("uniform:4", "nccl"));
  REQUIRE(forced.size() == 1);
  CHECK(forced[0].empty());
  CHECK(nccl_forced_choices(plan_of("uniform:4", "xring")).empty());
  // Two ops on the same ranks forcing different algorithms cannot share one communicator.
  Plan p = plan_of("uniform:2", "nccl.ring.ll");
  REQUIRE(p.ops.size() == 1);
  Op second = p.ops[0];
  second.algo = "tree.ll";
  second.deps = {0};
  p.add(second);
  CHECK(artune_test::error_of([&] { (void)nccl_forced_choices(p); }) ==
        "nccl backend: ops 0 and 1 run on the same ranks with different NCCL algorithms ('ring.ll' and 'tree.ll'); "
        "one communicator per group cannot force both");
  p.ops[1].algo = "ring.ll";
  CHECK(nccl_forced_choices(p) == std::vector<NcclForcedChoice>{{"Ring", "LL", 0}});
}

TEST_CASE("nccl_forced_choice.scope_sets_and_restores_the_environment") {
  ::setenv("NCCL_ALGO", "Tree", 1);
  ::unsetenv("NCCL_PROTO");
  {
    const ScopedNcclForcedChoice scope(NcclForcedChoice{"Ring", "LL128", 0});
    CHECK(env_or("NCCL_ALGO", "-") == "Ring");
    CHECK(env_or("NCCL_PROTO", "-") == "LL128");
  }
  CHECK(env_or("NCCL_ALGO", "-") == "Tree");  // the user's value comes back
  CHECK(env_or("NCCL_PROTO", "-") == "-");    // and an unset one stays unset
  {
    const ScopedNcclForcedChoice scope(NcclForcedChoice{});
    CHECK(env_or("NCCL_ALGO", "-") == "Tree");  // nothing forced: nothing touched
  }
  ::unsetenv("NCCL_ALGO");
}
