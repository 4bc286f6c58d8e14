// `artune topo show|list|import` through the built binary: exit codes,
// output layout, and `topo show --json` parsed back.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"
#include "artune/topology/io.hpp"

using json = nlohmann::json;

namespace {

using Result = artune_test::CliResult;
using artune_test::run_artune;

std::string temp_path(const std::string& suffix) {
  char pattern[] = "/tmp/artune_cli_topo_XXXXXX";
  const int fd = mkstemp(pattern);
  REQUIRE(fd >= 0);
  close(fd);
  std::remove(pattern);
  return std::string(pattern) + suffix;
}

std::string source_path(const std::string& rel) {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/" + rel;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("cli.topo_show_json_parses_back") {
  const Result r = run_artune({"topo", "show", "-t", "dgx1-v100", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc["name"] == "dgx1-v100");
  REQUIRE(doc["peer_matrix"].size() == 8);
  for (const auto& row : doc["peer_matrix"]) {
    REQUIRE(row.size() == 8);
    for (const auto& cell : row) CHECK(cell.is_boolean());
  }
  CHECK(doc["peer_matrix"][3][4] == false);
  CHECK(doc["peer_matrix"][0][4] == true);
  CHECK(doc["nvlink_matrix"][0] == json({0, 1, 1, 2, 2, 0, 0, 0}));
  CHECK(doc["path_matrix"][3][4] == "SYS");
  CHECK(doc["bandwidth_matrix"][0][4] == 50.0);
  CHECK(doc["devices"].size() == 8 + 2 + 4 + 4);
  // What --json prints is itself a loadable topology.
  const std::string saved = temp_path(".json");
  { std::ofstream(saved) << r.out; }
  const Result again = run_artune({"topo", "show", "-t", saved, "--json"});
  std::remove(saved.c_str());
  REQUIRE(again.status == 0);
  CHECK(json::parse(again.out)["fingerprint"] == doc["fingerprint"]);
}

TEST_CASE("cli.topo_show_default_is_dgx1_v100") {
  const Result r = run_artune({"topo", "show", "--json"});
  REQUIRE(r.status == 0);
  CHECK(json::parse(r.out)["name"] == std::string(artune::kDefaultTopology));
}

TEST_CASE("cli.topo_show_text_layout") {
  const Result r = run_artune({"topo", "show", "-t", "dgx1-p100"});
  REQUIRE(r.status == 0);
  // The seed's DMA matrix, line for line.
  const char* seed =
      "DMA: 0 1 2 3 4 5 6 7\n"
      "0:   Y Y Y Y Y N N N\n"
      "1:   Y Y Y Y N Y N N\n"
      "2:   Y Y Y Y N N Y N\n"
      "3:   Y Y Y Y N N N Y\n"
      "4:   Y N N N Y Y Y Y\n"
      "5:   N Y N N Y Y Y Y\n"
      "6:   N N Y N Y Y Y Y\n"
      "7:   N N N Y Y Y Y Y\n";
  CHECK(r.out.find(seed) != std::string::npos);
  CHECK(r.out.find("GPU0  X     NV1   NV1   NV1   NV1   SYS   SYS   SYS") != std::string::npos);
  CHECK(r.out.find("Bandwidth") != std::string::npos);
  CHECK(r.out.find("  gpu0   <-> gpu1   nvlink") != std::string::npos);

  const Result v = run_artune({"topo", "show", "-t", "dgx1-v100"});
  REQUIRE(v.status == 0);
  CHECK(v.out.find("GPU0  X     NV1   NV1   NV2   NV2   SYS   SYS   SYS") != std::string::npos);
  const Result p = run_artune({"topo", "show", "-t", "pcie-8gpu"});
  CHECK(p.out.find("GPU0  X     PIX   PHB   PHB   SYS   SYS   SYS   SYS") != std::string::npos);
  const Result h = run_artune({"topo", "show", "-t", "dgx-h100"});
  CHECK(h.out.find("GPU0  X     NV18  NV18") != std::string::npos);
}

TEST_CASE("cli.topo_show_cluster_and_generators") {
  const Result r = run_artune({"topo", "show", "-t", "uniform:2x4"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("GPU0  X     NV1   NV1   NV1   NET") != std::string::npos);
  CHECK(r.out.find("machines     2, GPUs 8 (4 per machine)") != std::string::npos);
  // Large clusters summarise instead of printing 1024x1024 matrices.
  const Result big = run_artune({"topo", "show", "-t", "128xdgx-h100"});
  REQUIRE(big.status == 0);
  CHECK(big.out.find("Matrices omitted for 1024 GPUs") != std::string::npos);
  CHECK(big.out.find("1024 gpu") != std::string::npos);
}

TEST_CASE("cli.topo_show_bad_input_exits_2") {
  const Result unknown = run_artune({"topo", "show", "-t", "dgx9"});
  CHECK(unknown.status == 2);
  CHECK(count_lines(unknown.err) == 1);
  CHECK(unknown.err.find("dgx1-v100") != std::string::npos);  // lists the built-ins
  CHECK(unknown.out.empty());

  const std::string bad = source_path("tests/topology/data/bad_bandwidth.json");
  const Result invalid = run_artune({"topo", "show", "-t", bad});
  CHECK(invalid.status == 2);
  CHECK(invalid.err == "artune: " + bad + ": links[0].bandwidth: must be > 0 (got 0)\n");

  const Result malformed =
      run_artune({"topo", "show", "-t", source_path("tests/topology/data/malformed.json"), "--json"});
  CHECK(malformed.status == 2);
  CHECK(malformed.err.find("line 4, column") != std::string::npos);
  CHECK(count_lines(malformed.err) == 1);

  CHECK(run_artune({"topo", "show", "--no-such-flag"}).status == 2);
  CHECK(run_artune({"topo"}).status == 2);
}

TEST_CASE("cli.topo_help") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"topo", "--help"}, {"topo", "show", "--help"}, {"topo", "import", "--help"}, {"topo", "list", "--help"}}) {
    const Result r = run_artune(args);
    CHECK(r.status == 0);
    CHECK(!r.out.empty());
  }
  const Result show = run_artune({"topo", "show", "--help"});
  CHECK(show.out.find("uniform:NxG") != std::string::npos);
  CHECK(show.out.find("dgx-h100") != std::string::npos);
  const Result topo = run_artune({"topo", "--help"});
  CHECK(topo.out.find("discover") != std::string::npos);
}

