// `artune simulate` through the built binary: table, JSON (checked against the
// library's own simulation), --links, calibration overlays, exit codes.

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/simulator/simulator.hpp"
#include "tests/cli_runner.hpp"
#include "artune/topology/io/io.hpp"

using json = nlohmann::json;
using namespace artune;

namespace {

using Result = artune_test::CliResult;
using artune_test::run_artune;

std::string temp_path(const char* tag) {
  std::string pattern = std::string("/tmp/artune_cli_sim_") + tag + "_XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const int fd = mkstemp(buf.data());
  REQUIRE(fd >= 0);
  close(fd);
  return buf.data();
}

std::string write_file(const char* tag, const std::string& text) {
  const std::string path = temp_path(tag);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("cli_simulate.table") {
  const Result r = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "-b", "1K", "-e", "4K"});
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("time(us)") != std::string::npos);
  CHECK(r.out.find("busbw(GB/s)") != std::string::npos);
  CHECK(r.out.find("bottleneck") != std::string::npos);
  for (const char* size : {"  1024  ", "  2048  ", "  4096  "}) CHECK(r.out.find(size) != std::string::npos);
  CHECK(r.out.find("float") != std::string::npos);
  CHECK(r.out.find("sum") != std::string::npos);
  CHECK(r.out.find("(nvlink)") != std::string::npos);
}

TEST_CASE("cli_simulate.json_matches_library") {
  const Result r = run_artune({"simulate", "-t", "dgx1-v100", "-s", "rechd", "-b", "1M", "-e", "4M", "-d", "double",
                               "-o", "avg", "--segments", "2", "--json"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc["topology"] == "dgx1-v100");
  CHECK(doc["backend"] == "nccl");
  CHECK(doc["type"] == "double");
  CHECK(doc["redop"] == "avg");
  CHECK(doc["ranks"] == 8);
  REQUIRE(doc["results"].size() == 3);
  const Topology t = load_topology("dgx1-v100");
  for (const json& row : doc["results"]) {
    BuildOptions o;
    o.count = row["count"].get<std::int64_t>();
    o.reduce_op = ReduceOp::kAvg;
    o.segments = 2;
    CHECK(row["size"].get<std::int64_t>() == o.count * 8);
    const SimResult s = simulate(build_plan(t, "rechd", o), t, CostModel::defaults(), 8);
    CHECK(row["time_us"].get<double>() == s.time_us);
    CHECK(row["busbw_gbps"].get<double>() == s.busbw_gbps);
    CHECK(row["bottleneck"] == link_name(t, s.bottleneck_link));
  }
  CHECK_FALSE(doc.contains("links"));
}

TEST_CASE("cli_simulate.links_and_bottleneck") {
  const Result r = run_artune({"simulate", "-t", "pcie-8gpu", "-s", "xring", "-b", "64M", "-e", "64M", "--links"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("(smp)") != std::string::npos);
  CHECK(r.out.find("links at 67108864 bytes") != std::string::npos);
  CHECK(r.out.find("util(%)") != std::string::npos);
  const Result j =
      run_artune({"simulate", "-t", "pcie-8gpu", "-s", "xring", "-b", "64M", "-e", "64M", "--links", "--json"});
  REQUIRE(j.status == 0);
  const json doc = json::parse(j.out);
  CHECK(doc["results"][0]["bottleneck"].get<std::string>().find("(smp)") != std::string::npos);
  REQUIRE(doc["links"]["links"].size() > 0);
  CHECK(doc["links"]["size"] == 67108864);
  CHECK(doc["links"]["links"][0]["kind"] == "smp");  // most utilised first
  // When each link first and last carried data: the busy time falls between them, within the run.
  CHECK(r.out.find("first(us)    last(us)   idle(us)") != std::string::npos);
  for (const json& l : doc["links"]["links"]) {
    const double first = l["first_busy_us"], last = l["last_busy_us"], busy = l["busy_us"];
    CHECK(first >= 0);
    CHECK(last <= doc["results"][0]["time_us"].get<double>() + 1e-6);
    CHECK(busy <= last - first + 1e-6);
  }
}

TEST_CASE("cli_simulate.critical_path") {
  // xring on 4 GPUs in 2 segments at 1 MiB: three reduce hops (the last one's 2 segments fold into one run),
  // then three copy hops of the all-gather, each step started by the one before.
  const std::vector<std::string> args = {"simulate", "-t", "uniform:4", "-s", "xring", "--segments", "2",
                                         "-b",       "1M", "-e", "1M",        "--critical-path"};
  const Result r = run_artune(args);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("# critical path at 1048576 bytes") != std::string::npos);
  CHECK(r.out.find("7 steps in 6 runs") != std::string::npos);
  CHECK(r.out.find("reduce  gpu3 -> gpu0") != std::string::npos);
  CHECK(r.out.find("copy    gpu2 -> gpu3              gpu2->gpu3 (nvlink)") != std::string::npos);
  std::vector<std::string> with_json = args;
  with_json.push_back("--json");
  const Result j = run_artune(with_json);
  REQUIRE(j.status == 0);
  const json doc = json::parse(j.out);
  const json& path = doc["critical_path"];
  CHECK(path["size"] == 1048576);
  CHECK(path["steps"] == 7);
  REQUIRE(path["runs"].size() == 6);
  std::vector<std::string> ops;
  int steps = 0;
  for (const json& run : path["runs"]) {
    ops.push_back(run["op"]);
    steps += run["steps"].get<int>();
  }
  CHECK(ops == std::vector<std::string>{"reduce", "reduce", "reduce", "copy", "copy", "copy"});
  CHECK(steps == 7);
  CHECK(path["runs"][2]["steps"] == 2);
  CHECK(path["runs"][2]["from"] == "gpu3");
  CHECK(path["runs"][2]["to"] == "gpu0");
  CHECK(path["runs"][0]["start_us"] == 0.0);
  CHECK(path["runs"][5]["end_us"] == doc["results"][0]["time_us"]);
  for (std::size_t k = 1; k < path["runs"].size(); ++k) {
    CHECK(path["runs"][k]["start_us"] == path["runs"][k - 1]["end_us"]);
  }
  CHECK(path["runs"][5]["limited_by"] == "gpu2->gpu3 (nvlink)");
  // Without the flag, no path in either form.
  const Result plain = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "-b", "1M", "-e", "1M", "--json"});
  REQUIRE(plain.status == 0);
  CHECK_FALSE(json::parse(plain.out).contains("critical_path"));
}

