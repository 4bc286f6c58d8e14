// The algorithm registry: every family complete and registered once, the grammar's names and
// readable aliases unique, aliases building the same plans as TF's tokens.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;

TEST_CASE("registry.families_complete") {
  CHECK(families().size() == 9);
  std::set<std::string> names, tokens;
  std::set<int> positions;
  for (const Family* f : families()) {
    CAPTURE(f->name);
    CHECK(names.insert(f->name).second);
    CHECK(names.insert(f->readable).second == (std::string(f->readable) != f->name));
    CHECK(positions.insert(f->tuner_position).second);
    CHECK((f->emit != nullptr));
    CHECK((f->closed_form != nullptr));
    CHECK((f->candidates != nullptr));
    CHECK(!f->specs.empty());
    CHECK(family_named(f->name) == f);
    for (const SpecName& s : f->specs) {
      CHECK(tokens.insert(s.token).second);
      if (s.alias != nullptr) CHECK(tokens.insert(s.alias).second);
      CHECK(find_spec_name(s.token).first == f);
      CHECK(find_spec_name(s.token).second == &s);
      // A hybrid's in-machine token belongs to a family that can be the lower level, and every upper to one
      // that can run across machines.
      CHECK((s.hybrid_uppers.empty() || f->lower != nullptr));
      for (const char* upper : s.hybrid_uppers) {
        const Family* u = find_spec_name(upper).first;
        REQUIRE(u != nullptr);
        CHECK((u->upper != nullptr));
      }
    }
  }
  CHECK(family_named("nope") == nullptr);
  CHECK(find_spec_name("nope").first == nullptr);
  // Names never hold the grammar's separators (':' ranges, '/' levels, '#' arguments, '.' NCCL variants).
  for (const std::string& t : tokens) CHECK(t.find_first_of(":/#.") == std::string::npos);
}

TEST_CASE("registry.readable_aliases") {
  CHECK(parse_spec("ring") == parse_spec("xring"));
  CHECK(parse_spec("halving-doubling") == parse_spec("rechd"));
  CHECK(parse_spec("shuffle-cpu#2") == parse_spec("pscpu#2"));
  CHECK(parse_spec("shuffle-gpu") == parse_spec("psgpu"));
  CHECK(parse_spec("hierarchical-copy#4") == parse_spec("hiercopy#4"));
  CHECK(parse_spec("multi-ring#2") == parse_spec("mring#2"));
  CHECK(parse_spec("double-binary-tree") == parse_spec("tree"));
  CHECK(parse_spec("2d-hierarchical") == parse_spec("2d"));
  CHECK(parse_spec("tree-packing") == parse_spec("trees"));
  CHECK(parse_spec("tree-packing-two-phase") == parse_spec("trees2"));
  CHECK(parse_spec("reduce-broadcast-trees") == parse_spec("rbtrees"));
  CHECK(parse_spec("ring-packing") == parse_spec("prings"));
  CHECK(parse_spec("shuffle-cpu/ring:64K:nccl/halving-doubling") == parse_spec("pscpu/xring:64K:nccl/rechd"));
  // Printed with TF's tokens, as tables and reports have always named them.
  CHECK(to_string(parse_spec("nccl:1K:halving-doubling")) == "nccl:1K:rechd");
  // The ring alias never meets NCCL's forced ring (nccl.ring), a variant of the nccl token.
  const AlgToken forced = parse_spec("nccl.ring").ranges[0].intra;
  CHECK(forced.name == "nccl");
  CHECK(forced.variant == "ring");
  CHECK(parse_spec("nccl.ring/ring").ranges[0].inter->name == "xring");
  // An alias takes the token's argument rules.
  CHECK_THROWS_WITH_AS(parse_spec("halving-doubling#2"),
                       "parameter spec 'halving-doubling#2': 'halving-doubling#2': rechd takes no #n argument",
                       InvalidInput);
}

TEST_CASE("registry.aliases_build_the_same_plans") {
  const Topology topo = load_topology("uniform:2x4");
  for (const auto& [alias, token] :
       std::initializer_list<std::pair<const char*, const char*>>{{"ring#2", "xring#2"},
                                                                  {"halving-doubling", "rechd"},
                                                                  {"shuffle-cpu/ring", "pscpu/xring"},
                                                                  {"multi-ring", "mring"},
                                                                  {"double-binary-tree", "tree"},
                                                                  {"2d-hierarchical", "2d"},
                                                                  {"nccl/halving-doubling", "nccl/rechd"}}) {
    CAPTURE(alias);
    BuildOptions o;
    o.count = 1000;
    CHECK(plan_to_json(build_plan(topo, alias, o)).dump() == plan_to_json(build_plan(topo, token, o)).dump());
  }
}

TEST_CASE("registry.help_lists_every_token_and_hybrid") {
  std::size_t tokens = 0, hybrids = 0;
  for (const Family* f : families()) {
    for (const SpecName& s : f->specs) {
      ++tokens;
      hybrids += s.hybrid_uppers.size();
    }
  }
  CHECK(spec_algorithms().size() == tokens + hybrids);
  CHECK(tokens == 14);
  CHECK(hybrids == 7);
}

TEST_CASE("registry.collective_families_complete") {
  // All-gather and reduce-scatter families (issue 17): records of the same shape, looked up per collective.
  CHECK(families(Collective::kAllGather).size() == 6);
  CHECK(families(Collective::kReduceScatter).size() == 5);
  for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    std::set<std::string> tokens;
    std::set<int> positions;
    for (const Family* f : families(c)) {
      CAPTURE(f->name);
      CHECK(f->collective == c);
      CHECK(positions.insert(f->tuner_position).second);
      CHECK((f->emit != nullptr));
      CHECK((f->closed_form != nullptr));
      CHECK((f->candidates != nullptr));
      CHECK((f->upper == nullptr && f->lower == nullptr));
      for (const SpecName& s : f->specs) {
        CHECK(s.arg == ArgKind::kNone);
        // A hybrid's in-machine family has `inside`, each of its uppers `across` (nccl/ring, nccl/bruck, …).
        CHECK((s.hybrid_uppers.empty() || f->inside != nullptr));
        for (const char* upper : s.hybrid_uppers) {
          const Family* u = find_spec_name(upper, c).first;
          REQUIRE(u != nullptr);
          CHECK((u->across != nullptr));
        }
        CHECK(tokens.insert(s.token).second);
        if (s.alias != nullptr) CHECK(tokens.insert(s.alias).second);
        CHECK(find_spec_name(s.token, c).first == f);
        if (s.alias != nullptr) CHECK(find_spec_name(s.alias, c).first == f);
      }
    }
  }
  // Each collective's names are its own: "halving" is reduce-scatter only, "ring" is an all-reduce alias.
  CHECK(find_spec_name("halving", Collective::kAllGather).first == nullptr);
  CHECK(find_spec_name("halving", Collective::kReduceScatter).first == &family::reducescatter_halving);
  CHECK(find_spec_name("ring").first == &family::ring);
  CHECK(find_spec_name("ring", Collective::kAllGather).first == &family::allgather_ring);
  CHECK(families(Collective::kBroadcast).empty());
  CHECK_THROWS_WITH_AS(family_of(AlgToken{"bruck", -1, ""}, Collective::kReduceScatter),
                       "bruck: no reducescatter plan of this family", InvalidInput);
}
