// `artune run` on the cpu backend, end to end through the built binary:
// the table, JSON, exit codes (0 ok, 1 wrong results, 2 bad input).

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

namespace {

using Result = artune_test::CliResult;

// `artune run ARGS` with stdout and stderr together, under a hard 120 s cap.
// Under a hard cap: 120 s, 480 s in a sanitizer build (256 cpu ranks under ASan on a loaded 2-core machine).
Result artune_run(const std::string& args, const std::string& env = "") {
  const std::string cap = artune_test::sanitized_build() ? "480" : "120";
  return artune_test::run_shell("env " + env + " timeout -s KILL " + cap + " " + artune_test::artune_bin() + " run " +
                                args + " 2>&1");
}

std::vector<std::vector<std::string>> rows(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.size() == 8) out.push_back(w);
  }
  return out;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("run_cli.table") {
  const Result r = artune_run("-t uniform:4 -s xring -b 1K -e 4K -f 2 -n 2 -w 1 -d int32 -o min");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(contains(r.out, "size"));
  for (const char* column : {"count", "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"}) {
    CHECK(contains(r.out, column));
  }
  const auto table = rows(r.out);
  REQUIRE(table.size() == 3);
  CHECK(table[0][0] == "1024");
  CHECK(table[0][1] == "256");
  CHECK(table[2][0] == "4096");
  for (const auto& row : table) {
    CHECK(row[2] == "int32");
    CHECK(row[3] == "min");
    CHECK(row[7] == "0");
  }
  CHECK(contains(r.out, "# Avg bus bandwidth : "));
  CHECK(contains(r.out, "# Out of bounds values : 0 OK"));
}

TEST_CASE("run_cli.json") {
  const Result r = artune_run("-t dgx1-v100 -s 2d -b 64K -e 256K -f 4 -n 3 -w 1 -d half -o avg --json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["backend"] == "cpu");
  CHECK(doc["ranks"] == 8);
  CHECK(doc["wrong"] == 0);
  REQUIRE(doc["rows"].size() == 2);
  for (const auto& row : doc["rows"]) {
    CHECK(row["type"] == "half");
    CHECK(row["redop"] == "avg");
    CHECK(row["wrong"] == 0);
    CHECK(row["busbw_gbps"].get<double>() == doctest::Approx(row["algbw_gbps"].get<double>() * 1.75));
  }
}

TEST_CASE("run_cli.pipelined_permuted_and_unchecked") {
  Result r = artune_run("-t dgx1-v100 -s xring -b 1M -e 1M -n 2 -w 1 --segments 4 --gpu-perm 0,3,2,1,5,6,7,4");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(rows(r.out).size() == 1);
  r = artune_run("-t uniform:2x4 -s nccl/rechd -b 8K -e 8K -n 1 -w 0 -c 0");
  INFO(r.out);
  CHECK(r.status == 0);
  REQUIRE(rows(r.out).size() == 1);
  CHECK(rows(r.out)[0][7] == "N/A");
}

TEST_CASE("run_cli.wrong_results_exit_1") {
  // Runs 1-3 are warm-up and timing (-w 1 -n 2); run 4 is the check, where rank 1's input is corrupted.
  const Result r = artune_run("-t uniform:4 -s rechd -b 4K -e 4K -n 2 -w 1", "ARTUNE_TEST_FAULT=flip:rank1:iter4");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(contains(r.out, "# Out of bounds values : 4 FAILED"));
  CHECK(contains(r.out, "artune: run: 4 wrong elements"));
}

TEST_CASE("run_cli.bad_input_exit_2") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-d float17", "-d/--datatype"},
      {"-o mean2", "-o/--op"},
      {"--backend gpu", "--backend"},
      {"-s xrng", "xrng"},
      {"-t uniform:0", "uniform:0"},
      {"-n -1", "-n/--iters"},
      {"-b 1M -e 1K", "-b"},
      {"--timeout 0", "--timeout"},
      {"--segments 0", "--segments"},
      {"--gpu-perm 0,x", "--gpu-perm"},
      {"--table /nonexistent/table.json", "--table: decision table: '/nonexistent/table.json'"},
  };
  for (const auto& [args, mention] : cases) {
    const Result r = artune_run((contains(args, "-t ") ? "" : "-t uniform:4 ") + args);
    INFO(args << ": " << r.out);
    CHECK(r.status == 2);
    CHECK(contains(r.out, mention));
  }
}