TEST_CASE("cli.topo_list") {
  const Result r = run_artune({"topo", "list"});
  REQUIRE(r.status == 0);
  for (const auto& name : artune::builtin_topology_names()) CHECK(r.out.find(name) != std::string::npos);
  CHECK(r.out.find("uniform:NxG") != std::string::npos);
}

TEST_CASE("cli.topo_import_nvidia_smi") {
  const std::string input = source_path("tests/topology/data/cli_dgx1_v100_topo_m.txt");
  const std::string out = temp_path(".json");
  const Result r = run_artune({"topo", "import", "--from", "nvidia-smi", input, "--out", out});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.find("8 GPUs") != std::string::npos);
  const Result shown = run_artune({"topo", "show", "-t", out, "--json"});
  std::remove(out.c_str());
  REQUIRE(shown.status == 0);
  const json imported = json::parse(shown.out);
  const json shipped = json::parse(run_artune({"topo", "show", "-t", "dgx1-v100", "--json"}).out);
  CHECK(imported["nvlink_matrix"] == shipped["nvlink_matrix"]);
  CHECK(imported["peer_matrix"] == shipped["peer_matrix"]);
  CHECK(imported["name"] == "cli_dgx1_v100_topo_m");

  // Without --out the JSON goes to standard output.
  const Result to_stdout = run_artune({"topo", "import", "--from", "nvidia-smi", input, "--name", "box"});
  REQUIRE(to_stdout.status == 0);
  CHECK(json::parse(to_stdout.out)["name"] == "box");
}

TEST_CASE("cli.topo_import_bad_input_exits_2") {
  const std::string input = source_path("tests/topology/data/cli_dgx1_v100_topo_m.txt");
  const Result format = run_artune({"topo", "import", "--from", "lspci", input});
  CHECK(format.status == 2);
  const Result missing =
      run_artune({"topo", "import", "--from", "nvidia-smi", source_path("tests/topology/data/none.txt")});
  CHECK(missing.status == 2);
  CHECK(missing.err.find("none.txt: cannot open") != std::string::npos);
  const Result garbage =
      run_artune({"topo", "import", "--from", "nccl-xml", source_path("tests/topology/data/small_machine.json")});
  CHECK(garbage.status == 2);
  CHECK(count_lines(garbage.err) == 1);
  const Result no_file = run_artune({"topo", "import", "--from", "nvidia-smi"});
  CHECK(no_file.status == 2);
}
