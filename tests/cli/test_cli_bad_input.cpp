// Hostile input through the built `artune` binary, command by command: every
// case must end with exit status 2 and exactly one line on stderr, "artune: …",
// that names the flag, file or field at fault (the substrings listed with the
// case), within a time limit (a hang fails as status 124) and a memory limit
// (an attempt to allocate absurd amounts fails as status 3 instead of waking
// the OOM killer). Fixture files live in a fresh temporary folder that every
// command runs in.

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"
#include "tests/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Seconds one command may take; far above what any case needs (a few ms each).
constexpr int kTimeLimitS = 60;
// Virtual memory one command may map (KiB): plenty for the binary, far below what the machine has.
constexpr long kMemoryLimitKiB = 8L << 20;
// An error line longer than this is not readable (main() cuts messages at 1000 characters).
constexpr std::size_t kMaxLineBytes = 1100;

using artune_test::shell_quote;

using artune_test::slurp;

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The folder of fixture files, made once per test run and removed at exit.
class Fixtures {
 public:
  Fixtures() {
    char pattern[] = "/tmp/artune_bad_input_XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    make_files();
  }
  ~Fixtures() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }

 private:
  void file(const std::string& name, const std::string& text) { write(dir_ / name, text); }

  void make_files() {
    const std::string two_gpus = R"("devices": [{"id": "gpu0", "kind": "gpu"}, {"id": "gpu1", "kind": "gpu"}])";
    auto link = [&](const std::string& fields) {
      return "{" + two_gpus + R"(, "links": [{"a": "gpu0", "b": "gpu1", "kind": "nvlink", )" + fields + "}]}";
    };
    fs::create_directory(dir_ / "adir");
    file("empty.json", "");
    file("trunc.json", "{\"name\": \"x\", \"devices\": [\n");
    file("array.json", "[1, 2, 3]\n");
    file("string.json", "\"hello\"\n");
    file("number.json", "42\n");
    file("null.json", "null\n");
    file("binary.json", std::string("\xff\xfe\x00garbage", 10));
    file("deep.json", std::string(100000, '[') + std::string(100000, ']'));
    file("devices_string.json", R"({"devices": "gpu0", "links": []})");
    file("no_devices.json", R"({"devices": [], "links": []})");
    file("neg_bw.json", link(R"("bandwidth": -5)"));
    file("big_bw.json", link(R"("bandwidth": 1e308)"));
    file("tiny_bw.json", link(R"("bandwidth": 1e-300)"));
    file("nan_bw.json", link(R"("bandwidth": NaN)"));
    file("string_bw.json", link(R"("bandwidth": "NaN")"));
    file("neg_latency.json", link(R"("bandwidth": 5, "latency": -1)"));
    file("float_lanes.json", link(R"("bandwidth": 5, "lanes": 1e12)"));
    file("self_link.json",
         "{" + two_gpus + R"(, "links": [{"a": "gpu0", "b": "gpu0", "kind": "nvlink", "bandwidth": 5}]})");
    file("unknown_device.json",
         "{" + two_gpus + R"(, "links": [{"a": "gpu0", "b": "gpu9", "kind": "nvlink", "bandwidth": 5}]})");
    file("dup_id.json", R"({"devices": [{"id": "gpu0", "kind": "gpu"}, {"id": "gpu0", "kind": "gpu"}], "links": []})");
    file("disconnected.json", "{" + two_gpus + R"(, "links": []})");
    file("dup_link.json", "{" + two_gpus +
                              R"(, "links": [{"a": "gpu0", "b": "gpu1", "kind": "nvlink", "bandwidth": 5},
                                             {"a": "gpu0", "b": "gpu1", "kind": "nvlink", "bandwidth": 5}]})");
    file("directed_only.json", link(R"("bandwidth": 5, "directed": true)"));
    file("bad_kind.json", R"({"devices": [{"id": "gpu0", "kind": "toaster"}], "links": []})");
    file("unknown_field.json",
         "{" + two_gpus + R"(, "links": [{"a": "gpu0", "b": "gpu1", "kind": "nvlink", "bandwidth": 5}], "bogus": 1})");
    file("machine_gap.json",
         R"({"devices": [{"id": "gpu0", "kind": "gpu", "machine": 5}, {"id": "gpu1", "kind": "gpu"}], "links": []})");
    file("no_gpu.json", R"({"devices": [{"id": "cpu0", "kind": "cpu"}], "links": []})");
    file("compact_gpus0.json", R"({"compact": {"gpus": 0}})");
    file("compact_gpus_huge.json", R"({"compact": {"gpus": 100000000}})");
    file("compact_gpus_string.json", R"({"compact": {"gpus": "8"}})");
    file("compact_asymmetric.json",
         R"({"compact": {"gpus": 2, "nvlink": [[0, 1], [0, 0]], "nvlink_lane_bandwidth": 25}})");
    file("compact_nics_huge.json",
         R"({"compact": {"gpus": 2, "nics_per_switch": 100000000, "pcie_switches": [[0], [1]]}})");
    file("cluster_count_huge.json", R"({"machines": [{"config": "dgx1-v100", "count": 100000000}]})");
    file("cluster_nested.json", R"({"machines": [{"config": "cluster-4xdgx1-v100"}]})");
    file("cluster_missing.json", R"({"machines": [{"config": "nosuch_machine.json"}]})");
    file("cluster_oversubscribed.json",
         R"({"machines": [{"config": "uniform:8"}], "network": {"oversubscription": 0.5}})");
    // Calibration overlays.
    file("cal_huge_number.json", R"({"op_overhead_us": 1e400})");
    file("cal_array.json", "[1, 2]");
    file("cal_bad_profile.json", R"({"profile": "toaster"})");
    file("cal_negative.json", R"({"links": {"nvlink": {"alpha_us": -5}}})");
    file("cal_unknown.json", R"({"bogus": 1})");
    file("cal_big_alpha.json", R"({"links": {"nvlink": {"alpha_us": 1e308}}})");
    file("cal_tiny_reduce.json", R"({"devices": {"gpu": {"reduce_gbps": 1e-300}}})");
    file("cal_tiny_efficiency.json", R"({"links": {"nvlink": {"efficiency": 1e-300}}})");
    file("cal_cpu.json", R"({"profile": "cpu"})");
    // nvidia-smi topo -m and NCCL XML.
    file("smi_ok.txt", "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-3\nGPU1\tNV1\t X \t0-3\n");
    file("smi_garbage.txt", "hello world\n");
    file("smi_unknown_cell.txt", "\tGPU0\tGPU1\nGPU0\t X \tNV99999999999\nGPU1\tNV99999999999\t X \n");
    file("smi_dup_gpu.txt", "\tGPU0\tGPU0\nGPU0\t X \tNV1\nGPU0\tNV1\t X \n");
    file("smi_missing_row.txt", "\tGPU0\tGPU1\nGPU0\t X \tNV1\n");
    file("xml_garbage.xml", "not xml at all <<<>>>\n");
    file("xml_wrong_root.xml", "<notsystem/>\n");
    file("xml_no_gpu.xml", "<system version=\"1\"></system>\n");
    file("xml_unclosed.xml", "<system version=\"1\"><cpu numaid=\"0\">\n");
    file("xml_bad_bus.xml",
         "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"zz\"><gpu dev=\"0\" sm=\"70\" rank=\"0\"/></pci>"
         "</cpu></system>\n");
    file("xml_entities.xml",
         "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">]><system version=\"1\">&lol;</system>\n");
    std::string deep = "<system version=\"1\">";
    for (int i = 0; i < 10000; ++i) deep += "<cpu numaid=\"0\">";
    for (int i = 0; i < 10000; ++i) deep += "</cpu>";
    file("xml_deep.xml", deep + "</system>\n");
    // Gradient lists.
    file("fusion_empty.json", R"({"tensors": []})");
    file("fusion_negative.json", R"({"tensors": [{"name": "a", "elements": -5}]})");
    file("fusion_zero.json", R"({"tensors": [{"name": "a", "elements": 0}]})");
    file("fusion_type.json", R"({"type": "float128", "tensors": [{"name": "a", "elements": 5}]})");
    file("fusion_string.json", R"({"tensors": "abc"})");
  }

  fs::path dir_;
};

