#include "artune/report/lowering_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/executor/cuda/cuda_program.hpp"
#include "artune/executor/nccl/nccl_program.hpp"
#include "artune/executor/nccl/nccl_registry.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

LowerTarget parse_lower_target(std::string_view text, std::string_view what) {
  if (text == "cuda") return LowerTarget::kCuda;
  if (text == "nccl") return LowerTarget::kNccl;
  throw InvalidInput(fmt::format("{}: unknown backend '{}' (cuda, nccl)", what, text));
}

namespace {

std::string_view kind_name(cuda::StepKind k) {
  switch (k) {
    case cuda::StepKind::kCopy: return "copy";
    case cuda::StepKind::kReduce: return "reduce";
    case cuda::StepKind::kScale: return "scale";
    case cuda::StepKind::kRecord: return "record";
    case cuda::StepKind::kWait: return "wait";
  }
  return "?";
}

std::string_view kind_name(nccl::StepKind k) {
  switch (k) {
    case nccl::StepKind::kGroupStart: return "group_start";
    case nccl::StepKind::kGroupEnd: return "group_end";
    case nccl::StepKind::kSend: return "send";
    case nccl::StepKind::kRecv: return "recv";
    case nccl::StepKind::kCopy: return "copy";
    case nccl::StepKind::kReduce: return "reduce";
    case nccl::StepKind::kScale: return "scale";
    case nccl::StepKind::kCollective: return "collective";
  }
  return "?";
}

nlohmann::json ref_json(int device, int buffer, std::int64_t offset, bool staging) {
  if (staging) return {{"staging", true}, {"device", device}, {"offset", offset}};
  return {{"device", device}, {"buffer", buffer}, {"offset", offset}};
}

struct CudaLowered {
  int gpus = 0;
  cuda::Program program;
  cuda::GraphDag graph;
  std::vector<cuda::RoundFanIn> fan_in;
};

CudaLowered lower_cuda(const Plan& plan, const Topology& topo, const LowerOptions& o) {
  CudaLowered out;
  int gpus = o.gpus;
  if (gpus < 0) throw InvalidInput(fmt::format("{}: must be ≥ 1 (got {})", parameter("gpus"), gpus));
  if (gpus == 0) {
    // One GPU per GPU plan device: the highest local GPU index + 1.
    const auto placement = cuda::place_devices(plan, 1 << 20, &topo);
    for (const cuda::Placement& p : placement) gpus = std::max(gpus, p.host ? 0 : p.local_gpu + 1);
    gpus = std::max(gpus, 1);
  }
  out.gpus = gpus;
  const auto placement = cuda::place_devices(plan, gpus, &topo);
  const auto n = static_cast<std::size_t>(gpus);
  std::vector<std::vector<bool>> peer(n, std::vector<bool>(n));
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) peer[a][b] = a == b || o.p2p;
  }
  out.program = cuda::lower_plan(plan, placement, peer);
  out.graph = cuda::graph_of(out.program);
  out.fan_in = cuda::fan_in(out.program);
  return out;
}

