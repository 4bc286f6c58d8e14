#include "artune/executor/cuda/cuda_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <string_view>
#include <utility>

#include "artune/core/error.hpp"
#include "artune/topology/topology.hpp"

namespace artune::cuda {
DeviceNameInfo parse_device_name(std::string_view name) {
  DeviceNameInfo info;
  if (const auto slash = name.rfind('/'); slash != std::string_view::npos) {
    const std::string_view prefix = name.substr(0, slash);
    if (prefix.size() > 1 && (prefix[0] == 'm' || prefix[0] == 'M') &&
        std::all_of(prefix.begin() + 1, prefix.end(), [](unsigned char c) { return std::isdigit(c); })) {
      info.machine = std::stoi(std::string(prefix.substr(1)));
    }
    name.remove_prefix(slash + 1);
  }
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (std::string_view host_prefix : {"cpu", "socket", "numa", "host"}) {
    if (lower.rfind(host_prefix, 0) == 0) {
      info.host = true;
      return info;
    }
  }
  if (lower.rfind("gpu", 0) == 0 && lower.size() > 3 && lower.size() < 10 &&
      std::all_of(lower.begin() + 3, lower.end(), [](unsigned char c) { return std::isdigit(c); })) {
    info.gpu_index = std::stoi(lower.substr(3));
  }
  return info;
}

std::vector<int> pci_bus_order(const std::vector<std::string>& bus_ids) {
  std::vector<std::pair<std::uint64_t, int>> keyed;
  for (std::size_t i = 0; i < bus_ids.size(); ++i) {
    unsigned domain = 0, bus = 0, device = 0, function = 0;
    char tail = 0;
    if (std::sscanf(bus_ids[i].c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) {
      throw InvalidInput(fmt::format("cuda: PCI bus id '{}' of cuda:{} is not dddd:bb:dd.f", bus_ids[i], i));
    }
    const std::uint64_t key = (std::uint64_t{domain} << 24) | (std::uint64_t{bus} << 16) |
                              (std::uint64_t{device} << 8) | std::uint64_t{function};
    keyed.emplace_back(key, static_cast<int>(i));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> order;
  for (const auto& [key, ordinal] : keyed) order.push_back(ordinal);
  return order;
}

std::vector<Placement> place_devices(const Plan& plan, int cuda_devices, const Topology* topo,
                                     const std::vector<int>& bus_order) {
  if (cuda_devices <= 0) throw Unsupported("no CUDA device available");
  if (!bus_order.empty() && static_cast<int>(bus_order.size()) != cuda_devices) {
    throw InvalidInput(fmt::format("cuda: {} PCI bus ids for {} devices", bus_order.size(), cuda_devices));
  }
  const int n = static_cast<int>(plan.devices.size());
  std::vector<Placement> placement(n);
  std::vector<bool> known(n, false);
  for (int d = 0; d < n; ++d) {
    const PlanDevice& dev = plan.devices[d];
    Placement& p = placement[d];
    if (topo != nullptr && dev.node >= 0 && dev.node < static_cast<int>(topo->nodes().size())) {
      const Node& node = topo->nodes()[dev.node];
      if (node.kind == NodeKind::kGpu) {
        p.local_gpu = node.local_index;
        known[d] = true;
      } else {
        p.host = true;
        known[d] = true;
      }
      continue;
    }
    const DeviceNameInfo info = parse_device_name(dev.name);
    if (info.host) {
      p.host = true;
      known[d] = true;
    } else if (info.gpu_index >= 0) {
      p.local_gpu = info.gpu_index;
      known[d] = true;
    }
  }
  for (int d = 0; d < n; ++d) {
    Placement& p = placement[d];
    if (!known[d]) {
      // Nothing says what it is: a participant is a GPU (its rank as local index), a helper host memory.
      if (plan.devices[d].participant) {
        p.local_gpu = d;
      } else {
        p.host = true;
      }
    }
    if (!p.host) {
      const int k = p.local_gpu % cuda_devices;
      p.cuda_device = bus_order.empty() ? k : bus_order[static_cast<std::size_t>(k)];
    }
  }
  // Host devices are driven from the stream of the first GPU-placed device's GPU.
  int host_driver = 0;
  for (const Placement& p : placement) {
    if (!p.host) {
      host_driver = p.cuda_device;
      break;
    }
  }
  for (Placement& p : placement) {
    if (p.host) p.cuda_device = host_driver;
  }
  return placement;
}

bool shares_gpus(const std::vector<Placement>& placement) {
  std::set<int> seen;
  for (const Placement& p : placement) {
    if (p.host) continue;
    if (!seen.insert(p.cuda_device).second) return true;
  }
  return false;
}

int executing_stream(const Op& op, const std::vector<Placement>& placement) {
  switch (op.kind) {
    case OpKind::kCopy:
    case OpKind::kReduce:
      if (placement.at(op.dst.device).host && !placement.at(op.src.device).host) return op.src.device;
      return op.dst.device;
    case OpKind::kScale: return op.dst.device;
    case OpKind::kGroup: break;
  }
  throw InvalidInput(fmt::format("op {}: a group op has no single executing stream", op.id));
}

namespace {

class Lowering {
 public:
  Lowering(const Plan& plan, const std::vector<Placement>& placement, const std::vector<std::vector<bool>>& peer)
      : plan_(plan), placement_(placement), peer_(peer) {
    const int n = static_cast<int>(plan.devices.size());
    if (static_cast<int>(placement.size()) != n) {
      throw InvalidInput(fmt::format("cuda lowering: {} placements for {} plan devices", placement.size(), n));
    }
    prog_.placement = placement;
    prog_.staging.assign(n, 0);
    known_.assign(n, std::vector<int>(n, -1));
  }

  Program run() {
    const auto& ops = plan_.ops;
    streams_of_.resize(ops.size());
    for (const Op& op : ops) {
      if (op.id < 0 || op.id >= static_cast<int>(ops.size()) || &ops[op.id] != &op) {
        throw InvalidInput(
            fmt::format("cuda lowering: op ids must equal positions (op at {} has id {})", &op - ops.data(), op.id));
      }
      for (int d : op.deps) {
        if (d < 0 || d >= op.id) throw InvalidInput(fmt::format("op {}: dependency {} is not an earlier op", op.id, d));
      }
      if (op.kind == OpKind::kGroup) {
        std::vector<int> members;
        for (int m : op.group) {
          check_device(op, m);
          if (std::find(members.begin(), members.end(), m) == members.end()) members.push_back(m);
        }
        streams_of_[op.id] = members;
      } else {
        if (op.kind != OpKind::kScale) check_device(op, op.src.device);
        check_device(op, op.dst.device);
        streams_of_[op.id] = {executing_stream(op, placement_)};
      }
    }
    // An op's completion on stream s needs an event when a dependent issues on another stream.
    needs_event_.resize(ops.size());
    for (const Op& op : ops) needs_event_[op.id].assign(streams_of_[op.id].size(), false);
    for (const Op& op : ops) {
      for (int d : op.deps) {
        for (std::size_t i = 0; i < streams_of_[d].size(); ++i) {
          for (int t : streams_of_[op.id]) {
            if (t != streams_of_[d][i]) needs_event_[d][i] = true;
          }
        }
      }
    }
    events_of_.resize(ops.size());
    for (const Op& op : ops) {
      if (op.kind == OpKind::kGroup) {
        lower_group(op);
      } else {
        lower_plain(op);
      }
    }
    drop_unwaited_records();
    return std::move(prog_);
  }

 private:
  // Records nobody waits on (their waits were implied by others) cost an API call per run: drop
  // them and renumber the remaining events densely.
  void drop_unwaited_records() {
    std::vector<bool> waited(static_cast<std::size_t>(prog_.events), false);
    for (const Step& s : prog_.steps) {
      if (s.kind == StepKind::kWait) waited[s.event] = true;
    }
    std::vector<int> renumber(static_cast<std::size_t>(prog_.events), -1);
    std::vector<int> event_stream;
    for (int e = 0; e < prog_.events; ++e) {
      if (!waited[e]) continue;
      renumber[e] = static_cast<int>(event_stream.size());
      event_stream.push_back(prog_.event_stream[e]);
    }
    std::vector<Step> steps;
    steps.reserve(prog_.steps.size());
    for (Step s : prog_.steps) {
      if (s.kind == StepKind::kRecord || s.kind == StepKind::kWait) {
        if (!waited[s.event]) continue;
        s.event = renumber[s.event];
      }
      steps.push_back(s);
    }
    prog_.steps = std::move(steps);
    prog_.event_stream = std::move(event_stream);
    prog_.events = static_cast<int>(prog_.event_stream.size());
  }

  void check_device(const Op& op, int device) const {
    if (device < 0 || device >= static_cast<int>(placement_.size())) {
      throw InvalidInput(fmt::format("op {}: device {} is not a plan device", op.id, device));
    }
  }

  int new_event(int stream) {
    prog_.event_stream.push_back(stream);
    return prog_.events++;
  }

  // known_[s][t]: the last record of stream t that stream s is already ordered after (directly or
  // through a chain of waits); a wait that adds nothing is left out.
  void record(int op, int stream, int event) {
    auto& mine = known_[stream];
    ++mine[stream];
    event_seq_.resize(prog_.events, -1);
    event_clock_.resize(prog_.events);
    event_seq_[event] = mine[stream];
    event_clock_[event] = mine;
    Step s;
    s.kind = StepKind::kRecord;
    s.stream = stream;
    s.event = event;
    s.op = op;
    prog_.steps.push_back(s);
  }

  void wait(int op, int stream, int event) {
    const int source = prog_.event_stream[event];
    if (source == stream) return;
    auto& mine = known_[stream];
    if (mine[source] >= event_seq_.at(event)) return;
    const auto& theirs = event_clock_.at(event);
    for (std::size_t t = 0; t < mine.size(); ++t) mine[t] = std::max(mine[t], theirs[t]);
    Step s;
    s.kind = StepKind::kWait;
    s.stream = stream;
    s.event = event;
    s.op = op;
    prog_.steps.push_back(s);
  }

  // Waits on every event in `events` that the stream is not already ordered after, leaving out
  // those another event of the batch implies.
  void wait_all(int op, int stream, const std::vector<int>& events) {
    std::vector<int> needed;
    for (int ev : events) {
      const int source = prog_.event_stream[ev];
      if (source != stream && known_[stream][source] < event_seq_.at(ev)) needed.push_back(ev);
    }
    for (int ev : needed) {
      const int source = prog_.event_stream[ev];
      const bool implied = std::any_of(needed.begin(), needed.end(), [&](int other) {
        return other != ev && event_clock_.at(other)[source] >= event_seq_.at(ev);
      });
      if (!implied) wait(op, stream, ev);
    }
  }

  void wait_deps(const Op& op, int stream) {
    std::vector<int> events;
    for (int d : op.deps) {
      for (const auto& [t, ev] : events_of_[d]) events.push_back(ev);
    }
    wait_all(op.id, stream, events);
  }

  void finish(const Op& op, int stream) {
    const auto& streams = streams_of_[op.id];
    const auto it = std::find(streams.begin(), streams.end(), stream);
    if (it == streams.end() || !needs_event_[op.id][it - streams.begin()]) return;
    const int ev = new_event(stream);
    record(op.id, stream, ev);
    events_of_[op.id].emplace_back(stream, ev);
  }

  int gpu_of_stream(int stream) const { return placement_[stream].cuda_device; }

  bool loadable(int stream, int device) const {
    const Placement& data = placement_[device];
    if (data.host) return false;  // a DMA copy into staging beats loads over PCIe
    const int exec = gpu_of_stream(stream);
    if (data.cuda_device == exec) return true;
    return exec < static_cast<int>(peer_.size()) && data.cuda_device < static_cast<int>(peer_[exec].size()) &&
           peer_[exec][data.cuda_device];
  }

  static Ref ref(const Location& loc) { return Ref{loc.device, loc.buffer, loc.offset}; }
  static Ref ref(int device, int buffer, std::int64_t offset) { return Ref{device, buffer, offset}; }

  void push_step(StepKind kind, int op, int stream, Ref dst, Ref src, std::int64_t count) {
    Step s;
    s.phase = phase_.phase;
    s.round = phase_.round;
    s.kind = kind;
    s.stream = stream;
    s.dst = dst;
    s.src = src;
    s.count = count;
    s.op = op;
    prog_.steps.push_back(s);
  }

  bool in_host_memory(const Ref& r) const { return r.buffer != Ref::kStaging && placement_[r.device].host; }

  void emit_copy(int op, int stream, Ref dst, Ref src, std::int64_t count) {
    if (count <= 0) return;
    if (in_host_memory(dst) && in_host_memory(src)) {
      // cudaMemcpyAsync between two host buffers is "fully synchronous with respect to the host"
      // (CUDA's API synchronisation rules), not queued work: the issuing thread would block on it
      // or copy before the stream's earlier work and event waits have produced its source. Two
      // pinned DMA copies through staging are ordinary stream work.
      const Ref staging{stream, Ref::kStaging, 0};
      push_step(StepKind::kCopy, op, stream, staging, src, count);
      push_step(StepKind::kCopy, op, stream, dst, staging, count);
      prog_.staging[stream] = std::max(prog_.staging[stream], count);
      return;
    }
    push_step(StepKind::kCopy, op, stream, dst, src, count);
  }

  void emit_reduce(int op, int stream, Ref dst, Ref src, std::int64_t count) {
    if (count <= 0) return;
    if (!loadable(stream, src.device)) {
      const Ref staging{stream, Ref::kStaging, 0};
      emit_copy(op, stream, staging, src, count);
      prog_.staging[stream] = std::max(prog_.staging[stream], count);
      src = staging;
    }
    push_step(StepKind::kReduce, op, stream, dst, src, count);
  }

  void lower_plain(const Op& op) {
    const int stream = streams_of_[op.id][0];
    wait_deps(op, stream);
    switch (op.kind) {
      case OpKind::kCopy: emit_copy(op.id, stream, ref(op.dst), ref(op.src), op.dst.count); break;
      case OpKind::kReduce: emit_reduce(op.id, stream, ref(op.dst), ref(op.src), op.dst.count); break;
      case OpKind::kScale: {
        if (op.divisor == 0) throw InvalidInput(fmt::format("op {}: scale by 0", op.id));
        if (op.dst.count > 0) {
          Step s;
          s.kind = StepKind::kScale;
          s.stream = stream;
          s.dst = ref(op.dst);
          s.count = op.dst.count;
          s.divisor = op.divisor;
          s.op = op.id;
          prog_.steps.push_back(s);
        }
        break;
      }
      case OpKind::kGroup: break;
    }
    finish(op, stream);
  }

  void lower_group(const Op& op) {
    const auto& members = streams_of_[op.id];
    if (members.size() != op.group.size()) {
      throw InvalidInput(fmt::format("op {}: group lists a device twice", op.id));
    }
    for (int m : members) wait_deps(op, m);
    const int buffer = op.dst.buffer;
    const std::int64_t offset = op.dst.offset;
    const std::int64_t count = op.dst.count;
    const int g = static_cast<int>(members.size());
    auto shard = [&](int k) { return even_piece(count, g, k); };
    auto root_member = [&]() {
      if (std::find(members.begin(), members.end(), op.root) == members.end()) {
        throw InvalidInput(fmt::format("op {}: root {} is not in the group", op.id, op.root));
      }
      return op.root;
    };
    // Peer order is rotated: in round s (1…g-1) member k pulls from member k+s (mod g), so every member
    // is read by exactly one peer per round (fan-in 1) instead of every member reading member 0 first.
    auto reduce_scatter = [&]() {
      for (int s = 1; s < g; ++s) {
        phase_ = {Phase::kReduceScatter, s - 1};
        for (int k = 0; k < g; ++k) {
          const int j = (k + s) % g;
          const auto [off, cnt] = shard(k);
          emit_reduce(op.id, members[k], ref(members[k], buffer, offset + off), ref(members[j], buffer, offset + off),
                      cnt);
        }
      }
    };
    auto all_gather = [&]() {
      for (int s = 1; s < g; ++s) {
        phase_ = {Phase::kAllGather, s - 1};
        for (int m = 0; m < g; ++m) {
          const int k = (m + s) % g;
          const auto [off, cnt] = shard(k);
          emit_copy(op.id, members[m], ref(members[m], buffer, offset + off), ref(members[k], buffer, offset + off),
                    cnt);
        }
      }
    };
    switch (op.collective) {
      case Collective::kBroadcast: {
        // Binomial tree from the root: in round r every member that holds the data (relative index
        // i < 2^r) is pulled from by member i + 2^r, which first waits for i's own pull to finish.
        // log2(g) rounds of one full copy each, every holder read by one peer per round.
        const int root = root_member();
        const int root_at = static_cast<int>(std::find(members.begin(), members.end(), root) - members.begin());
        auto member = [&](int relative) { return members[(root_at + relative) % g]; };
        std::vector<int> received(g, -1);  // per relative index: event recorded after its pull
        int round = 0;
        for (int span = 1; span < g; span *= 2, ++round) {
          phase_ = {Phase::kBroadcast, round};
          for (int i = 0; i < span && i + span < g; ++i) {
            const int parent = member(i);
            const int child = member(i + span);
            if (received[i] >= 0) wait(op.id, child, received[i]);
            emit_copy(op.id, child, ref(child, buffer, offset), ref(parent, buffer, offset), count);
            if (2 * span < g) {  // a later round reads the child: record its arrival
              received[i + span] = new_event(child);
              record(op.id, child, received[i + span]);
            }
          }
        }
        break;
      }
      case Collective::kReduce: {
        const int root = root_member();
        int round = 0;
        for (int m : members) {
          if (m == root) continue;
          phase_ = {Phase::kReduce, round++};
          emit_reduce(op.id, root, ref(root, buffer, offset), ref(m, buffer, offset), count);
        }
        break;
      }
      case Collective::kReduceScatter: reduce_scatter(); break;
      case Collective::kAllGather: all_gather(); break;
      case Collective::kAllReduce: {
        reduce_scatter();
        // Member m overwrites shard k with member k's result: k's reduce-scatter (which also read
        // m's shard k) must be complete first.
        std::vector<int> rs_event(g);
        for (int k = 0; k < g; ++k) {
          rs_event[k] = new_event(members[k]);
          record(op.id, members[k], rs_event[k]);
        }
        for (int m = 0; m < g; ++m) wait_all(op.id, members[m], rs_event);
        all_gather();
        break;
      }
    }
    phase_ = {};
    for (int m : members) finish(op, m);
  }

  struct PhaseTag {
    Phase phase = Phase::kNone;
    int round = -1;
  };
  PhaseTag phase_;  // the group phase and round being lowered (tags the steps it emits)
  const Plan& plan_;
  const std::vector<Placement>& placement_;
  const std::vector<std::vector<bool>>& peer_;
  Program prog_;
  std::vector<std::vector<int>> streams_of_;
  std::vector<std::vector<bool>> needs_event_;
  std::vector<std::vector<std::pair<int, int>>> events_of_;  // per op: (stream, event)
  std::vector<std::vector<int>> known_;                      // per stream: vector clock of records
  std::vector<int> event_seq_;                               // per event: its position on its stream
  std::vector<std::vector<int>> event_clock_;                // per event: the recording stream's clock
};

std::string ref_text(const Ref& r) {
  if (r.buffer == Ref::kStaging) return fmt::format("staging{}[{}]", r.device, r.offset);
  return fmt::format("d{}.b{}[{}]", r.device, r.buffer, r.offset);
}

}  // namespace

Program lower_plan(const Plan& plan, const std::vector<Placement>& placement,
                   const std::vector<std::vector<bool>>& peer) {
  return Lowering(plan, placement, peer).run();
}

std::int64_t buffer_elements(const Plan& plan, int device, int buffer) {
  const auto d = static_cast<std::size_t>(device);
  const std::int64_t elements = plan.buffers[d][static_cast<std::size_t>(buffer)];
  return buffer == 0 && plan.devices[d].participant ? std::max(elements, plan.count) : elements;
}

MemoryNeed memory_need(const Plan& plan, const Program& program, int cuda_devices, std::size_t element_bytes) {
  MemoryNeed need;
  need.gpu_bytes.assign(static_cast<std::size_t>(std::max(cuda_devices, 0)), 0);
  need.devices_on_gpu.assign(need.gpu_bytes.size(), 0);
  const auto bytes = [&](std::int64_t elements) { return static_cast<std::uint64_t>(elements) * element_bytes; };
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    const Placement& p = program.placement[d];
    std::uint64_t own = 0;
    for (std::size_t b = 0; b < plan.buffers[d].size(); ++b) {
      own += bytes(buffer_elements(plan, static_cast<int>(d), static_cast<int>(b)));
    }
    const auto gpu = static_cast<std::size_t>(p.cuda_device);
    if (gpu >= need.gpu_bytes.size())
      throw Unsupported(fmt::format("plan device {} placed on cuda:{} of {}", d, gpu, cuda_devices));
    (p.host ? need.host_bytes : need.gpu_bytes[gpu]) += own;
    need.gpu_bytes[gpu] += bytes(program.staging[d]);  // a stream's staging is always on its GPU
    if (!p.host) ++need.devices_on_gpu[gpu];
  }
  return need;
}

std::string_view to_string(Phase phase) noexcept {
  switch (phase) {
    case Phase::kNone: return "-";
    case Phase::kBroadcast: return "broadcast";
    case Phase::kReduce: return "reduce";
    case Phase::kReduceScatter: return "reduce_scatter";
    case Phase::kAllGather: return "all_gather";
  }
  return "?";
}

int RoundFanIn::max() const { return readers.empty() ? 0 : *std::max_element(readers.begin(), readers.end()); }

std::vector<RoundFanIn> fan_in(const Program& program) {
  const std::size_t n = program.placement.size();
  std::vector<RoundFanIn> out;
  std::map<std::tuple<int, Phase, int>, std::size_t> index;
  std::vector<std::set<std::pair<int, int>>> seen;  // per round: (read device, reading stream)
  for (const Step& s : program.steps) {
    if (s.phase == Phase::kNone || (s.kind != StepKind::kCopy && s.kind != StepKind::kReduce)) continue;
    const auto key = std::make_tuple(s.op, s.phase, s.round);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, out.size()).first;
      out.push_back(RoundFanIn{s.op, s.phase, s.round, std::vector<int>(n, 0)});
      seen.emplace_back();
    }
    if (s.src.buffer == Ref::kStaging || s.src.device == s.stream) continue;
    if (seen[it->second].insert({s.src.device, s.stream}).second) {
      ++out[it->second].readers[static_cast<std::size_t>(s.src.device)];
    }
  }
  return out;
}