const Fixtures& fixtures() {
  static const Fixtures f;
  return f;
}

// Runs `artune ARGS` in the fixture folder under the time and memory limits; stdout is dropped.
artune_test::CliResult run_artune(const std::vector<std::string>& args) {
  const fs::path err_path = fixtures().dir() / "stderr.txt";
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on long chains of string operator+.
  std::string cmd = "cd ";
  cmd += shell_quote(fixtures().dir().string());
  cmd += " && ";
  cmd += artune_test::memory_limit_prefix(kMemoryLimitKiB);
  cmd += "exec timeout ";
  cmd += std::to_string(artune_test::sanitized_build() ? 4 * kTimeLimitS : kTimeLimitS);  // as meson's multiplier
  cmd += ' ';
  cmd += shell_quote(artune_test::artune_bin());
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " </dev/null >/dev/null 2>";
  cmd += shell_quote(err_path.string());
  artune_test::CliResult r = artune_test::run_shell(cmd);
  r.err = slurp(err_path);
  return r;
}

std::string command_text(const std::vector<std::string>& args) {
  std::string text = "artune";
  for (const auto& a : args) text += " " + (a.size() > 60 ? a.substr(0, 60) + "…" : a);
  return text;
}

// One hostile command and the names its error line must carry (flag, file, field, token).
struct Case {
  std::vector<std::string> args;
  std::vector<std::string> names;
};

void check_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const artune_test::CliResult r = run_artune(c.args);
    INFO("command: ", command_text(c.args));
    INFO("stderr: ", r.err);
    CHECK(r.status == 2);
    // Exactly one line: text, then one newline at the very end.
    CHECK(!r.err.empty());
    CHECK(r.err.find('\n') == r.err.size() - 1);
    CHECK(r.err.rfind("artune: ", 0) == 0);
    CHECK(r.err.size() <= kMaxLineBytes);
    CHECK(r.err.find("internal error") == std::string::npos);
    for (const std::string& name : c.names) CHECK_MESSAGE(r.err.find(name) != std::string::npos, "missing: ", name);
  }
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("cli_bad_input.command_line") {
  check_cases({
      {{}, {"subcommand"}},
      {{"bogus"}, {"subcommand"}},
      {{"topo"}, {"subcommand"}},
      {{"topo", "show", "--bogus"}, {"--bogus"}},
      {{"topo", "show", "-t"}, {"--topology"}},
      {{"plan"}, {"--spec"}},
      {{"simulate"}, {"--spec"}},
      {{"calibrate"}, {"--topology"}},
      {{"plan", "-s", "xring", "--segments", "abc"}, {"--segments"}},
      {{"plan", "-s", "xring", "--segments", "99999999999"}, {"--segments"}},
      // A misspelt flag is named with the closest real one.
      {{"autotune", "--maxbyte", "1M"}, {"unknown flag --maxbyte (did you mean --maxbytes?)"}},
      {{"run", "--backend", "cpu", "--itres", "3"}, {"did you mean --iters?"}},
  });
}