nlohmann::json cuda_json(const Plan& plan, const CudaLowered& l) {
  const cuda::Program& prog = l.program;
  nlohmann::json j;
  j["backend"] = "cuda";
  j["gpus"] = l.gpus;
  nlohmann::json placement = nlohmann::json::array();
  for (std::size_t d = 0; d < prog.placement.size(); ++d) {
    const cuda::Placement& p = prog.placement[d];
    placement.push_back({{"device", d},
                         {"name", plan.devices[d].name},
                         {"host", p.host},
                         {"cuda_device", p.cuda_device},
                         {"local_gpu", p.local_gpu}});
  }
  j["placement"] = std::move(placement);
  std::vector<std::map<std::string, int>> per_stream(prog.placement.size());
  nlohmann::json steps = nlohmann::json::array();
  for (std::size_t i = 0; i < prog.steps.size(); ++i) {
    const cuda::Step& s = prog.steps[i];
    ++per_stream[static_cast<std::size_t>(s.stream)][std::string(kind_name(s.kind))];
    nlohmann::json step = {{"index", i}, {"stream", s.stream}, {"kind", kind_name(s.kind)}, {"op", s.op}};
    if (s.kind == cuda::StepKind::kRecord || s.kind == cuda::StepKind::kWait) {
      step["event"] = s.event;
    } else {
      step["dst"] = ref_json(s.dst.device, s.dst.buffer, s.dst.offset, s.dst.buffer == cuda::Ref::kStaging);
      if (s.kind != cuda::StepKind::kScale) {
        step["src"] = ref_json(s.src.device, s.src.buffer, s.src.offset, s.src.buffer == cuda::Ref::kStaging);
      } else {
        step["divisor"] = s.divisor;
      }
      step["count"] = s.count;
    }
    if (s.phase != cuda::Phase::kNone) {
      step["phase"] = cuda::to_string(s.phase);
      step["round"] = s.round;
    }
    steps.push_back(std::move(step));
  }
  nlohmann::json streams = nlohmann::json::array();
  for (std::size_t d = 0; d < prog.placement.size(); ++d) {
    nlohmann::json counts = nlohmann::json::object();
    int total = 0;
    for (const auto& [k, n] : per_stream[d]) {
      counts[k] = n;
      total += n;
    }
    streams.push_back({{"stream", d},
                       {"cuda_device", prog.placement[d].cuda_device},
                       {"steps", total},
                       {"by_kind", std::move(counts)},
                       {"staging", prog.staging[d]}});
  }
  j["streams"] = std::move(streams);
  nlohmann::json events = nlohmann::json::array();
  for (int e = 0; e < prog.events; ++e) events.push_back({{"event", e}, {"stream", prog.event_stream[e]}});
  j["events"] = std::move(events);
  j["steps"] = std::move(steps);
  nlohmann::json nodes = nlohmann::json::array();
  for (std::size_t n = 0; n < l.graph.step.size(); ++n) {
    nodes.push_back({{"node", n}, {"step", l.graph.step[n]}, {"deps", l.graph.deps[n]}});
  }
  j["graph"] = {{"nodes", std::move(nodes)}, {"edges", l.graph.edges()}};
  nlohmann::json fan = nlohmann::json::array();
  int worst = 0;
  for (const cuda::RoundFanIn& r : l.fan_in) {
    fan.push_back({{"op", r.op},
                   {"phase", cuda::to_string(r.phase)},
                   {"round", r.round},
                   {"readers", r.readers},
                   {"max", r.max()}});
    worst = std::max(worst, r.max());
  }
  j["fan_in"] = std::move(fan);
  j["max_fan_in"] = worst;
  return j;
}

