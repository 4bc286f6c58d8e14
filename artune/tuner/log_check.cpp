#include "artune/tuner/log_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/core/nccl_names.hpp"
#include "artune/core/parameters.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/simulator/simulator.hpp"

namespace artune {

namespace {

// A latency share at or above this makes a row latency-bound (its band is the latency band).
constexpr double kLatencyBound = 0.5;
// An alternative NCCL choice "matches" the measured time within this fraction (the "which algorithm ran" hint).
constexpr double kMatchTolerance = 0.1;
// NCCL's own choice is worth naming when it would be at least this much faster than what the log forced.
constexpr double kForcedGain = 0.1;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<int> machine_gpus(const Topology& topo, int machine) {
  std::vector<int> g = topo.nodes_of_kind(NodeKind::kGpu, machine);
  std::sort(g.begin(), g.end(), [&](int a, int b) { return topo.nodes()[a].local_index < topo.nodes()[b].local_index; });
  return g;
}

struct Placement {
  std::vector<int> gpus;  // topology GPU nodes in rank order
  int machines = 0;
  int ppn = 0;
};

std::string where(const logs::TestRun& run) { return fmt::format("{}:{}", run.source, run.header_line); }

Placement place(const Topology& topo, const logs::TestRun& run) {
  Placement p;
  const int ranks = run.ranks();
  if (!run.devices.empty()) {
    // The device lines: host i is machine i, device d its local GPU d, ranks in rank order.
    const std::vector<std::string> hosts = run.hosts();
    if (static_cast<int>(hosts.size()) > topo.machine_count()) {
      throw InvalidInput(fmt::format("{}: the run spans {} hosts, topology '{}' has {} machine(s)", where(run),
                                     hosts.size(), topo.name(), topo.machine_count()));
    }
    std::map<int, const logs::TestDevice*> by_rank;
    for (const auto& d : run.devices) by_rank.emplace(d.rank, &d);
    std::map<std::string, int> count_per_host;
    for (const auto& [rank, d] : by_rank) {
      const int m = static_cast<int>(std::find(hosts.begin(), hosts.end(), d->host) - hosts.begin());
      const std::vector<int> gpus = machine_gpus(topo, m);
      if (d->device >= static_cast<int>(gpus.size())) {
        throw InvalidInput(fmt::format("{}: rank {} runs on device {} of {}; machine {} of topology '{}' has {} GPU(s)",
                                       where(run), rank, d->device, d->host, m, topo.name(), gpus.size()));
      }
      p.gpus.push_back(gpus[static_cast<std::size_t>(d->device)]);
      ++count_per_host[d->host];
    }
    std::set<int> distinct(p.gpus.begin(), p.gpus.end());
    if (distinct.size() != p.gpus.size()) {
      throw InvalidInput(fmt::format("{}: two ranks name the same device of one host", where(run)));
    }
    p.machines = static_cast<int>(hosts.size());
    p.ppn = count_per_host.begin()->second;
    for (const auto& [h, c] : count_per_host) {
      if (c != p.ppn) {
        throw InvalidInput(fmt::format("{}: host {} runs {} ranks and {} runs {}; NCCL's model needs the same number "
                                       "on every machine",
                                       where(run), count_per_host.begin()->first, p.ppn, h, c));
      }
    }
    return p;
  }
  // No device lines: the topology's GPUs when the ranks are all of them, else the first GPUs of every machine.
  const int total = static_cast<int>(topo.gpus().size());
  const int machines = std::max(1, topo.machine_count());
  if (ranks == total || ranks == 0) {
    p.gpus = topo.gpus();
    p.machines = machines;
    p.ppn = total / machines;
    return p;
  }
  if (ranks % machines == 0 && ranks / machines <= static_cast<int>(machine_gpus(topo, 0).size())) {
    p.ppn = ranks / machines;
    p.machines = machines;
    for (int m = 0; m < machines; ++m) {
      const std::vector<int> g = machine_gpus(topo, m);
      p.gpus.insert(p.gpus.end(), g.begin(), g.begin() + p.ppn);
    }
    return p;
  }
  throw InvalidInput(fmt::format("{}: the run has {} ranks and no 'Using devices' lines; topology '{}' has {} GPUs on "
                                 "{} machine(s) (pass the topology of the ranks that ran)",
                                 where(run), ranks, topo.name(), total, machines));
}

// What the run forced, from --spec or from the environment the log shows.
struct Forcing {
  std::optional<nccl::Algo> algo;
  std::optional<nccl::Proto> proto;
  std::set<nccl::Algo> excluded;
  std::string from = "NCCL's own choice";
  std::vector<std::string> notes;
  bool any() const { return algo || proto || !excluded.empty(); }
};

std::optional<nccl::Algo> algo_named(const std::string& n) {
  for (int a = 0; a < nccl::kAlgos; ++a) {
    if (n == nccl::to_string(static_cast<nccl::Algo>(a))) return static_cast<nccl::Algo>(a);
  }
  return std::nullopt;
}

std::optional<nccl::Proto> proto_named(const std::string& n) {
  for (int p = 0; p < nccl::kProtos; ++p) {
    if (n == nccl::to_string(static_cast<nccl::Proto>(p))) return static_cast<nccl::Proto>(p);
  }
  return std::nullopt;
}

Forcing forcing_of(const CheckOptions& options, const logs::TestRun& run, const logs::InfoLog* info) {
  Forcing f;
  if (!options.spec.empty()) {
    if (options.spec != "nccl") {
      if (options.spec.rfind("nccl.", 0) != 0) {
        throw InvalidInput(fmt::format("{} '{}': check compares NCCL runs: nccl or nccl.ALGO[.PROTO]",
                                       parameter("spec"), options.spec));
      }
      const nccl::Forced forced = nccl::parse_variant(options.spec.substr(5), parameter("spec"));
      if (forced.channels > 0) {
        throw InvalidInput(
            fmt::format("{} '{}': a channel count is not what a log shows", parameter("spec"), options.spec));
      }
      f.algo = forced.algo;
      f.proto = forced.proto;
    }
    f.from = parameter("spec");
    return f;
  }
  std::map<std::string, std::string> env = run.env;
  if (info != nullptr) {
    for (const auto& [k, v] : info->env) env.emplace(k, v);
  }
  std::vector<std::string> from;
  if (const auto it = env.find("NCCL_ALGO"); it != env.end()) {
    const std::string v = lower(it->second);
    if (v.find_first_of(";:,") != std::string::npos) {
      f.notes.push_back(fmt::format("NCCL_ALGO={} lists several algorithms: the model takes NCCL's own choice among "
                                    "all of them",
                                    it->second));
    } else if (!v.empty() && v.front() == '^') {
      if (const auto a = algo_named(v.substr(1))) f.excluded.insert(*a);
      from.push_back("NCCL_ALGO=" + it->second);
    } else if (const auto a = algo_named(v)) {
      f.algo = a;
      from.push_back("NCCL_ALGO=" + it->second);
    } else {
      f.notes.push_back(fmt::format("NCCL_ALGO={} is not an algorithm the model has (ring, tree, nvls, nvlstree, pat)",
                                    it->second));
    }
  }
  if (const auto it = env.find("NCCL_PROTO"); it != env.end()) {
    const std::string v = lower(it->second);
    if (v.find_first_of(";:,") != std::string::npos) {
      f.notes.push_back(fmt::format("NCCL_PROTO={} lists several protocols: the model takes NCCL's own choice",
                                    it->second));
    } else if (!v.empty() && v.front() == '^') {
      f.notes.push_back(fmt::format("NCCL_PROTO={} excludes a protocol: the model takes NCCL's own choice",
                                    it->second));
    } else if (const auto p = proto_named(v)) {
      f.proto = p;
      from.push_back("NCCL_PROTO=" + it->second);
    } else {
      f.notes.push_back(fmt::format("NCCL_PROTO={} is not a protocol the model has (ll, ll128, simple)", it->second));
    }
  }
  if (const auto it = env.find("NCCL_NVLS_ENABLE"); it != env.end() && it->second == "0") {
    f.excluded.insert(nccl::Algo::kNvls);
    f.excluded.insert(nccl::Algo::kNvlsTree);
    from.push_back("NCCL_NVLS_ENABLE=0");
  }
  if (!from.empty()) {
    f.from.clear();
    for (const auto& s : from) f.from += (f.from.empty() ? "" : ", ") + s;
    f.from += " (log)";
  }
  return f;
}

// What the run forced, as a spec ("nccl.ring", "nccl.ring.simple") or in words.
std::string forcing_text(const Forcing& f, const std::string& spec) {
  if (!spec.empty()) return spec;
  if (!f.any()) return "nccl";
  std::string out = "nccl";
  if (f.algo) out += "." + std::string(nccl::to_string(*f.algo));
  if (f.proto) out += (f.algo ? "." : " with protocol ") + std::string(nccl::to_string(*f.proto));
  for (const auto a : f.excluded) out += " without " + std::string(nccl::to_string(a));
  return out;
}

// The spec NCCL runs for one size under the forcing: its cheapest allowed choice ("nccl" when nothing is forced).
std::string spec_for(const nccl::Graph& graph, double bytes, Collective coll, const Forcing& f, const std::string& what) {
  if (!f.any()) return "nccl";
  double best = -1;
  std::string spec;
  for (int a = 0; a < nccl::kAlgos; ++a) {
    const auto algo = static_cast<nccl::Algo>(a);
    if (f.algo && *f.algo != algo) continue;
    if (f.excluded.count(algo) != 0) continue;
    nccl::Forced forced;
    forced.algo = algo;
    forced.proto = f.proto;
    try {
      const nccl::Choice c = nccl::choose(graph, bytes, forced, what, coll);
      if (best < 0 || c.nccl_time_us < best) {
        best = c.nccl_time_us;
        spec = fmt::format("nccl.{}.{}", nccl::to_string(c.algo), nccl::to_string(c.proto));
      }
    } catch (const InvalidInput&) {
      // not available here; another algorithm may be
    }
  }
  if (best < 0) {
    nccl::Forced forced;
    forced.algo = f.algo;
    forced.proto = f.proto;
    (void)nccl::choose(graph, bytes, forced, what, coll);  // throws the model's own message
    throw InvalidInput(fmt::format("{}: nothing NCCL's model runs is left", what));
  }
  return spec;
}

struct Prediction {
  double time_us = 0;
  double latency_us = 0;
  std::string nccl;
  std::string algo, proto;
  int channels = 0;
  int bottleneck_link = -1;
};

// What a run's own launches add to the simulated time: the simulator charges the model's launches per call, the
// run paid its own (nccl-tests -g, -G).
double launch_difference_us(const CostModel& model, int gpus_per_thread, bool graph) {
  return nccl::launch_us(gpus_per_thread, graph) - nccl::launch_us(model.launch.gpus_per_thread, model.launch.cuda_graph);
}

// The NCCL release whose cost table chose in a run: the version the log prints where the model reproduces that
// release's choice (a note says which), else `fallback` (the model's own).
NcclRelease run_release(const std::string& version, const NcclRelease& fallback, std::vector<std::string>* notes) {
  const std::optional<NcclRelease> printed = read_nccl_release(version);
  if (!printed) return fallback;
  if (!nccl_release_modelled(*printed)) {
    if (notes != nullptr) {
      notes->push_back(fmt::format("NCCL {} predates the oldest release whose choice the model reproduces ({}): NCCL's "
                                   "choice is modelled with {}'s cost table",
                                   version, to_string(kOldestModelledNcclRelease), to_string(fallback)));
    }
    return fallback;
  }
  if (notes != nullptr && *printed != fallback) {
    notes->push_back(fmt::format("NCCL {} (the log's version) chooses with its own cost table", to_string(*printed)));
  }
  return *printed;
}

Prediction predict(const Topology& topo, const Placement& p, Collective coll, std::uint64_t bytes, int type_bytes,
                   const std::string& spec, const CheckOptions& options, int gpus_per_thread, bool graph) {
  BuildOptions o;
  o.count = static_cast<std::int64_t>(bytes / static_cast<std::uint64_t>(type_bytes));
  o.participants = p.gpus;
  o.collective = coll;
  o.verify = false;  // the builders' own tests prove NCCL plans; only the timing matters here
  const Plan plan = build_plan(topo, parse_collective_spec(coll, spec), o);
  const SimResult s = simulate(plan, topo, options.model, static_cast<std::size_t>(type_bytes));
  Prediction r;
  const double launches = launch_difference_us(options.model, gpus_per_thread, graph);
  r.time_us = s.time_us + launches;
  r.bottleneck_link = s.bottleneck_link;
  if (!s.groups.empty()) {
    const GroupRun& g = s.groups.front();
    r.latency_us = g.latency_us + launches;
    r.algo = g.algorithm;
    r.proto = g.protocol;
    r.channels = g.channels;
    r.nccl = fmt::format("{}/{}/{}", g.algorithm, g.protocol, g.channels);
  }
  return r;
}

int nics_per_machine(const Topology& topo) { return static_cast<int>(topo.nodes_of_kind(NodeKind::kNic, 0).size()); }

int model_nics(const nccl::Graph& g) {
  std::set<int> used;
  for (const auto& ch : g.rings) {
    if (!ch.nics.empty()) used.insert(ch.nics.front());
  }
  return static_cast<int>(used.size());
}

std::string collective_program(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce_perf";
    case Collective::kAllGather: return "all_gather_perf";
    case Collective::kReduceScatter: return "reduce_scatter_perf";
    default: return "?";
  }
}

// The compute capability a GPU's name implies (nccl-tests' `Using devices` names), 0 when not known.
int compcap_of_name(const std::string& name) {
  struct Known {
    const char* part;
    int compcap;
  };
  // Data-center parts by generation (NVIDIA's product names; sm of each generation).
  static const Known known[] = {{"P100", 60}, {"V100", 70}, {"A100", 80}, {"A800", 80}, {"H100", 90},
                                {"H800", 90}, {"H200", 90},  {"H20", 90},   {"B200", 100}, {"B100", 100}};
  for (const auto& k : known) {
    if (name.find(k.part) != std::string::npos) return k.compcap;
  }
  return 0;
}

// Run-level findings from an NCCL INFO log of the same job.
void info_findings(const logs::InfoLog& info, const nccl::Graph& graph, const Topology& topo, const Placement& p,
                   std::vector<std::string>& out) {
  if (info.nranks > 0 && info.nranks != static_cast<int>(p.gpus.size())) {
    out.push_back(fmt::format("{}: the NCCL log is of a communicator of {} ranks, not this run's {}: not compared",
                              info.source, info.nranks, p.gpus.size()));
    return;
  }
  // The table is the INFO log's NCCL's: its own printed release where it names one the model has.
  nccl::Graph printed = graph;
  printed.release = run_release(info.nccl_version, graph.release, nullptr);
  if (const CostTableCheck table = compare_cost_table(info, printed); table.cells > 0) {
    if (table.matching == table.cells) {
      out.push_back(fmt::format("{}: NCCL's printed cost table is the model's in all {} cells (to the printed digit)",
                                info.source, table.cells));
    } else {
      out.push_back(fmt::format(
          "{}: NCCL's printed cost table differs from the model's (NCCL {}'s) in {} of {} cells ({}{}): is this "
          "topology the machine, and that NCCL release?",
          info.source, to_string(printed.release), table.cells - table.matching, table.cells,
          fmt::join(table.differing.begin(), table.differing.begin() + std::min<std::size_t>(3, table.differing.size()),
                    "; "),
          table.differing.size() > 3 ? "; …" : ""));
    }
  }
  if (info.search_fallbacks > 0) {
    out.push_back(fmt::format("{}: NCCL's graph search found no path and fell back to the simple order ({}x 'Could "
                              "not find a path for pattern')",
                              info.source, info.search_fallbacks));
  }
  // The tree graph's pattern (src/include/graph.h NCCL_TOPO_PATTERN_BALANCED_TREE 1, SPLIT_TREE 2, TREE 3; NCCL
  // takes the largest over the ranks, comm->maxTreePattern): TREE costs Tree .85 of its bandwidth in NCCL's table,
  // and the model's search says which one this topology gives (nccl::Graph::simple_tree).
  constexpr int kBalancedTreePattern = 1, kTreePattern = 3, kRingPattern = 4;
  const auto is_tree = [](const logs::InfoGraph& g) {
    return g.pattern >= kBalancedTreePattern && g.pattern <= kTreePattern;
  };
  for (const auto& g : info.graphs) {
    // Across machines a tree graph's bwIntra is raised above the ring's (nccl::Graph::tree_bw_intra).
    const double expected = is_tree(g) ? graph.tree_bw_intra : graph.bw_intra;
    if (g.channels < graph.channels || g.bw_intra + 1e-9 < expected) {
      out.push_back(
          fmt::format("{}:{}: NCCL's graph (pattern {}) has {} channel(s) at {:g} GB/s, type {}/{}; the "
                      "model's search finds {} at {:g} GB/s",
                      info.source, g.line, g.pattern, g.channels, g.bw_intra, g.type_intra, g.type_inter,
                      graph.channels, expected));
    }
  }
  const logs::InfoGraph* tree_graph = nullptr;
  for (const auto& g : info.graphs) {
    if (is_tree(g) && (tree_graph == nullptr || g.pattern > tree_graph->pattern)) tree_graph = &g;
  }
  if (tree_graph != nullptr && (tree_graph->pattern == kTreePattern) != graph.simple_tree) {
    out.push_back(
        graph.simple_tree
            ? fmt::format("{}:{}: NCCL's tree graph has pattern {} (NIC traffic spread over two GPUs) where the model's "
                          "search expects the simpler TREE (3, all NIC traffic through one GPU, Tree at .85 of its "
                          "bandwidth in NCCL's table): do two GPUs share a PCIe switch with each NIC on this machine?",
                          info.source, tree_graph->line, tree_graph->pattern)
            : fmt::format("{}:{}: NCCL's tree graph has the simpler TREE pattern (3: all NIC traffic through one GPU, "
                          "Tree at .85 of its bandwidth in NCCL's table) where the model's search expects a balanced "
                          "tree: does each GPU have its own NIC, under its own PCIe switch?",
                          info.source, tree_graph->line));
  }
  // The ring graph's GPU-to-NIC path type (NCCL's typeInter, printed after the '/' of "type"; NCCL names PCIe host
  // bridges within a socket PHB, where nvidia-smi says NODE) against the model's: PXN on one side only says which
  // GPUs share a PCIe switch with each NIC.
  if (p.machines > 1) {
    const std::string model_type(graph.type_inter == PathType::kNode ? "PHB" : to_string(graph.type_inter));
    for (const auto& g : info.graphs) {
      if (g.pattern != kRingPattern || g.type_inter.empty() || g.type_inter == model_type) continue;
      const bool nccl_pxn = g.type_inter == "PXN", model_pxn = graph.type_inter == PathType::kPxn;
      const bool near = g.type_inter == "PIX" || g.type_inter == "PXB";
      out.push_back(fmt::format(
          "{}:{}: NCCL's ring graph reaches its NICs over {} paths where the model's search goes over {}: {}", info.source,
          g.line, g.type_inter, model_type,
          nccl_pxn && !model_pxn ? "NCCL sends through a peer GPU (PXN), so no NIC shares a PCIe switch with two GPUs "
                                   "of a ring: does each NIC have one GPU of its own?"
          : model_pxn && near    ? "NCCL's rings start and end within each NIC's PCIe switch: do two GPUs share a "
                                   "switch with each NIC (the topology gives each NIC one), or did the run set "
                                   "NCCL_PXN_DISABLE=1?"
                                 : "are the NICs under the PCIe switches or CPUs the topology puts them?"));
      break;
    }
  }
  const int built = info.ring_channels();
  if (built > 0 && built != graph.channels) {
    out.push_back(fmt::format("{}: NCCL built {} ring channel(s); the model's search finds {}", info.source, built,
                              graph.channels));
  }
  if (p.machines > 1) {
    const int topo_nics = nics_per_machine(topo);
    std::map<std::string, int> opened;
    for (const auto& d : info.net_devices) ++opened[d.host];
    for (const auto& [host, n] : opened) {
      if (n < topo_nics) {
        out.push_back(fmt::format("{}: NCCL opened {} network device(s) on {}; the topology has {} NIC(s) per machine",
                                  info.source, n, host, topo_nics));
      }
    }
    for (const auto& [host, used] : info.devices_used()) {
      // A device NCCL fused of several ports (2.24 on) counts as its ports: a topology lists ports as NICs.
      int ports = 0;
      for (int d : used) ports += info.ports_of(host, d);
      if (ports < model_nics(graph)) {
        const std::string fused = ports == static_cast<int>(used.size()) ? "" : fmt::format(", {} ports fused", ports);
        out.push_back(
            fmt::format("{}: the printed network connections of {} use {} NIC(s) (device {}{}); the "
                        "model's rings use {} of the {} per machine",
                        info.source, host, used.size(), fmt::join(used, ", "), fused, model_nics(graph), topo_nics));
      }
    }
  }
}

}  // namespace

