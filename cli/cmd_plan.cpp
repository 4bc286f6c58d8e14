// `artune plan`: build the plan of a spec on a topology, prove it with the
// static verifier, and print a summary (devices, ops per kind and per phase,
// bytes per route class) or the plan itself as JSON.

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "artune/core/error.hpp"
#include "artune/core/sizes.hpp"
#include "artune/core/types.hpp"
#include "artune/report/lowering_report.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/topology/io/io.hpp"

namespace artune::cli {

namespace {

nlohmann::json nccl_channels_json(const Topology& topo, const Plan& plan);

// Phase tables beyond this many rows are cut (the JSON has every op).
constexpr std::size_t kMaxPhaseRows = 48;
// Rank lists beyond this many entries show the first ones and the last.
constexpr int kMaxListedRanks = 16;
// Scratch buffers listed one by one on a helper's line; more are summed.
constexpr std::size_t kMaxListedBuffers = 8;

struct PlanFlags {
  std::string topo = std::string(kDefaultTopology);
  std::string spec;
  std::string count = "1M";
  std::string gpu_perm;
  std::string gather;
  std::string participants;
  int segments = 1;
  std::string op = "sum";
  std::string type = "float";
  std::string collective = "allreduce";
  bool json = false;
  std::string lower;  // --lower cuda|nccl: print the backend's lowered program instead of the plan
  int gpus = 0;
  bool no_p2p = false;
  // Set when the flag was given at all, so that an explicitly empty value is an error, not the default.
  bool has_gpu_perm = false;
  bool has_gather = false;
  bool has_participants = false;
  bool has_gpus = false;
};

// Elements per rank; their bytes are held to kMaxMessageBytes like every message size.
std::int64_t parse_count(const std::string& text, std::size_t esize, std::string_view type) {
  const std::uint64_t n = parse_size(text, "--count");
  if (n < 1) throw InvalidInput(fmt::format("--count: must be ≥ 1 element (got '{}')", text));
  if (n > kMaxMessageBytes / esize) {
    throw InvalidInput(fmt::format("--count: '{}' elements of {} is more than artune's limit of {} bytes (1P) per rank",
                                   text, type, kMaxMessageBytes));
  }
  return static_cast<std::int64_t>(n);
}

// Level of each op in the dependency DAG: 1 + the deepest of its deps (ops without deps: 1).
std::vector<int> phases_of(const Plan& plan) {
  std::vector<int> level(plan.ops.size(), 1);
  for (const Op& op : plan.ops) {
    for (int d : op.deps) {
      level[static_cast<std::size_t>(op.id)] =
          std::max(level[static_cast<std::size_t>(op.id)], level[static_cast<std::size_t>(d)] + 1);
    }
  }
  return level;
}

struct Traffic {
  std::int64_t transfers = 0;
  std::uint64_t bytes = 0;
};

// Point-to-point bytes by the route class between the two devices ("local" on one device).
std::map<std::string, Traffic> traffic_by_route(const Topology& topo, const Plan& plan, std::size_t esize) {
  std::map<std::string, Traffic> out;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kCopy && op.kind != OpKind::kReduce) continue;
    const int a = plan.devices[static_cast<std::size_t>(op.src.device)].node;
    const int b = plan.devices[static_cast<std::size_t>(op.dst.device)].node;
    const std::string key =
        op.src.device == op.dst.device ? std::string("local") : std::string(to_string(topo.route(a, b).type));
    Traffic& t = out[key];
    ++t.transfers;
    t.bytes += static_cast<std::uint64_t>(op.dst.count) * esize;
  }
  return out;
}