TEST_CASE("cli_simulate.backend_and_calibration") {
  auto time_of = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"simulate", "-t", "uniform:4", "-s", "xring", "-b", "1K", "-e", "1K", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run_artune(args);
    REQUIRE(r.status == 0);
    return json::parse(r.out)["results"][0]["time_us"].get<double>();
  };
  const double nccl = time_of({});
  CHECK(time_of({"--backend", "cpu"}) != nccl);
  const std::string slow = write_file("slow", R"({"op_overhead_us": 100})");
  CHECK(time_of({"--calibration", slow}) > nccl + 100);
  const std::string cpu = write_file("cpu", R"({"profile": "cpu"})");
  CHECK(time_of({"--calibration", cpu}) == time_of({"--backend", "cpu"}));
  const Result mismatch =
      run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "--calibration", cpu, "--backend", "nccl"});
  CHECK(mismatch.status == 2);
  CHECK(mismatch.err.find("--calibration") != std::string::npos);
  const std::string bad = write_file("bad", R"({"links": {"nvlink": {"efficiency": 2}}})");
  const Result b = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "--calibration", bad});
  CHECK(b.status == 2);
  CHECK(b.err.find(bad + ": links.nvlink.efficiency: must be in (0, 1]") != std::string::npos);
  for (const auto& p : {slow, cpu, bad}) std::remove(p.c_str());
}

TEST_CASE("cli_simulate.op_limit_refused_before_building") {
  // 1024 ranks: the default sweep's smaller sizes fit the op limit, a larger one does not. Every size is checked
  // in closed form first, so the refusal comes before any plan is built, well within 3 s of CPU time (building,
  // verifying and simulating the smaller sizes first took about 6 s).
  const Result r = artune_test::run_shell("ulimit -t 3 && " + artune_test::shell_quote(artune_test::artune_bin()) +
                                          " simulate -t 128xdgx-h100 -s xring 2>&1");
  CHECK(r.status == 2);
  CHECK(r.out ==
        "artune: --spec xring: the plan over 1024 ranks would hold 1047552 ops, more than artune's limit of 524288 "
        "ops per plan (use fewer participants or subchunks, or a hierarchical spec such as 2d)\n");
}