CostTableCheck compare_cost_table(const logs::InfoLog& info, const nccl::Graph& graph) {
  // The printed digit: NCCL prints "%8.1f/%6.1f".
  constexpr double kPrintedDigit = 0.05 + 1e-9;
  CostTableCheck out;
  std::map<Collective, nccl::CostTable> tables;
  for (const logs::InfoCost& cell : info.costs) {
    std::optional<Collective> coll;
    if (cell.function == "AllReduce") coll = Collective::kAllReduce;
    if (cell.function == "AllGather") coll = Collective::kAllGather;
    if (cell.function == "ReduceScatter") coll = Collective::kReduceScatter;
    if (!coll) continue;
    const std::optional<NcclAlgo> algo = nccl_algo_of(cell.algo);
    const std::optional<NcclProto> proto = nccl_proto_of(cell.proto);
    if (!algo || !proto) continue;  // an algorithm the model does not have (CollNet)
    auto it = tables.find(*coll);
    if (it == tables.end()) it = tables.emplace(*coll, nccl::cost_table(graph, *coll)).first;
    const int a = static_cast<int>(*algo), pr = static_cast<int>(*proto);
    const double lat = it->second.latency_us[a][pr], bw = it->second.bandwidth[a][pr];
    ++out.cells;
    const bool both_off = cell.bandwidth_gbps == 0 && bw < kPrintedDigit;
    const bool same =
        std::fabs(lat - cell.latency_us) <= kPrintedDigit && std::fabs(bw - cell.bandwidth_gbps) <= kPrintedDigit;
    if (both_off || same) {
      ++out.matching;
    } else {
      out.differing.push_back(fmt::format("line {}: {} {}/{}: NCCL {:.1f}/{:.1f}, the model {:.1f}/{:.1f}", cell.line,
                                          cell.function, cell.algo, cell.proto, cell.latency_us, cell.bandwidth_gbps,
                                          lat, bw));
    }
  }
  return out;
}