TEST_CASE("cli_bad_input.topology_names_and_generators") {
  check_cases({
      {{"topo", "show", "-t", "uniform:0"}, {"uniform:0"}},
      {{"topo", "show", "-t", "uniform:-3"}, {"uniform:-3"}},
      {{"topo", "show", "-t", "uniform:1x0"}, {"uniform:1x0"}},
      {{"topo", "show", "-t", "uniform:0x8"}, {"uniform:0x8"}},
      {{"topo", "show", "-t", "uniform:100000"}, {"uniform:100000"}},
      {{"topo", "show", "-t", "uniform:256x256"}, {"uniform:256x256"}},
      {{"topo", "show", "-t", "uniform:99999999999999999999"}, {"uniform:99999999999999999999"}},
      {{"topo", "show", "-t", "uniform:abc"}, {"uniform:abc"}},
      {{"topo", "show", "-t", "uniform:"}, {"uniform:"}},
      {{"topo", "show", "-t", "uniform:8x8x8"}, {"uniform:8x8x8"}},
      {{"topo", "show", "-t", "uniform:1.5"}, {"uniform:1.5"}},
      {{"topo", "show", "-t", "0xdgx1-v100"}, {"0xdgx1-v100"}},
      {{"topo", "show", "-t", "99999xdgx-h100"}, {"99999xdgx-h100"}},
      {{"topo", "show", "-t", "999999999999xdgx-h100"}, {"999999999999xdgx-h100"}},
      {{"topo", "show", "-t", "-1xdgx-h100"}, {"-1xdgx-h100"}},
      {{"topo", "show", "-t", "2xcluster-4xdgx1-v100"}, {"2xcluster-4xdgx1-v100"}},
      {{"topo", "show", "-t", "2xnosuch"}, {"2xnosuch"}},
      {{"topo", "show", "-t", "nosuch"}, {"nosuch"}},
      {{"topo", "show", "-t", ""}, {"topology"}},
      {{"topo", "show", "-t", "foo\nbar"}, {"foo\\x0abar"}},
      {{"topo", "show", "-t", repeat("y", 100000)}, {"yyyyyyyy"}},
  });
}

TEST_CASE("cli_bad_input.topology_files") {
  check_cases({
      {{"topo", "show", "-t", "nosuch.json"}, {"nosuch.json"}},
      {{"topo", "show", "-t", "adir"}, {"adir"}},
      {{"topo", "show", "-t", "empty.json"}, {"empty.json", "line 1"}},
      {{"topo", "show", "-t", "/dev/null"}, {"/dev/null"}},
      {{"topo", "show", "-t", "trunc.json"}, {"trunc.json", "line 2"}},
      {{"topo", "show", "-t", "binary.json"}, {"binary.json"}},
      {{"topo", "show", "-t", "array.json"}, {"array.json", "object"}},
      {{"topo", "show", "-t", "string.json"}, {"string.json", "object"}},
      {{"topo", "show", "-t", "number.json"}, {"number.json", "object"}},
      {{"topo", "show", "-t", "null.json"}, {"null.json", "object"}},
      {{"topo", "show", "-t", "deep.json"}, {"deep.json"}},
      {{"topo", "show", "-t", "devices_string.json"}, {"devices_string.json", "devices"}},
      {{"topo", "show", "-t", "no_devices.json"}, {"no_devices.json", "devices"}},
      {{"topo", "show", "-t", "neg_bw.json"}, {"neg_bw.json", "links[0].bandwidth"}},
      {{"topo", "show", "-t", "big_bw.json"}, {"big_bw.json", "links[0].bandwidth"}},
      {{"topo", "show", "-t", "nan_bw.json"}, {"nan_bw.json", "line 1"}},
      {{"topo", "show", "-t", "string_bw.json"}, {"string_bw.json", "links[0].bandwidth"}},
      {{"topo", "show", "-t", "neg_latency.json"}, {"neg_latency.json", "links[0].latency"}},
      {{"topo", "show", "-t", "float_lanes.json"}, {"float_lanes.json", "links[0].lanes"}},
      {{"topo", "show", "-t", "self_link.json"}, {"self_link.json", "links[0]"}},
      {{"topo", "show", "-t", "unknown_device.json"}, {"unknown_device.json", "links[0].b", "gpu9"}},
      {{"topo", "show", "-t", "dup_id.json"}, {"dup_id.json", "devices[1].id"}},
      {{"topo", "show", "-t", "disconnected.json"}, {"disconnected.json", "not connected"}},
      {{"topo", "show", "-t", "dup_link.json"}, {"dup_link.json", "links[1]"}},
      {{"topo", "show", "-t", "directed_only.json"}, {"directed_only.json", "links[0]"}},
      {{"topo", "show", "-t", "bad_kind.json"}, {"bad_kind.json", "devices[0].kind"}},
      {{"topo", "show", "-t", "unknown_field.json"}, {"unknown_field.json", "bogus"}},
      {{"topo", "show", "-t", "machine_gap.json"}, {"machine_gap.json", "machine"}},
      {{"topo", "show", "-t", "compact_gpus0.json"}, {"compact_gpus0.json", "compact.gpus"}},
      {{"topo", "show", "-t", "compact_gpus_huge.json"}, {"compact_gpus_huge.json", "compact.gpus"}},
      {{"topo", "show", "-t", "compact_gpus_string.json"}, {"compact_gpus_string.json", "compact.gpus"}},
      {{"topo", "show", "-t", "compact_asymmetric.json"}, {"compact_asymmetric.json", "compact.nvlink[1][0]"}},
      {{"topo", "show", "-t", "compact_nics_huge.json"}, {"compact_nics_huge.json", "compact.nics_per_switch"}},
      {{"topo", "show", "-t", "cluster_count_huge.json"}, {"cluster_count_huge.json", "machines[0].count"}},
      {{"topo", "show", "-t", "cluster_nested.json"}, {"cluster_nested.json", "machines[0].config"}},
      {{"topo", "show", "-t", "cluster_missing.json"}, {"cluster_missing.json", "nosuch_machine.json"}},
      {{"topo", "show", "-t", "cluster_oversubscribed.json"},
       {"cluster_oversubscribed.json", "network.oversubscription"}},
      // A bandwidth the JSON loader lets through is still refused by the topology model.
      {{"simulate", "-s", "xring", "-t", "tiny_bw.json", "-b", "1K", "-e", "1K"}, {"bandwidth"}},
  });
}

