// artune check on the published logs of tests/logs/data: every row a source calls slow or wrong is flagged,
// no row a source calls normal is, and the causes name what the model sees (the algorithm the measured time
// matches, a forced algorithm, NCCL's INFO lines).

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/log_check.hpp"
#include "tests/logs/log_fixtures.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using artune_test::error_of;

namespace {

std::string data(const std::string& name) { return (artune_test::log_data_dir() / name).string(); }
std::string data_path_of(const std::string& name) { return data(name); }

// A fixture's topology: a built-in, or data/FILE.json of tests/simulator/data.
Topology fixture_topology(const std::string& name) {
  if (name.rfind("data/", 0) == 0) {
    return load_topology((artune_test::log_data_dir().parent_path().parent_path() / "simulator" / name).string());
  }
  return load_topology(name);
}

bool any_of(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

bool any_cause(const CheckRow& row, const std::string& needle) { return any_of(row.causes, needle); }

}  // namespace

TEST_CASE("log_check.sources_verdicts") {
  int slow = 0, normal = 0;
  for (const auto& f : artune_test::log_fixtures()) {
    if (f.topology.empty() || f.tables == 0) continue;
    INFO(f.file);
    const auto runs = logs::read_nccl_tests(data(f.file));
    CheckOptions options;
    options.spec = f.spec;
    const CheckReport report = check_runs(fixture_topology(f.topology), runs, nullptr, options);
    REQUIRE(report.runs.size() == runs.size());
    for (const auto& v : f.verdicts) {
      REQUIRE(v.table < static_cast<int>(report.runs.size()));
      int rows = 0;
      for (const CheckRow& row : report.runs[static_cast<std::size_t>(v.table)].rows) {
        if (row.bytes < v.from_bytes || (v.to_bytes > 0 && row.bytes > v.to_bytes)) continue;
        INFO("row at line ", row.line, ", ", row.bytes, " B, ratio ", row.ratio, ", verdict ", row.verdict);
        ++rows;
        if (v.says == "normal") {
          CHECK(row.verdict == "ok");
          ++normal;
        } else {
          CHECK(row.verdict != "ok");
          if (v.says == "wrong") CHECK(row.verdict == "wrong");
          CHECK_FALSE(row.causes.empty());
          ++slow;
        }
      }
      CHECK(rows > 0);
    }
  }
  CHECK(normal >= 20);
  CHECK(slow >= 11);  // NVIDIA/nccl#1184's wrong row and NVIDIA/nccl-tests#319's 10 slow ones
}

TEST_CASE("log_check.which_algorithm_ran") {
  // The ring configuration's log shows no NCCL_ALGO: against NCCL's own choice (NVLS on 8 H100) its large rows
  // are slow, and the model names Ring as what the time matches.
  const auto runs = logs::read_nccl_tests(data("together-h100-all_reduce_ring.log"));
  const CheckReport own = check_runs(load_topology("dgx-h100"), runs, nullptr, CheckOptions{});
  const CheckRow& big = own.runs[0].rows.back();
  CHECK(big.verdict == "slow");
  CHECK(big.nccl.rfind("nvls/", 0) == 0);
  CHECK(any_cause(big, "matches NCCL nccl.ring"));
  CHECK(any_cause(big, "bandwidth-bound by nvlink"));
  // Told what the run forced, the same rows are normal.
  CheckOptions ring;
  ring.spec = "nccl.ring";
  const CheckReport forced = check_runs(load_topology("dgx-h100"), runs, nullptr, ring);
  CHECK(forced.runs[0].rows.back().verdict == "ok");
  CHECK(forced.runs[0].rows.back().nccl.rfind("ring/simple/", 0) == 0);
  CHECK(forced.flagged() == 0);
  CHECK(forced.runs[0].spec_from == "parameter spec");
}

TEST_CASE("log_check.forcing_from_the_log") {
  // NCCL_ALGO on the command line before the table is what the run forced; NCCL's own choice is named.
  std::string text = artune_test::slurp(data("together-h100-all_reduce_ring.log"));
  text = "NCCL_ALGO=Ring ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8\n" + text.substr(text.find("# nThread"));
  const auto runs = logs::parse_nccl_tests(text, "ring.log");
  const CheckReport report = check_runs(load_topology("dgx-h100"), runs, nullptr, CheckOptions{});
  CHECK(report.runs[0].spec == "nccl.ring");
  CHECK(report.runs[0].spec_from.find("NCCL_ALGO=Ring") != std::string::npos);
  CHECK(report.runs[0].rows.back().verdict == "ok");
  CHECK(report.flagged() == 0);
  // An exclusion: NCCL_NVLS_ENABLE=0 leaves Ring as NCCL's choice at large sizes.
  text = "NCCL_NVLS_ENABLE=0 ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8\n" + text.substr(text.find("# nThread"));
  const CheckReport off = check_runs(load_topology("dgx-h100"), logs::parse_nccl_tests(text, "off.log"), nullptr,
                                     CheckOptions{});
  CHECK(off.runs[0].rows.back().nccl.rfind("ring/", 0) == 0);
  CHECK(off.runs[0].rows.back().verdict == "ok");
}

TEST_CASE("log_check.info_log_findings") {
  // NVIDIA/nccl#1876's INFO lines (the ring search fell back to one channel at 0.1 GB/s) next to a run on a
  // topology whose search finds more: the finding is the run's and every flagged row's.
  const auto runs = logs::read_nccl_tests(data("together-h100-all_reduce_ring.log"));
  logs::InfoLog info = logs::read_nccl_info(data("nccl1876-leonardo-info.log"));
  const CheckReport report = check_runs(load_topology("dgx-h100"), runs, &info, CheckOptions{});
  bool fallback = false, graph = false;
  for (const auto& f : report.runs[0].findings) {
    fallback = fallback || f.find("fell back to the simple order") != std::string::npos;
    graph = graph || f.find("1 channel(s) at 0.1 GB/s") != std::string::npos;
  }
  CHECK(fallback);
  CHECK(graph);
  CHECK(any_cause(report.runs[0].rows.back(), "fell back"));
  // NICs NCCL opened against the topology's (the mechanism, on two published logs of 16 ranks: NVIDIA/nccl#1357's
  // INFO lines next to the A3 Mega table).
  const auto a3 = logs::read_nccl_tests(data("a3mega-2x8-h100-all_reduce.log"));
  logs::InfoLog nics = logs::read_nccl_info(data("nccl1357-2x8-h100-info.log"));
  const CheckReport r3 =
      check_runs(load_topology((artune_test::log_data_dir().parent_path().parent_path() / "simulator/data/2xa3mega-h100.json").string()),
                 a3, &nics, CheckOptions{});
  bool opened = false;
  for (const auto& f : r3.runs[0].findings) {
    opened = opened || f.find("NCCL opened 4 network device(s) on qh100-gpu20; the topology has 8 NIC(s) per machine") !=
                           std::string::npos;
  }
  CHECK(opened);
  // The tree graph's pattern against the model's: 2 A3 Mega machines (a NIC per GPU under its own PCIe switch) give
  // the simpler TREE (3); a log whose tree graphs are balanced (1) is named, one whose largest pattern is TREE is not.
  const std::string head = "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n";
  const std::string balanced = "h:1:2 [0] NCCL INFO Pattern 1, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PIX, sameChannels 1\n";
  const std::string simple = "h:1:2 [0] NCCL INFO Pattern 3, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PIX, sameChannels 1\n";
  const std::string ring = "h:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PXN, sameChannels 1\n";
  const Topology a3topo =
      load_topology((artune_test::log_data_dir().parent_path().parent_path() / "simulator/data/2xa3mega-h100.json").string());
  REQUIRE(nccl::search(a3topo, a3topo.gpus()).simple_tree);
  const logs::InfoLog bal = logs::parse_nccl_info(head + ring + balanced, "bal.log");
  CHECK(any_of(check_runs(a3topo, a3, &bal, CheckOptions{}).runs[0].findings,
               "bal.log:3: NCCL's tree graph has pattern 1 (NIC traffic spread over two GPUs) where the model's search "
               "expects the simpler TREE"));
  const logs::InfoLog max = logs::parse_nccl_info(head + balanced + simple + ring, "max.log");
  CHECK_FALSE(any_of(check_runs(a3topo, a3, &max, CheckOptions{}).runs[0].findings, "tree graph"));
  // The reverse on A100 machines (sm80: NCCL never falls back to TREE there).
  const logs::InfoLog on_a100 = logs::parse_nccl_info(head + simple, "a100.log");
  CHECK(any_of(check_runs(load_topology("2xdgx-a100"), a3, &on_a100, CheckOptions{}).runs[0].findings,
               "a100.log:2: NCCL's tree graph has the simpler TREE pattern (3: all NIC traffic through one GPU, Tree at "
               ".85 of its bandwidth in NCCL's table) where the model's search expects a balanced tree"));
  // Across two machines a tree graph's speed inside the machine is raised above the rings' (search.cc pass 2,
  // nccl::Graph::tree_bw_intra: 30 GB/s on 2 x Oracle BM.GPU4.8, whose rings run 8 channels at 24 over its fused
  // dual-port NICs): a tree graph at the rings' speed is named, one at the raised speed is not.
  const Topology oci = load_topology(
      (artune_test::log_data_dir().parent_path().parent_path() / "simulator/data/2xoci-bm-gpu4.8.json").string());
  const std::string oci_ring =
      "h:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PXB, sameChannels 1\n";
  const std::string oci_flat_tree =
      "h:1:2 [0] NCCL INFO Pattern 1, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PXB, sameChannels 1\n";
  const std::string oci_tree =
      "h:1:2 [0] NCCL INFO Pattern 1, crossNic 0, nChannels 8, bw 30.000000/24.000000, type NVL/PXB, sameChannels 1\n";
  const logs::InfoLog flat = logs::parse_nccl_info(head + oci_ring + oci_flat_tree, "flat.log");
  CHECK(any_of(check_runs(oci, a3, &flat, CheckOptions{}).runs[0].findings,
               "flat.log:3: NCCL's graph (pattern 1) has 8 channel(s) at 24 GB/s, type NVL/PXB; the model's search "
               "finds 8 at 30 GB/s"));
  const logs::InfoLog raised = logs::parse_nccl_info(head + oci_ring + oci_tree, "raised.log");
  CHECK_FALSE(any_of(check_runs(oci, a3, &raised, CheckOptions{}).runs[0].findings, "NCCL's graph (pattern"));
  // The ring graph's GPU-to-NIC type against the model's: with a NIC per GPU NCCL sends through the NIC's own GPU
  // (PXN), which the model's search does too (no finding); a ring graph within PIX there, or PXN where two GPUs share
  // each NIC's switch, is named with the question it raises.
  CHECK_FALSE(any_of(check_runs(a3topo, a3, &bal, CheckOptions{}).runs[0].findings, "ring graph"));
  const std::string ring_pix =
      "h:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 8, bw 24.000000/24.000000, type NVL/PIX, sameChannels 1\n";
  const logs::InfoLog pix = logs::parse_nccl_info(head + ring_pix, "pix.log");
  CHECK(any_of(check_runs(a3topo, a3, &pix, CheckOptions{}).runs[0].findings,
               "pix.log:2: NCCL's ring graph reaches its NICs over PIX paths where the model's search goes over PXN: "
               "NCCL's rings start and end within each NIC's PCIe switch"));
  const logs::InfoLog pxn = logs::parse_nccl_info(head + ring, "pxn.log");
  CHECK(any_of(check_runs(load_topology("2xdgx-a100"), a3, &pxn, CheckOptions{}).runs[0].findings,
               "pxn.log:2: NCCL's ring graph reaches its NICs over PXN paths where the model's search goes over PIX: "
               "NCCL sends through a peer GPU (PXN)"));
  CHECK_FALSE(any_of(check_runs(load_topology("2xdgx-a100"), a3, &pix, CheckOptions{}).runs[0].findings, "ring graph"));
  // Connections through devices NCCL fused of several ports (2.24 on) count their ports: four dual-port devices
  // cover 2 x DGX A100's eight NICs per machine, two of them do not, and the finding says they were fused.
  std::string fused = head +
                      "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB "
                      "[3]mlx5_3:1/IB [4]mlx5_4:1/IB [5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]\n";
  for (int v = 0; v < 4; ++v) {
    fused += fmt::format(
        "h:1:2 [0] NCCL INFO NET/IB : Made virtual device [{}] name=mlx5_{}+mlx5_{} speed=400000 "
        "ndevs=2\n",
        8 + v, 2 * v, 2 * v + 1);
  }
  const auto via = [](int channel, int device) {
    return fmt::format("h:1:2 [0] NCCL INFO Channel {:02}/0 : 15[7] -> 0[0] [receive] via NET/IB/{}\n", channel,
                       device);
  };
  const Topology a100 = load_topology("2xdgx-a100");
  const logs::InfoLog four = logs::parse_nccl_info(fused + via(0, 8) + via(1, 9) + via(2, 10) + via(3, 11), "four.log");
  CHECK_FALSE(any_of(check_runs(a100, a3, &four, CheckOptions{}).runs[0].findings, "printed network connections"));
  const logs::InfoLog two = logs::parse_nccl_info(fused + via(0, 8) + via(1, 9), "two.log");
  CHECK(any_of(check_runs(a100, a3, &two, CheckOptions{}).runs[0].findings,
               "two.log: the printed network connections of h use 2 NIC(s) (device 8, 9, 4 ports fused); the model's "
               "rings use 8 of the 8 per machine"));
  // An INFO log of another communicator is not compared.
  logs::InfoLog other = logs::read_nccl_info(data("nccl1412-2x8-info.log"));
  const CheckReport r2 = check_runs(load_topology("dgx-h100"), runs, &other, CheckOptions{});
  CHECK(r2.runs[0].findings.back().find("not compared") != std::string::npos);
}

TEST_CASE("log_check.runs_that_do_not_fit_the_topology") {
  const auto a3 = logs::read_nccl_tests(data("a3mega-2x8-h100-all_reduce.log"));
  // 16 ranks on 2 hosts cannot run on one machine.
  CHECK(error_of([&] { check_runs(load_topology("dgx-h100"), a3, nullptr, CheckOptions{}); })
            .find("spans 2 hosts") != std::string::npos);
  // GPUs of another generation than the topology's are named.
  const CheckReport v100 = check_runs(load_topology("2xdgx1-v100"), a3, nullptr, CheckOptions{});
  bool generation = false;
  for (const auto& f : v100.runs[0].findings) {
    generation = generation || f.find("NVIDIA H100 80GB HBM3 (sm90); the topology's are sm70") != std::string::npos;
  }
  CHECK(generation);
  // A spec check cannot compare.
  CheckOptions bad;
  bad.spec = "xring";
  CHECK(error_of([&] {
          check_runs(load_topology("dgx-h100"), logs::read_nccl_tests(data("together-h100-all_reduce_ring.log")),
                     nullptr, bad);
        }).find("parameter spec") != std::string::npos);
  // A log without device lines whose ranks do not fit the topology.
  const auto excerpt = logs::read_nccl_tests(data("nccl1411-cross-nic0-excerpt.log"));
  CHECK(error_of([&] { check_runs(load_topology("dgx-h100"), excerpt, nullptr, CheckOptions{}); }).find("16 ranks") !=
        std::string::npos);
  // Programs the model does not cover are reported, not checked.
  const std::string bcast = "# Collective test starting: broadcast_perf\n" +
                            artune_test::slurp(data("together-h100-all_reduce_ring.log")).substr(
                                artune_test::slurp(data("together-h100-all_reduce_ring.log")).find("# nThread"));
  const CheckReport b = check_runs(load_topology("dgx-h100"), logs::parse_nccl_tests(bcast, "b.log"), nullptr,
                                   CheckOptions{});
  CHECK_FALSE(b.runs[0].modelled);
  CHECK(b.rows() == 0);
}

TEST_CASE("log_check.json_has_every_row") {
  const auto runs = logs::read_nccl_tests(data("together-h100-reduce_scatter_ring.log"));
  CheckOptions ring;
  ring.spec = "nccl.ring";
  const CheckReport report = check_runs(load_topology("dgx-h100"), runs, nullptr, ring);
  const nlohmann::json j = report.to_json();
  CHECK(j["runs"][0]["collective"] == "reducescatter");
  CHECK(j["runs"][0]["rows"].size() == report.runs[0].rows.size());
  CHECK(j["runs"][0]["rows"].back()["verdict"] == "ok");
  CHECK(j["rows"] == report.rows());
  // The zero-byte rows nccl-tests prints are not compared.
  CHECK(report.runs[0].rows.front().bytes == 128);
}

TEST_CASE("log_check.the_logs_nccl_release_chooses") {
  // A run's printed NCCL version picks the cost table NCCL chose with (nccl_model.cpp "Releases"); a release older
  // than the model's oldest keeps the model's own, and a note says which.
  const Topology topo = load_topology("dgx-h100");
  auto runs = logs::read_nccl_tests(data("together-h100-all_reduce_ring.log"));
  REQUIRE(runs[0].nccl_version.rfind("2.26.2", 0) == 0);
  auto picks_of = [&](const std::string& version, std::vector<std::string>* findings) {
    runs[0].nccl_version = version;
    const CheckReport r = check_runs(topo, runs, nullptr, CheckOptions{});
    *findings = r.runs[0].findings;
    std::vector<std::string> out;
    for (const CheckRow& row : r.runs[0].rows) out.push_back(row.nccl.substr(0, row.nccl.rfind('/')));
    return out;
  };
  auto expected = [&](const NcclRelease& release) {
    nccl::Graph g = nccl::search(topo, topo.gpus());
    g.release = release;
    std::vector<std::string> out;
    const CheckReport sizes = check_runs(topo, runs, nullptr, CheckOptions{});
    for (const CheckRow& row : sizes.runs[0].rows) {
      const nccl::Choice c = nccl::choose(g, static_cast<double>(row.bytes), {}, "x");
      out.push_back(fmt::format("{}/{}", nccl::to_string(c.algo), nccl::to_string(c.proto)));
    }
    return out;
  };
  std::vector<std::string> findings;
  const auto old = picks_of("2.20.5", &findings);
  CHECK(old == expected(NcclRelease{2, 20, 5}));
  CHECK(any_of(findings, "NCCL 2.20.5 (the log's version) chooses with its own cost table"));
  // Ring/LL at half the bandwidth and Hopper's LL cap at Ampere's: 2.20 leaves LL earlier than 2.28.9 does.
  const auto now = picks_of("2.28.9", &findings);
  CHECK(now == expected(kModelledNcclRelease));
  CHECK(old != now);
  CHECK_FALSE(any_of(findings, "chooses with its own cost table"));
  const auto older = picks_of("2.17.1+cuda12.0", &findings);
  CHECK(older == now);
  CHECK(any_of(findings, "NCCL 2.17.1+cuda12.0 predates the oldest release whose choice the model reproduces (2.19.0)"));
}

TEST_CASE("log_check.nccls_printed_cost_table") {
  // NCCL 2.30.4's cost table on 8 × H200 (tests/simulator/data/nccl_tuning_published.json, from
  // C-TC/multi-gpu-programming-models) beside an 8-GPU nccl-tests table on dgx-h100: every cell is the model's.
  const std::filesystem::path data =
      artune_test::log_data_dir().parent_path().parent_path() / "simulator" / "data" / "nccl_tuning_published.json";
  const nlohmann::json doc = nlohmann::json::parse(artune_test::slurp(data.string()));
  std::string text = "h:1:2 [0] NCCL INFO NCCL version 2.30.4+cuda13.2\n";  // the log's first NCCL line
  for (const auto& entry : doc.at("logs")) {
    if (entry.at("id") != "ctc-h200x8-nccl2.30") continue;
    for (const auto& line : entry.at("lines")) text += line.get<std::string>() + "\n";
  }
  REQUIRE(!text.empty());
  const Topology topo = load_topology("dgx-h100");
  const auto runs = logs::read_nccl_tests(data_path_of("together-h100-all_reduce_ring.log"));
  const logs::InfoLog info = logs::parse_nccl_info(text, "h200.log");
  const CheckReport same = check_runs(topo, runs, &info, CheckOptions{});
  CHECK(any_of(same.runs[0].findings, "h200.log: NCCL's printed cost table is the model's in all 45 cells"));
  // One cell changed (AllReduce Ring/LL's bandwidth): named, with the model's figure beside it.
  std::string changed = text;
  const std::size_t at = changed.find("    15.0/  80.6");
  REQUIRE(at != std::string::npos);
  changed.replace(at, 15, "    15.0/  90.6");
  const logs::InfoLog other = logs::parse_nccl_info(changed, "h200.log");
  const CheckReport differs = check_runs(topo, runs, &other, CheckOptions{});
  CHECK(any_of(differs.runs[0].findings,
               "h200.log: NCCL's printed cost table differs from the model's (NCCL 2.30.4's) in 1 of 45 cells (line 9: "
               "AllReduce ring/ll: NCCL 15.0/90.6, the model 15.0/80.6)"));
}
