#include "artune/executor/nccl/nccl_program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "artune/core/error.hpp"
#include "artune/executor/cuda/cuda_program.hpp"

namespace artune::nccl {
namespace {

Ref ref(const Location& l) { return Ref{l.device, l.buffer, l.offset}; }

class RankLowering {
 public:
  RankLowering(const Plan& plan, const std::vector<int>& host_of_device, const std::vector<bool>& host_device, int rank)
      : plan_(plan), host_of_(host_of_device), host_device_(host_device) {
    if (host_device.size() != plan.devices.size()) {
      throw InvalidInput(
          fmt::format("nccl lowering: {} host flags for {} devices", host_device.size(), plan.devices.size()));
    }
    prog_.rank = rank;
    prog_.host_device = host_device;
  }

  Program run() {
    const ProcessSchedule sched = split_for_process(plan_, host_of_, prog_.rank);
    prog_.devices = sched.devices;
    groups_ = distinct_groups(plan_);
    group_of_op_ = group_index_of_ops(plan_);
    std::set<int> comms;
    for (const Action& a : sched.actions) {
      switch (a.kind) {
        case ActionKind::kSend:
        case ActionKind::kRecv: add_transfer(a); break;
        case ActionKind::kCopy:
        case ActionKind::kReduce: {
          flush();
          Step s;
          s.kind = a.kind == ActionKind::kCopy ? StepKind::kCopy : StepKind::kReduce;
          s.op = a.op;
          s.dst = ref(a.local);
          s.src = ref(a.remote);
          s.count = a.local.count;
          if (s.count <= 0) break;
          if (s.kind == StepKind::kCopy && on_host(a.local.device) && on_host(a.remote.device)) {
            // A host-to-host cudaMemcpyAsync is synchronous with respect to the host instead of
            // queued behind the stream's earlier work (which produces its source): go through
            // staging with two pinned DMA copies, which are ordinary stream work.
            const Ref staged{-1, Ref::kStaging, 0};
            Step in = s;
            in.dst = staged;
            Step out = s;
            out.src = staged;
            prog_.steps.push_back(in);
            prog_.steps.push_back(out);
            prog_.staging = std::max(prog_.staging, s.count);
            break;
          }
          prog_.steps.push_back(s);
          break;
        }
        case ActionKind::kScale: {
          flush();
          const Op& op = plan_.ops.at(a.op);
          Step s;
          s.kind = StepKind::kScale;
          s.op = a.op;
          s.dst = ref(a.local);
          s.count = a.local.count;
          s.divisor = op.divisor;
          if (s.count > 0) prog_.steps.push_back(s);
          break;
        }
        case ActionKind::kGroup: {
          flush();
          const Op& op = plan_.ops.at(a.op);
          for (int m : op.group) {
            if (host_device_.at(m)) {
              throw InvalidInput(
                  fmt::format("nccl backend: op {}: group member {} ({}) is in host memory; NCCL groups need GPU ranks",
                              a.op, m, plan_.devices.at(m).name));
            }
          }
          Step s;
          s.kind = StepKind::kCollective;
          s.op = a.op;
          s.dst = ref(a.local);
          s.count = a.local.count;
          s.collective = op.collective;
          s.comm = group_of_op_.at(a.op);
          const auto& members = groups_.at(s.comm);
          s.comm_size = static_cast<int>(members.size());
          s.comm_rank = static_cast<int>(std::find(members.begin(), members.end(), a.device) - members.begin());
          if (op.collective == Collective::kBroadcast || op.collective == Collective::kReduce) {
            s.root = static_cast<int>(std::find(members.begin(), members.end(), op.root) - members.begin());
          }
          comms.insert(s.comm);
          prog_.steps.push_back(s);
          break;
        }
      }
    }
    flush();
    prog_.comms.assign(comms.begin(), comms.end());
    return std::move(prog_);
  }

 private:
  bool on_host(int device) const { return host_device_.at(device); }

  std::int64_t carve(std::int64_t count) {
    const std::int64_t at = used_;
    // Keep every staged region 16-byte aligned for the vector kernels (in elements of ≥ 1 byte).
    used_ += (count + 15) / 16 * 16;
    return at;
  }

  // True when op `id` descends (through the whole plan DAG, other devices included) from an op of
  // the open group. Direct local deps are not enough: NCCL completes a send when the data has left,
  // not when it has arrived, so an ordering that the plan carries only through other devices
  // (my recv → their ops → my send of the same region) must still split the group here.
  bool descends_from_group(int id) const {
    if (ops_in_group_.empty()) return false;
    const int lowest = *ops_in_group_.begin();
    std::vector<int> stack(plan_.ops.at(id).deps.begin(), plan_.ops.at(id).deps.end());
    std::set<int> seen;
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      if (x < lowest || !seen.insert(x).second) continue;
      if (ops_in_group_.count(x) != 0) return true;
      for (int d : plan_.ops.at(x).deps) stack.push_back(d);
    }
    return false;
  }