std::string cuda_text(const Plan& plan, const Topology& topo, const CudaLowered& l, const LowerOptions& o) {
  const cuda::Program& prog = l.program;
  std::map<cuda::StepKind, int> kinds;
  for (const cuda::Step& s : prog.steps) ++kinds[s.kind];
  std::string out;
  out += fmt::format("cuda lowering of {} on {}: {} plan devices on {} GPU(s), peer access {}\n", plan.spec,
                     topo.name(), prog.placement.size(), l.gpus, o.p2p ? "between every pair" : "nowhere");
  out += fmt::format("streams {}, events {}, steps {} ({} copy, {} reduce, {} scale, {} record, {} wait)\n",
                     prog.placement.size(), prog.events, prog.steps.size(), kinds[cuda::StepKind::kCopy],
                     kinds[cuda::StepKind::kReduce], kinds[cuda::StepKind::kScale], kinds[cuda::StepKind::kRecord],
                     kinds[cuda::StepKind::kWait]);
  out += fmt::format("graph {} nodes, {} edges (one cudaGraphLaunch per run)\n", l.graph.step.size(), l.graph.edges());
  int worst = 0;
  for (const auto& r : l.fan_in) worst = std::max(worst, r.max());
  out += fmt::format("group phases: {} rounds, largest fan-in {}\n", l.fan_in.size(), worst);
  out += "\nplacement\n";
  for (std::size_t d = 0; d < prog.placement.size(); ++d) {
    const cuda::Placement& p = prog.placement[d];
    out += p.host ? fmt::format("  d{} {} -> host memory (ops on a cuda:{} stream)\n", d, plan.devices[d].name,
                                p.cuda_device)
                  : fmt::format("  d{} {} -> cuda:{}\n", d, plan.devices[d].name, p.cuda_device);
  }
  out += "\nstreams\n";
  for (std::size_t d = 0; d < prog.placement.size(); ++d) {
    std::map<cuda::StepKind, int> k;
    for (const cuda::Step& s : prog.steps) {
      if (s.stream == static_cast<int>(d)) ++k[s.kind];
    }
    out +=
        fmt::format("  s{} cuda:{}: {} copy, {} reduce, {} scale, {} record, {} wait, staging {} elements\n", d,
                    prog.placement[d].cuda_device, k[cuda::StepKind::kCopy], k[cuda::StepKind::kReduce],
                    k[cuda::StepKind::kScale], k[cuda::StepKind::kRecord], k[cuda::StepKind::kWait], prog.staging[d]);
  }
  if (!l.fan_in.empty()) {
    out += "\nfan-in per round of each group phase (peers reading each plan device)\n";
    for (const auto& r : l.fan_in) {
      out += fmt::format("  op{} {} round {}: max {} [{}]\n", r.op, cuda::to_string(r.phase), r.round, r.max(),
                         fmt::join(r.readers, " "));
    }
  }
  out += "\nsteps (issue order)\n";
  const std::string steps = cuda::describe(prog);
  std::size_t line = 0;
  for (std::size_t start = 0; start < steps.size(); ++line) {
    const std::size_t end = steps.find('\n', start);
    const cuda::Step& s = prog.steps[line];
    std::string text = steps.substr(start, end - start);
    if (s.phase != cuda::Phase::kNone) text += fmt::format("  [{} r{}]", cuda::to_string(s.phase), s.round);
    out += fmt::format("  {:>4} {}\n", line, text);
    start = end + 1;
  }
  out += "\ngraph nodes (node = step, after nodes)\n";
  for (std::size_t n = 0; n < l.graph.step.size(); ++n) {
    out += fmt::format("  n{} = step {}{}{}\n", n, l.graph.step[n], l.graph.deps[n].empty() ? "" : " after n",
                       fmt::join(l.graph.deps[n], " n"));
  }
  return out;
}

std::vector<nccl::Program> lower_nccl(const Plan& plan, const Topology& topo) {
  const std::size_t n = plan.devices.size();
  const std::vector<int> machines = device_machines(plan, topo);
  std::vector<bool> host(n, false);
  for (std::size_t d = 0; d < n; ++d) {
    const int node = plan.devices[d].node;
    host[d] = node >= 0 && node < static_cast<int>(topo.nodes().size()) &&
              topo.nodes()[static_cast<std::size_t>(node)].kind != NodeKind::kGpu;
  }
  const std::vector<int> host_of = host_processes(plan, machines);
  std::vector<nccl::Program> out;
  for (int r = 0; r < plan.ranks(); ++r) out.push_back(nccl::lower_rank(plan, host_of, host, r));
  return out;
}