TEST_CASE("run_cli.unverifiable_type_op_rank_counts") {
  // uint8 avg over 86 ranks: the sum (up to 3·86) wraps before the division, so a check could only
  // report correct results as wrong: refused up front, naming the flags. Without a check it runs,
  // and the uint8 average over 256 ranks divides by 256 without wrapping the divisor to 0.
  const Result refused = artune_run("-t uniform:86 -s xring -d uint8 -o avg -b 1K -e 1K -n 1 -w 0");
  INFO(refused.out);
  CHECK(refused.status == 2);
  CHECK(contains(refused.out, "-d/--datatype uint8 with -o/--op avg"));
  CHECK(contains(refused.out, "at most 85 ranks"));
  CHECK(artune_run("-t uniform:85 -s xring -d uint8 -o avg -b 1K -e 1K -n 1 -w 0").status == 0);
  const Result unchecked = artune_run("-t uniform:256 -s xring -d uint8 -o avg -b 1K -e 1K -n 1 -w 0 -c 0");
  INFO(unchecked.out);
  CHECK(unchecked.status == 0);
}

TEST_CASE("run_cli.gpu_backends_without_gpu") {
  // Either not built here or built without a usable GPU: a clear message, exit 2, never a crash.
  for (const char* backend : {"cuda"}) {
    const Result r = artune_run(std::string("-t uniform:2 -b 1K -e 1K --backend ") + backend);
    INFO(r.out);
    if (r.status == 0) continue;  // a machine with a GPU runs it for real
    CHECK(r.status == 2);
    CHECK((contains(r.out, "not built") || contains(r.out, "no CUDA device available")));
  }
}

TEST_CASE("run_cli.back_to_back_timing") {
  // --back-to-back: the header and the JSON say how the time was taken; results are still checked.
  const Result r = artune_run("-t uniform:4 -s xring --backend cpu -b 8 -e 1K -f 4 -n 5 -w 1 --back-to-back");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  CHECK(contains(r.out, "-n 5 -w 1 -c 1, back to back (time = total / n)"));
  const auto table = rows(r.out);
  REQUIRE(table.size() == 4);
  for (const auto& row : table) CHECK(row[7] == "0");
  const Result j = artune_run("-t uniform:4 -s xring --backend cpu -b 8 -e 8 -n 3 -w 1 --back-to-back --json");
  REQUIRE_MESSAGE(j.status == 0, j.out);
  const auto doc = nlohmann::json::parse(j.out.substr(j.out.find('{')));
  CHECK(doc["timing"] == "back_to_back");
  const Result d = artune_run("-t uniform:4 -s xring --backend cpu -b 8 -e 8 -n 3 -w 1 --json");
  REQUIRE_MESSAGE(d.status == 0, d.out);
  CHECK(nlohmann::json::parse(d.out.substr(d.out.find('{')))["timing"] == "per_iteration");
}

TEST_CASE("run_cli.graph_flag") {
  // --graph (nccl back to back as n launches of one captured CUDA graph) needs --back-to-back and a GPU backend.
  const Result alone = artune_run("-t uniform:4 -s xring --backend cpu -b 8 -e 8 --graph");
  CHECK(alone.status == 2);
  CHECK(contains(alone.out, "--graph: only with --back-to-back"));
  const Result cpu = artune_run("-t uniform:4 -s xring --backend cpu -b 8 -e 8 --back-to-back --graph");
  CHECK(cpu.status == 2);
  CHECK(contains(cpu.out, "--graph: the cpu backend runs no CUDA graphs (nccl or cuda only)"));
  const Result help = artune_run("--help");
  CHECK(contains(help.out, "--graph"));
}