TEST_CASE("cli_bad_input.topo_import_and_discover") {
  check_cases({
      {{"topo", "import"}, {"file"}},
      {{"topo", "import", "--from", "nvidia-smi"}, {"file"}},
      {{"topo", "import", "--from", "toaster", "smi_garbage.txt"}, {"--from"}},
      {{"topo", "import", "--from", "nvidia-smi", "nosuch.txt"}, {"nosuch.txt"}},
      {{"topo", "import", "--from", "nvidia-smi", "adir"}, {"adir"}},
      {{"topo", "import", "--from", "nvidia-smi", "empty.json"}, {"empty.json"}},
      {{"topo", "import", "--from", "nvidia-smi", "smi_garbage.txt"}, {"smi_garbage.txt", "line"}},
      {{"topo", "import", "--from", "nvidia-smi", "smi_unknown_cell.txt"}, {"smi_unknown_cell.txt", "line 2"}},
      {{"topo", "import", "--from", "nvidia-smi", "smi_dup_gpu.txt"}, {"smi_dup_gpu.txt", "GPU0"}},
      {{"topo", "import", "--from", "nvidia-smi", "smi_missing_row.txt"}, {"smi_missing_row.txt", "GPU1"}},
      {{"topo", "import", "--from", "nvidia-smi", "binary.json"}, {"binary.json"}},
      {{"topo", "import", "--from", "nvidia-smi", "smi_ok.txt", "--out", "adir"}, {"--out", "adir"}},
      {{"topo", "import", "--from", "nccl-xml", "nosuch.xml"}, {"nosuch.xml"}},
      {{"topo", "import", "--from", "nccl-xml", "adir"}, {"adir"}},
      {{"topo", "import", "--from", "nccl-xml", "empty.json"}, {"empty.json"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_garbage.xml"}, {"xml_garbage.xml", "line 1"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_wrong_root.xml"}, {"xml_wrong_root.xml", "<notsystem>"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_no_gpu.xml"}, {"xml_no_gpu.xml", "GPU"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_unclosed.xml"}, {"xml_unclosed.xml"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_bad_bus.xml"}, {"xml_bad_bus.xml", "busid"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_entities.xml"}, {"xml_entities.xml", "DOCTYPE"}},
      {{"topo", "import", "--from", "nccl-xml", "xml_deep.xml"}, {"xml_deep.xml", "deeper"}},
      {{"topo", "import", "--from", "nccl-xml", "binary.json"}, {"binary.json"}},
      {{"topo", "discover", "--hwloc-xml", "nosuch.xml"}, {"--hwloc-xml"}},
      {{"topo", "discover", "--hwloc-xml", "adir"}, {"--hwloc-xml"}},
      {{"topo", "discover", "--hwloc-xml", "empty.json"}, {"empty.json"}},
      {{"topo", "discover", "--hwloc-xml", "xml_garbage.xml"}, {"xml_garbage.xml"}},
      {{"topo", "discover", "--nic-bandwidth", "0"}, {"--nic-bandwidth"}},
      {{"topo", "discover", "--nic-bandwidth", "-1"}, {"--nic-bandwidth"}},
      {{"topo", "discover", "--net-latency", "-1"}, {"--net-latency"}},
      {{"topo", "discover", "--oversubscription", "0.5"}, {"--oversubscription"}},
  });
}

