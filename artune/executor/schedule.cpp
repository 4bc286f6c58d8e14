#include "artune/executor/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "artune/core/error.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

std::string_view to_string(ActionKind kind) noexcept {
  switch (kind) {
    case ActionKind::kSend: return "send";
    case ActionKind::kRecv: return "recv";
    case ActionKind::kCopy: return "copy";
    case ActionKind::kReduce: return "reduce";
    case ActionKind::kScale: return "scale";
    case ActionKind::kGroup: return "group";
  }
  return "?";
}

namespace {

[[noreturn]] void bad(int op, const std::string& what) {
  throw InvalidInput(op >= 0 ? fmt::format("plan: op {}: {}", op, what) : fmt::format("plan: {}", what));
}

void check_location(const Plan& plan, int op, const Location& l, const char* role) {
  const int devices = static_cast<int>(plan.devices.size());
  if (l.device < 0 || l.device >= devices)
    bad(op, fmt::format("{} device {} out of range [0, {})", role, l.device, devices));
  const auto& bufs = plan.buffers[static_cast<std::size_t>(l.device)];
  if (l.buffer < 0 || l.buffer >= static_cast<int>(bufs.size())) {
    bad(op, fmt::format("{} buffer {} does not exist on device {}", role, l.buffer, l.device));
  }
  const std::int64_t size = bufs[static_cast<std::size_t>(l.buffer)];
  if (l.offset < 0 || l.count < 0 || l.offset > size || l.count > size - l.offset) {
    bad(op, fmt::format("{} region [{}, {}) outside device {} buffer {} of {} elements", role, l.offset,
                        l.offset + l.count, l.device, l.buffer, size));
  }
}

bool overlaps(const Location& a, const Location& b) {
  return a.device == b.device && a.buffer == b.buffer && a.count > 0 && b.count > 0 && a.offset < b.offset + b.count &&
         b.offset < a.offset + a.count;
}

// Sorted device lists of every op, for the "dep touches device" tests.
std::vector<std::vector<int>> devices_of_ops(const Plan& plan) {
  std::vector<std::vector<int>> out;
  out.reserve(plan.ops.size());
  for (const Op& op : plan.ops) {
    std::vector<int> d = op_devices(op);  // copy/reduce list (src, dst): sort for binary_search
    std::sort(d.begin(), d.end());
    out.push_back(std::move(d));
  }
  return out;
}

bool touches(const std::vector<int>& sorted_devices, int device) {
  return std::binary_search(sorted_devices.begin(), sorted_devices.end(), device);
}

std::vector<int> local_deps(const Op& op, const std::vector<std::vector<int>>& devs, int d1, int d2 = -1) {
  std::vector<int> out;
  for (int dep : op.deps) {
    const auto& dd = devs[static_cast<std::size_t>(dep)];
    if (touches(dd, d1) || (d2 >= 0 && touches(dd, d2))) out.push_back(dep);
  }
  return out;
}

Location member_region(const Op& op, int member) {
  return Location{member, op.dst.buffer, op.dst.offset, op.dst.count};
}

}  // namespace

