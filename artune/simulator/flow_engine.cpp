#include "artune/simulator/flow_engine.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace artune::detail {

namespace {
// A resource counts as saturated when less than this fraction of its capacity
// is left unallocated after filling (rounding of the shares).
constexpr double kSaturationSlack = 1e-9;
}  // namespace

FlowEngine::FlowEngine(std::vector<double> capacities, bool weighted) : weighted_(weighted) {
  res_.resize(capacities.size());
  for (std::size_t i = 0; i < capacities.size(); ++i) {
    if (!(capacities[i] > 0) || !std::isfinite(capacities[i])) {
      throw std::invalid_argument("FlowEngine: resource capacities must be finite and > 0");
    }
    res_[i].capacity = capacities[i];
  }
}

void FlowEngine::mark_dirty(int r) {
  if (!res_[r].dirty) {
    res_[r].dirty = true;
    dirty_.push_back(r);
  }
}

int FlowEngine::start(double now, double work, std::span<const int> resources, double cap, std::int64_t tag,
                      std::span<const double> weights) {
  if (!(work > 0)) throw std::invalid_argument("FlowEngine::start: work must be > 0");
  if (resources.empty() && !(cap > 0))
    throw std::invalid_argument("FlowEngine::start: a flow needs a resource or a cap");
  if (!weights.empty()) {
    if (!weighted_) throw std::invalid_argument("FlowEngine::start: weights on an engine made without them");
    if (weights.size() != resources.size()) throw std::invalid_argument("FlowEngine::start: one weight per resource");
    for (const double w : weights) {
      if (!(w > 0) || !std::isfinite(w))
        throw std::invalid_argument("FlowEngine::start: weights must be finite and > 0");
    }
  }
  int id;
  if (!free_flows_.empty()) {
    id = free_flows_.back();
    free_flows_.pop_back();
  } else {
    id = static_cast<int>(flows_.size());
    flows_.emplace_back();
    heap_pos_.push_back(-1);
  }
  Flow& f = flows_[id];
  f.res.assign(resources.begin(), resources.end());
  f.pos.resize(f.res.size());
  if (weighted_) {
    if (weights_.size() < flows_.size()) weights_.resize(flows_.size());
    weights_[static_cast<std::size_t>(id)].assign(weights.begin(), weights.end());
  }
  f.limiters.clear();
  f.work_left = work;
  f.last_t = now;
  f.rate = 0;
  f.new_rate = 0;
  f.cap = cap > 0 ? cap : 0;
  f.limiter = -1;
  f.tag = tag;
  heap_pos_[static_cast<std::size_t>(id)] = -1;
  f.active = true;
  for (std::size_t k = 0; k < f.res.size(); ++k) {
    const int r = f.res[k];
    Resource& R = res_.at(r);
    if (R.flows.empty()) R.busy_since = now;
    f.pos[k] = static_cast<int>(R.flows.size());
    R.flows.push_back(id);
    if (weighted_) {
      const double w = weights.empty() ? 1.0 : weights[k];
      R.weight_sum += w;
      R.stats.work += work * w;
    } else {
      R.stats.work += work;
    }
    mark_dirty(r);
  }
  if (f.res.empty()) {
    // Only its own cap limits it: its rate is known now.
    f.rate = f.cap;
    f.limiter = -1;
    schedule(id, now + work / f.rate);
  }
  ++active_;
  return id;
}

void FlowEngine::credit_limiter(Flow& f, double moved) {
  if (moved <= 0) return;
  for (auto& [r, w] : f.limiters) {
    if (r == f.limiter) {
      w += moved;
      return;
    }
  }
  f.limiters.emplace_back(f.limiter, moved);
}

FlowEnd FlowEngine::finish(int flow, double now) {
  Flow& f = flows_.at(flow);
  if (!f.active) throw std::logic_error("FlowEngine::finish: flow is not active");
  credit_limiter(f, f.work_left);
  FlowEnd end;
  end.tag = f.tag;
  double best = -1;
  for (const auto& [r, w] : f.limiters) {
    if (w > best) {
      best = w;
      end.limiter = r;
    }
  }
  for (std::size_t k = 0; k < f.res.size(); ++k) {
    const int r = f.res[k];
    Resource& R = res_[r];
    const int p = f.pos[k];
    const int last = R.flows.back();
    R.flows[p] = last;
    R.flows.pop_back();
    // An empty resource restarts its sum from exactly 0 (weighted sums drift by rounding).
    if (weighted_) {
      const std::vector<double>& w = weights_[static_cast<std::size_t>(flow)];
      R.weight_sum = R.flows.empty() ? 0.0 : R.weight_sum - (w.empty() ? 1.0 : w[k]);
    }
    if (last != flow) {
      Flow& g = flows_[last];
      for (std::size_t j = 0; j < g.res.size(); ++j) {
        if (g.res[j] == r) {
          g.pos[j] = p;
          break;
        }
      }
    }
    if (R.flows.empty()) R.stats.busy_us += now - R.busy_since;
    mark_dirty(r);
  }
  f.active = false;
  unschedule(flow);
  free_flows_.push_back(flow);
  --active_;
  return end;
}