TEST_CASE("cli_bad_input.plan") {
  check_cases({
      {{"plan", "-s", ""}, {"--spec"}},
      {{"plan", "-s", "xring#0"}, {"--spec", "xring#0"}},
      {{"plan", "-s", "xring#-1"}, {"--spec", "xring#-1"}},
      {{"plan", "-s", "xring#"}, {"--spec", "xring#"}},
      {{"plan", "-s", "xring#2#3"}, {"--spec", "xring#2#3"}},
      {{"plan", "-s", "xring#99999999999999999999"}, {"--spec"}},
      {{"plan", "-s", "xring#99"}, {"xring#99", "subchunks"}},
      {{"plan", "-s", "hiercopy", "-t", "pcie-8gpu"}, {"hiercopy", "pcie-8gpu"}},
      {{"plan", "-s", "hiercopy#100000"}, {"--spec", "hiercopy#100000"}},
      {{"plan", "-s", "mring#50"}, {"mring#50"}},
      {{"plan", "-s", "mring#0"}, {"--spec", "mring#0"}},
      {{"plan", "-s", ":"}, {"--spec"}},
      {{"plan", "-s", "xring:1K:"}, {"--spec"}},
      {{"plan", "-s", ":1K:xring"}, {"--spec"}},
      {{"plan", "-s", "xring:0:nccl"}, {"--spec", "limit '0'"}},
      {{"plan", "-s", "xring:-5:nccl"}, {"--spec", "limit '-5'"}},
      {{"plan", "-s", "xring:1K:nccl:512:rechd"}, {"--spec", "limit '512'"}},
      {{"plan", "-s", "xring:abc:nccl"}, {"--spec", "limit 'abc'"}},
      {{"plan", "-s", "xring:99999999999G:nccl"}, {"--spec", "99999999999G"}},
      {{"plan", "-s", "xring/nccl/rechd"}, {"--spec"}},
      {{"plan", "-s", "/xring"}, {"--spec"}},
      {{"plan", "-s", "nccl/nccl"}, {"--spec", "nccl/nccl"}},
      {{"plan", "-s", "bogus"}, {"--spec", "bogus"}},
      {{"plan", "-s", "xring\nbad"}, {"--spec", "xring\\nbad"}},
      {{"plan", "-s", "tree#3"}, {"--spec", "tree#3"}},
      {{"plan", "-s", repeat("x", 100000)}, {"--spec", "1024 characters"}},
      {{"plan", "-s", repeat("xring:1K:", 5000) + "xring"}, {"--spec"}},
      {{"plan", "-s", "xring", "-t", "no_gpu.json"}, {"no_gpu"}},
      {{"plan", "-s", "xring", "-t", "nosuch.json"}, {"nosuch.json"}},
      {{"plan", "-s", "xring", "--count", "0"}, {"--count"}},
      {{"plan", "-s", "xring", "--count", "-1"}, {"--count"}},
      {{"plan", "-s", "xring", "--count", "1e9"}, {"--count"}},
      {{"plan", "-s", "xring", "--count", "1.5"}, {"--count"}},
      {{"plan", "-s", "xring", "--count", ""}, {"--count"}},
      {{"plan", "-s", "xring", "--count", "99999999999G"}, {"--count"}},
      {{"plan", "-s", "xring", "--count", "9223372036854775807"}, {"--count"}},
      {{"plan", "-s", "xring", "--count", "512T", "-d", "double"}, {"--count"}},
      // Plans that would need minutes and gigabytes are refused before they are built.
      {{"plan", "-s", "xring#8", "--count", "1G", "-t", "128xdgx-h100"}, {"--spec", "xring#8", "ops"}},
      {{"plan", "-s", "xring", "-t", "128xdgx-h100"}, {"--spec", "xring", "ops"}},
      {{"plan", "-s", "mring", "-t", "128xdgx-h100"}, {"--spec", "mring", "ops"}},
      {{"plan", "-s", "2d", "-t", "512xdgx-h100"}, {"--spec", "2d", "ops"}},
      {{"plan", "-s", "pscpu#65536", "-t", "128xdgx-h100"}, {"--spec", "pscpu#65536", "ops"}},
      {{"plan", "-s", "hiercopy#65536"}, {"--spec", "hiercopy#65536", "ops"}},
      {{"plan", "-s", "nccl", "-t", "4096xdgx2"}, {"4096xdgx2", "ranks"}},
      {{"plan", "-s", "xring#16", "-t", "dgx2", "--segments", "4096"}, {"--segments"}},
      {{"plan", "-s", "xring", "--segments", "0"}, {"--segments"}},
      {{"plan", "-s", "xring", "--segments", "-1"}, {"--segments"}},
      {{"plan", "-s", "xring", "--segments", "100000"}, {"--segments"}},
      {{"plan", "-s", "xring", "-o", "xor"}, {"-o/--op", "xor"}},
      {{"plan", "-s", "xring", "-o", ""}, {"-o/--op"}},
      {{"plan", "-s", "xring", "-d", "float128"}, {"-d/--type", "float128"}},
      {{"plan", "-s", "xring", "--gpu-perm", "0,0,1,2,3,4,5,6"}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", "0,1,2,3,4,5,6,8"}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", "0,1,2,3,4,5,6,-1"}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", "0,1,2"}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", "a,b"}, {"--gpu-perm", "a,b"}},
      {{"plan", "-s", "xring", "--gpu-perm", "0,,1"}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", "0,1,2,3,4,5,6,7,"}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", ""}, {"--gpu-perm"}},
      {{"plan", "-s", "xring", "--gpu-perm", "99999999999,1,2,3,4,5,6,7"}, {"--gpu-perm"}},
      {{"plan", "-s", "nccl", "--gpu-perm", "5,5"}, {"--gpu-perm"}},
      {{"plan", "-s", "2d", "-t", "2xdgx1-v100", "--gpu-perm", "0,0,1,2,3,4,5,6"}, {"--gpu-perm"}},
      {{"plan", "-s", "shuffle", "--gather", "nosuch"}, {"--gather", "nosuch"}},
      {{"plan", "-s", "shuffle", "--gather", ""}, {"--gather"}},
      {{"plan", "-s", "shuffle", "--gather", "cpu0,"}, {"--gather"}},
      {{"plan", "-s", "shuffle", "--gather", "pcisw0"}, {"--gather", "pcisw0"}},
      {{"plan", "-s", "shuffle", "--gather", "nic0"}, {"--gather", "nic0"}},
      {{"plan", "-s", "xring", "--participants", "nosuch"}, {"--participants", "nosuch"}},
      {{"plan", "-s", "xring", "--participants", ""}, {"--participants"}},
      {{"plan", "-s", "xring", "--participants", "gpu0,gpu0"}, {"participants[1]", "gpu0"}},
      {{"plan", "-s", "xring", "--participants", "pcisw0,gpu1"}, {"participants[0]", "pcisw0"}},
  });
}