void check_plan_shape(const Plan& plan) {
  const int devices = static_cast<int>(plan.devices.size());
  if (devices == 0) bad(-1, "no devices");
  if (plan.count < 0) bad(-1, fmt::format("negative count {}", plan.count));
  if (plan.buffers.size() != plan.devices.size()) {
    bad(-1, fmt::format("{} buffer lists for {} devices", plan.buffers.size(), plan.devices.size()));
  }
  const int ranks = plan.ranks();
  if (ranks < 1) bad(-1, "no participants");
  for (int d = 0; d < devices; ++d) {
    const bool participant = plan.devices[static_cast<std::size_t>(d)].participant;
    if (participant != (d < ranks)) bad(-1, fmt::format("device {}: participants must come first", d));
    const auto& bufs = plan.buffers[static_cast<std::size_t>(d)];
    if (participant && (bufs.empty() || bufs[0] != plan.count)) {
      bad(-1, fmt::format("device {}: buffer 0 must hold count = {} elements", d, plan.count));
    }
    for (std::int64_t b : bufs) {
      if (b < 0) bad(-1, fmt::format("device {}: negative buffer size", d));
    }
  }
  const auto devs = devices_of_ops(plan);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    const int id = static_cast<int>(i);
    if (op.id != id) bad(id, fmt::format("id {} at position {}", op.id, i));
    switch (op.kind) {
      case OpKind::kCopy:
      case OpKind::kReduce:
        check_location(plan, id, op.src, "src");
        check_location(plan, id, op.dst, "dst");
        if (op.src.count != op.dst.count)
          bad(id, fmt::format("src has {} elements, dst {}", op.src.count, op.dst.count));
        if (overlaps(op.src, op.dst)) bad(id, "src and dst overlap");
        break;
      case OpKind::kScale:
        check_location(plan, id, op.dst, "dst");
        if (op.divisor < 1) bad(id, fmt::format("divisor {} must be ≥ 1", op.divisor));
        break;
      case OpKind::kGroup: {
        if (op.group.empty()) bad(id, "empty group");
        std::vector<int> sorted = op.group;
        std::sort(sorted.begin(), sorted.end());
        if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) bad(id, "group lists a device twice");
        for (int m : op.group) check_location(plan, id, member_region(op, m), "group member");
        if ((op.collective == Collective::kBroadcast || op.collective == Collective::kReduce) &&
            std::find(op.group.begin(), op.group.end(), op.root) == op.group.end()) {
          bad(id, fmt::format("root {} is not a group member", op.root));
        }
        break;
      }
    }
    for (int dep : op.deps) {
      if (dep < 0 || dep >= id) bad(id, fmt::format("dependency {} is not an earlier op", dep));
      const auto& dd = devs[static_cast<std::size_t>(dep)];
      const bool shared = std::any_of(devs[i].begin(), devs[i].end(), [&](int d) { return touches(dd, d); });
      if (!shared) bad(id, fmt::format("dependency {} shares no device with it", dep));
    }
  }
}

bool same_shape(const Plan& prepared, const Plan& other) {
  if (prepared.collective != other.collective || prepared.devices != other.devices ||
      prepared.ops.size() != other.ops.size() || prepared.buffers.size() != other.buffers.size()) {
    return false;
  }
  for (std::size_t d = 0; d < prepared.buffers.size(); ++d) {
    if (prepared.buffers[d].size() != other.buffers[d].size()) return false;
  }
  const auto same_place = [](const Location& a, const Location& b) {
    return a.device == b.device && a.buffer == b.buffer;
  };
  for (std::size_t i = 0; i < prepared.ops.size(); ++i) {
    const Op& a = prepared.ops[i];
    const Op& b = other.ops[i];
    if (a.kind != b.kind || !same_place(a.src, b.src) || !same_place(a.dst, b.dst) || a.deps != b.deps ||
        a.collective != b.collective || a.group != b.group || a.root != b.root || a.algo != b.algo ||
        a.divisor != b.divisor) {
      return false;
    }
  }
  return true;
}

std::vector<DeviceSchedule> split_by_device(const Plan& plan) {
  check_plan_shape(plan);
  const auto devs = devices_of_ops(plan);
  std::vector<DeviceSchedule> out(plan.devices.size());
  for (std::size_t d = 0; d < out.size(); ++d) out[d].device = static_cast<int>(d);
  auto push = [&](int device, Action a) { out[static_cast<std::size_t>(device)].actions.push_back(std::move(a)); };
  for (const Op& op : plan.ops) {
    switch (op.kind) {
      case OpKind::kCopy:
      case OpKind::kReduce: {
        const ActionKind local_kind = op.kind == OpKind::kCopy ? ActionKind::kCopy : ActionKind::kReduce;
        if (op.src.device == op.dst.device) {
          push(op.dst.device, Action{local_kind, op.id, op.dst.device, op.src.device, op.dst, op.src, false,
                                     local_deps(op, devs, op.dst.device)});
        } else {
          push(op.src.device, Action{ActionKind::kSend, op.id, op.src.device, op.dst.device, op.src, op.dst, false,
                                     local_deps(op, devs, op.src.device)});
          push(op.dst.device, Action{ActionKind::kRecv, op.id, op.dst.device, op.src.device, op.dst, op.src,
                                     op.kind == OpKind::kReduce, local_deps(op, devs, op.dst.device)});
        }
        break;
      }
      case OpKind::kScale:
        push(op.dst.device,
             Action{
                 ActionKind::kScale, op.id, op.dst.device, -1, op.dst, {}, false, local_deps(op, devs, op.dst.device)});
        break;
      case OpKind::kGroup:
        for (int m : op.group) {
          push(m, Action{ActionKind::kGroup, op.id, m, -1, member_region(op, m), {}, false, local_deps(op, devs, m)});
        }
        break;
    }
  }
  return out;
}

