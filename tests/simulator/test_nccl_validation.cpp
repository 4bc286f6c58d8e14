// The simulator against published nccl-tests all_reduce_perf, all_gather_perf and
// reduce_scatter_perf figures (tests/simulator/data/nccl_published.json, sources
// in its README): every row is rebuilt from its spec, as a plan of its collective
// (`collective`, all-reduce when absent), on its topology, simulated with the
// default NCCL cost model, and compared with the published out-of-place busbw or
// time. Sizes are nccl-tests' printed `size` column: the whole buffer (all-gather:
// the output, count × ranks × 4 B; reduce-scatter: the input), which is also what
// a plan's count covers (Plan::count), and busbw is nccl-tests' algbw × 2(n−1)/n
// for all-reduce, × (n−1)/n for the other two (bus_factor).
// The mean absolute percentage error (MAPE) per regime is printed against
// issue 26's targets: large single-machine busbw ≤ 7 %, multi-machine busbw
// ≤ 15 %, small-message time ≤ 25 %, and enforced; medium-size time (above
// 64 KiB, below 64 MiB) is printed without a target.
//
// Each row says how nccl-tests issued its calls (`gpus_per_thread`: its -g,
// `cuda_graph`: -G), which the simulator's time model charges
// (nccl::launch_us); the simulator itself charges one launch per call. Rows
// from which a constant of the time model was derived name it (`derives`);
// the MAPE is printed, and the targets enforced, on the held-out rows (all
// others) as well as on all rows.
//
// The table is printed between "<!-- nccl-validation:begin -->" and
// "<!-- nccl-validation:end -->" as markdown; scripts/nccl_validation.sh turns
// it into reports/nccl-validation/REPORT.md.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/search.hpp"

using namespace artune;
using json = nlohmann::json;