std::size_t GraphDag::edges() const {
  std::size_t n = 0;
  for (const auto& d : deps) n += d.size();
  return n;
}

GraphDag graph_of(const Program& program) {
  GraphDag dag;
  const std::size_t streams = program.placement.size();
  std::vector<std::set<int>> frontier(streams);  // per stream: the nodes its next work depends on
  std::vector<std::set<int>> event_nodes(static_cast<std::size_t>(program.events));
  for (std::size_t i = 0; i < program.steps.size(); ++i) {
    const Step& s = program.steps[i];
    auto& mine = frontier.at(static_cast<std::size_t>(s.stream));
    switch (s.kind) {
      case StepKind::kRecord: event_nodes.at(static_cast<std::size_t>(s.event)) = mine; break;
      case StepKind::kWait: {
        const auto& theirs = event_nodes.at(static_cast<std::size_t>(s.event));
        mine.insert(theirs.begin(), theirs.end());
        break;
      }
      default: {
        const int node = static_cast<int>(dag.step.size());
        dag.step.push_back(static_cast<int>(i));
        // As capture records them: the stream's last node and the nodes joined in by waits since.
        std::vector<int> deps(mine.begin(), mine.end());
        dag.deps.push_back(std::move(deps));
        mine = {node};
        break;
      }
    }
  }
  return dag;
}

