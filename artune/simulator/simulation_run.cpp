// Running a compiled plan: tasks, phases and timers in time order on the flow engine (Simulation::run),
// and the lower bound the tuner prunes with (Simulation::lower_bound).

#include "artune/simulator/simulation.hpp"

namespace artune::sim_detail {

void Simulation::start_task(int task, double now) {
  TaskState& s = state_[task];
  s.start = now;
  s.phase = 0;
  const Program& p = programs_[task];
  s.repeats_left = p.phase_count == 1 ? p.last_repeats - 1 : p.last_repeats;
  begin_phase(task, now);
}

void Simulation::begin_phase(int task, double now) {
  const Phase& ph = phases_[programs_[task].phase_begin + state_[task].phase];
  timers_.push({now + ph.delay, seq_++, task});
}

void Simulation::on_timer(int task, double now) {
  TaskState& s = state_[task];
  const Phase& ph = phases_[programs_[task].phase_begin + s.phase];
  s.outstanding = ph.flow_count;
  if (ph.flow_count == 0) {
    phase_done(task, now);
    return;
  }
  for (int f = ph.flow_begin; f < ph.flow_begin + ph.flow_count; ++f) {
    const FlowSpec& spec = flows_[f];
    engine_->start(now, spec.work, std::span<const int>(res_pool_.data() + spec.res_begin, spec.res_count), spec.cap,
                   task,
                   spec.weighted ? std::span<const double>(w_pool_.data() + spec.res_begin, spec.res_count)
                                 : std::span<const double>());
  }
}

void Simulation::on_flow_end(int task, int limiter, double now) {
  TaskState& s = state_[task];
  s.limiter = limiter;
  if (--s.outstanding == 0) phase_done(task, now);
}

void Simulation::phase_done(int task, double now) {
  TaskState& s = state_[task];
  const Program& p = programs_[task];
  if (s.phase + 1 < p.phase_count) {
    ++s.phase;
    if (s.phase + 1 == p.phase_count) s.repeats_left = p.last_repeats - 1;
    begin_phase(task, now);
  } else if (s.repeats_left > 0) {
    --s.repeats_left;
    begin_phase(task, now);
  } else {
    finish_task(task, now);
  }
}

void Simulation::finish_task(int task, double now) {
  state_[task].end = now;
  for (int k = succ_begin_[task]; k < succ_begin_[task + 1]; ++k) {
    const int next = succ_[k];
    TaskState& n = state_[next];
    if (--n.deps_left == 0) {
      n.crit_dep = task;
      start_task(next, now);
    }
  }
}

std::vector<int> Simulation::op_links(const Op& op) {
  std::vector<int> out;
  auto append = [&](const RouteInfo& r) {
    for (int i = 0; i < r.res_count; ++i) out.push_back(res_pool_[r.res_begin + i]);
  };
  if (op.kind == OpKind::kCopy || op.kind == OpKind::kReduce) {
    const int sn = plan_.devices[op.src.device].node;
    const int dn = plan_.devices[op.dst.device].node;
    if (sn != dn) append(route_info(sn, dn));
  } else if (op.kind == OpKind::kGroup && group_links_.count(op.id) != 0) {
    return group_links_.at(op.id);
  } else if (op.kind == OpKind::kGroup && op.group.size() > 1) {
    std::vector<int> members;
    for (const int d : op.group) members.push_back(plan_.devices[d].node);
    for (const RouteInfo& e : ring_info(members).edges) append(e);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

SimResult Simulation::run() {
  compile();
  engine_.emplace(capacity_, host_ || sym_.weighted);
  timers_ = {};
  seq_ = 0;
  const int n_ops = static_cast<int>(plan_.ops.size());
  state_.assign(n_ops, TaskState{});
  for (int i = 0; i < n_ops; ++i) state_[i].deps_left = deps_count_[i];
  // The host backend's run starts (its threads wake) before the first op can.
  const double t0 = model_.host.run_overhead_us;
  for (int i = 0; i < n_ops; ++i) {
    if (simulated(i) && state_[i].deps_left == 0) start_task(i, t0);
  }
  detail::FlowEngine& engine = *engine_;
  for (;;) {
    auto next = engine.next_completion();
    const bool have_timer = !timers_.empty();
    if (next.second < 0 && !have_timer) break;
    double now;
    if (next.second < 0) {
      now = timers_.top().time;
    } else if (!have_timer) {
      now = next.first;
    } else {
      now = std::min(next.first, timers_.top().time);
    }
    while (next.second >= 0 && next.first == now) {
      const detail::FlowEnd end = engine.finish(next.second, now);
      on_flow_end(static_cast<int>(end.tag), end.limiter, now);
      next = engine.next_completion();
    }
    while (!timers_.empty() && timers_.top().time == now) {
      const int task = timers_.top().task;
      timers_.pop();
      on_timer(task, now);
    }
    engine.settle(now);
  }

  SimResult result;
  result.bytes = static_cast<std::uint64_t>(plan_.count * factor_) * static_cast<std::uint64_t>(es_);
  result.ranks = plan_.ranks();
  int last = -1;
  for (int i = 0; i < n_ops; ++i) {
    if (!simulated(i)) continue;  // ends when its orbit's representative does
    if (state_[i].end < 0) {
      throw InvalidInput(fmt::format("plan: op {} never ran (its dependencies never completed)", i));
    }
    if (last < 0 || state_[i].end >= state_[last].end) last = i;
  }
  result.time_us = last < 0 ? 0.0 : state_[last].end;
  if (!std::isfinite(result.time_us)) {
    // Only figures far outside real hardware get here (a link of 1e-300 GB/s): say so rather than print inf.
    throw InvalidInput(
        fmt::format("topology '{}': the predicted time of plan {} is not finite; a link bandwidth or "
                    "latency (or a calibration figure) is far outside real hardware",
                    topo_.name(), plan_.spec));
  }
  if (result.time_us > 0) {
    result.algbw_gbps = static_cast<double>(result.bytes) / (result.time_us * kBytesPerUsPerGbps);
    const int n = result.ranks;
    result.busbw_gbps = result.algbw_gbps * bus_factor(plan_.collective, n);  // nccl-tests' factor per collective
  }
  for (int l = 0; l < links_; ++l) {
    // Folded by symmetry: every link of an orbit carried what its representative did.
    const detail::ResourceStats& st = engine.stats(sym_.order > 1 ? sym_.res_rep[static_cast<std::size_t>(l)] : l);
    if (st.work <= 0) continue;
    LinkUsage u;
    u.link = l;
    u.bytes = st.work;
    u.busy_us = st.busy_us;
    u.saturated_us = st.saturated_us;
    u.first_busy_us = st.first_busy_us;
    u.last_busy_us = st.last_busy_us;
    u.utilisation = result.time_us > 0 ? st.work / (link_capacity_[l] * result.time_us) : 0.0;
    result.links.push_back(u);
  }
  const LinkUsage* best = nullptr;
  for (const LinkUsage& u : result.links) {
    if (best == nullptr || u.saturated_us > best->saturated_us ||
        (u.saturated_us == best->saturated_us && u.busy_us > best->busy_us)) {
      best = &u;
    }
  }
  result.bottleneck_link = best ? best->link : -1;
  if (sym_.order == 1) {
    result.groups = group_runs_;
  } else {
    // Every op of a folded group's orbit ran as its representative did.
    std::unordered_map<int, std::size_t> run_of;
    for (std::size_t k = 0; k < group_runs_.size(); ++k) run_of.emplace(group_runs_[k].op, k);
    for (int i = 0; i < n_ops && !run_of.empty(); ++i) {
      const auto it = run_of.find(sym_.op_rep[static_cast<std::size_t>(i)]);
      if (it == run_of.end()) continue;
      result.groups.push_back(group_runs_[it->second]);
      result.groups.back().op = i;
    }
  }
  for (int t = last; t >= 0; t = state_[t].crit_dep) {
    CriticalStep step;
    step.op = t;
    step.start_us = state_[t].start;
    step.end_us = state_[t].end;
    step.links = op_links(plan_.ops[t]);
    step.limiting_link = state_[t].limiter < links_ ? state_[t].limiter : -1;
    result.critical_path.push_back(std::move(step));
  }
  std::reverse(result.critical_path.begin(), result.critical_path.end());
  return result;
}

// Two bounds no run of the compiled program can beat, from its flows alone (no events):
//  - resources: every flow's work crosses each of its resources, which max-min sharing never fills past its
//    capacity (Σ weight·rate ≤ capacity at every instant), and nothing moves before the run starts: the run
//    ends no earlier than start + (work the resource must carry) / capacity, for every resource;
//  - paths: an op starts no earlier than its last dependency (serial devices included) ends, a phase takes
//    its delay plus, for each of its flows, work / (the flow's fastest possible rate: its cap, and capacity /
//    weight on each resource it crosses): the run ends no earlier than the longest chain of such ops.
// The larger of the two, less a relative 1e-9 for the rounding of the event simulation's arithmetic.
double Simulation::lower_bound() {
  compile();
  const int n_ops = static_cast<int>(plan_.ops.size());
  const double t0 = model_.host.run_overhead_us;
  std::vector<double> load(capacity_.size(), 0.0);
  std::vector<double> start(static_cast<std::size_t>(n_ops), t0);
  double path = t0;
  for (int i = 0; i < n_ops; ++i) {
    if (!simulated(i)) continue;
    const Program& p = programs_[static_cast<std::size_t>(i)];
    double duration = 0;
    for (int k = 0; k < p.phase_count; ++k) {
      const Phase& ph = phases_[static_cast<std::size_t>(p.phase_begin + k)];
      const double times = k + 1 == p.phase_count ? p.last_repeats : 1;
      double longest = 0;
      for (int fi = ph.flow_begin; fi < ph.flow_begin + ph.flow_count; ++fi) {
        const FlowSpec& f = flows_[static_cast<std::size_t>(fi)];
        double rate = f.cap > 0 ? f.cap : std::numeric_limits<double>::infinity();
        for (int j = 0; j < f.res_count; ++j) {
          const auto at = static_cast<std::size_t>(f.res_begin + j);
          const double w = f.weighted ? w_pool_[at] : 1.0;
          const auto r = static_cast<std::size_t>(res_pool_[at]);
          rate = std::min(rate, capacity_[r] / w);
          load[r] += f.work * w * times;
        }
        if (f.work > 0 && std::isfinite(rate)) longest = std::max(longest, f.work / rate);
      }
      duration += (ph.delay + longest) * times;
    }
    const double end = start[static_cast<std::size_t>(i)] + duration;
    path = std::max(path, end);
    for (int k = succ_begin_[static_cast<std::size_t>(i)]; k < succ_begin_[static_cast<std::size_t>(i) + 1]; ++k) {
      double& next = start[static_cast<std::size_t>(succ_[static_cast<std::size_t>(k)])];
      next = std::max(next, end);
    }
  }
  double resources = t0;
  for (std::size_t r = 0; r < capacity_.size(); ++r) resources = std::max(resources, t0 + load[r] / capacity_[r]);
  return std::max(path, resources) * (1.0 - 1e-9);
}

}  // namespace artune::sim_detail