void print_summary(const Topology& topo, const Plan& plan, const PlanFlags& f, const VerifyResult& verdict) {
  const std::size_t esize = element_size(parse_data_type(f.type, "-d/--type"));
  const int ranks = plan.ranks();
  fmt::print("plan         {} on {}\n", plan.spec, topo.name());
  fmt::print("count        {} elements of {} ({} bytes per rank), op {}{}\n", plan.count, f.type,
             static_cast<std::uint64_t>(plan.count) * esize, to_string(plan.reduce_op),
             f.segments > 1 ? fmt::format(", pipelined in {} segments", f.segments) : "");
  std::string rank_text;
  for (int r = 0; r < ranks && r < kMaxListedRanks; ++r) {
    rank_text += fmt::format("{}{}={}", r == 0 ? "" : " ", r, plan.devices[static_cast<std::size_t>(r)].name);
  }
  if (ranks > kMaxListedRanks)
    rank_text += fmt::format(" … {}={}", ranks - 1, plan.devices[static_cast<std::size_t>(ranks - 1)].name);
  fmt::print("ranks        {}: {}\n", ranks, rank_text);
  if (static_cast<int>(plan.devices.size()) > ranks) {
    std::string helpers;
    for (std::size_t d = static_cast<std::size_t>(ranks); d < plan.devices.size(); ++d) {
      // A few buffers by size; many (a packing's pieces staged through a CPU) as their total and count.
      const std::vector<std::int64_t>& buffers = plan.buffers[d];
      std::string scratch;
      if (buffers.size() <= kMaxListedBuffers) {
        for (std::int64_t b : buffers) scratch += (scratch.empty() ? "" : "+") + std::to_string(b);
        scratch += " elements";
      } else {
        std::int64_t total = 0;
        for (std::int64_t b : buffers) total += b;
        scratch = fmt::format("{} elements in {} buffers", total, buffers.size());
      }
      helpers += fmt::format("{}{}={} (scratch {})", helpers.empty() ? "" : ", ", d, plan.devices[d].name, scratch);
    }
    fmt::print("helpers      {}\n", helpers);
  }

  std::map<OpKind, int> by_kind;
  for (const Op& op : plan.ops) ++by_kind[op.kind];
  fmt::print("ops          {} ({} copy, {} reduce, {} scale, {} group)\n", plan.ops.size(), by_kind[OpKind::kCopy],
             by_kind[OpKind::kReduce], by_kind[OpKind::kScale], by_kind[OpKind::kGroup]);

  // Phases: ops at the same depth of the dependency DAG can run together.
  const std::vector<int> level = phases_of(plan);
  const int phases = level.empty() ? 0 : *std::max_element(level.begin(), level.end());
  fmt::print("\nPhases ({}; phase = 1 + the deepest dependency):\n", phases);
  fmt::print("  {:>5}  {:>6}  {:>6}  {:>6}  {:>6}  {:>6}  {:>12}\n", "phase", "ops", "copy", "reduce", "scale", "group",
             "bytes");
  std::vector<std::map<OpKind, int>> rows(static_cast<std::size_t>(phases) + 1);
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(phases) + 1, 0);
  for (const Op& op : plan.ops) {
    const auto p = static_cast<std::size_t>(level[static_cast<std::size_t>(op.id)]);
    ++rows[p][op.kind];
    if (op.kind != OpKind::kScale) bytes[p] += static_cast<std::uint64_t>(op.dst.count) * esize;
  }
  for (int p = 1; p <= phases; ++p) {
    if (static_cast<std::size_t>(p) > kMaxPhaseRows && p < phases) {
      fmt::print("  … {} more phases (--json lists every op)\n", phases - p);
      p = phases;
    }
    auto& r = rows[static_cast<std::size_t>(p)];
    const int total = r[OpKind::kCopy] + r[OpKind::kReduce] + r[OpKind::kScale] + r[OpKind::kGroup];
    fmt::print("  {:>5}  {:>6}  {:>6}  {:>6}  {:>6}  {:>6}  {:>12}\n", p, total, r[OpKind::kCopy], r[OpKind::kReduce],
               r[OpKind::kScale], r[OpKind::kGroup], format_size(bytes[static_cast<std::size_t>(p)]));
  }

  fmt::print("\nPoint-to-point traffic by route class:\n");
  const auto traffic = traffic_by_route(topo, plan, esize);
  if (traffic.empty()) fmt::print("  none\n");
  for (const auto& [kind, t] : traffic) {
    fmt::print("  {:<6} {:>8} transfers  {:>12} bytes ({})\n", kind, t.transfers, t.bytes, format_size(t.bytes));
  }
  std::map<std::string, std::pair<int, std::uint64_t>> groups;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kGroup) continue;
    auto& g = groups[fmt::format("{} over {} devices", to_string(op.collective), op.group.size())];
    ++g.first;
    g.second += static_cast<std::uint64_t>(op.dst.count) * esize;
  }
  if (!groups.empty()) {
    fmt::print("\nLibrary collectives (their traffic depends on the library's own algorithm):\n");
    for (const auto& [what, g] : groups) {
      fmt::print("  {:>4} x {}, {} per device in all\n", g.first, what, format_size(g.second));
    }
  }

  if (verdict.ok) {
    if (plan.collective == Collective::kAllGather) {
      fmt::print("\nverification ok: every rank ends with every rank's block, in rank order, no races\n");
    } else if (plan.collective == Collective::kReduceScatter) {
      fmt::print("\nverification ok: rank k ends with block k holding each input exactly once{}, no races\n",
                 plan.reduce_op == ReduceOp::kAvg ? " (scaled once)" : "");
    } else {
      fmt::print("\nverification ok: every rank ends with each input exactly once{}, no races\n",
                 plan.reduce_op == ReduceOp::kAvg ? " (scaled once)" : "");
    }
  } else {
    fmt::print("\nverification FAILED ({} problems):\n", verdict.problems.size());
    for (const auto& p : verdict.problems) fmt::print("  {}\n", p);
  }
}