template <bool kWeighted>
void FlowEngine::freeze(int flow, double rate, int limiter) {
  Flow& f = flows_[flow];
  f.frozen = true;
  f.new_rate = rate;
  f.new_limiter = limiter;
  if constexpr (!kWeighted) {
    for (const int r : f.res) {
      if (r == limiter) continue;
      Resource& R = res_[r];
      // Every weight 1: the weight left on a resource is its count of unfrozen flows.
      R.remaining -= rate;
      if (--R.unfrozen > 0) {
        // Exact arithmetic never lowers a share below the current level; rounding could.
        if (R.remaining < rate * R.unfrozen) R.remaining = rate * R.unfrozen;
        requeue(r);
      }
    }
    return;
  }
  const std::vector<double>& weights = weights_[static_cast<std::size_t>(flow)];
  for (std::size_t k = 0; k < f.res.size(); ++k) {
    const int r = f.res[k];
    if (r == limiter) continue;
    Resource& R = res_[r];
    {
      const double w = weights.empty() ? 1.0 : weights[k];
      R.remaining -= rate * w;
      R.unfrozen_weight -= w;
      if (--R.unfrozen > 0) {
        if (!(R.unfrozen_weight > 0)) R.unfrozen_weight = std::numeric_limits<double>::min();
        if (R.remaining < rate * R.unfrozen_weight) R.remaining = rate * R.unfrozen_weight;
        requeue(r);
      }
    }
  }
}

void FlowEngine::requeue(int r) {
  Resource& R = res_[r];
  if (R.requeued) return;
  R.requeued = true;
  requeued_.push_back(r);
}

template <bool kWeighted>
void FlowEngine::push_requeued() {
  for (const int r : requeued_) {
    Resource& R = res_[r];
    R.requeued = false;
    if (R.unfrozen == 0) continue;
    if constexpr (kWeighted) {
      shares_.push_back({R.remaining / R.unfrozen_weight, r});
    } else {
      shares_.push_back({R.remaining / R.unfrozen, r});
    }
    std::push_heap(shares_.begin(), shares_.end(), ShareLater{});
  }
  requeued_.clear();
}

void FlowEngine::settle(double now) {
  if (dirty_.empty()) return;
  if (weighted_) {
    settle_impl<true>(now);
  } else {
    settle_impl<false>(now);
  }
}