std::optional<Collective> run_collective(const logs::TestRun& run, const std::optional<Collective>& forced,
                                         std::string* from) {
  auto say = [&](const char* s) {
    if (from != nullptr) *from = s;
  };
  const std::string& p = run.program;
  if (!p.empty()) {
    say("program");
    if (p.find("all_reduce") != std::string::npos) return Collective::kAllReduce;
    if (p.find("all_gather") != std::string::npos) return Collective::kAllGather;
    if (p.find("reduce_scatter") != std::string::npos) return Collective::kReduceScatter;
    return std::nullopt;  // broadcast, reduce, alltoall, sendrecv, …: not modelled
  }
  if (forced) {
    say("parameter collective");
    return forced;
  }
  say("columns");
  const bool none = !run.rows.empty() && run.rows.front().redop == "none";
  if (none) return Collective::kAllGather;
  if (run.size_per_count > 1) return Collective::kReduceScatter;
  return Collective::kAllReduce;
}

CheckReport check_runs(const Topology& topo, const std::vector<logs::TestRun>& runs, const logs::InfoLog* info,
                       const CheckOptions& options) {
  CheckReport report;
  report.topology = topo.name();
  for (const logs::TestRun& run : runs) {
    CheckRun cr;
    cr.source = run.source;
    cr.header_line = run.header_line;
    cr.program = run.program;
    cr.nccl_version = run.nccl_version.empty() && info != nullptr ? info->nccl_version : run.nccl_version;
    const auto coll = run_collective(run, options.collective, &cr.collective_from);
    if (!coll) {
      cr.modelled = false;
      cr.findings.push_back(fmt::format("{} is not a collective NCCL's model covers (all-reduce, all-gather, "
                                        "reduce-scatter): not checked",
                                        run.program));
      report.runs.push_back(std::move(cr));
      continue;
    }
    cr.collective = *coll;
    if (cr.collective_from == "columns") {
      cr.findings.push_back(fmt::format("the log does not name its program: taken as {} from its columns ({} to say "
                                        "otherwise)",
                                        collective_program(cr.collective), parameter("collective")));
    }
    const Placement p = place(topo, run);
    cr.ranks = static_cast<int>(p.gpus.size());
    cr.machines = p.machines;
    cr.gpus_per_machine = p.ppn;
    cr.gpus_per_thread = std::max(1, run.gpus_per_thread);
    cr.cuda_graph = run.graph > 0;
    if (run.ranks() > 0 && run.ranks() != cr.ranks) {
      throw InvalidInput(fmt::format("{}: the table's bus bandwidth factor says {} ranks, the topology places {}",
                                     where(run), run.ranks(), cr.ranks));
    }
    if (run.copies() > 1) {
      cr.findings.push_back(fmt::format("{} jobs printed into this table (its ranks repeat): every size appears once "
                                        "per job",
                                        run.copies()));
    }
    if (run.interrupted_rows > 0) {
      cr.findings.push_back(fmt::format("{} row(s) cut by NCCL log lines were skipped", run.interrupted_rows));
    }
    if (!run.footer) cr.findings.push_back("the table ends without nccl-tests' footer (the log may be cut short)");
    if (run.gpus_per_thread > 1) {
      cr.findings.push_back(fmt::format("nGpus {}: one thread launches {} kernels per call ({:.1f} µs of launches in "
                                        "the model)",
                                        run.gpus_per_thread, run.gpus_per_thread,
                                        nccl::launch_us(run.gpus_per_thread, cr.cuda_graph)));
    }
    const Forcing forcing = forcing_of(options, run, info);
    cr.findings.insert(cr.findings.end(), forcing.notes.begin(), forcing.notes.end());
    cr.spec_from = forcing.from;
    CheckOptions run_options = options;
    run_options.model.nccl_release = run_release(cr.nccl_version, options.model.nccl_release, &cr.findings);
    nccl::Graph graph = nccl::search(topo, p.gpus, run_options.model.nccl_release);
    if (!run.devices.empty()) {
      const int logged = compcap_of_name(run.devices.front().name);
      if (logged > 0 && logged != graph.compcap) {
        cr.findings.push_back(fmt::format("the log's GPUs are {} (sm{}); the topology's are sm{}: does {} describe "
                                          "this machine?",
                                          run.devices.front().name, logged, graph.compcap, parameter("topology")));
      }
    }
    if (info != nullptr && !info->empty()) info_findings(*info, graph, topo, p, cr.findings);
    const bool wrong_counts = std::find(run.columns.begin(), run.columns.end(), "#wrong") != run.columns.end() ||
                              std::find(run.columns.begin(), run.columns.end(), "wrong") != run.columns.end();
    for (const logs::TestRow& row : run.rows) {
      if (row.bytes == 0) continue;
      const int tb = logs::type_bytes(row.type);
      if (tb <= 0 || row.bytes % static_cast<std::uint64_t>(tb) != 0) continue;
      const std::string what = fmt::format("{}:{}", run.source, row.line);
      const std::string spec = options.spec.empty() || options.spec == "nccl"
                                   ? spec_for(graph, static_cast<double>(row.bytes), cr.collective, forcing, what)
                                   : options.spec;
      CheckRow r;
      r.line = row.line;
      r.bytes = row.bytes;
      const logs::TestResult& m = row.out_of_place ? *row.out_of_place : row.in_place;
      r.measured_us = m.time_us;
      r.measured_busbw_gbps = m.busbw_gbps;
      Prediction pr;
      try {
        pr = predict(topo, p, cr.collective, row.bytes, tb, spec, run_options, cr.gpus_per_thread, cr.cuda_graph);
      } catch (const InvalidInput& e) {
        throw InvalidInput(fmt::format("{}: {}", what, e.what()));
      }
      r.model_us = pr.time_us;
      const double factor = bus_factor(cr.collective, cr.ranks);
      r.model_busbw_gbps = pr.time_us > 0 ? static_cast<double>(row.bytes) / (pr.time_us * 1e3) * factor : 0;
      r.ratio = r.measured_us > 0 ? pr.time_us / r.measured_us : 0;
      r.nccl = pr.nccl;
      r.latency_share = pr.time_us > 0 ? std::min(1.0, pr.latency_us / pr.time_us) : 1.0;
      const bool latency_bound = r.latency_share >= kLatencyBound;
      if (latency_bound || pr.bottleneck_link < 0) {
        r.bound = "latency";
      } else {
        const Link& l = topo.links()[static_cast<std::size_t>(pr.bottleneck_link)];
        r.bound = fmt::format("bandwidth: {} {:g} GB/s", to_string(l.kind), l.bandwidth_gbps);
      }
      const CheckBand band = latency_bound     ? options.latency_band
                             : p.machines > 1 ? options.network_band
                                              : options.bandwidth_band;
      r.verdict = "ok";
      if (wrong_counts && m.check && *m.check > 0) {
        r.verdict = "wrong";
        r.causes.push_back(fmt::format("#wrong {:g}: the run computed wrong results (a broken transport or "
                                       "configuration, whatever its speed)",
                                       *m.check));
      } else if (r.ratio < band.low) {
        r.verdict = "slow";
      } else if (r.ratio > band.high) {
        r.verdict = "fast";
      }
      if (r.verdict == "slow" || r.verdict == "fast") {
        const double extra = r.measured_us - pr.time_us;
        if (latency_bound) {
          r.causes.push_back(fmt::format(
              "latency-bound: the model's {:.1f} µs are {:.0f}% latency ({} launch(es) per call and NCCL's {}/{} "
              "steps); the run took {:+.1f} µs per call",
              pr.time_us, 100 * r.latency_share, cr.cuda_graph ? 0 : cr.gpus_per_thread, pr.algo, pr.proto, extra));
        } else if (pr.bottleneck_link >= 0) {
          const Link& l = topo.links()[static_cast<std::size_t>(pr.bottleneck_link)];
          if (l.kind == LinkKind::kNetwork && p.machines > 1) {
            const int used = std::max(1, model_nics(graph));
            r.causes.push_back(fmt::format(
                "bandwidth-bound by the network: the model's rings use {} of the {} NICs per machine ({:g} GB/s "
                "each); the measured busbw is what {:.1f} of them carry",
                used, nics_per_machine(topo), l.bandwidth_gbps, r.ratio * used));
          } else {
            const bool heads = pr.algo == "nvls" || pr.algo == "nvlstree";
            r.causes.push_back(fmt::format(
                "bandwidth-bound by {} ({:g} GB/s links): the model runs {} {}; the measured busbw is what {:.1f} of "
                "them carry",
                to_string(l.kind), l.bandwidth_gbps, std::max(1, pr.channels), heads ? "NVLS heads" : "channel(s)",
                r.ratio * std::max(1, pr.channels)));
          }
        }
        // What NCCL's own choice would take when the log forced something.
        if (forcing.any()) {
          const Prediction own = predict(topo, p, cr.collective, row.bytes, tb, "nccl", options, cr.gpus_per_thread,
                                         cr.cuda_graph);
          if (own.time_us < pr.time_us * (1 - kForcedGain)) {
            r.causes.push_back(fmt::format("{} forces {}; NCCL's own choice ({}) would take {:.1f} µs", forcing.from,
                                           spec, own.nccl, own.time_us));
          }
        }
        // Which of NCCL's algorithms matches the measured time: what may really have run.
        for (int a = 0; a < nccl::kAlgos; ++a) {
          const auto algo = static_cast<nccl::Algo>(a);
          const std::string alt = fmt::format("nccl.{}", nccl::to_string(algo));
          if (alt == spec || spec.rfind(alt + ".", 0) == 0) continue;
          try {
            nccl::Forced fa;
            fa.algo = algo;
            (void)nccl::choose(graph, static_cast<double>(row.bytes), fa, what, cr.collective);
            const Prediction q = predict(topo, p, cr.collective, row.bytes, tb, alt, options, cr.gpus_per_thread,
                                         cr.cuda_graph);
            if (std::fabs(q.time_us - r.measured_us) <= kMatchTolerance * r.measured_us) {
              r.causes.push_back(fmt::format("the measured time matches NCCL {} ({}: {:.1f} µs): did {} run?", alt,
                                             q.nccl, q.time_us, nccl::to_string(algo)));
            }
          } catch (const InvalidInput&) {
            // NCCL's model lacks that algorithm here
          }
        }
        if (r.verdict == "fast") {
          r.causes.push_back("faster than the model: does the topology describe this machine (GPUs, NVLink, NICs)?");
        }
        if (info != nullptr) {
          for (const auto& pick : info->picks) {
            if (pick.bytes != row.bytes || pr.algo.empty()) continue;
            if (pick.algo != pr.algo || pick.proto != pr.proto) {
              r.causes.push_back(fmt::format("{}:{}: NCCL picked {}/{} at this size; the model's NCCL picks {}/{}",
                                             info->source, pick.line, pick.algo, pick.proto, pr.algo, pr.proto));
            }
            break;
          }
          for (const auto& f : cr.findings) {
            if (f.rfind(info->source + ":", 0) == 0 && r.causes.size() < 8) r.causes.push_back(f);
          }
        }
      }
      cr.rows.push_back(std::move(r));
    }
    cr.spec = forcing_text(forcing, options.spec);
    report.runs.push_back(std::move(cr));
  }
  return report;
}

