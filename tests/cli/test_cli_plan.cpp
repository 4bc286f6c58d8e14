// `artune plan` through the built binary: summary, JSON (parsed back and
// checked against the library's own plan), exit codes and error messages.

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/plan.hpp"
#include "tests/cli_runner.hpp"
#include "artune/topology/io/io.hpp"

using json = nlohmann::json;
using namespace artune;

namespace {

using Result = artune_test::CliResult;
using artune_test::run_artune;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cli.plan_json_ring_chunks") {
  // The acceptance example: every reduce of an unpipelined ring moves one whole chunk.
  const Result r = run_artune({"plan", "-t", "dgx1-v100", "-s", "xring", "--count", "8000", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc["verified"] == true);
  CHECK(doc["spec"] == "xring");
  CHECK(doc["count"] == 8000);
  REQUIRE(doc["ranks"].size() == 8);
  REQUIRE(doc["ops"].size() == 112);
  int reduces = 0;
  for (const auto& op : doc["ops"]) {
    CHECK(op.contains("id"));
    CHECK(op.contains("deps"));
    if (op["kind"] == "reduce") {
      ++reduces;
      CHECK(op["src"]["count"] == 1000);
      CHECK(op["dst"]["count"] == 1000);
      CHECK(op["dst"]["offset"].get<int>() % 1000 == 0);
    }
  }
  CHECK(reduces == 56);
  // The JSON is the library's plan, exactly.
  const json plan_only = [&] {
    json d = doc;
    d.erase("verified");
    d.erase("topology");
    return d;
  }();
  BuildOptions o;
  o.count = 8000;
  CHECK(plan_from_json(plan_only, "cli") == build_plan(load_topology("dgx1-v100"), "xring", o));
}

TEST_CASE("cli.plan_json_clusters_use_global_gpu_indices") {
  const Result r =
      run_artune({"plan", "-t", "uniform:2x8", "-s", "nccl/xring", "--count", "1K", "-o", "avg", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  REQUIRE(doc["ranks"].size() == 16);
  for (int i = 0; i < 16; ++i) CHECK(doc["ranks"][static_cast<std::size_t>(i)]["rank"] == i);
  CHECK(doc["ranks"][8]["device"] == "m1/gpu0");
  CHECK(doc["op"] == "avg");
  CHECK(doc["count"] == 1024);
}

TEST_CASE("cli.plan_json_nccl_graph") {
  // NCCL's graph of each group op: channels and speeds, the tree graph's raised inside the machine on two machines
  // (2 x DGX-1 V100: 4 channels at 12 GB/s; the chains fit 20 per channel, one NVLink 2 lane's 20 GB/s, not 24).
  const Result r = run_artune({"plan", "-t", "2xdgx1-v100", "-s", "nccl", "--count", "1K", "--json"});
  REQUIRE(r.status == 0);
  const json g = json::parse(r.out)["nccl"][0];
  CHECK(g["channels"] == 4);
  CHECK(g["bw_intra_gbps"] == 12.0);
  CHECK(g["bw_inter_gbps"] == 12.0);
  CHECK(g["tree_bw_intra_gbps"] == 20.0);
  CHECK(g["rings"].size() == 4);
}

TEST_CASE("cli.plan_summary") {
  const Result r = run_artune({"plan", "-s", "pscpu#2", "--count", "1000"});
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "plan         pscpu#2 on dgx1-v100"));  // -t defaults to dgx1-v100
  CHECK(contains(r.out, "helpers"));
  CHECK(contains(r.out, "ops          32 (18 copy, 14 reduce, 0 scale, 0 group)"));
  // A helper with a packing's many staged pieces: their total and count, not one size per buffer.
  const Result many = run_artune({"plan", "-t", "dgx1-v100[1,2,3,4,5,6,7]", "-s", "prings"});
  REQUIRE(many.status == 0);
  CHECK(contains(many.out,
                 "helpers      7=cpu1 (scratch 252774 elements in 432 buffers), 8=cpu0 (scratch 126396 elements in 216 "
                 "buffers)\n"));
  CHECK(contains(r.out, "Phases"));
  CHECK(contains(r.out, "verification ok"));
  // Default count 1M elements: a ring on DGX-1 crosses NVLink and the sockets.
  const Result ring = run_artune({"plan", "-s", "xring", "--gpu-perm", "0,3,2,1,5,6,7,4"});
  REQUIRE(ring.status == 0);
  CHECK(contains(ring.out, "1048576 elements"));
  CHECK(contains(ring.out, "NVL"));
  CHECK_FALSE(contains(ring.out, "SYS"));  // this order stays on NVLink
  const Result nccl = run_artune({"plan", "-t", "uniform:2x4", "-s", "nccl/rechd", "--segments", "2"});
  REQUIRE(nccl.status == 0);
  CHECK(contains(nccl.out, "Library collectives"));
  CHECK(contains(nccl.out, "pipelined in 2 segments"));
}

TEST_CASE("cli.plan_gather_and_participants") {
  const Result r =
      run_artune({"plan", "-t", "uniform:4", "-s", "shuffle#2", "--gather", "cpu0", "--count", "10", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  REQUIRE(doc["helpers"].size() == 1);
  CHECK(doc["helpers"][0]["device"] == "cpu0");
  const Result p = run_artune({"plan", "-s", "rechd", "--participants", "gpu1,gpu2,gpu5", "--json"});
  REQUIRE(p.status == 0);
  CHECK(json::parse(p.out)["ranks"].size() == 3);
}

TEST_CASE("cli.plan_rejections") {
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{"plan", "-s", "xrng"}, "'xrng'"},
      {{"plan", "-s", "xring#9"}, "xring#9"},
      {{"plan", "-s", "mring#7"}, "holds 6"},
      {{"plan", "-s", "hiercopy", "-t", "pcie-8gpu"}, "no NVLink groups"},
      {{"plan", "-s", "xring", "--gpu-perm", "0,1"}, "--gpu-perm"},
      {{"plan", "-s", "xring", "--gpu-perm", "0,a"}, "--gpu-perm"},
      {{"plan", "-s", "pscpu", "--gather", "cpu7"}, "--gather"},
      {{"plan", "-s", "xring", "--count", "0"}, "--count"},
      {{"plan", "-s", "xring", "--count", "12Q"}, "--count"},
      {{"plan", "-s", "xring", "--segments", "0"}, "--segments"},
      {{"plan", "-s", "xring", "-o", "median"}, "-o/--op"},
      {{"plan", "-s", "xring", "-t", "no-such-machine"}, "no-such-machine"},
      {{"plan", "-s", "nccl/xring#2", "-t", "uniform:2x8"}, "xring#2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.fragment);
    const Result r = run_artune(c.args);
    CHECK(r.status == 2);
    CHECK(contains(r.err, c.fragment));
    CHECK(r.out.empty());
  }
  // -s is required.
  CHECK(run_artune({"plan"}).status == 2);
}

TEST_CASE("cli.plan_help") {
  const Result r = run_artune({"plan", "--help"});
  CHECK(r.status == 0);
  for (const std::string flag :
       {"--topology", "--spec", "--count", "--gpu-perm", "--gather", "--segments", "--op", "--json", "1M"}) {
    CHECK(contains(r.out, flag));
  }
}

TEST_CASE("cli.plan_text_states_units") {
  // The count line names its units: elements of the type, and bytes per rank.
  const Result r = run_artune({"plan", "-t", "uniform:4", "-s", "xring", "--count", "1000", "-d", "double"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("count        1000 elements of double (8000 bytes per rank), op sum\n") != std::string::npos);
}