namespace {

constexpr std::size_t kFloatBytes = 4;  // every row is float, as nccl-tests runs by default (sum where it reduces)

// Issue 26's targets, MAPE in percent per regime (issue 12's were 10, 25 and 40).
const std::map<std::string, double> kTargetPercent = {{"large_single", 7.0}, {"large_multi", 15.0}, {"small", 25.0}};
// What the test asserts: the targets, on all rows and on the held-out rows alike.
const std::map<std::string, double> kEnforcedPercent = {{"large_single", 7.0}, {"large_multi", 15.0}, {"small", 25.0}};
// Regimes reported without a target: `medium` (time, above 64 KiB and below 64 MiB, where the protocols change and
// the pipelines fill: DDP's 25 MiB buckets fall here). Issue 26 sets none; the error is printed so that it is known.
const std::set<std::string> kReportedRegimes = {"medium"};

// The rows each fitted constant of the time model was derived from (nccl_model.cpp says how): the data's
// `derives` labels must name exactly these, and the constants must recompute from exactly them.
const std::map<std::string, std::set<std::string>> kTrainingRows = {
    {"launch_us",
     {"h100-ring-8b", "h100-ring-1024b", "h100-ring-65536b", "h100-default-8b", "h100-default-1024b",
      "h100-default-65536b"}},
    {"nvls_device_us", {"h100-2gpu-nvls-128b", "h100-2gpu-nvls-256b", "h100-2gpu-nvls-512b"}},
    {"ll128_latency", {"h100-ring-4m", "h100-ring-16m"}},
};

// Per row: the prediction within this factor of the published figure either way, unless the row is a known miss
// (`known_miss` in the data, with the reason); a known miss must be outside it (so the list cannot go stale).
constexpr double kRowCapFactor = 2.0;

std::string data_dir() {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tests/simulator/data";
}

struct Row {
  std::string id;
  std::string regime;  // large_single | large_multi | small
  Collective collective = Collective::kAllReduce;  // `collective`: all_reduce (default), all_gather, reduce_scatter
  std::string source;
  std::string hardware;
  int machines = 0;
  int gpus_per_machine = 0;
  std::string nics;          // "" on one machine
  int nics_per_machine = 0;  // multi-machine rows: NICs per machine the run used
  double nic_gbit = 0;       // and their port speed in Gb/s
  std::string nccl_version;  // "" when the source does not say
  std::string forced;        // NCCL_ALGO / NCCL_PROTO as set by the source, "" for NCCL's own choice
  std::string spec;
  std::string topology;  // built-in name, generator, or "data/FILE.json" (this folder)
  std::uint64_t size = 0;
  std::string metric;  // busbw_gbps | time_us
  double published = 0;
  std::string column;
  int gpus_per_thread = 1;  // nccl-tests -g: GPUs one thread issues each call to
  bool cuda_graph = false;  // nccl-tests -G: calls replayed from a CUDA graph
  std::string derives;      // the time-model constant derived from this row, "" for a held-out row
  std::string known_miss;   // why the model misses this row by more than kRowCapFactor, "" for none
};

std::string req_string(const json& j, const char* key, const std::string& where) {
  REQUIRE_MESSAGE(j.contains(key), where, ": missing '", key, "'");
  REQUIRE_MESSAGE(j[key].is_string(), where, ".", key, ": must be a string");
  return j[key].get<std::string>();
}

std::string opt_string(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return "";
  REQUIRE_MESSAGE(j[key].is_string(), where, ".", key, ": must be a string or null");
  return j[key].get<std::string>();
}

std::vector<Row> load_rows() {
  const std::string path = data_dir() + "/nccl_published.json";
  const json doc = read_json_input(path, "nccl_published.json");
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("rows"));
  REQUIRE(doc["rows"].is_array());
  std::vector<Row> rows;
  for (std::size_t i = 0; i < doc["rows"].size(); ++i) {
    const json& j = doc["rows"][i];
    const std::string where = fmt::format("nccl_published.json: rows[{}]", i);
    REQUIRE_MESSAGE(j.is_object(), where, ": must be an object");
    Row r;
    r.id = req_string(j, "id", where);
    r.regime = req_string(j, "regime", where);
    const std::string collective = opt_string(j, "collective", where);
    if (!collective.empty()) {
      bool known = false;
      for (const Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
        if (collective == to_string(c)) {
          r.collective = c;
          known = true;
        }
      }
      REQUIRE_MESSAGE(known, where, ".collective: all_reduce, all_gather or reduce_scatter (got '", collective, "')");
    }
    r.source = req_string(j, "source", where);
    r.hardware = req_string(j, "hardware", where);
    r.nics = opt_string(j, "nics", where);
    r.nccl_version = opt_string(j, "nccl_version", where);
    r.forced = opt_string(j, "forced", where);
    r.spec = req_string(j, "spec", where);
    r.topology = req_string(j, "topology", where);
    r.metric = req_string(j, "metric", where);
    r.column = req_string(j, "column", where);
    r.derives = opt_string(j, "derives", where);
    r.known_miss = opt_string(j, "known_miss", where);
    REQUIRE_MESSAGE((j.contains("gpus_per_thread") && j["gpus_per_thread"].is_number_integer() &&
                     j["gpus_per_thread"].get<int>() >= 1),
                    where, ".gpus_per_thread: integer ≥ 1");
    REQUIRE_MESSAGE((j.contains("cuda_graph") && j["cuda_graph"].is_boolean()), where, ".cuda_graph: boolean");
    r.gpus_per_thread = j["gpus_per_thread"].get<int>();
    r.cuda_graph = j["cuda_graph"].get<bool>();
    REQUIRE_MESSAGE((j.contains("machines") && j["machines"].is_number_integer()), where, ".machines: integer");
    REQUIRE_MESSAGE((j.contains("gpus_per_machine") && j["gpus_per_machine"].is_number_integer()), where,
                    ".gpus_per_machine: integer");
    REQUIRE_MESSAGE((j.contains("size") && j["size"].is_number_unsigned()), where, ".size: unsigned integer");
    REQUIRE_MESSAGE((j.contains("published") && j["published"].is_number()), where, ".published: number");
    if (j.contains("nics_per_machine") && !j["nics_per_machine"].is_null()) {
      REQUIRE_MESSAGE(j["nics_per_machine"].is_number_integer(), where, ".nics_per_machine: integer or null");
      r.nics_per_machine = j["nics_per_machine"].get<int>();
    }
    if (j.contains("nic_gbit") && !j["nic_gbit"].is_null()) {
      REQUIRE_MESSAGE(j["nic_gbit"].is_number(), where, ".nic_gbit: number or null");
      r.nic_gbit = j["nic_gbit"].get<double>();
    }
    r.machines = j["machines"].get<int>();
    r.gpus_per_machine = j["gpus_per_machine"].get<int>();
    r.size = j["size"].get<std::uint64_t>();
    r.published = j["published"].get<double>();
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string topology_arg(const Row& r) {
  return r.topology.rfind("data/", 0) == 0 ? data_dir() + "/" + r.topology.substr(5) : r.topology;
}

std::string size_text(std::uint64_t bytes) {
  if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ULL << 10) && bytes % (1ULL << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

// A source as a markdown link: "NVIDIA/nccl#1259" to its issue page, a GitHub file URL to
// "owner/repo: file", anything else as it is.
std::string source_text(const std::string& s) {
  const std::string github = "https://github.com/";
  const std::size_t hash = s.find('#');
  if (s.rfind("https://", 0) != 0 && hash != std::string::npos) {
    return fmt::format("[{}]({}{}/issues/{})", s, github, s.substr(0, hash), s.substr(hash + 1));
  }
  if (s.rfind(github, 0) == 0) {
    const std::string rest = s.substr(github.size());
    const std::size_t blob = rest.find("/blob/");
    const std::string repo = blob == std::string::npos ? rest : rest.substr(0, blob);
    const std::size_t slash = s.rfind('/');
    return fmt::format("[{}: {}]({})", repo, s.substr(slash + 1), s);
  }
  return s;
}

struct Outcome {
  std::optional<double> predicted;  // empty when skipped or failed
  std::string skipped;              // why the spec could not be parsed (a build without the forced grammar)
  std::string failed;               // why the plan could not be built or simulated
};

Outcome evaluate(const Row& r, const CostModel& model) {
  Outcome o;
  AllReduceSpec spec;
  try {
    spec = parse_collective_spec(r.collective, r.spec);
  } catch (const InvalidInput& e) {
    // Rows that force NCCL_ALGO/NCCL_PROTO use the nccl.<algo>[.<proto>] grammar of the NCCL model;
    // a build without it cannot evaluate them, and says so instead of guessing.
    REQUIRE_MESSAGE(!r.forced.empty(), r.id, ": spec '", r.spec, "' of a row NCCL chose itself must parse: ", e.what());
    o.skipped = fmt::format("spec '{}' ({}) is not supported by this build: {}", r.spec, r.forced, e.what());
    return o;
  }
  // A row the model cannot build (an algorithm it refuses on that machine) is a failure of that row,
  // reported with the others, not an exception that hides the table.
  try {
    const Topology topo = load_topology(topology_arg(r));
    BuildOptions options;
    // nccl-tests' size is the whole buffer for all three collectives, as a plan's count is.
    options.count = static_cast<std::int64_t>(r.size / kFloatBytes);
    options.collective = r.collective;
    options.verify = false;  // the builders' own tests prove their plans; here only the timing matters
    const Plan plan = build_plan(topo, spec, options);
    // nccl-tests as the row ran it: r.gpus_per_thread launches per call from one thread, none with CUDA graphs
    // (artune simulate --launch thread:G / graph).
    CostModel as_run = model;
    as_run.launch = LaunchMode{r.gpus_per_thread, r.cuda_graph};
    // NCCL chose with the cost table of the release the row ran (where the source names it and the model has it).
    if (const auto release = read_nccl_release(r.nccl_version); release && nccl_release_modelled(*release)) {
      as_run.nccl_release = *release;
    }
    const SimResult s = simulate(plan, topo, as_run, kFloatBytes);
    o.predicted = r.metric == "time_us" ? s.time_us : s.busbw_gbps;
  } catch (const Error& e) {
    o.failed = e.what();
  }
  return o;
}

}  // namespace

TEST_CASE("nccl_validation.data_is_well_formed") {
  const std::vector<Row> rows = load_rows();
  // Issue 26: at least 60 rows, all-gather and reduce-scatter among them, at least 25 across machines from at
  // least 6 sources (the data README names the clusters behind them).
  CHECK(rows.size() >= 60);
  std::set<std::string> ids;
  std::map<std::string, int> per_regime;
  std::map<Collective, int> per_collective;
  std::set<std::string> multi_sources;
  int multi_rows = 0;
  for (const Row& r : rows) {
    INFO("row ", r.id);
    CHECK(ids.insert(r.id).second);
    CHECK(kTargetPercent.count(r.regime) + kReportedRegimes.count(r.regime) == 1);
    ++per_regime[r.regime];
    ++per_collective[r.collective];
    if (r.machines > 1) {
      ++multi_rows;
      multi_sources.insert(r.source);
    }
    const bool large = r.regime == "large_single" || r.regime == "large_multi";
    CHECK(r.metric == (large ? "busbw_gbps" : "time_us"));
    CHECK(r.published > 0);
    CHECK(r.size > 0);
    CHECK(r.size % kFloatBytes == 0);
    // all_gather_perf / reduce_scatter_perf print the whole buffer: count per rank × ranks × 4 B.
    if (r.collective != Collective::kAllReduce) {
      CHECK(r.size % (kFloatBytes * static_cast<std::uint64_t>(r.machines * r.gpus_per_machine)) == 0);
    }
    // The regimes' sizes are the tuner's (search.hpp), whose minimum gain per size is this validation's error.
    if (r.regime == "small") CHECK(r.size <= artune::kSmallMessageBytes);
    if (large) CHECK(r.size >= artune::kLargeMessageBytes);
    if (r.regime == "medium") CHECK((r.size > artune::kSmallMessageBytes && r.size < artune::kLargeMessageBytes));
    CHECK(r.machines >= 1);
    CHECK(r.gpus_per_machine >= 1);
    // Only the time model's derived constants and choices; a CUDA-graph row issues its calls from one thread.
    CHECK((r.derives.empty() || kTrainingRows.count(r.derives) == 1));
    CHECK(r.gpus_per_thread <= r.gpus_per_machine);
    const bool multi = r.machines > 1;
    if (large) CHECK((r.regime == "large_multi") == multi);
    CHECK(r.nics.empty() == !multi);
    CHECK(!r.source.empty());
    CHECK(!r.hardware.empty());
    // NCCL's own choice is the spec `nccl`; a forced algorithm/protocol is spelled nccl.<algo>[.<proto>].
    if (r.forced.empty()) {
      CHECK(r.spec == "nccl");
    } else {
      CHECK(r.spec.rfind("nccl.", 0) == 0);
    }
    // The topology is the machine the row was measured on: same machine and GPU counts.
    const Topology topo = load_topology(topology_arg(r));
    CHECK(topo.machine_count() == r.machines);
    CHECK(static_cast<int>(topo.gpus().size()) == r.machines * r.gpus_per_machine);
    // Across machines, the NICs decide the bandwidth: the topology must have the row's NIC count per
    // machine, each joined to the network at the row's port speed.
    if (multi) {
      CHECK(r.nics_per_machine >= 1);
      CHECK(r.nic_gbit > 0);
      std::map<int, int> nics_per_machine;
      for (const Node& n : topo.nodes()) {
        if (n.kind == NodeKind::kNic) ++nics_per_machine[n.machine];
      }
      CHECK(static_cast<int>(nics_per_machine.size()) == r.machines);
      for (const auto& [machine, count] : nics_per_machine) CHECK(count == r.nics_per_machine);
      int network_links = 0;
      for (const Link& l : topo.links()) {
        if (l.kind != LinkKind::kNetwork || topo.nodes()[l.src].kind != NodeKind::kNic) continue;
        ++network_links;
        CHECK(l.bandwidth_gbps == doctest::Approx(r.nic_gbit / 8.0));
      }
      CHECK(network_links == r.machines * r.nics_per_machine);
    } else {
      CHECK(r.nics_per_machine == 0);
    }
  }
  for (const auto& [regime, target] : kTargetPercent) {
    INFO("regime ", regime);
    CHECK(per_regime[regime] >= 5);
  }
  for (const std::string& regime : kReportedRegimes) {
    INFO("regime ", regime);
    CHECK(per_regime[regime] >= 5);
  }
  CHECK(per_collective[Collective::kAllGather] >= 1);
  CHECK(per_collective[Collective::kReduceScatter] >= 1);
  CHECK(multi_rows >= 25);
  CHECK(multi_sources.size() >= 6);
}

TEST_CASE("nccl_validation.fitted_constants_come_from_their_rows") {
  // The rows labelled `derives` are exactly the pinned training rows, and each constant recomputes from them as
  // nccl_model.cpp describes: launch_us = mean over its rows of (published − the model's device time) / the
  // launches per call; the NVLS round on 2 GPUs = mean over its rows of (published − the rest of the prediction).
  const std::vector<Row> rows = load_rows();
  const CostModel model = CostModel::defaults(BackendProfile::kNccl);
  std::map<std::string, std::set<std::string>> labelled;
  std::map<std::string, std::vector<double>> fitted;
  for (const Row& r : rows) {
    if (r.derives.empty()) continue;
    labelled[r.derives].insert(r.id);
    CAPTURE(r.id);
    REQUIRE(r.metric == "time_us");
    REQUIRE(r.collective == Collective::kAllReduce);
    const Topology topo = load_topology(topology_arg(r));
    BuildOptions options;
    options.count = static_cast<std::int64_t>(r.size / kFloatBytes);
    options.verify = false;
    const SimResult s = simulate(build_plan(topo, parse_spec(r.spec), options), topo, model, kFloatBytes);
    const double device = s.time_us - nccl::launch_us();  // the simulator charges one launch
    if (r.derives == "launch_us") {
      REQUIRE(!r.cuda_graph);
      fitted[r.derives].push_back((r.published - device) / r.gpus_per_thread);
    } else if (r.derives == "ll128_latency") {
      // LL128 on one machine is timed with LL's latencies (nccl_model.cpp kLl128OneMachineLatencyProto): NCCL picks
      // LL128 on these rows, the simulator charges LL's latency, and that prediction is nearer the published time
      // than the one with the table's LL128 latency.
      REQUIRE(!r.cuda_graph);
      REQUIRE(r.machines == 1);
      REQUIRE(s.groups.size() == 1);
      CHECK(s.groups[0].algorithm == "ring");
      CHECK(s.groups[0].protocol == "ll128");
      const nccl::Graph g = nccl::search(topo, topo.gpus());
      const double ll = nccl::all_reduce_latency_us(g, nccl::Algo::kRing, nccl::Proto::kLL);
      const double table = nccl::all_reduce_latency_us(g, nccl::Algo::kRing, nccl::Proto::kLL128);
      CHECK(s.groups[0].latency_us - nccl::launch_us() == doctest::Approx(ll));
      CHECK(table > ll + 20);  // 14 + 14 × 1.9 against 6.6 + 14 × 0.6 on 8 GPUs
      const double predicted = device + nccl::launch_us(r.gpus_per_thread);
      CHECK(std::abs(predicted - r.published) < std::abs(predicted - ll + table - r.published));
    } else {
      REQUIRE(r.cuda_graph);  // no launch in the published time
      REQUIRE(r.gpus_per_machine == 2);
      fitted[r.derives].push_back(r.published - (device - nccl::nvls_round_us(2)));
    }
  }
  CHECK(labelled == kTrainingRows);
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (const double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  // Each constant is its rows' mean as printed in nccl_model.cpp (launch_us to 0.1 µs, the NVLS round to 0.01).
  CHECK(std::abs(mean(fitted["launch_us"]) - nccl::launch_us()) <= 0.05);
  CHECK(std::abs(mean(fitted["nvls_device_us"]) - nccl::nvls_round_us(2)) <= 0.005);
}

TEST_CASE("nccl_validation.published_figures") {
  const std::vector<Row> rows = load_rows();
  const CostModel model = CostModel::defaults(BackendProfile::kNccl);
  std::map<std::string, std::vector<double>> errors;  // regime -> |error| in percent
  std::map<std::string, std::vector<double>> held;    // the same over the held-out rows
  std::map<std::pair<std::string, Collective>, std::vector<double>> held_by_collective;  // (regime, collective)
  std::vector<std::string> lines;
  std::vector<std::string> failures;
  std::vector<std::string> known_misses;
  std::map<std::string, std::pair<std::string, double>> worst;  // regime -> held-out row with the largest |error|
  std::vector<std::string> regime_lines;                          // the summary, as printed
  int skipped = 0;
  for (const Row& r : rows) {
    INFO("row ", r.id);
    const Outcome o = evaluate(r, model);
    const std::string unit = r.metric == "time_us" ? "µs" : "GB/s";
    std::string predicted = "skipped";
    std::string error = "—";
    if (o.predicted) {
      const double e = 100.0 * (*o.predicted - r.published) / r.published;
      errors[r.regime].push_back(std::fabs(e));
      if (r.derives.empty()) {
        held[r.regime].push_back(std::fabs(e));
        held_by_collective[{r.regime, r.collective}].push_back(std::fabs(e));
      }
      // The per-row cap: a miss beyond kRowCapFactor must be listed, with its reason; a listed one must be one.
      const double factor = std::max(*o.predicted / r.published, r.published / *o.predicted);
      if (r.known_miss.empty()) {
        CHECK_MESSAGE(factor <= kRowCapFactor, r.id, ": predicted ", *o.predicted, " against ", r.published,
                      " (", factor, "x): list it as a known_miss with the reason, or fix the model");
      } else {
        CHECK_MESSAGE(factor > kRowCapFactor, r.id, " is listed as a known miss but is within ", kRowCapFactor, "x");
        known_misses.push_back(fmt::format("{} ({:.2f}x): {}", r.id, factor, r.known_miss));
      }
      if (r.derives.empty()) {
        auto& w = worst[r.regime];
        if (std::fabs(e) > std::fabs(w.second)) w = {r.id, e};
      }
      predicted = fmt::format("{:.2f}", *o.predicted);
      error = fmt::format("{:+.1f} %", e);
    } else if (!o.failed.empty()) {
      predicted = "error";
      failures.push_back(r.id + ": " + o.failed);
    } else {
      ++skipped;
      fmt::print("# skipped {}: {}\n", r.id, o.skipped);
    }
    lines.push_back(fmt::format("| {} | {} | {} | {} | {}×{} | {} | `{}` | `{}` | {} | {} | {:g} | {} | {} |", r.id,
                                r.regime, to_string(r.collective), source_text(r.source), r.machines,
                                r.gpus_per_machine, r.hardware, r.spec, r.topology, size_text(r.size), unit,
                                r.published, predicted, error));
    lines.back().insert(lines.back().find(" | ", 2) + 3,
                        fmt::format("{}{} | {} | ", r.gpus_per_thread, r.cuda_graph ? ", graph" : "",
                                    r.derives.empty() ? "held out" : "`" + r.derives + "`"));
  }
  auto mean = [](const std::vector<double>& e) {
    double sum = 0;
    for (const double x : e) sum += x;
    return e.empty() ? NAN : sum / static_cast<double>(e.size());
  };
  std::map<std::string, double> mape, held_mape;
  for (const auto& [regime, e] : errors) {
    mape[regime] = mean(e);
    held_mape[regime] = mean(held[regime]);
  }

  fmt::print("<!-- nccl-validation:begin -->\n");
  fmt::print(
      "| row | launches per call (-g) | role | regime | collective | source | machines×GPUs | hardware | spec | "
      "topology | size | unit | published | predicted | error |\n");
  fmt::print("|---|---:|---|---|---|---|---|---|---|---|---|---|---:|---:|---:|\n");
  for (const std::string& l : lines) fmt::print("{}\n", l);
  auto median = [](std::vector<double> e) -> double {
    if (e.empty()) return NAN;
    std::sort(e.begin(), e.end());
    const std::size_t n = e.size();
    return n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
  };
  fmt::print(
      "\n| regime | held-out rows (sources) | held-out MAPE | median | worst held-out row | all rows | all-rows MAPE | "
      "target | met |\n|---|---:|---:|---:|---|---:|---:|---:|---|\n");
  for (const auto& [regime, e] : errors) {
    const auto target = kTargetPercent.find(regime);
    const bool met = target != kTargetPercent.end() && !std::isnan(mape[regime]) && mape[regime] <= target->second &&
                     held_mape[regime] <= target->second;
    std::set<std::string> sources;
    for (const Row& r : rows) {
      if (r.regime == regime && r.derives.empty()) sources.insert(r.source);
    }
    const bool reported = target == kTargetPercent.end();
    const std::string target_text = reported ? std::string("none") : fmt::format("≤ {:g} %", target->second);
    const std::string met_text = reported ? "reported" : met ? "yes" : "no";
    const std::string line =
        fmt::format("| {} | {} ({}) | **{:.1f} %** | {:.1f} % | {} ({:+.1f} %) | {} | {:.1f} % | {} | {} |", regime,
                    held[regime].size(), sources.size(), held_mape[regime], median(held[regime]), worst[regime].first,
                    worst[regime].second, e.size(), mape[regime], target_text, met_text);
    fmt::print("{}\n", line);
    regime_lines.push_back(line);
  }
  // The same held-out rows by collective within each regime (reported, not enforced: the targets are per regime).
  fmt::print("\n| regime | collective | held-out rows | held-out MAPE | median |\n|---|---|---:|---:|---:|\n");
  for (const auto& [key, e] : held_by_collective) {
    fmt::print("| {} | {} | {} | {:.1f} % | {:.1f} % |\n", key.first, to_string(key.second), e.size(), mean(e),
               median(e));
  }
  fmt::print("\nPer-row cap: every prediction within {:g}x of its published figure, except the known misses:\n",
             kRowCapFactor);
  for (const std::string& m : known_misses) fmt::print("\n- {}\n", m);
  if (known_misses.empty()) fmt::print("\n- none\n");
  std::size_t evaluated = 0;
  for (const auto& [regime, e] : errors) evaluated += e.size();
  fmt::print("\n{} of {} rows evaluated, {} skipped, {} failed.\n", evaluated, rows.size(), skipped, failures.size());
  for (const std::string& f : failures) fmt::print("\n- failed {}\n", f);
  fmt::print("<!-- nccl-validation:end -->\n");

  // Once the build knows the forced-algorithm grammar, every row must evaluate: a skip then means a
  // row spells its spec differently from the parser, not a missing feature.
  bool forced_grammar = true;
  try {
    parse_spec("nccl.ring");
  } catch (const InvalidInput&) {
    forced_grammar = false;
  }
  if (forced_grammar) CHECK(skipped == 0);
  for (const std::string& f : failures) CHECK_MESSAGE(false, "row could not be simulated: ", f);
  for (const auto& [regime, target] : kTargetPercent) {
    const double enforced = kEnforcedPercent.at(regime);
    INFO("regime ", regime, ": ", errors[regime].size(), " rows evaluated, MAPE ", mape[regime], " %, target ≤ ",
         target, " %, enforced ≤ ", enforced, " %");
    CHECK(!errors[regime].empty());
    CHECK(enforced >= target);
    CHECK(mape[regime] <= enforced);
    INFO("held out: ", held[regime].size(), " rows, MAPE ", held_mape[regime], " %");
    CHECK(held[regime].size() >= 5);
    CHECK(held_mape[regime] <= enforced);
  }
  // The committed report (scripts/nccl_validation.sh writes it from this output, the README quotes it) is current.
  const std::string report_path = data_dir() + "/../../../reports/nccl-validation/REPORT.md";
  const std::string report = read_input_file(report_path, "reports/nccl-validation/REPORT.md");
  // Every row's line and every regime's (the docs quote rows from it under check markers).
  for (const std::vector<std::string>* printed : {&lines, &regime_lines}) {
    for (const std::string& line : *printed) {
      CHECK_MESSAGE(report.find(line) != std::string::npos, "reports/nccl-validation/REPORT.md is stale (rerun ",
                    "scripts/nccl_validation.sh): it lacks ", line);
    }
  }
  // The tuner's default minimum gain over NCCL's own choice is this validated error (held-out MAPE per regime,
  // artune/tuner/search.hpp kValidatedModelError): it must follow the data, to the printed tenth of a percent.
  CHECK(std::abs(held_mape["small"] - artune::kValidatedModelError.small_pct) < 0.05);
  CHECK(std::abs(held_mape["medium"] - artune::kValidatedModelError.medium_pct) < 0.05);
  CHECK(std::abs(held_mape["large_single"] - artune::kValidatedModelError.large_single_pct) < 0.05);
  CHECK(std::abs(held_mape["large_multi"] - artune::kValidatedModelError.large_multi_pct) < 0.05);
}
