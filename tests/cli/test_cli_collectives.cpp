// `--collective` and `--sparse` through the built binary (issue 17): plan, simulate, run (the
// all_gather_perf / reduce_scatter_perf tables with #wrong), autotune tables per collective that
// run --table runs, the sparse crossover report and sparse tensors in --fusion lists.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"

using json = nlohmann::json;
using artune_test::CliResult;
using artune_test::run_artune;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// A scratch file name, removed when the guard goes.
struct ScratchFile {
  std::string path;
  ScratchFile() {
    char pattern[] = "/tmp/artune_cli_coll_XXXXXX";
    const int fd = mkstemp(pattern);
    REQUIRE(fd >= 0);
    close(fd);
    path = pattern;
  }
  ~ScratchFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("cli_collectives.plan") {
  CliResult r = run_artune({"plan", "-t", "uniform:4", "--collective", "allgather", "-s", "bruck", "--count", "10"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "every rank ends with every rank's block, in rank order"));
  r = run_artune(
      {"plan", "-t", "uniform:5", "--collective", "reducescatter", "-s", "halving", "--count", "11", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc.at("collective") == "reduce_scatter");
  CHECK(doc.at("verified") == true);
  r = run_artune({"plan", "-t", "uniform:4", "--collective", "allgather", "-s", "halving"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--spec 'halving': unknown allgather algorithm (known: ring, bruck, rd, nccl, 2d"));
  r = run_artune({"plan", "-t", "uniform:4", "--collective", "bcast", "-s", "ring"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--collective: unknown collective 'bcast'"));
}

TEST_CASE("cli_collectives.simulate_bus_factor") {
  const CliResult r = run_artune(
      {"simulate", "-t", "uniform:4", "--collective", "reducescatter", "-s", "ring", "-b", "1M", "-e", "4M", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc.at("collective") == "reducescatter");
  for (const json& row : doc.at("results")) {
    CHECK(row.at("busbw_gbps").get<double>() == doctest::Approx(row.at("algbw_gbps").get<double>() * 0.75));
  }
  const CliResult ag =
      run_artune({"simulate", "-t", "uniform:4", "--collective", "allgather", "-s", "bruck", "-b", "1M", "-e", "1M"});
  REQUIRE(ag.status == 0);
  CHECK(has(ag.out, "collective allgather"));
  CHECK(has(ag.out, " none "));
}

TEST_CASE("cli_collectives.run_tables") {
  CliResult r = run_artune({"run", "-t", "uniform:4", "--collective", "allgather", "-s", "ring", "--backend", "cpu",
                            "-b", "1K", "-e", "8K", "-n", "2", "-w", "1", "-d", "half"});
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "all_gather_perf"));
  CHECK(has(r.out, " none "));
  CHECK(has(r.out, "Out of bounds values : 0 OK"));
  r = run_artune({"run", "-t", "uniform:3", "--collective", "reducescatter", "-s", "halving", "--backend",
                  "cpu", "-b", "100",       "-e",           "100",           "-n", "1",       "-w",
                  "0",   "-o", "avg",       "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc.at("collective") == "reducescatter");
  CHECK(doc.at("wrong") == 0);
  const json& row = doc.at("rows").at(0);
  CHECK(row.at("busbw_gbps").get<double>() == doctest::Approx(row.at("algbw_gbps").get<double>() * 2.0 / 3.0));
}

TEST_CASE("cli_collectives.autotune_table_then_run") {
  ScratchFile table;
  CliResult r = run_artune(
      {"autotune", "-t", "uniform:4", "--collective", "allgather", "-b", "1K", "-e", "1M", "--out", table.path, "-q"});
  REQUIRE(r.status == 0);
  r = run_artune({"run", "--table", table.path, "--backend", "cpu", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0"});
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "all_gather_perf"));
  CHECK(has(r.out, "Out of bounds values : 0 OK"));
  r = run_artune({"run", "--table", table.path, "--collective", "reducescatter", "--backend", "cpu", "-b", "1K"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--collective: reducescatter but the table"));
}

TEST_CASE("cli_collectives.hybrids") {
  // nccl/bruck, nccl/halving, …: the library inside machines, a point-to-point family across them.
  CliResult r =
      run_artune({"plan", "-t", "uniform:3x2", "--collective", "allgather", "-s", "nccl/bruck", "--count", "13"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "9 x all_gather over 2 devices"));
  CHECK(has(r.out, "every rank ends with every rank's block, in rank order"));
  r = run_artune({"run",
                  "-t",
                  "uniform:3x2",
                  "--collective",
                  "reducescatter",
                  "-s",
                  "nccl/halving",
                  "--backend",
                  "cpu",
                  "-b",
                  "1K",
                  "-e",
                  "4K",
                  "-n",
                  "1",
                  "-w",
                  "0",
                  "-o",
                  "avg",
                  "--json"});
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out).at("wrong") == 0);
  r = run_artune(
      {"simulate", "-t", "2xdgx1-v100", "--collective", "allgather", "-s", "nccl/rd", "-b", "1M", "-e", "1M"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "spec nccl/rd"));
  r = run_artune({"plan", "-t", "uniform:2x2", "--collective", "reducescatter", "-s", "nccl/bruck"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--spec 'nccl/bruck': unknown reducescatter algorithm 'bruck'"));
  r = run_artune({"plan", "-t", "uniform:2x2", "--collective", "allgather", "-s", "ring/ring"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--spec 'ring/ring': ring/ring is not a supported allgather hierarchy"));
  // autotune on two DGX-1s tries the hybrids (the runner-up at 64 MiB) and picks the trees across machines (each
  // DGX-1's out-trees, rings across); run --table runs the pick.
  ScratchFile table;
  r = run_artune({"autotune", "-t", "2xdgx1-v100", "--collective", "allgather", "-b", "64M", "-e", "64M", "--out",
                  table.path, "-q", "--min-gain", "0"});
  REQUIRE(r.status == 0);
  std::ifstream in(table.path);
  const json doc = json::parse(in);
  const json& plan = doc.at("ranges").at(0).at("plan");
  CHECK(plan.at("family") == "trees");
  CHECK(plan.at("spec") == "trees");
  CHECK(doc.at("ranges").at(0).at("points").at(0).at("runner_up").at("label") == "nccl/ring");
  r = run_artune({"run", "--table", table.path, "--backend", "cpu", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"});
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "Out of bounds values : 0 OK"));
}

TEST_CASE("cli_collectives.sparse") {
  CliResult r =
      run_artune({"autotune", "-t", "uniform:8", "--sparse", "1M,64,0.01", "-b", "64M", "-e", "256M", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc.at("tensor").at("pick") == "sparse");
  CHECK(doc.at("tensor").at("nnz_per_rank") == 10486);
  REQUIRE(doc.at("crossover").size() == 3);  // 64M, 128M, 256M
  for (const json& x : doc.at("crossover")) {
    CHECK(x.at("crossover_density").get<double>() > 0);
    CHECK(x.at("crossover_density").get<double>() < 1);
  }
  r = run_artune({"autotune", "-t", "uniform:8", "--sparse", "1M,64"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--sparse: '1M,64' is not ROWS,WIDTH,DENSITY"));
  r = run_artune({"autotune", "-t", "uniform:8", "--sparse", "1M,64,2"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "--sparse: DENSITY 2 is not in (0, 1]"));
}

TEST_CASE("cli_collectives.fusion_sparse_tensors") {
  ScratchFile list;
  std::ofstream(list.path) << R"({"model": "toy", "type": "float32", "tensors": [
      {"name": "emb", "shape": [100000, 64], "sparse": {"rows": 100000, "width": 64, "density": 0.001}},
      {"name": "small_emb", "shape": [1000, 64], "sparse": {"rows": 1000, "width": 64, "nnz": 900}},
      {"name": "fc", "elements": 4096}]})";
  CliResult r = run_artune({"autotune", "-t", "uniform:8", "--fusion", list.path, "-b", "1K", "-e", "64K"});
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "# sparse tensor emb (100000 rows x 64, density 0.001): sparse (dense all-reduce "));
  CHECK(has(r.out, "# sparse tensor small_emb (1000 rows x 64, density 0.9): dense (dense all-reduce "));
  CHECK_FALSE(has(r.out, "sparse tensor fc"));
  CHECK(has(
      r.out,
      "# fusion toy: 1 sparse tensors outside the packs (272384 of 25872384 bytes packed); at pack size per tensor: "));
  {
    const std::string dir = list.path + "_report";
    r = run_artune(
        {"autotune", "-t", "uniform:8", "--fusion", list.path, "-b", "1K", "-e", "64K", "--report", dir, "-q"});
    CHECK(r.status == 0);
    std::ifstream md(dir + "/REPORT.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    CHECK(
        has(text, "Outside the packs, each as its own sparse all-reduce (all-gather of its indices and rows): emb ("));
    CHECK(has(text, "the packs hold the other 272384 bytes"));
    std::filesystem::remove_all(dir);
  }
  r = run_artune({"autotune", "-t", "uniform:8", "--fusion", list.path, "-b", "1K", "-e", "64K", "--json"});
  REQUIRE(r.status == 0);
  const json picks = json::parse(r.out).at("fusion").at(0).at("sparse");
  REQUIRE(picks.size() == 2);
  CHECK(picks.at(0).at("name") == "emb");
  CHECK(picks.at(0).at("pick") == "sparse");
  CHECK(picks.at(0).at("nnz_per_rank") == 100);
  CHECK(picks.at(1).at("name") == "small_emb");
  CHECK(picks.at(1).at("pick") == "dense");
  // emb, picked sparse, leaves the packs: its time is its sparse all-reduce's, in every pack size's totals.
  const json fusion = json::parse(r.out).at("fusion").at(0);
  CHECK(fusion.at("total_bytes") == (100000 * 64 + 1000 * 64 + 4096) * 4);
  CHECK(fusion.at("packed_bytes") == (1000 * 64 + 4096) * 4);
  REQUIRE(fusion.at("separate").size() == 1);
  CHECK(fusion.at("separate").at(0).at("name") == "emb");
  CHECK(fusion.at("separate").at(0).at("bytes") == 100000 * 64 * 4);
  const double sparse_us = picks.at(0).at("sparse_us").get<double>();
  CHECK(fusion.at("separate").at(0).at("us").get<double>() == sparse_us);
  for (const json& option : fusion.at("options")) {
    CHECK(option.at("separate_us").get<double>() == sparse_us);
    CHECK(option.at("total_us").get<double>() ==
          doctest::Approx(option.at("allreduce_us").get<double>() + option.at("packing_us").get<double>() + sparse_us));
  }
  // A bad field: one line naming the file and the field, exit 2.
  std::ofstream(list.path) << R"({"tensors": [{"name": "e", "elements": 60, "sparse": {"rows": 10, "width": 6,
      "density": 2}}]})";
  r = run_artune({"autotune", "-t", "uniform:8", "--fusion", list.path, "-b", "1K", "-e", "64K"});
  CHECK(r.status == 2);
  CHECK(has(r.err, list.path + ": tensors[0].sparse.density: must be in (0, 1]"));
  CHECK(r.err.find('\n') == r.err.size() - 1);
}
