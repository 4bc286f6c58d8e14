// `artune plan --lower cuda|nccl [--json]`: what the GPU backends will run, without a GPU.
// Pins the lowered programs of small plans: streams, steps, events, graph nodes, fan-in.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

namespace {

artune_test::CliResult plan(const std::string& args) {
  return artune_test::run_shell("timeout -s KILL 120 " + artune_test::artune_bin() + " plan " + args + " 2>&1");
}

nlohmann::json plan_json(const std::string& args) {
  const auto r = plan(args + " --json");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  return nlohmann::json::parse(r.out);
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("plan_lower.cuda_all_reduce_group_is_rotated") {
  // 4 GPUs, 10 elements (shards 3+3+2+2): 3 reduce-scatter rounds, 4 records, 12 waits, 3 all-gather rounds.
  const auto j = plan_json("-t uniform:4 -s nccl --count 10 --lower cuda");
  CHECK(j["backend"] == "cuda");
  CHECK(j["gpus"] == 4);
  CHECK(j["streams"].size() == 4);
  CHECK(j["events"].size() == 4);
  CHECK(j["steps"].size() == 40);
  CHECK(j["graph"]["nodes"].size() == 24);
  CHECK(j["graph"]["edges"] == 32);
  CHECK(j["max_fan_in"] == 1);
  CHECK(j["fan_in"].size() == 6);
  // Round 0 of the reduce-scatter: member k pulls from k+1.
  for (int k = 0; k < 4; ++k) {
    const auto& s = j["steps"][static_cast<std::size_t>(k)];
    CHECK(s["kind"] == "reduce");
    CHECK(s["stream"] == k);
    CHECK(s["src"]["device"] == (k + 1) % 4);
    CHECK(s["phase"] == "reduce_scatter");
    CHECK(s["round"] == 0);
  }
  // The first all-gather copy on stream 0 takes shard 1 from device 1, after the reduce-scatter events.
  CHECK(j["steps"][28]["kind"] == "copy");
  CHECK(j["steps"][28]["src"]["device"] == 1);
  CHECK(j["steps"][28]["src"]["offset"] == 3);
  CHECK(j["steps"][28]["phase"] == "all_gather");
}

TEST_CASE("plan_lower.cuda_text_and_options") {
  const auto r = plan("-t uniform:8 -s nccl --count 64 --lower cuda --gpus 1");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  CHECK(contains(r.out, "cuda lowering of nccl on uniform:8: 8 plan devices on 1 GPU(s)"));
  CHECK(contains(r.out, "group phases: 14 rounds, largest fan-in 1"));
  CHECK(contains(r.out, "d7 gpu7 -> cuda:0"));
  CHECK(contains(r.out, "op0 reduce_scatter round 0: max 1 [1 1 1 1 1 1 1 1]"));
  CHECK(contains(r.out, "n0 = step 0\n"));
  // Without peer access every cross-GPU reduce is staged (a copy into the stream's staging first).
  const auto staged = plan_json("-t uniform:2 -s xring --count 8 --lower cuda --no-p2p");
  int staging_copies = 0;
  for (const auto& s : staged["steps"]) {
    if (s["kind"] == "copy" && s["dst"].contains("staging")) ++staging_copies;
  }
  CHECK(staging_copies > 0);
  CHECK(staged["streams"][0]["staging"] == 4);
  // Bad values: one line, exit 2.
  for (const char* bad : {"--lower cuda --gpus 0", "--lower gpu", "--lower cuda --gpus -3"}) {
    const auto b = plan(std::string("-t uniform:2 -s xring --count 8 ") + bad);
    CAPTURE(bad);
    CHECK(b.status == 2);
    CHECK(contains(b.out, "--"));
  }
}

TEST_CASE("plan_lower.cuda_broadcast_tree_in_hierarchical_plans") {
  // A pscpu/xring hybrid and the DGX-1 hierarchical copy: every group round has fan-in ≤ 1 and the graph
  // has one node per work step.
  for (const char* args : {"-t uniform:2x4 -s nccl/xring --count 100", "-t dgx1-v100 -s hiercopy --count 100",
                           "-t uniform:8 -s pscpu --count 33"}) {
    CAPTURE(args);
    const auto j = plan_json(std::string(args) + " --lower cuda");
    CHECK(j["max_fan_in"].get<int>() <= 1);
    int work = 0;
    for (const auto& s : j["steps"]) work += s["kind"] != "record" && s["kind"] != "wait" ? 1 : 0;
    CHECK(j["graph"]["nodes"].size() == static_cast<std::size_t>(work));
  }
}

TEST_CASE("plan_lower.nccl_ranks_and_communicators") {
  const auto j = plan_json("-t uniform:2x4 -s nccl/xring --count 16 --lower nccl");
  CHECK(j["backend"] == "nccl");
  CHECK(j["ranks"].size() == 8);  // one rank per GPU
  const auto r = plan("-t uniform:4 -s xring --count 16 --lower nccl");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  CHECK(contains(r.out, "nccl lowering of xring on uniform:4: 4 ranks, one stream each"));
  CHECK(contains(r.out, "communicators 0"));
  const auto g = plan_json("-t uniform:4 -s nccl --count 10 --lower nccl");
  REQUIRE(g["communicators"].size() == 1);
  CHECK(g["communicators"][0]["member_set"] == nlohmann::json({0, 1, 2, 3}));
  for (int k = 0; k < 4; ++k) {
    const auto& steps = g["ranks"][static_cast<std::size_t>(k)]["steps"];
    REQUIRE(steps.size() == 1);
    CHECK(steps[0]["kind"] == "collective");
    CHECK(steps[0]["comm_rank"] == k);
    // The collective's region is registered with its communicator, nothing with the all-ranks one.
    CHECK(g["ranks"][static_cast<std::size_t>(k)]["registers"] ==
          nlohmann::json::parse(R"([{"comm": 0, "buffer": {"device": )" + std::to_string(k) + R"(, "buffer": 0}}])"));
  }
  // A ring: sends read buffer 0, reducing receives land in staging; both on the all-ranks communicator.
  CHECK(contains(r.out, "registers (ncclCommRegister, once per prepare): peers staging, peers d0.b0\n"));
}