ProcessSchedule split_for_process(const Plan& plan, const std::vector<int>& host_of_device, int process) {
  check_plan_shape(plan);
  if (host_of_device.size() != plan.devices.size()) {
    throw InvalidInput(
        fmt::format("split_for_process: {} hosts for {} devices", host_of_device.size(), plan.devices.size()));
  }
  const auto devs = devices_of_ops(plan);
  auto here = [&](int d) { return host_of_device[static_cast<std::size_t>(d)] == process; };
  ProcessSchedule out;
  out.process = process;
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    if (here(static_cast<int>(d))) out.devices.push_back(static_cast<int>(d));
  }
  for (const Op& op : plan.ops) {
    switch (op.kind) {
      case OpKind::kCopy:
      case OpKind::kReduce: {
        const bool src_here = here(op.src.device);
        const bool dst_here = here(op.dst.device);
        if (src_here && dst_here) {
          out.actions.push_back(Action{op.kind == OpKind::kCopy ? ActionKind::kCopy : ActionKind::kReduce, op.id,
                                       op.dst.device, op.src.device, op.dst, op.src, false,
                                       local_deps(op, devs, op.dst.device, op.src.device)});
        } else if (src_here) {
          out.actions.push_back(Action{ActionKind::kSend, op.id, op.src.device, op.dst.device, op.src, op.dst, false,
                                       local_deps(op, devs, op.src.device)});
        } else if (dst_here) {
          out.actions.push_back(Action{ActionKind::kRecv, op.id, op.dst.device, op.src.device, op.dst, op.src,
                                       op.kind == OpKind::kReduce, local_deps(op, devs, op.dst.device)});
        }
        break;
      }
      case OpKind::kScale:
        if (here(op.dst.device)) {
          out.actions.push_back(Action{
              ActionKind::kScale, op.id, op.dst.device, -1, op.dst, {}, false, local_deps(op, devs, op.dst.device)});
        }
        break;
      case OpKind::kGroup:
        for (int m : op.group) {
          if (here(m)) {
            out.actions.push_back(
                Action{ActionKind::kGroup, op.id, m, -1, member_region(op, m), {}, false, local_deps(op, devs, m)});
          }
        }
        break;
    }
  }
  return out;
}

std::vector<int> host_processes(const Plan& plan, const std::vector<int>& machine_of_device) {
  if (machine_of_device.size() != plan.devices.size()) {
    throw InvalidInput(
        fmt::format("host_processes: {} machines for {} devices", machine_of_device.size(), plan.devices.size()));
  }
  const int ranks = plan.ranks();
  std::vector<int> host(plan.devices.size(), 0);
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    if (static_cast<int>(d) < ranks) {
      host[d] = static_cast<int>(d);
      continue;
    }
    for (int r = 0; r < ranks; ++r) {
      if (machine_of_device[static_cast<std::size_t>(r)] == machine_of_device[d]) {
        host[d] = r;
        break;
      }
    }
  }
  return host;
}

std::vector<int> device_machines(const Plan& plan, const Topology& topo) {
  std::vector<int> out;
  out.reserve(plan.devices.size());
  const auto& nodes = topo.nodes();
  for (const PlanDevice& d : plan.devices) {
    if (d.node < 0 || d.node >= static_cast<int>(nodes.size())) {
      throw InvalidInput(fmt::format("plan: device '{}' refers to node {} outside the topology", d.name, d.node));
    }
    out.push_back(nodes[static_cast<std::size_t>(d.node)].machine);
  }
  return out;
}

std::vector<std::vector<int>> distinct_groups(const Plan& plan) {
  std::vector<std::vector<int>> out;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kGroup && std::find(out.begin(), out.end(), op.group) == out.end()) out.push_back(op.group);
  }
  return out;
}

std::vector<int> group_index_of_ops(const Plan& plan) {
  const auto groups = distinct_groups(plan);
  std::vector<int> out(plan.ops.size(), -1);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if (op.kind != OpKind::kGroup) continue;
    out[i] = static_cast<int>(std::find(groups.begin(), groups.end(), op.group) - groups.begin());
  }
  return out;
}

}  // namespace artune