std::vector<RunRowPlan> run_row_plans(const Topology& topo, const logs::TestRun& run, const logs::InfoLog* info,
                                      const CheckOptions& options) {
  std::vector<RunRowPlan> out;
  std::string from;
  const auto coll = run_collective(run, options.collective, &from);
  if (!coll) return out;
  const Placement p = place(topo, run);
  const Forcing forcing = forcing_of(options, run, info);
  const nccl::Graph graph =
      nccl::search(topo, p.gpus,
                   run_release(run.nccl_version.empty() && info != nullptr ? info->nccl_version : run.nccl_version,
                               options.model.nccl_release, nullptr));
  const double launches = launch_difference_us(options.model, std::max(1, run.gpus_per_thread), run.graph > 0);
  for (const logs::TestRow& row : run.rows) {
    const int tb = logs::type_bytes(row.type);
    if (row.bytes == 0 || tb <= 0 || row.bytes % static_cast<std::uint64_t>(tb) != 0) continue;
    const std::string what = fmt::format("{}:{}", run.source, row.line);
    const std::string spec = options.spec.empty() || options.spec == "nccl"
                                 ? spec_for(graph, static_cast<double>(row.bytes), *coll, forcing, what)
                                 : options.spec;
    RunRowPlan r;
    r.line = row.line;
    r.bytes = row.bytes;
    r.element_bytes = static_cast<std::size_t>(tb);
    BuildOptions o;
    o.count = static_cast<std::int64_t>(row.bytes / static_cast<std::uint64_t>(tb));
    o.participants = p.gpus;
    o.collective = *coll;
    o.verify = false;
    try {
      r.plan = build_plan(topo, parse_collective_spec(*coll, spec), o);
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("{}: {}", what, e.what()));
    }
    r.launch_extra_us = launches;
    r.measured_us = row.out_of_place ? row.out_of_place->time_us : row.in_place.time_us;
    out.push_back(std::move(r));
  }
  return out;
}