template <bool kWeighted>
void FlowEngine::settle_impl(double now) {
  ++epoch_;
  // The connected component(s) of the dirty resources, breadth first.
  comp_res_.clear();
  comp_flows_.clear();
  for (const int r : dirty_) {
    res_[r].dirty = false;
    if (res_[r].epoch != epoch_) {
      res_[r].epoch = epoch_;
      comp_res_.push_back(r);
    }
  }
  dirty_.clear();
  for (std::size_t i = 0; i < comp_res_.size(); ++i) {
    const int r = comp_res_[i];
    for (const int fl : res_[r].flows) {
      Flow& f = flows_[fl];
      if (f.epoch == epoch_) continue;
      f.epoch = epoch_;
      comp_flows_.push_back(fl);
      for (const int r2 : f.res) {
        if (res_[r2].epoch != epoch_) {
          res_[r2].epoch = epoch_;
          comp_res_.push_back(r2);
        }
      }
    }
  }

  // Progressive filling: repeatedly fix the flows of the resource (or cap)
  // offering the smallest fair share. Shares only grow as flows are fixed,
  // so a lazy heap with stale entries skipped is exact.
  shares_.clear();
  for (const int r : comp_res_) {
    Resource& R = res_[r];
    R.remaining = R.capacity;
    R.unfrozen = static_cast<int>(R.flows.size());
    if constexpr (kWeighted) {
      R.unfrozen_weight = R.weight_sum;
      if (R.unfrozen > 0) shares_.push_back({R.remaining / R.unfrozen_weight, r});
    } else {
      if (R.unfrozen > 0) shares_.push_back({R.remaining / R.unfrozen, r});
    }
  }
  for (const int fl : comp_flows_) {
    Flow& f = flows_[fl];
    f.frozen = false;
    if (f.cap > 0) shares_.push_back({f.cap, -(fl + 1)});
  }
  std::make_heap(shares_.begin(), shares_.end(), ShareLater{});
  while (!shares_.empty()) {
    std::pop_heap(shares_.begin(), shares_.end(), ShareLater{});
    const Share s = shares_.back();
    shares_.pop_back();
    if (s.id < 0) {
      const int fl = -s.id - 1;
      if (!flows_[fl].frozen) freeze<kWeighted>(fl, s.value, -1);
      push_requeued<kWeighted>();
      continue;
    }
    Resource& R = res_[s.id];
    if (R.unfrozen == 0) continue;
    if constexpr (kWeighted) {
      if (R.remaining / R.unfrozen_weight != s.value) continue;  // stale
    } else {
      if (R.remaining / R.unfrozen != s.value) continue;  // stale
    }
    for (const int fl : R.flows) {
      if (!flows_[fl].frozen) freeze<kWeighted>(fl, s.value, s.id);
    }
    R.unfrozen = 0;
    if constexpr (kWeighted) R.unfrozen_weight = 0;
    R.remaining = 0;
    push_requeued<kWeighted>();
  }

  // Saturation bookkeeping.
  for (const int r : comp_res_) {
    Resource& R = res_[r];
    const bool sat = !R.flows.empty() && R.remaining <= R.capacity * kSaturationSlack;
    if (sat != R.saturated) {
      if (sat) {
        R.saturated_since = now;
      } else {
        R.stats.saturated_us += now - R.saturated_since;
      }
      R.saturated = sat;
    }
  }

  // New rates: advance the flows whose rate changed and reschedule them.
  for (const int fl : comp_flows_) {
    Flow& f = flows_[fl];
    if (f.new_rate == f.rate && f.new_limiter == f.limiter) continue;
    if (f.rate > 0) {
      const double moved = std::min(f.work_left, f.rate * (now - f.last_t));
      credit_limiter(f, moved);
      f.work_left -= moved;
    }
    f.last_t = now;
    f.limiter = f.new_limiter;
    if (f.new_rate == f.rate) continue;
    f.rate = f.new_rate;
    schedule(fl, now + f.work_left / f.rate);
  }
}

std::pair<double, int> FlowEngine::next_completion() {
  if (completions_.empty()) return {0.0, -1};
  return {completions_.front().time, completions_.front().flow};
}

void FlowEngine::heap_set(int pos, const Scheduled& entry) {
  completions_[static_cast<std::size_t>(pos)] = entry;
  heap_pos_[static_cast<std::size_t>(entry.flow)] = pos;
}

void FlowEngine::heap_up(int pos) {
  const Scheduled entry = completions_[static_cast<std::size_t>(pos)];
  while (pos > 0) {
    const int parent = (pos - 1) / kHeapArity;
    if (!earlier(entry, completions_[static_cast<std::size_t>(parent)])) break;
    heap_set(pos, completions_[static_cast<std::size_t>(parent)]);
    pos = parent;
  }
  heap_set(pos, entry);
}

void FlowEngine::heap_down(int pos) {
  const int n = static_cast<int>(completions_.size());
  const Scheduled entry = completions_[static_cast<std::size_t>(pos)];
  for (;;) {
    const int first = kHeapArity * pos + 1;
    if (first >= n) break;
    int child = first;
    for (int c = first + 1; c < std::min(first + kHeapArity, n); ++c) {
      if (earlier(completions_[static_cast<std::size_t>(c)], completions_[static_cast<std::size_t>(child)])) child = c;
    }
    if (!earlier(completions_[static_cast<std::size_t>(child)], entry)) break;
    heap_set(pos, completions_[static_cast<std::size_t>(child)]);
    pos = child;
  }
  heap_set(pos, entry);
}

void FlowEngine::schedule(int flow, double time) {
  int& pos = heap_pos_[static_cast<std::size_t>(flow)];
  if (pos < 0) {
    completions_.push_back({time, flow});
    pos = static_cast<int>(completions_.size()) - 1;
    heap_up(pos);
  } else {
    Scheduled& entry = completions_[static_cast<std::size_t>(pos)];
    const bool sooner = time < entry.time;
    entry.time = time;
    // Only one direction can move it: up when it ends sooner, down when later.
    if (sooner) {
      heap_up(pos);
    } else {
      heap_down(pos);
    }
  }
}

void FlowEngine::unschedule(int flow) {
  const int pos = heap_pos_[static_cast<std::size_t>(flow)];
  if (pos < 0) return;
  heap_pos_[static_cast<std::size_t>(flow)] = -1;
  const Scheduled last = completions_.back();
  completions_.pop_back();
  if (last.flow == flow) return;
  heap_set(pos, last);
  heap_up(pos);
  heap_down(heap_pos_[static_cast<std::size_t>(last.flow)]);
}

}  // namespace artune::detail