void add_graph_nodes(const Program& program, GraphBuilder& builder) {
  const GraphDag dag = graph_of(program);
  std::vector<int> id(dag.step.size(), -1);
  for (std::size_t n = 0; n < dag.step.size(); ++n) {
    std::vector<int> deps;
    deps.reserve(dag.deps[n].size());
    for (int d : dag.deps[n]) deps.push_back(id[static_cast<std::size_t>(d)]);
    id[n] = builder.add(dag.step[n], deps);
  }
}

std::string describe(const Program& program) {
  std::string out;
  for (const Step& s : program.steps) {
    switch (s.kind) {
      case StepKind::kCopy:
        out += fmt::format("s{} op{} copy {} <- {} x{}\n", s.stream, s.op, ref_text(s.dst), ref_text(s.src), s.count);
        break;
      case StepKind::kReduce:
        out += fmt::format("s{} op{} reduce {} += {} x{}\n", s.stream, s.op, ref_text(s.dst), ref_text(s.src), s.count);
        break;
      case StepKind::kScale:
        out += fmt::format("s{} op{} scale {} /{} x{}\n", s.stream, s.op, ref_text(s.dst), s.divisor, s.count);
        break;
      case StepKind::kRecord: out += fmt::format("s{} op{} record e{}\n", s.stream, s.op, s.event); break;
      case StepKind::kWait: out += fmt::format("s{} op{} wait e{}\n", s.stream, s.op, s.event); break;
    }
  }
  return out;
}

}  // namespace artune::cuda