int CheckReport::flagged() const {
  int n = 0;
  for (const auto& r : runs) {
    for (const auto& row : r.rows) n += row.verdict == "ok" ? 0 : 1;
  }
  return n;
}

int CheckReport::rows() const {
  int n = 0;
  for (const auto& r : runs) n += static_cast<int>(r.rows.size());
  return n;
}

nlohmann::json CheckReport::to_json() const {
  nlohmann::json doc;
  doc["topology"] = topology;
  doc["rows"] = rows();
  doc["flagged"] = flagged();
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json j;
    j["source"] = r.source;
    j["header_line"] = r.header_line;
    j["program"] = r.program;
    j["modelled"] = r.modelled;
    j["collective"] = std::string(collective_flag_name(r.collective));
    j["collective_from"] = r.collective_from;
    j["ranks"] = r.ranks;
    j["machines"] = r.machines;
    j["gpus_per_machine"] = r.gpus_per_machine;
    j["gpus_per_thread"] = r.gpus_per_thread;
    j["cuda_graph"] = r.cuda_graph;
    j["spec"] = r.spec;
    j["spec_from"] = r.spec_from;
    j["nccl_version"] = r.nccl_version;
    j["findings"] = r.findings;
    nlohmann::json rows_json = nlohmann::json::array();
    for (const auto& row : r.rows) {
      rows_json.push_back({{"line", row.line},
                           {"bytes", row.bytes},
                           {"measured_us", row.measured_us},
                           {"measured_busbw_gbps", row.measured_busbw_gbps},
                           {"model_us", row.model_us},
                           {"model_busbw_gbps", row.model_busbw_gbps},
                           {"ratio", row.ratio},
                           {"nccl", row.nccl},
                           {"bound", row.bound},
                           {"latency_share", row.latency_share},
                           {"verdict", row.verdict},
                           {"causes", row.causes}});
    }
    j["rows"] = std::move(rows_json);
    rs.push_back(std::move(j));
  }
  doc["runs"] = std::move(rs);
  return doc;
}