nlohmann::json nccl_json(const Plan& plan, const std::vector<nccl::Program>& progs) {
  nlohmann::json j;
  j["backend"] = "nccl";
  nlohmann::json comms = nlohmann::json::array();
  const auto groups = distinct_groups(plan);
  for (std::size_t c = 0; c < groups.size(); ++c) {
    std::vector<int> set = groups[c];
    std::sort(set.begin(), set.end());
    comms.push_back({{"comm", c}, {"members", groups[c]}, {"member_set", set}});
  }
  j["communicators"] = std::move(comms);
  nlohmann::json ranks = nlohmann::json::array();
  for (const nccl::Program& p : progs) {
    nlohmann::json steps = nlohmann::json::array();
    for (const nccl::Step& s : p.steps) {
      nlohmann::json step = {{"kind", kind_name(s.kind)}, {"op", s.op}};
      switch (s.kind) {
        case nccl::StepKind::kGroupStart:
        case nccl::StepKind::kGroupEnd: break;
        case nccl::StepKind::kSend:
          step["src"] = ref_json(s.src.device, s.src.buffer, s.src.offset, s.src.buffer == nccl::Ref::kStaging);
          step["peer"] = s.peer;
          step["count"] = s.count;
          break;
        case nccl::StepKind::kRecv:
          step["dst"] = ref_json(s.dst.device, s.dst.buffer, s.dst.offset, s.dst.buffer == nccl::Ref::kStaging);
          step["peer"] = s.peer;
          step["count"] = s.count;
          break;
        case nccl::StepKind::kCollective:
          step["collective"] = to_string(s.collective);
          step["comm"] = s.comm;
          step["comm_rank"] = s.comm_rank;
          step["comm_size"] = s.comm_size;
          step["root"] = s.root;
          [[fallthrough]];
        default:
          step["dst"] = ref_json(s.dst.device, s.dst.buffer, s.dst.offset, s.dst.buffer == nccl::Ref::kStaging);
          if (s.kind == nccl::StepKind::kCopy || s.kind == nccl::StepKind::kReduce) {
            step["src"] = ref_json(s.src.device, s.src.buffer, s.src.offset, s.src.buffer == nccl::Ref::kStaging);
          }
          if (s.kind == nccl::StepKind::kScale) step["divisor"] = s.divisor;
          step["count"] = s.count;
          break;
      }
      steps.push_back(std::move(step));
    }
    nlohmann::json registers = nlohmann::json::array();
    for (const nccl::BufferUse& u : nccl::buffer_uses(p)) {
      nlohmann::json buffer;
      if (u.device < 0) {
        buffer["staging"] = true;
      } else {
        buffer["device"] = u.device;
        buffer["buffer"] = u.buffer;
      }
      nlohmann::json use;
      use["comm"] = u.comm == nccl::BufferUse::kPeers ? nlohmann::json("peers") : nlohmann::json(u.comm);
      use["buffer"] = std::move(buffer);
      registers.push_back(std::move(use));
    }
    ranks.push_back({{"rank", p.rank},
                     {"devices", p.devices},
                     {"staging", p.staging},
                     {"comms", p.comms},
                     {"registers", std::move(registers)},
                     {"stream", 0},
                     {"steps", std::move(steps)}});
  }
  j["ranks"] = std::move(ranks);
  return j;
}

std::string nccl_text(const Plan& plan, const Topology& topo, const std::vector<nccl::Program>& progs) {
  std::string out =
      fmt::format("nccl lowering of {} on {}: {} ranks, one stream each\n", plan.spec, topo.name(), progs.size());
  const auto groups = distinct_groups(plan);
  out += fmt::format("communicators {} (split once per member set, reused across message sizes)\n", groups.size());
  for (std::size_t c = 0; c < groups.size(); ++c) {
    out += fmt::format("  comm {}: members {}\n", c, fmt::join(groups[c], " "));
  }
  for (const nccl::Program& p : progs) {
    std::map<nccl::StepKind, int> k;
    for (const nccl::Step& s : p.steps) ++k[s.kind];
    out += fmt::format(
        "\nrank {}: devices {}, {} NCCL groups, {} send, {} recv, {} collective, {} copy, {} reduce, "
        "{} scale\n",
        p.rank, fmt::join(p.devices, " "), k[nccl::StepKind::kGroupStart], k[nccl::StepKind::kSend],
        k[nccl::StepKind::kRecv], k[nccl::StepKind::kCollective], k[nccl::StepKind::kCopy], k[nccl::StepKind::kReduce],
        k[nccl::StepKind::kScale]);
    std::vector<std::string> registers;
    for (const nccl::BufferUse& u : nccl::buffer_uses(p)) {
      registers.push_back(fmt::format("{} {}",
                                      u.comm == nccl::BufferUse::kPeers ? "peers" : fmt::format("comm {}", u.comm),
                                      u.device < 0 ? "staging" : fmt::format("d{}.b{}", u.device, u.buffer)));
    }
    out += fmt::format("registers (ncclCommRegister, once per prepare): {}\n", fmt::join(registers, ", "));
    out += nccl::describe(p);
  }
  return out;
}

}  // namespace

nlohmann::json lowering_json(const Plan& plan, const Topology& topo, const LowerOptions& options) {
  if (options.target == LowerTarget::kCuda) return cuda_json(plan, lower_cuda(plan, topo, options));
  return nccl_json(plan, lower_nccl(plan, topo));
}

std::string lowering_text(const Plan& plan, const Topology& topo, const LowerOptions& options) {
  if (options.target == LowerTarget::kCuda) return cuda_text(plan, topo, lower_cuda(plan, topo, options), options);
  return nccl_text(plan, topo, lower_nccl(plan, topo));
}

}  // namespace artune
