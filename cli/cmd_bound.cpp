// `artune bound`: the min-cut throughput bound of a collective on a topology (algorithms/synthesis/cut_bound.hpp)
// at the cost profile's effective link rates and at nominal rates, with the cut that sets it.

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/simulator/bound.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

namespace artune::cli {

namespace {

struct BoundFlags {
  std::string topo = std::string(kDefaultTopology);
  std::string collective = "allreduce";
  std::string backend;
  std::string calibration;
  bool has_backend = false;
  bool has_calibration = false;
  bool json = false;
};

std::string set_by(const CollectiveBound& b) {
  if (b.ranks < 2) return "one participant: nothing moves";
  if (b.collective == Collective::kAllReduce) {
    const std::string& what = b.cuts.front().what;
    if (what == "volume")
      return fmt::format("volume: 2(N-1) buffers into the GPUs{}", b.cuts.front().as_flows ? ", as flows" : "");
    if (what == "partition") {
      return fmt::format("{}partition: 2({}-1) buffers between {} parts{}",
                         b.in_network ? "in-network reduction (NVLS) and a " : "", b.cuts.front().parts.size(),
                         b.cuts.front().parts.size(), b.cuts.front().as_flows ? ", as flows" : "");
    }
    if (what == "two-way split") return "a cut splitting the GPUs, crossed both ways at once";
    return b.in_network ? "in-network reduction (NVLS): the slowest cut splitting the GPUs"
                        : "the slowest cut splitting the GPUs";
  }
  return b.collective == Collective::kAllGather ? "all-gather cut" : "reduce-scatter cut";
}

nlohmann::json cut_json(const Topology& topo, const BoundCut& cut) {
  nlohmann::json inside = nlohmann::json::array();
  for (int v : cut.inside) inside.push_back(topo.nodes()[static_cast<std::size_t>(v)].id);
  nlohmann::json links = nlohmann::json::array();
  for (int l : cut.links) links.push_back(link_name(topo, l));
  nlohmann::json receivers = nlohmann::json::array();
  for (int r : cut.receivers) receivers.push_back(topo.nodes()[static_cast<std::size_t>(r)].id);
  nlohmann::json parts = nlohmann::json::array();
  for (const std::vector<int>& part : cut.parts) {
    nlohmann::json ids = nlohmann::json::array();
    for (int v : part) ids.push_back(topo.nodes()[static_cast<std::size_t>(v)].id);
    parts.push_back(ids);
  }
  return {{"what", cut.what},
          {"inside", inside},
          {"ranks_inside", cut.ranks_inside},
          {"ranks_outside", cut.ranks_outside},
          {"links", links},
          {"gbps", cut.gbps},
          {"rate_gbps", cut.rate_gbps},
          {"receivers", receivers},
          {"parts", parts},
          {"as_flows", cut.as_flows}};
}

// What trees packed over the routes carry beside a bound (synthesis::packed_trees_algbw), on one machine of at most
// kMaxTreePackingParticipants GPUs (a cluster's trees are packed per machine, with rings across).
struct PackedTrees {
  bool known = false;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double fraction = 0;  // of the bound's algbw
};

PackedTrees packed_trees(const Topology& topo, Collective collective, const LinkRates& rates,
                         const CollectiveBound& bound) {
  PackedTrees p;
  if (topo.machine_count() != 1 || bound.ranks < 2 || bound.ranks > synthesis::kMaxTreePackingParticipants) return p;
  p.known = true;
  p.algbw_gbps = synthesis::packed_trees_algbw(topo, topo.gpus(), collective, rates);
  p.busbw_gbps = p.algbw_gbps * bus_factor(collective, bound.ranks);
  p.fraction = bound.algbw_gbps > 0 ? p.algbw_gbps / bound.algbw_gbps : 0;
  return p;
}

nlohmann::json bound_json(const Topology& topo, const CollectiveBound& b, const PackedTrees& packed) {
  nlohmann::json cuts = nlohmann::json::array();
  for (const BoundCut& c : b.cuts) cuts.push_back(cut_json(topo, c));
  nlohmann::json trees = nullptr;
  if (packed.known) {
    trees = {{"algbw_gbps", packed.algbw_gbps}, {"busbw_gbps", packed.busbw_gbps}, {"fraction", packed.fraction}};
  }
  return {{"busbw_gbps", b.busbw_gbps},
          {"algbw_gbps", b.algbw_gbps},
          {"us_per_byte", b.us_per_byte},
          {"in_network", b.in_network},
          {"cuts", cuts},
          {"packed_trees", trees}};
}

void run_bound(const BoundFlags& f) {
  const Topology topo = load_topology(f.topo);
  const Collective collective = parse_collective_kind(f.collective, "--collective");
  const CostModel model = cost_model_from_flags(f.backend, f.has_backend, f.calibration, f.has_calibration);
  const CollectiveBound effective = effective_bound(topo, {}, collective, model);
  const CollectiveBound nominal = nominal_bound(topo, {}, collective);
  const PackedTrees packed_effective = packed_trees(topo, collective, effective_link_rates(topo, model), effective);
  const PackedTrees packed_nominal = packed_trees(topo, collective, nominal_link_rates(topo), nominal);
  if (f.json) {
    nlohmann::json doc;
    doc["topology"] = topo.name();
    doc["gpus"] = topo.gpus().size();
    doc["machines"] = topo.machine_count();
    doc["collective"] = std::string(collective_flag_name(collective));
    doc["backend"] = std::string(to_string(model.profile));
    doc["in_network_reduction"] = collective == Collective::kAllReduce && in_network_reduction(topo, {});
    doc["effective"] = bound_json(topo, effective, packed_effective);
    doc["nominal"] = bound_json(topo, nominal, packed_nominal);
    print_json(doc);
    return;
  }
  fmt::print("# artune bound: topology {} ({} GPUs, {} machine{}), collective {}\n", topo.name(), topo.gpus().size(),
             topo.machine_count(), topo.machine_count() == 1 ? "" : "s", collective_flag_name(collective));
  fmt::print("# no plan moves the data faster than the links crossing some cut of the topology allow\n#\n");
  fmt::print("# {:<24}  {:>11}  {:>11}  {}\n", "rates", "busbw(GB/s)", "algbw(GB/s)", "set by");
  const auto row = [&](const std::string& label, const CollectiveBound& b) {
    fmt::print("  {:<24}  {:>11.2f}  {:>11.2f}  {}\n", label, b.busbw_gbps, b.algbw_gbps, set_by(b));
  };
  row(fmt::format("effective (profile {})", to_string(model.profile)), effective);
  row("nominal", nominal);
  fmt::print("#\n");
  const auto cuts = [&](const std::string& label, const CollectiveBound& b) {
    for (const BoundCut& c : b.cuts) {
      const std::string per =
          c.what == "in-network" || c.what == "split"
              ? fmt::format("every result crosses it: algbw <= {:.2f} GB/s", c.rate_gbps)
          : c.what == "volume"
              ? fmt::format("{} buffers in all: algbw <= {:.2f} GB/s", 2 * (c.ranks_outside - 1), c.rate_gbps)
          : c.what == "two-way split"
              ? fmt::format("every result crosses it both ways, on links that cannot carry both: algbw <= {:.2f} GB/s",
                            c.rate_gbps)
          : c.what == "partition"
              ? fmt::format("{} buffers cross between the parts: algbw <= {:.2f} GB/s", 2 * (c.parts.size() - 1),
                            c.rate_gbps)
              : fmt::format("{} blocks at {:.2f} GB/s each",
                            c.receivers.empty()
                                ? c.ranks_inside
                                : static_cast<int>(c.receivers.size()) * (c.ranks_inside + c.ranks_outside - 1),
                            c.rate_gbps);
      fmt::print("# {} {} cut: {}; {}\n", label, c.what, cut_text(topo, c), per);
    }
  };
  cuts("effective", effective);
  cuts("nominal", nominal);
  if (!packed_effective.known) return;
  fmt::print("#\n# trees packed over the routes (the trees family's LP; what trees carry, not a bound on every plan)\n");
  fmt::print("# {:<24}  {:>11}  {:>11}  {}\n", "rates", "busbw(GB/s)", "algbw(GB/s)", "of the bound");
  const auto packed_row = [&](const std::string& label, const PackedTrees& p, bool in_network) {
    fmt::print("  {:<24}  {:>11.2f}  {:>11.2f}  {:.1f} %{}\n", label, p.busbw_gbps, p.algbw_gbps, 100 * p.fraction,
               p.fraction >= 1 - 1e-6 ? ""
               : in_network     ? ": the bound counts the switches' reduction (NVLS), which trees do not use"
                                : ": routes bind that no cut sees");
  };
  packed_row(fmt::format("effective (profile {})", to_string(model.profile)), packed_effective, effective.in_network);
  packed_row("nominal", packed_nominal, nominal.in_network);
}

}  // namespace

void add_bound_command(CLI::App& app) {
  auto flags = std::make_shared<BoundFlags>();
  CLI::App* cmd = app.add_subcommand("bound", "Print the min-cut throughput bound of a collective on a topology");
  cmd->footer(fmt::format(
      "The bound is the least time any plan can take (ForestColl's min-cut bound, found with max flows):\n"
      "all-gather M/N * max over sets S of devices holding some but not all GPUs of |S ∩ GPUs| / (GB/s of\n"
      "the links leaving S); reduce-scatter the same on the reversed links; all-reduce the largest of\n"
      "M / the slowest cut splitting the GPUs, 2(N-1)M / what the GPUs can take in together (not where the\n"
      "hardware reduces in the network, NVLS), and 2(p-1)M / the links between p parts of a partition of the\n"
      "devices (p >= 3, searched for up to 8 GPUs of one machine). Effective rates are nominal times the\n"
      "--backend profile's link efficiency (what a simulated plan can reach).\n"
      "On one machine of up to {} GPUs it also prints what spanning trees packed over the routes carry (the\n"
      "trees family's LP: rbtrees for all-reduce, out-/in-trees for all-gather and reduce-scatter): below the\n"
      "bound where routes bind that no cut sees (an edge staged through a CPU loads its PCIe uplink both ways).\n"
      "Examples:\n"
      "  artune bound -t 'dgx1-v100[0,1,2,4,5]'\n"
      "  artune bound -t dgx-h100 --collective allgather --json\n",
      synthesis::kMaxTreePackingParticipants));
  cmd->add_option("-t,--topology", flags->topo,
                  "topology: built-in name, generator (uniform:8, 4xdgx1-v100), JSON file, or a GPU subset of any "
                  "(dgx1-v100[0,1,2,4,5])")
      ->capture_default_str();
  cmd->add_option("--collective", flags->collective, "allreduce, allgather or reducescatter")->capture_default_str();
  cmd->add_option("--backend", flags->backend,
                  "cost profile whose link efficiencies give the effective rates: cuda, nccl, cpu, mpi (default nccl)")
      ->each([flags](const std::string&) { flags->has_backend = true; });
  cmd->add_option("--calibration", flags->calibration, "JSON cost-model overlay (from artune calibrate)")
      ->each([flags](const std::string&) { flags->has_calibration = true; });
  cmd->add_flag("--json", flags->json, "print the same data as JSON");
  cmd->callback([flags] { run_bound(*flags); });
}

}  // namespace artune::cli