TEST_CASE("cli_bad_input.simulate") {
  const std::vector<std::string> base = {"simulate", "-s", "xring", "-t", "uniform:4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  check_cases({
      {with({"-b", "0"}), {"-b/--minbytes"}},
      {with({"-b", "-1"}), {"-b/--minbytes"}},
      {with({"-b", "1e9"}), {"-b/--minbytes"}},
      {with({"-e", "99999999999G"}), {"-e/--maxbytes"}},
      {with({"-b", "18446744073709551615", "-e", "18446744073709551615"}), {"-b/--minbytes"}},
      {with({"-b", "1K", "-e", "16383T"}), {"-e/--maxbytes"}},
      {with({"-b", "3", "-e", "3"}), {"-b/--minbytes", "multiple"}},
      {with({"-b", "8", "-e", "12", "-f", "1.5", "-d", "double"}), {"-e/--maxbytes", "multiple"}},
      {with({"-b", "1M", "-e", "1K"}), {"-e/--maxbytes", "-b/--minbytes"}},
      {with({"-b", "1K", "-e", "1M", "-f", "1"}), {"-f/--stepfactor"}},
      {with({"-b", "1K", "-e", "1M", "-f", "0"}), {"-f/--stepfactor"}},
      {with({"-b", "1K", "-e", "1M", "-f", "-2"}), {"-f/--stepfactor"}},
      {with({"-b", "1K", "-e", "1M", "-f", "NaN"}), {"-f/--stepfactor"}},
      {with({"-b", "1K", "-e", "1M", "-f", "inf"}), {"-f/--stepfactor"}},
      {with({"-b", "1K", "-e", "1M", "-f", "abc"}), {"--stepfactor"}},
      {with({"-b", "1", "-e", "16T", "-f", "1.001"}), {"-f/--stepfactor"}},
      {with({"-d", "float128"}), {"-d/--datatype", "float128"}},
      {with({"-o", "xor"}), {"-o/--op", "xor"}},
      {with({"--segments", "0"}), {"--segments"}},
      {with({"--segments", "100000"}), {"--segments"}},
      {with({"--backend", "toaster"}), {"--backend", "toaster"}},
      {with({"--backend", ""}), {"--backend"}},
      {with({"--gpu-perm", "0,0,1,2"}), {"--gpu-perm"}},
      {with({"--gpu-perm", "0,1,2,3,"}), {"--gpu-perm"}},
      {with({"--gpu-perm", ""}), {"--gpu-perm"}},
      {with({"--launch", "threads"}), {"--launch", "threads"}},
      {with({"--launch", ""}), {"--launch"}},
      {with({"--launch", "thread:0"}), {"--launch", "thread:0"}},
      {with({"--launch", "thread:5"}), {"--launch", "thread:5", "4 GPUs"}},
      {with({"--launch", "thread:x"}), {"--launch", "thread:x"}},
      {with({"--launch", "thread:99999999999"}), {"--launch"}},
      {with({"--gather", "nosuch"}), {"--gather", "nosuch"}},
      {with({"--gather", "nic0"}), {"--gather", "nic0"}},
      {with({"--calibration", "nosuch.json"}), {"--calibration", "nosuch.json"}},
      {with({"--calibration", ""}), {"--calibration"}},
      {with({"--calibration", "adir"}), {"--calibration", "adir"}},
      {with({"--calibration", "empty.json"}), {"--calibration", "empty.json", "line 1"}},
      {with({"--calibration", "trunc.json"}), {"--calibration", "trunc.json", "line 2"}},
      {with({"--calibration", "deep.json"}), {"--calibration", "deep.json"}},
      {with({"--calibration", "/dev/zero"}), {"--calibration", "/dev/zero"}},
      {with({"--calibration", "cal_huge_number.json"}), {"cal_huge_number.json", "1e400"}},
      {with({"--calibration", "cal_array.json"}), {"cal_array.json", "must be an object, not an array"}},
      {with({"--calibration", "cal_bad_profile.json"}), {"cal_bad_profile.json", "profile"}},
      {with({"--calibration", "cal_negative.json"}), {"cal_negative.json", "links.nvlink.alpha_us"}},
      {with({"--calibration", "cal_unknown.json"}), {"cal_unknown.json", "bogus"}},
      {with({"--calibration", "cal_big_alpha.json"}), {"cal_big_alpha.json", "links.nvlink.alpha_us"}},
      {with({"--calibration", "cal_tiny_reduce.json"}), {"cal_tiny_reduce.json", "devices.gpu.reduce_gbps"}},
      {with({"--calibration", "cal_tiny_efficiency.json"}), {"cal_tiny_efficiency.json", "links.nvlink.efficiency"}},
      {with({"--calibration", "cal_cpu.json", "--backend", "nccl"}), {"--calibration", "--backend"}},
      {{"simulate", "-s", "xring#8", "-b", "1G", "-e", "1G", "--segments", "4096", "-t", "dgx2"}, {"--segments"}},
      {{"simulate", "-s", "xring", "-b", "1K", "-e", "1M", "-t", "128xdgx-h100"}, {"--spec", "ops"}},
      {{"simulate", "-s", "tree", "-b", "1K", "-e", "1K", "-t", "4096xdgx2"}, {"4096xdgx2", "ranks"}},
      {{"simulate", "-s", "hiercopy", "-t", "pcie-8gpu"}, {"hiercopy"}},
      {{"simulate", "-s", "xring", "-t", "uniform:0"}, {"uniform:0"}},
  });
}

