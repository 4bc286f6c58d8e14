// `artune simulate`: predicted time, algbw and busbw of a plan over a size
// sweep, printed like nccl-tests, with the bottleneck link per size.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/spec.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "artune/core/error.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/sizes.hpp"
#include "artune/core/types.hpp"
#include "artune/simulator/bound.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"

namespace artune::cli {

namespace {

struct SimulateFlags {
  std::string topo = std::string(kDefaultTopology);
  std::string spec;
  SweepFlags sweep;
  std::string type = "float";
  std::string op = "sum";
  std::string collective = "allreduce";
  int segments = 1;
  std::string backend;
  std::string calibration;
  std::string launch;
  std::string nccl_version;
  std::string gpu_perm;
  std::string gather;
  bool links = false;
  bool critical_path = false;
  bool json = false;
  // Set when the flag was given at all, so that an explicitly empty value is an error, not the default.
  bool has_backend = false;
  bool has_calibration = false;
  bool has_launch = false;
  bool has_nccl_version = false;
  bool has_gpu_perm = false;
  bool has_gather = false;
};

struct Row {
  std::uint64_t size = 0;
  std::int64_t count = 0;
  SimResult result;
  std::vector<CriticalRun> critical;  ///< --critical-path, largest size only
  std::vector<std::string> devices;   ///< the plan's device names (with `critical`)
};

/// "gpu1 -> gpu3", "on gpu3" (a local op), "-" (group and scale ops, by their ranks).
std::string run_devices(const Row& row, const CriticalRun& run) {
  const auto name = [&](int d) { return d >= 0 && d < static_cast<int>(row.devices.size()) ? row.devices[d] : "-"; };
  if (run.src_device < 0 && run.dst_device < 0) return "-";
  if (run.src_device < 0 || run.src_device == run.dst_device) return "on " + name(run.dst_device);
  return name(run.src_device) + " -> " + name(run.dst_device);
}

std::string bottleneck_text(const Topology& topo, const SimResult& r) {
  return r.bottleneck_link < 0 ? std::string("-") : link_name(topo, r.bottleneck_link);
}

// Links of one result, most utilised first.
std::vector<LinkUsage> ranked_links(const SimResult& r) {
  std::vector<LinkUsage> links = r.links;
  std::stable_sort(links.begin(), links.end(),
                   [](const LinkUsage& a, const LinkUsage& b) { return a.utilisation > b.utilisation; });
  return links;
}

nlohmann::json links_json(const Topology& topo, const Row& row) {
  nlohmann::json out = nlohmann::json::array();
  for (const LinkUsage& u : ranked_links(row.result)) {
    nlohmann::json j = link_usage_to_json(u, topo);
    j["link"] = link_name(topo, u.link);  // the table's name for it, as this output has always keyed it
    out.push_back(std::move(j));
  }
  return out;
}

// How NCCL ran the plan's group ops (algorithm, protocol, channels), for --json.
nlohmann::json nccl_json(const SimResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const GroupRun& g : r.groups) {
    out.push_back({{"op", g.op},
                   {"algorithm", g.algorithm},
                   {"protocol", g.protocol},
                   {"channels", g.channels},
                   {"latency_us", g.latency_us}});
  }
  return out;
}

// "ring/ll128/12": the first group op's algorithm, protocol and channels ("+" when the plan has more).
std::string nccl_text(const SimResult& r) {
  if (r.groups.empty()) return "-";
  const GroupRun& g = r.groups.front();
  return fmt::format("{}/{}/{}{}", g.algorithm, g.protocol, g.channels, r.groups.size() > 1 ? "+" : "");
}

void run_simulate(const SimulateFlags& f) {
  const Topology topo = load_topology(f.topo);
  const Collective collective = parse_collective_kind(f.collective);
  const AllReduceSpec spec = parse_collective_spec(collective, f.spec);
  const DataType type = parse_data_type(f.type, "-d/--datatype");
  const ReduceOp op = parse_reduce_op(f.op, "-o/--op");
  // nccl-tests prints "none" as the all-gather's redop: it reduces nothing.
  const std::string redop(collective == Collective::kAllGather ? "none" : to_string(op));
  if (f.segments < 1) throw InvalidInput(fmt::format("--segments: {} must be ≥ 1", f.segments));
  CostModel model = cost_model_from_flags(f.backend, f.has_backend, f.calibration, f.has_calibration);
  if (f.has_launch) model.launch = parse_launch_mode(f.launch, topo.gpus_per_machine(), "--launch");
  if (f.has_nccl_version) model.nccl_release = parse_nccl_release(f.nccl_version, "--nccl-version");
  const std::vector<std::uint64_t> sizes = sweep_sizes(f.sweep);
  const std::size_t es = element_size(type);
  for (const std::uint64_t size : sizes) {
    if (size % es != 0) {
      throw InvalidInput(fmt::format("{}: size {} is not a multiple of the {} element size ({} bytes)",
                                     size_flag(size, sizes), size, to_string(type), es));
    }
  }
  BuildOptions options;
  options.reduce_op = op;
  options.segments = f.segments;
  options.collective = collective;
  if (f.has_gpu_perm) options.gpu_perm = parse_int_list(f.gpu_perm, "--gpu-perm");
  if (f.has_gather) options.gather = parse_node_list(topo, f.gather, "--gather");

  // Every size's plan within the op limit, in closed form, before the first one is built and simulated.
  for (const std::uint64_t size : sizes) {
    options.count = static_cast<std::int64_t>(size / es);
    require_plan_fits(topo, spec, options);
  }

  std::vector<Row> rows;
  rows.reserve(sizes.size());
  for (const std::uint64_t size : sizes) {
    Row row;
    row.size = size;
    row.count = static_cast<std::int64_t>(size / es);
    options.count = row.count;
    const Plan plan = build_plan(topo, spec, options);
    row.result = simulate(plan, topo, model, es);
    if (f.critical_path && size == sizes.back()) {
      row.critical = critical_runs(plan, row.result);
      for (const PlanDevice& d : plan.devices) row.devices.push_back(d.name);
    }
    rows.push_back(std::move(row));
  }
  const int ranks = rows.empty() ? 0 : rows.front().result.ranks;
  // The min-cut bound at the profile's rates: every row's share of it (plans over every GPU).
  const CollectiveBound bound = effective_bound(topo, {}, collective, model);
  const bool has_bound = bound.us_per_byte > 0 && static_cast<int>(topo.gpus().size()) == ranks;
  const auto pct = [&](const Row& row) {
    return has_bound ? 100.0 * bound_fraction(bound, static_cast<double>(row.size), row.result.time_us) : 0.0;
  };

  if (f.json) {
    nlohmann::json doc;
    doc["topology"] = topo.name();
    doc["spec"] = to_string(spec);
    doc["backend"] = std::string(to_string(model.profile));
    doc["type"] = std::string(to_string(type));
    doc["redop"] = redop;
    doc["collective"] = std::string(collective_flag_name(collective));
    doc["segments"] = f.segments;
    doc["launch"] = to_string(model.launch);
    doc["nccl_release"] = to_string(model.nccl_release);
    doc["ranks"] = ranks;
    doc["cost_model"] = model.to_json();
    if (has_bound) {
      doc["bound"] = {{"busbw_gbps", bound.busbw_gbps},
                      {"algbw_gbps", bound.algbw_gbps},
                      {"us_per_byte", bound.us_per_byte},
                      {"in_network", bound.in_network},
                      {"set_by", bound.cuts.empty() ? std::string() : bound.cuts.front().what},
                      {"cut", bound.cuts.empty() ? std::string() : cut_text(topo, bound.cuts.front())}};
    }
    nlohmann::json results = nlohmann::json::array();
    for (const Row& row : rows) {
      const SimResult& r = row.result;
      nlohmann::json j = {
          {"size", row.size},     {"count", row.count},         {"type", to_string(type)},   {"redop", redop},
          {"time_us", r.time_us}, {"algbw_gbps", r.algbw_gbps}, {"busbw_gbps", r.busbw_gbps}};
      j["bottleneck"] =
          r.bottleneck_link < 0 ? nlohmann::json(nullptr) : nlohmann::json(link_name(topo, r.bottleneck_link));
      j["critical_path_ops"] = r.critical_path.size();
      if (has_bound) j["bound_pct"] = pct(row);
      if (!r.groups.empty()) j["nccl"] = nccl_json(r);
      results.push_back(std::move(j));
    }
    doc["results"] = std::move(results);
    if (f.critical_path && !rows.empty()) {
      const Row& row = rows.back();
      nlohmann::json runs = nlohmann::json::array();
      for (const CriticalRun& run : row.critical) {
        const auto device = [&](int d) { return d < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.devices[d]); };
        runs.push_back({{"steps", run.ops},
                        {"start_us", run.start_us},
                        {"end_us", run.end_us},
                        {"op", std::string(to_string(run.kind))},
                        {"from", device(run.src_device)},
                        {"to", device(run.dst_device)},
                        {"limited_by", run.limiting_link < 0 ? nlohmann::json(nullptr)
                                                             : nlohmann::json(link_name(topo, run.limiting_link))}});
      }
      doc["critical_path"] = {{"size", row.size},
                              {"time_us", row.result.time_us},
                              {"steps", row.result.critical_path.size()},
                              {"runs", std::move(runs)}};
    }
    if (f.links && !rows.empty()) {
      doc["links"] = {{"size", rows.back().size}, {"links", links_json(topo, rows.back())}};
      if (!rows.back().result.groups.empty()) doc["links"]["nccl"] = nccl_json(rows.back().result);
    }
    print_json(doc);
    return;
  }

