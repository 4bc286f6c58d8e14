// `artune topo show|list|import` through the built binary: exit codes,
// output layout, and `topo show --json` parsed back.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"
#include "artune/topology/io/io.hpp"

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

// nvidia-smi's matrix names no CPU: --cpu-arch states it for every socket (NCCL's model reads the vendor across
// machines); a value outside the list, or on an NCCL XML (which names its CPUs), is refused naming the flag.
TEST_CASE("cli.topo_import_cpu_arch") {
  const std::string input = source_path("tests/topology/data/cli_dgx1_v100_topo_m.txt");
  const Result amd = run_artune({"topo", "import", "--gpu", "v100", "--cpu-arch", "x86_64-amd", input});
  REQUIRE_MESSAGE(amd.status == 0, amd.err);
  int cpus = 0;
  const json amd_model = json::parse(amd.out);
  for (const auto& d : amd_model["devices"]) {
    if (d["kind"] == "cpu") {
      CHECK(d["arch"] == "x86_64-amd");
      ++cpus;
    }
  }
  CHECK(cpus == 2);
  const Result unstated = run_artune({"topo", "import", "--gpu", "v100", input});
  REQUIRE(unstated.status == 0);
  const json unstated_model = json::parse(unstated.out);
  for (const auto& d : unstated_model["devices"]) {
    if (d["kind"] == "cpu") CHECK_FALSE(d.contains("arch"));
  }
  const Result bad = run_artune({"topo", "import", "--cpu-arch", "epyc", input});
  CHECK(bad.status == 2);
  CHECK(bad.err == "artune: --cpu-arch: 'epyc' is not one of x86_64-intel, x86_64-amd, x86_64-zhaoxin, x86_64, "
                   "arm64 or ppc64\n");
  const Result xml = run_artune(
      {"topo", "import", "--cpu-arch", "x86_64-amd", source_path("tests/topology/data/dgx1_v100_nccl.xml")});
  CHECK(xml.status == 2);
  CHECK(xml.err.find("--cpu-arch: only for --from nvidia-smi") != std::string::npos);
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

namespace {

// busbw of `artune simulate -s nccl` per size (column 7), one per table row.
std::vector<double> nccl_busbw(const std::string& topology) {
  const Result r = run_artune({"simulate", "-t", topology, "-s", "nccl", "-b", "1K", "-e", "1G", "-f", "8"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  std::vector<double> out;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    std::string c[7];
    for (auto& x : c) cols >> x;
    out.push_back(std::stod(c[6]));
  }
  return out;
}

}  // namespace

TEST_CASE("cli.topo_import_nvswitch_machines_match_the_builtins") {
  // Published `nvidia-smi topo -m` of NVSwitch machines (tests/topology/data/README.md) import as NVSwitch machines
  // with the generation's architecture: NCCL's modelled all-reduce equals the matching built-in's at every size.
  struct Case {
    const char* file;
    const char* gpu;
    const char* builtin;
  };
  for (const Case c : {Case{"dgx_a100_topo_m.txt", "a100", "dgx-a100"}, Case{"h100_nv18_topo_m.txt", "h100", "dgx-h100"},
                       Case{"h100_nv18_topo_m.txt", "h200", "dgx-h100"}}) {
    CAPTURE(c.file);
    CAPTURE(c.gpu);
    const std::string out = temp_path(".json");
    const Result r = run_artune(
        {"topo", "import", source_path(std::string("tests/topology/data/") + c.file), "--gpu", c.gpu, "--out", out});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(r.err.find("warning") == std::string::npos);  // --gpu given: nothing guessed
    const json topo = json::parse(run_artune({"topo", "show", "-t", out, "--json"}).out);
    const std::vector<double> imported = nccl_busbw(out);
    std::remove(out.c_str());
    int switches = 0;
    for (const auto& d : topo["devices"]) {
      switches += d["kind"] == "nvswitch";
      if (d["kind"] == "gpu") CHECK(d["arch"] == (std::string(c.gpu) == "a100" ? "sm80" : "sm90"));
    }
    CHECK(switches == 1);
    const std::vector<double> shipped = nccl_busbw(c.builtin);
    REQUIRE(imported.size() == shipped.size());
    for (std::size_t k = 0; k < shipped.size(); ++k) CHECK(imported[k] == doctest::Approx(shipped[k]).epsilon(0.01));
  }
  // Without --gpu: one warning line naming what was assumed and the inferred NVSwitch.
  const Result guess = run_artune({"topo", "import", source_path("tests/topology/data/h100_nv18_topo_m.txt")});
  REQUIRE(guess.status == 0);
  CHECK(count_lines(guess.err) == 1);
  CHECK(guess.err.find("warning: ") != std::string::npos);
  CHECK(guess.err.find("NVSwitch inferred") != std::string::npos);
  // A 4-GPU HGX H100 board (NV6 in every pair: 3 x 6 = 18 lanes, all an H100 has) is wired directly.
  const json board = json::parse(
      run_artune({"topo", "import", source_path("tests/topology/data/hgx_h100_4gpu_topo_m.txt"), "--gpu", "h100"}).out);
  int board_switches = 0, nvlinks = 0;
  for (const auto& d : board["devices"]) board_switches += d["kind"] == "nvswitch";
  for (const auto& l : board["links"]) nvlinks += l["kind"] == "nvlink";
  CHECK(board_switches == 0);
  CHECK(nvlinks == 6);  // 6 GPU pairs (the file lists each duplex link once)
}

TEST_CASE("cli.topo_import_tells_the_format_without_from") {
  const Result smi = run_artune({"topo", "import", source_path("tests/topology/data/cli_dgx1_v100_topo_m.txt")});
  CHECK(smi.status == 0);
  CHECK(smi.err.find("(nvidia-smi)") == std::string::npos);  // to stdout: no summary line, only the --gpu warning
  const Result xml = run_artune({"topo", "import", source_path("tests/topology/data/dgx1_v100_nccl.xml")});
  CHECK(xml.status == 0);
  CHECK(xml.err.empty());
  const Result neither = run_artune({"topo", "import", source_path("tests/topology/data/small_machine.json")});
  CHECK(neither.status == 2);
  CHECK(count_lines(neither.err) == 1);
  CHECK(neither.err.find("--from nvidia-smi|nccl-xml") != std::string::npos);
}
