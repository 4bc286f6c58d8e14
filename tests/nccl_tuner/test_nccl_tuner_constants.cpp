// The plugin's v5 constants (ARTUNE_TUNER_CALIBRATION), dlopened as NCCL does: after init, NCCL's own cost
// formula — re-implemented here from NVIDIA/nccl 2.28 src/graph/tuning.cc (ncclTopoTuneModel for all-reduce,
// ncclTopoGetAlgoTime: time = latency + bytes / (1000 · bandwidth), the tree correction and the ring plateau) —
// evaluated on the constants the plugin wrote picks what artune's calibrated model of NCCL picks
// (nccl::choose over LatencyTables::calibrated), at every size of a sweep, on one machine and on clusters; the
// calibration changes NCCL's pick somewhere; a corrupt calibration logs one warning and leaves the constants as
// NCCL filled them.

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/core/json_input.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/calibration/from_logs.hpp"
#include "nccl_tuner/tuner_abi.h"
#include "tests/logs/log_fixtures.hpp"
#include "tests/nccl_tuner/plugin_loader.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using artune_test::PluginLib;
using artune_test::plugin_log;
using artune_test::record_log;

namespace {

// NCCL 2.28.9's ncclTunerConstantsDefaults (src/graph/tuning.cc), what NCCL hands init.
artuneNcclTunerConstants nccl_defaults() {
  artuneNcclTunerConstants c{};
  const double base[7][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
  const double hw[3][7][3] = {
      {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
      {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
      {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};
  const double ll[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
  const double ring128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
  const double tree128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
  const double tree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
  const double nvlstree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8}};
  std::memcpy(c.baseLatencies, base, sizeof base);
  std::memcpy(c.hwLatencies, hw, sizeof hw);
  std::memcpy(c.llMaxBws, ll, sizeof ll);
  std::memcpy(c.perChMaxRingLL128Bws, ring128, sizeof ring128);
  std::memcpy(c.perChMaxTreeLL128Bws, tree128, sizeof tree128);
  std::memcpy(c.perChMaxTreeBws, tree, sizeof tree);
  std::memcpy(c.perChMaxNVLSTreeBws, nvlstree, sizeof nvlstree);
  return c;
}

constexpr int kTree = ARTUNE_NCCL_ALGO_TREE, kRing = ARTUNE_NCCL_ALGO_RING, kNvls = ARTUNE_NCCL_ALGO_NVLS,
              kNvlsTree = ARTUNE_NCCL_ALGO_NVLS_TREE;
constexpr int kLL = ARTUNE_NCCL_PROTO_LL, kLL128 = ARTUNE_NCCL_PROTO_LL128, kSimple = ARTUNE_NCCL_PROTO_SIMPLE;
enum { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };

int log2i(std::uint64_t n) {
  int l = -1;
  while (n > 0) {
    n >>= 1;
    ++l;
  }
  return l;
}

/// NCCL's all-reduce pick from its constants over the graphs NCCL builds on the machine (their values from
/// artune's search: channels, per-channel speeds, link types, NVLS heads), tuning.cc transcribed for
/// all-reduce (Intel CPUs, no CollNet, one GPU generation; the tree graph's pattern is the one artune's search
/// says NCCL's tree search ends with, Graph::simple_tree).
struct NcclFormula {
  const artuneNcclTunerConstants& k;
  const nccl::Graph& g;

  double bandwidth(int a, int p) const {
    const int nNodes = g.machines, nRanks = g.ranks;
    const int cc = g.compcap >= 100 ? 3 : g.compcap >= 90 ? 2 : g.compcap >= 80 ? 1 : 0;
    const int index2 = nNodes <= 2 ? nNodes - 1 : 2;
    const int index1 = nNodes == 1 ? cc : 0;
    const double llMaxBw = k.llMaxBws[index1][index2];
    const double ppn = static_cast<double>(nRanks) / nNodes;
    const double nvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
    int nChannels = g.channels;
    // NCCL's graphs: bwIntra on up to two machines, else bwInter; the ring graph's are equal, the tree graph's
    // bwIntra is raised across machines (nccl::Graph::tree_bw_intra).
    const double intra = a == kTree ? g.tree_bw_intra : g.bw_intra;
    double bw = nNodes <= 2 ? intra : g.bw_inter;
    if (a == kNvls || a == kNvlsTree) {
      if (g.nvls_channels < 2) return 0;
      nChannels = g.nvls_channels;
      const double intraBw = g.nvls_bw * nvlsEfficiency[cc] * (nChannels - 1) / nChannels * 2.0;
      const double graphInter = nNodes > 1 ? g.bw_inter * g.channels / nChannels : g.nvls_bw_inter;
      const double interBw = graphInter * ((nNodes <= 2 && a == kNvlsTree) ? 2 : 1);
      bw = std::min({intraBw, interBw, a == kNvlsTree ? k.perChMaxNVLSTreeBws[cc][index2] : 1e30});
    }
    double busBw = nChannels * bw;
    if (a == kRing && p == kLL) busBw = std::min(llMaxBw, busBw * .5);
    if (a == kRing && p == kLL128) busBw = std::min(busBw * .92, nChannels * k.perChMaxRingLL128Bws[cc][index2]);
    if (a == kTree) busBw = std::min(busBw * .92, nChannels * k.perChMaxTreeBws[cc][index2]);
    if (a == kTree && p == kLL) busBw = std::min(busBw * 1.0 / 3.8, llMaxBw);
    if (a == kTree && p == kLL128) {
      busBw = std::min(busBw * (nNodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nChannels * k.perChMaxTreeLL128Bws[cc][index2]);
    }
    if (a == kTree && g.simple_tree) busBw *= .85;  // comm->maxTreePattern == NCCL_TOPO_PATTERN_TREE
    const int nsteps = 2 * (nRanks - 1);
    busBw *= (a == kRing || a == kNvls || a == kNvlsTree) ? (1.0 * nRanks) / nsteps : .5;
    (void)ppn;
    // Enabled: NVLS on one machine, NVLSTree on several; LL128 where the graph allows it; NVLS Simple only.
    if ((a == kNvls || a == kNvlsTree) && p != kSimple) return 0;
    if (a == kNvls && nNodes > 1) return 0;
    if (a == kNvlsTree && nNodes == 1) return 0;
    if (p == kLL128 && !g.ll128_ok) return 0;
    return busBw;
  }

  double latency(int a, int p) const {
    const int nNodes = g.machines, nRanks = g.ranks;
    const int intraHw = (a == kNvls || a == kNvlsTree || g.nvlink_intra) ? kHwNvlink : kHwPci;
    const double ppn = static_cast<double>(nRanks) / nNodes;
    double lat = k.baseLatencies[a][p];
    double intraLat = k.hwLatencies[intraHw][a][p];
    const double interLat = ppn == 1 ? k.hwLatencies[kHwNet][kTree][p] : k.hwLatencies[kHwNet][a][p];
    const int nsteps = 2 * (nRanks - 1);
    if (a == kRing) {
      double netOverhead = 0.0;
      if (nNodes > 1) netOverhead = p == kSimple ? 3.0 : 1.0;  // getNetOverhead on Intel: 1 µs, ×3 for Simple
      intraLat = std::max(intraLat, netOverhead);
      const int nInterSteps = nNodes == 1 ? 0 : 2 * (nNodes - 1);
      lat += (nsteps - nInterSteps) * intraLat + nInterSteps * interLat;
    } else if (a == kTree) {
      lat += 2 * ((nRanks / nNodes - 1) * intraLat + log2i(static_cast<std::uint64_t>(nNodes)) * interLat);
    } else if (a == kNvls) {
      lat = intraLat + (nNodes > 1 ? interLat : 0.0);
    } else if (a == kNvlsTree) {
      lat += intraLat + 2 * log2i(static_cast<std::uint64_t>(nNodes)) * interLat;
    }
    return lat;
  }

  double time(int a, int p, std::uint64_t bytes) const {
    static const double treeCorrection[3][23] = {
        {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
        {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
        {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
    double bw = bandwidth(a, p);
    double lat = latency(a, p);
    if (bw == 0) return -1;
    const int logSize = log2i(bytes >> 6);
    if (a == kTree && logSize >= 0 && logSize < 23) bw *= treeCorrection[p][logSize];
    if (a == kRing && p == kSimple && g.machines > 1 &&
        bytes / (static_cast<std::uint64_t>(g.channels) * static_cast<std::uint64_t>(g.ranks)) >= 64) {
      lat *= g.compcap < 80 ? 1.9 : 1.4;
    }
    return lat + static_cast<double>(bytes) / (1000 * bw);
  }

  std::pair<int, int> pick(std::uint64_t bytes) const {
    std::pair<int, int> best{-1, -1};
    double min = -1;
    for (const int a : {kTree, kRing, kNvls, kNvlsTree}) {
      for (int p = 0; p < 3; ++p) {
        const double t = time(a, p, bytes);
        if (t >= 0 && (min < 0 || t < min)) {
          min = t;
          best = {a, p};
        }
      }
    }
    return best;
  }
};

/// artune's algorithm as NCCL's cost-table row.
int nccl_row(nccl::Algo a) {
  switch (a) {
    case nccl::Algo::kTree: return kTree;
    case nccl::Algo::kRing: return kRing;
    case nccl::Algo::kNvls: return kNvls;
    case nccl::Algo::kNvlsTree: return kNvlsTree;
    case nccl::Algo::kPat: return ARTUNE_NCCL_ALGO_PAT;
  }
  return -1;
}

/// Sets an environment variable for one scope.
class Env {
 public:
  Env(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~Env() { ::unsetenv(name_); }

 private:
  const char* name_;
};

std::vector<std::uint64_t> sweep() {
  std::vector<std::uint64_t> s;
  for (std::uint64_t b = 8; b <= (8ULL << 30); b *= 2) s.push_back(b);
  return s;
}

/// Inits the plugin's v5 interface for `g`'s ranks and machines with ARTUNE_TUNER_CALIBRATION = `overlay`
/// and returns the constants it wrote.
artuneNcclTunerConstants init_with(const PluginLib& lib, const nccl::Graph& g, const std::string& overlay_path) {
  auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  REQUIRE(v5 != nullptr);
  Env env("ARTUNE_TUNER_CALIBRATION", overlay_path);
  artuneNcclTunerConstants k = nccl_defaults();
  void* ctx = nullptr;
  plugin_log().clear();
  REQUIRE(v5->init(&ctx, 1, static_cast<size_t>(g.ranks), static_cast<size_t>(g.machines), record_log, nullptr, &k) ==
          artuneNcclSuccess);
  v5->finalize(ctx);
  return k;
}

/// Holds the plugin's picks on `topo` (all its GPUs) with the overlay to the calibrated model's at every size;
/// returns the sizes where the calibration changed NCCL's pick.
int compare_picks(const PluginLib& lib, const Topology& topo, const nlohmann::json& overlay, const std::string& path) {
  {
    std::ofstream out(path);
    out << overlay.dump(1);
  }
  const nccl::Graph g = nccl::search(topo, topo.gpus());
  const artuneNcclTunerConstants written = init_with(lib, g, path);
  // One INFO line saying what was written, nothing else (no table was named: no table warning either).
  REQUIRE(plugin_log().size() == 1);
  CHECK(plugin_log()[0].level == artuneNcclLogInfo);
  CHECK(plugin_log()[0].text.find("NCCL tuning constants calibrated") != std::string::npos);
  // The calibrated model: the overlay read by artune's own cost-model reader.
  CostModel m = CostModel::defaults(BackendProfile::kNccl);
  m.apply_overlay(overlay, "overlay");
  const double alpha[3] = {m.link_for(LinkKind::kNvLink).alpha_us, m.link_for(LinkKind::kPcie).alpha_us,
                           m.link_for(LinkKind::kNetwork).alpha_us};
  const double eff[3] = {m.link_for(LinkKind::kNvLink).efficiency, m.link_for(LinkKind::kPcie).efficiency,
                         m.link_for(LinkKind::kNetwork).efficiency};
  const auto cal = nccl_tuning::from_overlay(alpha, eff, overlay.value("nccl_intra", "nvlink") == "pcie" ? 1 : 0);
  const nccl::LatencyTables tables = nccl::LatencyTables::calibrated(cal, g.machines);
  const artuneNcclTunerConstants defaults = nccl_defaults();
  const NcclFormula nccl_after{written, g}, nccl_before{defaults, g};
  int changed = 0;
  for (const std::uint64_t bytes : sweep()) {
    INFO(topo.name(), " at ", bytes, " B");
    const nccl::Choice c = nccl::choose(g, static_cast<double>(bytes), {}, "test", Collective::kAllReduce, tables);
    const auto p = nccl_after.pick(bytes);
    CHECK(p.first == nccl_row(c.algo));
    CHECK(p.second == static_cast<int>(c.proto));
    changed += nccl_before.pick(bytes) != p ? 1 : 0;
    // Uncalibrated, artune's model of NCCL and NCCL's formula agree too.
    const nccl::Choice d = nccl::choose(g, static_cast<double>(bytes), {}, "test", Collective::kAllReduce);
    CHECK(nccl_before.pick(bytes) == std::make_pair(nccl_row(d.algo), static_cast<int>(d.proto)));
  }
  MESSAGE(topo.name(), ": the calibration changed NCCL's pick at ", changed, " of ", sweep().size(), " sizes");
  // What the plugin leaves alone: NCCL's bandwidth caps.
  CHECK(std::memcmp(written.llMaxBws, defaults.llMaxBws, sizeof defaults.llMaxBws) == 0);
  CHECK(std::memcmp(written.perChMaxTreeBws, defaults.perChMaxTreeBws, sizeof defaults.perChMaxTreeBws) == 0);
  return changed;
}

}  // namespace

TEST_CASE("nccl_tuner_constants.ncclformula_on_the_written_constants_picks_as_the_calibrated_model") {
  PluginLib lib;
  artune_test::ScratchDir dir("artune-tuner-calibration");
  // One machine: slower NVLink (half of NCCL's estimate) and a dearer per-step latency.
  const nlohmann::json one = {{"profile", "nccl"},
                              {"links", {{"nvlink", {{"alpha_us", 2.0}, {"efficiency", 0.4}}}}},
                              {"nccl_intra", "nvlink"}};
  int changed = compare_picks(lib, load_topology("dgx-h100"), one, (dir.path() / "one.json").string());
  CHECK(changed > 0);
  changed = compare_picks(lib, load_topology("dgx1-v100"), one, (dir.path() / "v100.json").string());
  CHECK(changed > 0);
  // Several machines: the overlay calibrate --from fitted to the published A3 Mega log (tests/logs/data).
  const auto runs =
      logs::read_nccl_tests((artune_test::log_data_dir() / "a3mega-2x8-h100-all_reduce.log").string());
  const Topology a3 =
      load_topology((artune_test::log_data_dir().parent_path().parent_path() / "simulator/data/2xa3mega-h100.json").string());
  const LogCalibration fit = calibrate_from_logs(a3, {{&runs[0], nullptr, ""}}, CheckOptions{});
  CHECK(fit.overlay["nccl_intra"] == "nvlink");
  changed = compare_picks(lib, a3, fit.overlay, (dir.path() / "a3.json").string());
  CHECK(changed > 0);
  // The line docs/nccl-plugin.md quotes.
  INFO("the plugin's line: ", plugin_log()[0].text);
  CHECK(plugin_log()[0].text.find("calibrated for 16 ranks on 2 node(s): per-step latency NVLink +0 us, PCI +0 us, "
                                  "network +55 us; every latency x0.835 (the network bandwidth share)") !=
        std::string::npos);
  // A network faster and shorter than NCCL assumes (negative shift) on 4 machines.
  const nlohmann::json net = {{"profile", "nccl"}, {"links", {{"network", {{"alpha_us", 1.0}, {"efficiency", 0.45}}}}}};
  compare_picks(lib, load_topology("4xdgx-h100"), net, (dir.path() / "net.json").string());
}

TEST_CASE("nccl_tuner_constants.a_bad_calibration_leaves_ncclconstants_alone") {
  PluginLib lib;
  artune_test::ScratchDir dir("artune-tuner-calibration-bad");
  const nccl::Graph g = nccl::search(load_topology("dgx-h100"), load_topology("dgx-h100").gpus());
  const artuneNcclTunerConstants defaults = nccl_defaults();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"corrupt.json", R"({"profile": "nccl", "links": {"nvlink": {"alpha_us": 2.0, )"},
      {"profile.json", R"({"profile": "cuda", "links": {}})"},
      {"efficiency.json", R"({"profile": "nccl", "links": {"nvlink": {"efficiency": 3}}})"},
      {"alpha.json", R"({"profile": "nccl", "links": {"network": {"alpha_us": -1}}})"},
      {"intra.json", R"({"profile": "nccl", "nccl_intra": "qpi"})"},
      {"array.json", R"([1, 2, 3])"},
  };
  for (const auto& [name, text] : cases) {
    INFO(name);
    const std::string path = (dir.path() / name).string();
    {
      std::ofstream out(path);
      out << text;
    }
    const artuneNcclTunerConstants k = init_with(lib, g, path);
    CHECK(std::memcmp(&k, &defaults, sizeof k) == 0);
    REQUIRE(plugin_log().size() == 1);
    CHECK(plugin_log()[0].level == artuneNcclLogWarn);
    CHECK(plugin_log()[0].text.find(path) != std::string::npos);
    CHECK(plugin_log()[0].text.find("NCCL's tuning constants kept") != std::string::npos);
  }
  // A missing file and a folder alike.
  for (const std::string& path : {(dir.path() / "none.json").string(), dir.path().string()}) {
    const artuneNcclTunerConstants k = init_with(lib, g, path);
    CHECK(std::memcmp(&k, &defaults, sizeof k) == 0);
    REQUIRE(plugin_log().size() == 1);
    CHECK(plugin_log()[0].level == artuneNcclLogWarn);
  }
  // Interfaces before v5 carry no constants: one warning that says so.
  {
    const std::string path = (dir.path() / "ok.json").string();
    std::ofstream(path) << R"({"profile": "nccl", "links": {"nvlink": {"alpha_us": 1.0}}})";
    auto* v4 = lib.symbol<artuneNcclTunerV4>("ncclTunerPlugin_v4");
    Env env("ARTUNE_TUNER_CALIBRATION", path);
    void* ctx = nullptr;
    plugin_log().clear();
    REQUIRE(v4->init(8, 1, record_log, &ctx) == artuneNcclSuccess);
    v4->destroy(ctx);
    REQUIRE(plugin_log().size() == 1);
    CHECK(plugin_log()[0].text.find("v5") != std::string::npos);
  }
}