TEST_CASE("cli_bad_input.run") {
  const std::vector<std::string> base = {"run", "-t", "uniform:4", "-b", "1K", "-e", "1K"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  check_cases({
      {with({"--backend", "toaster"}), {"--backend", "toaster"}},
      {with({"--backend", ""}), {"--backend"}},
      {{"run", "-t", "uniform:4", "-b", "0"}, {"-b/--minbytes"}},
      {{"run", "-t", "uniform:4", "-b", "1M", "-e", "1K"}, {"-e/--maxbytes"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1M", "-f", "inf"}, {"-f/--stepfactor"}},
      {{"run", "-t", "uniform:4", "-b", "16383T", "-e", "16383T"}, {"-b/--minbytes"}},
      {with({"-w", "-1"}), {"-w/--warmup_iters"}},
      {with({"-c", "-1"}), {"-c/--check"}},
      {with({"-n", "abc"}), {"--iters"}},
      {with({"--timeout", "0"}), {"--timeout"}},
      {with({"--timeout", "-1"}), {"--timeout"}},
      {with({"--timeout", "nan"}), {"--timeout"}},
      {with({"-d", "float128"}), {"-d/--datatype"}},
      {with({"-o", "xor"}), {"-o/--op"}},
      {with({"--segments", "0"}), {"--segments"}},
      {with({"--segments", "100000"}), {"--segments"}},
      {with({"--gpu-perm", "0,0,1,2"}), {"--gpu-perm"}},
      {with({"--gpu-perm", "a,b"}), {"--gpu-perm"}},
      {with({"--gpu-perm", "0,1,2,3,"}), {"--gpu-perm"}},
      {with({"-s", ""}), {"--spec"}},
      {with({"-s", "bogus"}), {"--spec", "bogus"}},
      {with({"-s", "xring#99"}), {"xring#99"}},
      {{"run", "-t", "nosuch", "-b", "1K", "-e", "1K"}, {"nosuch"}},
      {with({"--table", "nosuch.json"}), {"nosuch.json"}},
      {with({"--table", "empty.json"}), {"empty.json"}},
      {with({"--table", "trunc.json"}), {"trunc.json"}},
      {with({"--table", "array.json"}), {"array.json"}},
      {with({"--table", "array.json", "-s", "xring"}), {"--spec", "--table"}},
  });
}

TEST_CASE("cli_bad_input.run_table") {
  // A real decision table, then copies of it broken one field at a time.
  const fs::path dir = fixtures().dir();
  const artune_test::CliResult made =
      run_artune({"autotune", "-t", "uniform:4", "-b", "1K", "-e", "64K", "-q", "--out", "table.json"});
  REQUIRE(made.status == 0);
  const json table = json::parse(slurp(dir / "table.json"));
  auto broken = [&](const std::string& name, auto&& change) {
    json doc = table;
    change(doc);
    write(dir / name, doc.dump());
    return name;
  };
  const std::string no_ranges = broken("t_no_ranges.json", [](json& d) { d["ranges"] = json::array(); });
  const std::string min_max = broken("t_min_max.json", [](json& d) { d["ranges"][0]["min_bytes"] = 1 << 20; });
  const std::string seg0 = broken("t_seg0.json", [](json& d) { d["ranges"][0]["plan"]["segments"] = 0; });
  const std::string schema = broken("t_schema.json", [](json& d) { d["schema_version"] = 999; });
  const std::string ranges_string = broken("t_ranges_string.json", [](json& d) { d["ranges"] = "x"; });
  const std::string no_topology = broken("t_no_topology.json", [](json& d) { d.erase("topology"); });
  const std::string type = broken("t_type.json", [](json& d) { d["type"] = "float128"; });
  const std::string spec = broken("t_spec.json", [](json& d) { d["ranges"][0]["plan"]["spec"] = "bogus"; });
  check_cases({
      {{"run", "-t", "uniform:8", "-b", "1K", "-e", "1K", "--table", "table.json"}, {"table.json", "uniform:8"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", no_ranges}, {no_ranges, "ranges"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", min_max}, {min_max, "ranges[0]"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", seg0}, {seg0, "ranges[0].plan.segments"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", schema}, {schema, "schema_version"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", ranges_string}, {ranges_string, "ranges"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", no_topology}, {no_topology, "topology"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", type}, {type, "type"}},
      {{"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", spec}, {spec, "ranges[0].plan"}},
  });
}

TEST_CASE("cli_bad_input.autotune") {
  const std::vector<std::string> base = {"autotune", "-t", "uniform:4", "-b", "1K", "-e", "1K", "-q"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  check_cases({
      {{"autotune", "-t", "uniform:0", "-q"}, {"uniform:0"}},
      {{"autotune", "-t", "nosuch", "-q"}, {"nosuch"}},
      {{"autotune", "-t", "uniform:4", "-b", "0", "-q"}, {"-b/--minbytes"}},
      {{"autotune", "-t", "uniform:4", "-b", "1K", "-e", "1M", "-f", "1", "-q"}, {"-f/--stepfactor"}},
      {{"autotune", "-t", "uniform:4", "-b", "1K", "-e", "1M", "-f", "inf", "-q"}, {"-f/--stepfactor"}},
      {{"autotune", "-t", "uniform:4", "-b", "1M", "-e", "1K", "-q"}, {"-e/--maxbytes"}},
      {with({"-d", "float128"}), {"-d/--datatype"}},
      {with({"--op", "xor"}), {"--op"}},
      {with({"--measure", "toaster"}), {"--measure"}},
      {with({"--top", "0", "--measure", "cpu"}), {"--top"}},
      {with({"--iters", "0", "--measure", "cpu"}), {"--iters"}},
      {with({"--measure-max", "abc", "--measure", "cpu"}), {"--measure-max"}},
      {with({"--calibration", "nosuch.json"}), {"nosuch.json"}},
      {with({"--calibration", "empty.json"}), {"empty.json"}},
      {with({"--calibration", "cal_negative.json"}), {"cal_negative.json", "links.nvlink.alpha_us"}},
      {with({"--calibration", "cal_big_alpha.json"}), {"cal_big_alpha.json", "links.nvlink.alpha_us"}},
      {with({"--profile", "toaster"}), {"--profile"}},
      {with({"--launch", "graphs"}), {"--launch", "graphs"}},
      {with({"--launch", "thread:9"}), {"--launch", "thread:9"}},
      {with({"--fusion", "nosuch.json"}), {"nosuch.json"}},
      {with({"--fusion", "empty.json"}), {"empty.json"}},
      {with({"--fusion", "array.json"}), {"array.json"}},
      {with({"--fusion", "fusion_empty.json"}), {"fusion_empty.json", "tensors"}},
      {with({"--fusion", "fusion_negative.json"}), {"fusion_negative.json", "tensors[0].elements"}},
      {with({"--fusion", "fusion_zero.json"}), {"fusion_zero.json", "tensors[0]"}},
      {with({"--fusion", "fusion_type.json"}), {"fusion_type.json", "type"}},
      {with({"--fusion", "fusion_string.json"}), {"fusion_string.json", "tensors"}},
      {with({"--out", "adir"}), {"adir"}},
      {with({"--report", "empty.json"}), {"--report"}},
      {with({"--max-cycles", "0"}), {"--max-cycles"}},
      {with({"--segments", "0"}), {"--segments"}},
      {with({"--segments", "100000"}), {"--segments"}},
      {with({"--segments", "a,b"}), {"--segments"}},
      {with({"--segments", ""}), {"--segments"}},
      {with({"--segments", "1,"}), {"--segments"}},
  });
}

TEST_CASE("cli_bad_input.calibrate") {
  check_cases({
      {{"calibrate", "-t", "nosuch"}, {"nosuch"}},
      {{"calibrate", "-t", "uniform:0"}, {"uniform:0"}},
      {{"calibrate", "-t", "uniform:2", "--backend", "toaster"}, {"--backend"}},
      {{"calibrate", "-t", "uniform:2", "--backend", ""}, {"--backend"}},
      {{"calibrate", "-t", "uniform:2", "-d", "float128"}, {"-d/--datatype"}},
      {{"calibrate", "-t", "uniform:2", "-b", "0"}, {"-b/--minbytes"}},
      {{"calibrate", "-t", "uniform:2", "-b", "1M", "-e", "1K"}, {"-e/--maxbytes"}},
      {{"calibrate", "-t", "uniform:2", "-b", "4K", "-e", "4K"}, {"-b/-e/-f"}},
      {{"calibrate", "-t", "uniform:2", "-b", "1K", "-e", "1M", "-f", "1"}, {"-f/--stepfactor"}},
      {{"calibrate", "-t", "uniform:2", "-b", "1K", "-e", "1M", "-f", "inf"}, {"-f/--stepfactor"}},
      {{"calibrate", "-t", "uniform:2", "--iters", "0"}, {"--iters"}},
      {{"calibrate", "-t", "uniform:1"}, {"uniform:1"}},
      {{"calibrate", "-t", "no_gpu.json"}, {"no_gpu"}},
  });
}