void run_plan(const PlanFlags& f) {
  const Topology topo = load_topology(f.topo);
  if (f.spec.empty()) throw InvalidInput("-s/--spec: missing (e.g. -s xring#2, -s nccl/xring, -s pscpu:64K:xring)");
  const Collective collective = parse_collective_kind(f.collective);
  const AllReduceSpec spec = parse_collective_spec(collective, f.spec);
  BuildOptions options;
  options.collective = collective;
  const DataType type = parse_data_type(f.type, "-d/--type");
  options.count = parse_count(f.count, element_size(type), to_string(type));
  options.reduce_op = parse_reduce_op(f.op, "-o/--op");
  if (f.has_gpu_perm) options.gpu_perm = parse_int_list(f.gpu_perm, "--gpu-perm");
  if (f.has_gather) options.gather = parse_node_list(topo, f.gather, "--gather");
  if (f.has_participants) options.participants = parse_node_list(topo, f.participants, "--participants");
  if (f.segments < 1) throw InvalidInput(fmt::format("--segments: must be ≥ 1 (got {})", f.segments));
  options.segments = f.segments;
  options.verify = false;  // verified below, so that a failure can be shown in full
  const Plan plan = build_plan(topo, spec, options);
  const VerifyResult verdict = verify(plan);
  if (!f.lower.empty() && verdict.ok) {
    LowerOptions lower;
    lower.target = parse_lower_target(f.lower);
    if (f.gpus < 0 || (f.gpus == 0 && f.has_gpus)) {
      throw InvalidInput(fmt::format("--gpus: must be ≥ 1 (got {})", f.gpus));
    }
    lower.gpus = f.gpus;
    lower.p2p = !f.no_p2p;
    if (f.json) {
      nlohmann::json doc = lowering_json(plan, topo, lower);
      doc["spec"] = plan.spec;
      doc["topology"] = topo.name();
      doc["count"] = plan.count;
      print_json(doc);
    } else {
      fmt::print("{}", lowering_text(plan, topo, lower));
    }
    return;
  }
  if (f.json) {
    nlohmann::json doc = plan_to_json(plan);
    doc["topology"] = topo.name();
    doc["verified"] = verdict.ok;
    if (!verdict.ok) doc["problems"] = verdict.problems;
    const nlohmann::json channels = nccl_channels_json(topo, plan);
    if (!channels.empty()) doc["nccl"] = channels;
    print_json(doc);
  } else {
    print_summary(topo, plan, f, verdict);
  }
  if (!verdict.ok) {
    throw Error(ErrorCode::kWrongResult,
                fmt::format("plan {} failed verification: {}", plan.spec, verdict.problems.front()));
  }
}

// The channels NCCL would run each GPU all-reduce group op on (simulator/nccl_model.hpp): per op the ring
// of every channel by node id and, across machines, the NIC of each machine it uses.
nlohmann::json nccl_channels_json(const Topology& topo, const Plan& plan) {
  nlohmann::json out = nlohmann::json::array();
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kGroup || op.collective != Collective::kAllReduce || op.group.size() < 2) continue;
    std::vector<int> nodes;
    for (const int d : op.group) nodes.push_back(plan.devices[static_cast<std::size_t>(d)].node);
    const bool gpus = std::all_of(nodes.begin(), nodes.end(), [&](int n) {
      return topo.nodes()[static_cast<std::size_t>(n)].kind == NodeKind::kGpu;
    });
    if (!gpus) continue;
    const nccl::Graph g = nccl::search(topo, nodes);
    nlohmann::json rings = nlohmann::json::array();
    for (const nccl::Channel& ch : g.rings) {
      nlohmann::json ring = nlohmann::json::array(), nics = nlohmann::json::array();
      for (const int n : ch.ring) ring.push_back(topo.nodes()[static_cast<std::size_t>(n)].id);
      for (const int n : ch.nics) nics.push_back(topo.nodes()[static_cast<std::size_t>(n)].id);
      nlohmann::json c = {{"ring", std::move(ring)}};
      if (!nics.empty()) c["nics"] = std::move(nics);
      rings.push_back(std::move(c));
    }
    out.push_back({{"op", op.id},
                   {"algo", op.algo.empty() ? nlohmann::json(nullptr) : nlohmann::json(op.algo)},
                   {"channels", g.channels},
                   {"bw_intra_gbps", g.bw_intra},
                   {"bw_inter_gbps", g.bw_inter},
                   {"tree_bw_intra_gbps", g.tree_bw_intra},
                   {"nvls_heads", g.nvls_channels},
                   {"rings", std::move(rings)}});
  }
  return out;
}