std::string CheckReport::text() const {
  std::string out;
  for (const auto& r : runs) {
    out += fmt::format("# {} (table at line {}): {}", r.source, r.header_line,
                       r.program.empty() ? collective_program(r.collective) + " (from its columns)" : r.program);
    if (!r.modelled) {
      out += "\n";
      for (const auto& f : r.findings) out += fmt::format("#   {}\n", f);
      continue;
    }
    out += fmt::format(", {} ranks on {} machine(s) of {}, {} per thread{}, NCCL {}\n", r.ranks, r.machines, topology,
                       r.gpus_per_thread, r.cuda_graph ? " (CUDA graph)" : "",
                       r.nccl_version.empty() ? "version not printed" : r.nccl_version);
    out += fmt::format("# model: {} ({})\n", r.spec, r.spec_from);
    for (const auto& f : r.findings) out += fmt::format("#   {}\n", f);
    out += fmt::format("{:>12}  {:>11}  {:>10}  {:>9}  {:>9}  {:>6}  {:<18}  {:<30}  {}\n", "size", "measured(us)",
                       "model(us)", "busbw", "model", "ratio", "model's NCCL", "bound", "verdict");
    for (const auto& row : r.rows) {
      out += fmt::format("{:>12}  {:>11.2f}  {:>10.2f}  {:>9.2f}  {:>9.2f}  {:>6.2f}  {:<18}  {:<30}  {}\n", row.bytes,
                         row.measured_us, row.model_us, row.measured_busbw_gbps, row.model_busbw_gbps, row.ratio,
                         row.nccl, row.bound, row.verdict);
      for (const auto& c : row.causes) out += fmt::format("{:>14}{}\n", "-> ", c);
    }
  }
  out += fmt::format("# {} of {} rows outside the band\n", flagged(), rows());
  return out;
}

}  // namespace artune