  void add_transfer(const Action& a) {
    if (descends_from_group(a.op)) flush();
    const std::int64_t count = a.local.count;
    ops_in_group_.insert(a.op);
    if (count <= 0) return;
    const int peer_rank = host_of_.at(a.peer);
    Step s;
    s.op = a.op;
    s.count = count;
    s.peer = peer_rank;
    if (a.kind == ActionKind::kSend) {
      s.kind = StepKind::kSend;
      if (on_host(a.local.device)) {
        const Ref staged{-1, Ref::kStaging, carve(count)};
        Step pre;
        pre.kind = StepKind::kCopy;
        pre.op = a.op;
        pre.dst = staged;
        pre.src = ref(a.local);
        pre.count = count;
        pre_.push_back(pre);
        s.src = staged;
      } else {
        s.src = ref(a.local);
      }
    } else {
      s.kind = StepKind::kRecv;
      if (!a.reduce && !on_host(a.local.device)) {
        s.dst = ref(a.local);
      } else {
        const Ref staged{-1, Ref::kStaging, carve(count)};
        s.dst = staged;
        Step post;
        post.kind = a.reduce ? StepKind::kReduce : StepKind::kCopy;
        post.op = a.op;
        post.dst = ref(a.local);
        post.src = staged;
        post.count = count;
        post_.push_back(post);
      }
    }
    p2p_.push_back(s);
  }

  void flush() {
    if (!p2p_.empty()) {
      for (const Step& s : pre_) prog_.steps.push_back(s);
      Step start;
      start.kind = StepKind::kGroupStart;
      start.op = p2p_.front().op;
      prog_.steps.push_back(start);
      for (const Step& s : p2p_) prog_.steps.push_back(s);
      Step end;
      end.kind = StepKind::kGroupEnd;
      end.op = p2p_.back().op;
      prog_.steps.push_back(end);
      for (const Step& s : post_) prog_.steps.push_back(s);
    }
    prog_.staging = std::max(prog_.staging, used_);
    used_ = 0;
    pre_.clear();
    p2p_.clear();
    post_.clear();
    ops_in_group_.clear();
  }

  const Plan& plan_;
  const std::vector<int>& host_of_;
  const std::vector<bool>& host_device_;
  Program prog_;
  std::vector<std::vector<int>> groups_;
  std::vector<int> group_of_op_;
  std::vector<Step> pre_, p2p_, post_;
  std::set<int> ops_in_group_;
  std::int64_t used_ = 0;
};

std::string ref_text(const Ref& r) {
  if (r.buffer == Ref::kStaging) return fmt::format("staging[{}]", r.offset);
  return fmt::format("d{}.b{}[{}]", r.device, r.buffer, r.offset);
}

}  // namespace

Program lower_rank(const Plan& plan, const std::vector<int>& host_of_device, const std::vector<bool>& host_device,
                   int rank) {
  return RankLowering(plan, host_of_device, host_device, rank).run();
}

std::vector<int> machines_from_names(const Plan& plan) {
  std::vector<int> out;
  out.reserve(plan.devices.size());
  for (const PlanDevice& d : plan.devices) out.push_back(cuda::parse_device_name(d.name).machine);
  return out;
}

std::vector<bool> host_devices_from_names(const Plan& plan) {
  std::vector<bool> out;
  out.reserve(plan.devices.size());
  for (const PlanDevice& d : plan.devices) out.push_back(cuda::parse_device_name(d.name).host);
  return out;
}

std::vector<CommKey> communicator_keys(const Plan& plan, const std::vector<int>& host_of_device) {
  std::vector<CommKey> keys;
  for (const auto& members : distinct_groups(plan)) {
    CommKey key;
    key.reserve(members.size());
    for (int d : members) key.push_back(host_of_device.at(static_cast<std::size_t>(d)));
    keys.push_back(std::move(key));
  }
  return keys;
}

std::string describe(const Program& program) {
  std::string out = fmt::format("rank {} (staging {})\n", program.rank, program.staging);
  for (const Step& s : program.steps) {
    switch (s.kind) {
      case StepKind::kGroupStart: out += "  group start\n"; break;
      case StepKind::kGroupEnd: out += "  group end\n"; break;
      case StepKind::kSend:
        out += fmt::format("  op{} send {} x{} -> rank {}\n", s.op, ref_text(s.src), s.count, s.peer);
        break;
      case StepKind::kRecv:
        out += fmt::format("  op{} recv {} x{} <- rank {}\n", s.op, ref_text(s.dst), s.count, s.peer);
        break;
      case StepKind::kCopy:
        out += fmt::format("  op{} copy {} <- {} x{}\n", s.op, ref_text(s.dst), ref_text(s.src), s.count);
        break;
      case StepKind::kReduce:
        out += fmt::format("  op{} reduce {} += {} x{}\n", s.op, ref_text(s.dst), ref_text(s.src), s.count);
        break;
      case StepKind::kScale:
        out += fmt::format("  op{} scale {} /{} x{}\n", s.op, ref_text(s.dst), s.divisor, s.count);
        break;
      case StepKind::kCollective:
        out += fmt::format("  op{} {} comm {} rank {}/{} root {} {} x{}\n", s.op, to_string(s.collective), s.comm,
                           s.comm_rank, s.comm_size, s.root, ref_text(s.dst), s.count);
        break;
    }
  }
  return out;
}

RankMemory rank_memory(const Plan& plan, const Program& program, std::size_t element_bytes) {
  RankMemory need;
  const auto bytes = [&](std::int64_t elements) { return static_cast<std::uint64_t>(elements) * element_bytes; };
  for (int d : program.devices) {
    for (std::size_t b = 0; b < plan.buffers[static_cast<std::size_t>(d)].size(); ++b) {
      const std::uint64_t own = bytes(cuda::buffer_elements(plan, d, static_cast<int>(b)));
      (program.host_device[static_cast<std::size_t>(d)] ? need.host_bytes : need.gpu_bytes) += own;
    }
  }
  need.gpu_bytes += bytes(program.staging);
  need.host_bytes += bytes(plan.count);
  return need;
}

}  // namespace artune::nccl