std::string spec_help() {
  std::string names;
  for (const auto& [name, what] : spec_algorithms()) names += fmt::format("\n    {:<14} {}", name, what);
  return "all-reduce spec: alg[#n], intra/inter hybrids, ranges alg:LIMIT:alg (limit in elements, K/M/G)" + names;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Build the plan of an all-reduce spec on a topology, verify it, and summarise it or print it as JSON");
  cmd->add_option("-t,--topology", flags->topo,
                  "topology: a built-in name, a generator (uniform:G, uniform:NxG, NxNAME) or a JSON file")
      ->capture_default_str();
  cmd->add_option("-s,--spec", flags->spec, spec_help())->required();
  cmd->add_option(
         "--collective", flags->collective,
         "allreduce, allgather (specs ring, bruck, rd, nccl, 2d, trees; hybrids nccl/ring, nccl/bruck, nccl/rd) or "
         "reducescatter (ring, halving, nccl, 2d, trees; nccl/ring, nccl/halving)")
      ->capture_default_str();
  cmd->add_option(
         "--count", flags->count,
         "elements per rank, K/M/G suffixes are powers of 1024 (default 1M = 1048576 elements; at most 1P bytes "
         "per rank); a range spec picks its range by this count")
      ->capture_default_str();
  cmd->add_option(
         "--gpu-perm", flags->gpu_perm,
         "order of the GPUs inside each machine, e.g. 0,3,2,1,5,6,7,4: the ring of xring and 2d, the pairing order of "
         "rechd, the rank order of tree (default identity)")
      ->each([flags](const std::string&) { flags->has_gpu_perm = true; });
  cmd->add_option("--gather", flags->gather,
                  "gather devices for the shuffle families, comma-separated node ids such as cpu0,cpu1 or gpu2")
      ->each([flags](const std::string&) { flags->has_gather = true; });
  cmd->add_option("--participants", flags->participants,
                  "ranks, comma-separated node ids in rank order (default: every GPU by global index)")
      ->each([flags](const std::string&) { flags->has_participants = true; });
  cmd->add_option("--segments", flags->segments, "pipeline depth: split every op into K segments (1 = none)")
      ->capture_default_str();
  cmd->add_option("-o,--op", flags->op, "reduce op: sum, prod, min, max, avg (avg = sum then one scale)")
      ->capture_default_str();
  cmd->add_option("-d,--type", flags->type, "element type, for the byte counts of the summary")->capture_default_str();
  cmd->add_flag(
      "--json", flags->json,
      "print the plan as JSON ({\"spec\",\"ranks\",\"count\",\"ops\":[…],\"verified\"}) instead of the summary");
  cmd->add_option("--lower", flags->lower,
                  "print what a GPU backend will run instead of the plan: cuda (placement, streams, steps, events, "
                  "CUDA graph nodes, fan-in per round of every group phase) or nccl (per rank: NCCL groups, sends, "
                  "receives, collectives, communicators); with --json as JSON")
      ->check(CLI::IsMember({"cuda", "nccl"}));
  cmd->add_option("--gpus", flags->gpus,
                  "with --lower cuda: GPUs of the machine the plan devices are mapped onto (device K on GPU K mod N; "
                  "default one per GPU of the plan)")
      ->each([flags](const std::string&) { flags->has_gpus = true; });
  cmd->add_flag("--no-p2p", flags->no_p2p, "with --lower cuda: no peer access between GPUs (cross-GPU reduces staged)");
  cmd->footer(
      "Ranks are the topology's GPUs in global index order (machine·G + local); with -t uniform:WxG the workers are "
      "the machines. Helper devices (gather shards such as a CPU socket) follow the ranks. Exit status: 0 when the "
      "plan verifies, 1 when it does not, 2 on bad input.\n" +
      plan_limits_help());
  cmd->callback([flags] { run_plan(*flags); });
}

}  // namespace artune::cli