TEST_CASE("cli_simulate.op_limit_of_a_hierarchical_spec_suggests_no_hierarchy") {
  // 2d over 512 machines is already hierarchical: the refusal does not send the user to "a hierarchical spec".
  const Result r = artune_test::run_shell(artune_test::shell_quote(artune_test::artune_bin()) +
                                          " simulate -t 512xdgx-h100 -s 2d -b 1M -e 1M 2>&1");
  CHECK(r.status == 2);
  CHECK(r.out.find("more than artune's limit of 524288 ops per plan (use fewer participants or subchunks)\n") !=
        std::string::npos);
  CHECK(r.out.find("such as 2d") == std::string::npos);
}

TEST_CASE("cli_simulate.bad_input") {
  const Result odd = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "-b", "6", "-e", "1K"});
  CHECK(odd.status == 2);
  CHECK(odd.err.find("-b/--minbytes") != std::string::npos);
  const Result dbl =
      run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "-b", "8", "-e", "12", "-f", "1.5", "-d", "double"});
  CHECK(dbl.status == 2);
  CHECK(dbl.err.find("-e/--maxbytes: size 12 is not a multiple of the double element size (8 bytes)") !=
        std::string::npos);
  const Result backend = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "--backend", "gloo"});
  CHECK(backend.status == 2);
  CHECK(backend.err.find("--backend") != std::string::npos);
  const Result spec = run_artune({"simulate", "-t", "uniform:4", "-s", "xrnig"});
  CHECK(spec.status == 2);
  const Result missing = run_artune({"simulate", "-t", "uniform:4"});
  CHECK(missing.status == 2);
  const Result segments = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "--segments", "0"});
  CHECK(segments.status == 2);
  CHECK(segments.err.find("--segments") != std::string::npos);
  const Result file =
      run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "--calibration", "/nonexistent/c.json"});
  CHECK(file.status == 2);
  const Result help = run_artune({"simulate", "--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("--links") != std::string::npos);
  CHECK(help.out.find("--calibration") != std::string::npos);
}

TEST_CASE("cli_simulate.nccl_algorithm_protocol_channels") {
  // --json names NCCL's algorithm, protocol and channels for every group op; the table has a column for it.
  const Result r = run_artune(
      {"simulate", "-t", "dgx1-v100", "-s", "nccl", "-b", "1K", "-e", "1G", "-f", "1024", "--json", "--links"});
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  REQUIRE(doc["results"].size() == 3);
  CHECK(doc["results"][0]["nccl"][0]["algorithm"] == "ring");
  CHECK(doc["results"][0]["nccl"][0]["protocol"] == "ll");
  CHECK(doc["results"][2]["nccl"][0]["protocol"] == "simple");
  CHECK(doc["results"][2]["nccl"][0]["channels"] == 6);
  CHECK(doc["links"]["nccl"][0]["channels"] == 6);
  const Result text = run_artune({"simulate", "-t", "dgx-h100", "-s", "nccl", "-b", "1G", "-e", "1G", "--links"});
  REQUIRE(text.status == 0);
  CHECK(text.out.find("nccl(algo/proto/ch)") != std::string::npos);
  CHECK(text.out.find("nvls/simple/8") != std::string::npos);
  CHECK(text.out.find("# op 0: NCCL nvls / simple on 8 channels") != std::string::npos);
  // A forced algorithm NCCL does not have on the machine is bad input naming the spec.
  const Result nvls = run_artune({"simulate", "-t", "dgx1-v100", "-s", "nccl.nvls", "-b", "1M", "-e", "1M"});
  CHECK(nvls.status == 2);
  CHECK(nvls.err.find("spec 'nccl.nvls'") != std::string::npos);
  const Result proto = run_artune({"simulate", "-t", "dgx1-v100", "-s", "nccl.ring.ll64"});
  CHECK(proto.status == 2);
  CHECK(proto.err.find("unknown NCCL protocol 'll64'") != std::string::npos);
  // plan --json lists the channels NCCL would use.
  const Result plan = run_artune({"plan", "-t", "2xdgx1-v100", "-s", "nccl.ring", "--count", "1M", "--json"});
  REQUIRE(plan.status == 0);
  const json p = json::parse(plan.out);
  CHECK(p["ops"][0]["algo"] == "ring");
  CHECK(p["nccl"][0]["channels"] == 4);
  CHECK(p["nccl"][0]["rings"].size() == 4);
  CHECK(p["nccl"][0]["rings"][0]["nics"].size() == 2);
}

TEST_CASE("cli_simulate.nccl_version") {
  // --nccl-version: NCCL's choice as that release's cost table makes it. On 3 × 8 H100 at 1 MiB NCCL 2.21 picks
  // NVLSTree where 2.28.9 picks Tree/LL128 (nccl.releases_choose_with_their_own_tables).
  const Result old = run_artune({"simulate", "-t", "3xdgx-h100", "-s", "nccl", "-b", "1M", "-e", "1M",
                                 "--nccl-version", "2.21.5"});
  REQUIRE(old.status == 0);
  CHECK(old.out.find("segments 1, NCCL 2.21.5's choice\n") != std::string::npos);
  CHECK(old.out.find("nvlstree/simple/8") != std::string::npos);
  const Result now = run_artune({"simulate", "-t", "3xdgx-h100", "-s", "nccl", "-b", "1M", "-e", "1M", "--json"});
  REQUIRE(now.status == 0);
  const json doc = json::parse(now.out);
  CHECK(doc["nccl_release"] == "2.28.9");
  CHECK(doc["results"][0]["nccl"][0]["algorithm"] == "tree");
  for (const char* bad : {"2.17", "latest", ""}) {
    CAPTURE(bad);
    const Result r = run_artune({"simulate", "-t", "dgx-h100", "-s", "nccl", "-b", "8", "-e", "8", "--nccl-version", bad});
    CHECK(r.status == 2);
    CHECK(r.err.rfind("artune: --nccl-version: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  const Result at = run_artune({"autotune", "-t", "3xdgx-h100", "-b", "1M", "-e", "1M", "--nccl-version", "2.21"});
  CHECK(at.status == 0);
  CHECK(at.out.find(", NCCL 2.21.0's choice (--nccl-version)\n") != std::string::npos);
  CHECK(run_artune({"autotune", "-t", "dgx-h100", "-b", "8", "-e", "8", "--nccl-version", "2.2"}).status == 2);
  // A release newer than the model's tables runs with the newest it carries, and the header says so.
  const Result newer = run_artune({"simulate", "-t", "dgx-h100", "-s", "nccl", "-b", "8", "-e", "8",
                                   "--nccl-version", "2.30.4"});
  REQUIRE(newer.status == 0);
  CHECK(newer.out.find("NCCL 2.30.4's choice (2.28.9's tables, the newest the model carries)\n") != std::string::npos);
}

TEST_CASE("cli_simulate.launch_mode") {
  // --launch charges the host time of issuing each NCCL call as the program issues it (nccl::launch_us): one thread
  // driving the 8 GPUs (all_reduce_perf -g 8) launches 8 kernels per call, one process per GPU (the default) one,
  // a CUDA graph (all_reduce_perf -G) none. Only the launch term moves: every size by the same amount.
  auto times = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"simulate", "-t", "dgx-h100", "-s", "nccl", "-b",
                                     "8",        "-e", "128M",     "-f", "64",   "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run_artune(args);
    REQUIRE(r.status == 0);
    const json doc = json::parse(r.out);
    std::vector<double> t;
    for (const json& row : doc["results"]) t.push_back(row["time_us"].get<double>());
    return std::make_pair(t, doc["launch"].get<std::string>());
  };
  const auto [base, base_mode] = times({});
  const auto [process, process_mode] = times({"--launch", "process"});
  const auto [g8, g8_mode] = times({"--launch", "thread:8"});
  const auto [all, all_mode] = times({"--launch", "thread"});
  const auto [graph, graph_mode] = times({"--launch", "graph"});
  CHECK(base_mode == "process");
  CHECK(g8_mode == "thread:8");
  CHECK(all_mode == "thread:8");  // every GPU of a dgx-h100
  CHECK(graph_mode == "graph");
  REQUIRE(base.size() == 5);
  for (std::size_t i = 0; i < base.size(); ++i) {
    CAPTURE(i);
    CHECK(process[i] == base[i]);
    CHECK(g8[i] - base[i] == doctest::Approx(7 * 2.6).epsilon(1e-6));
    CHECK(all[i] == g8[i]);
    CHECK(base[i] - graph[i] == doctest::Approx(2.6).epsilon(1e-6));
  }
  // The table's header names a launch mode other than the default.
  const Result text =
      run_artune({"simulate", "-t", "dgx-h100", "-s", "nccl", "-b", "8", "-e", "8", "--launch", "thread:8"});
  REQUIRE(text.status == 0);
  CHECK(text.out.find("segments 1, launch thread:8\n") != std::string::npos);
  const Result plain = run_artune({"simulate", "-t", "dgx-h100", "-s", "nccl", "-b", "8", "-e", "8"});
  REQUIRE(plain.status == 0);
  CHECK(plain.out.find("launch") == std::string::npos);
}