  fmt::print(
      "# artune simulate: topology {} ({} ranks), {}spec {}, backend {}, segments {}{}{}\n", topo.name(), ranks,
      collective == Collective::kAllReduce ? "" : fmt::format("collective {}, ", collective_flag_name(collective)),
      to_string(spec), to_string(model.profile), f.segments,
      model.launch == LaunchMode{} ? "" : ", launch " + to_string(model.launch),
      model.nccl_release == kModelledNcclRelease ? "" : ", " + describe_nccl_choice(model.nccl_release));
  if (has_bound) {
    fmt::print(
        "# bound: {:.2f} GB/s busbw at the profile's link rates, set by the {} cut ({}); bound% = its time / the "
        "row's\n",
        bound.busbw_gbps, bound.cuts.front().what, cut_text(topo, bound.cuts.front()));
  }
  fmt::print("#\n");
  // NCCL-run group ops get a column naming NCCL's algorithm/protocol/channels for each size.
  const bool nccl_column = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !r.result.groups.empty(); });
  if (nccl_column) {
    fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>12}  {:>11}  {:>11}  {:>6}  {:>18}  {}\n", "size", "count", "type",
               "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "bound%", "nccl(algo/proto/ch)", "bottleneck");
  } else {
    fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>12}  {:>11}  {:>11}  {:>6}  {}\n", "size", "count", "type", "redop",
               "time(us)", "algbw(GB/s)", "busbw(GB/s)", "bound%", "bottleneck");
  }
  for (const Row& row : rows) {
    const SimResult& r = row.result;
    if (nccl_column) {
      fmt::print("  {:>10}  {:>12}  {:>8}  {:>6}  {:>12.2f}  {:>11.2f}  {:>11.2f}  {:>6.1f}  {:>19}  {}\n", row.size,
                 row.count, to_string(type), redop, r.time_us, r.algbw_gbps, r.busbw_gbps, pct(row), nccl_text(r),
                 bottleneck_text(topo, r));
    } else {
      fmt::print("  {:>10}  {:>12}  {:>8}  {:>6}  {:>12.2f}  {:>11.2f}  {:>11.2f}  {:>6.1f}  {}\n", row.size, row.count,
                 to_string(type), redop, r.time_us, r.algbw_gbps, r.busbw_gbps, pct(row), bottleneck_text(topo, r));
    }
  }
  if (f.critical_path && !rows.empty()) {
    const Row& row = rows.back();
    fmt::print(
        "#\n# critical path at {} bytes ({:.2f} us): {} steps in {} runs, each step started by the "
        "one before; a run is consecutive steps alike (op, devices, limiting link), such as a pipelined op's "
        "segments\n",
        row.size, row.result.time_us, row.result.critical_path.size(), row.critical.size());
    fmt::print("# {:>5}  {:>11}  {:>11}  {:>11}  {:<6}  {:<24}  {}\n", "steps", "start(us)", "end(us)", "time(us)",
               "op", "devices", "limited by");
    for (const CriticalRun& run : row.critical) {
      fmt::print("  {:>5}  {:>11.2f}  {:>11.2f}  {:>11.2f}  {:<6}  {:<24}  {}\n", run.ops, run.start_us, run.end_us,
                 run.end_us - run.start_us, to_string(run.kind), run_devices(row, run),
                 run.limiting_link < 0 ? std::string("- (latency or compute)") : link_name(topo, run.limiting_link));
    }
  }
  if (f.links && !rows.empty()) {
    const Row& row = rows.back();
    fmt::print("#\n# links at {} bytes ({:.2f} us), most utilised first\n", row.size, row.result.time_us);
    for (const GroupRun& g : row.result.groups) {
      fmt::print("# op {}: NCCL {} / {} on {} channels, latency {:.2f} us\n", g.op, g.algorithm, g.protocol, g.channels,
                 g.latency_us);
    }
    // first/last: when the link first carried a flow and when its last one ended; idle = the time between them it
    // carried none (fill = first, drain = the total time − last).
    fmt::print("# {:<34}  {:>8}  {:>8}  {:>14}  {:>12}  {:>14}  {:>7}  {:>10}  {:>10}  {:>9}\n", "link", "kind", "GB/s",
               "bytes", "busy(us)", "saturated(us)", "util(%)", "first(us)", "last(us)", "idle(us)");
    for (const LinkUsage& u : ranked_links(row.result)) {
      const Link& l = topo.links()[u.link];
      fmt::print(
          "  {:<34}  {:>8}  {:>8.2f}  {:>14.0f}  {:>12.2f}  {:>14.2f}  {:>7.1f}  {:>10.2f}  {:>10.2f}  {:>9.2f}\n",
          link_name(topo, u.link), to_string(l.kind), l.bandwidth_gbps, u.bytes, u.busy_us, u.saturated_us,
          100.0 * u.utilisation, u.first_busy_us, u.last_busy_us,
          std::max(0.0, u.last_busy_us - u.first_busy_us - u.busy_us));
    }
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Predict all-reduce time, algbw and busbw of a plan over a size sweep with the cost-model simulator");
  cmd->footer(
      "Prints one nccl-tests style row per size plus the link that limited it (saturated longest).\n"
      "busbw = algbw * 2(n-1)/n. The cost model's constants are those of --backend (default nccl),\n"
      "optionally overlaid by a calibration file (artune calibrate). Example:\n"
      "  artune simulate -t dgx1-v100 -s xring --gpu-perm 0,3,2,1,5,6,7,4 -b 1M -e 1G --links\n" +
      plan_limits_help());
  cmd->add_option("-t,--topology", flags->topo,
                  "topology: built-in name, generator (uniform:8, 4xdgx1-v100) or JSON file")
      ->capture_default_str();
  cmd->add_option("-s,--spec", flags->spec, "all-reduce spec (xring, rechd, pscpu, nccl, nccl/xring, ...)")->required();
  add_sweep_flags(cmd, flags->sweep);
  cmd->add_option("-d,--datatype", flags->type, "element type (float, double, half, bfloat16, int32, int64, uint8)")
      ->capture_default_str();
  cmd->add_option("-o,--op", flags->op, "reduce op (sum, prod, min, max, avg)")->capture_default_str();
  cmd->add_option(
         "--collective", flags->collective,
         "allreduce, allgather (specs ring, bruck, rd, nccl, 2d, trees; hybrids nccl/ring, nccl/bruck, nccl/rd) or "
         "reducescatter (ring, halving, nccl, 2d, trees; nccl/ring, nccl/halving); "
         "busbw = algbw*(n-1)/n for the last two, as nccl-tests")
      ->capture_default_str();
  cmd->add_option("--segments", flags->segments, "pipeline segments per op (1 = no pipelining)")->capture_default_str();
  cmd->add_option("--backend", flags->backend,
                  "executor whose costs to model: cuda, nccl, cpu, mpi (default nccl, or the calibration's)")
      ->each([flags](const std::string&) { flags->has_backend = true; });
  cmd->add_option("--calibration", flags->calibration, "JSON cost-model overlay (from artune calibrate)")
      ->each([flags](const std::string&) { flags->has_calibration = true; });
  cmd->add_option("--launch", flags->launch, kLaunchHelp)
      ->each([flags](const std::string&) { flags->has_launch = true; });
  cmd->add_option("--nccl-version", flags->nccl_version, kNcclVersionHelp)
      ->each([flags](const std::string&) { flags->has_nccl_version = true; });
  cmd->add_option("--gpu-perm", flags->gpu_perm, "ring order of the local GPUs, e.g. 0,3,2,1,5,6,7,4")
      ->each([flags](const std::string&) { flags->has_gpu_perm = true; });
  cmd->add_option("--gather", flags->gather, "gather devices for shuffle families, as node ids (e.g. cpu0,cpu1)")
      ->each([flags](const std::string&) { flags->has_gather = true; });
  cmd->add_flag("--links", flags->links,
                "add the per-link utilisation table for the largest size: bytes, busy and saturated time, and when "
                "each link first and last carried data, with the time it idled in between");
  cmd->add_flag("--critical-path", flags->critical_path,
                "add the critical path of the largest size: the chain of ops, each started by the one before, that "
                "sets its time, runs of alike ops folded into one line");
  cmd->add_flag("--json", flags->json, "print the same data as JSON");
  cmd->callback([flags] { run_simulate(*flags); });
}

}  // namespace artune::cli
