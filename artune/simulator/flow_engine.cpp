#include "artune/simulator/flow_engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace artune::detail {

namespace {
// A resource counts as saturated when less than this fraction of its capacity
// is left unallocated after filling (rounding of the shares).
constexpr double kSaturationSlack = 1e-9;

// FNV-1a over the bytes of a class's route, weights and cap.
std::uint64_t class_key(std::span<const int> resources, std::span<const double> weights, double cap) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  };
  for (const int r : resources) mix(&r, sizeof r);
  for (const double w : weights) mix(&w, sizeof w);
  mix(&cap, sizeof cap);
  return h;
}

// Indexed d-ary heaps (a class's members, the completion heap): `before` orders entries, `place(pos, entry)` stores
// an entry and records where it now is.
template <int Arity, typename T, typename Before, typename Place>
void sift_up(std::vector<T>& heap, int pos, Before before, Place place) {
  const T entry = heap[static_cast<std::size_t>(pos)];
  while (pos > 0) {
    const int parent = (pos - 1) / Arity;
    if (!before(entry, heap[static_cast<std::size_t>(parent)])) break;
    place(pos, heap[static_cast<std::size_t>(parent)]);
    pos = parent;
  }
  place(pos, entry);
}

template <int Arity, typename T, typename Before, typename Place>
void sift_down(std::vector<T>& heap, int pos, Before before, Place place) {
  const int n = static_cast<int>(heap.size());
  const T entry = heap[static_cast<std::size_t>(pos)];
  for (;;) {
    const int first = Arity * pos + 1;
    if (first >= n) break;
    int child = first;
    for (int c = first + 1; c < std::min(first + Arity, n); ++c) {
      if (before(heap[static_cast<std::size_t>(c)], heap[static_cast<std::size_t>(child)])) child = c;
    }
    if (!before(heap[static_cast<std::size_t>(child)], entry)) break;
    place(pos, heap[static_cast<std::size_t>(child)]);
    pos = child;
  }
  place(pos, entry);
}

// Removes heap[pos]: the last entry takes its place and moves whichever way it must; `where(entry)` is the
// position place() recorded.
template <int Arity, typename T, typename Before, typename Place, typename Where>
void erase_at(std::vector<T>& heap, int pos, Before before, Place place, Where where) {
  const T last = heap.back();
  heap.pop_back();
  if (pos == static_cast<int>(heap.size())) return;
  place(pos, last);
  sift_up<Arity>(heap, pos, before, place);
  sift_down<Arity>(heap, where(last), before, place);
}

// The index of a free slot of `items`: one freed before, or a new one at the end.
template <typename T>
int reuse_or_append(std::vector<T>& items, std::vector<int>& free) {
  if (!free.empty()) {
    const int id = free.back();
    free.pop_back();
    return id;
  }
  items.emplace_back();
  return static_cast<int>(items.size()) - 1;
}
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

double FlowEngine::rate(int flow) const {
  const Flow& f = flows_.at(flow);
  return f.active ? classes_[static_cast<std::size_t>(f.cls)].rate : 0.0;
}

int FlowEngine::class_for(double now, std::span<const int> resources, std::span<const double> weights, double cap) {
  const std::uint64_t key = class_key(resources, weights, cap);
  std::vector<int>& same_key = classes_by_key_[key];
  for (const int c : same_key) {
    const Class& k = classes_[static_cast<std::size_t>(c)];
    if (k.cap == cap && std::equal(k.res.begin(), k.res.end(), resources.begin(), resources.end()) &&
        std::equal(k.weights.begin(), k.weights.end(), weights.begin(), weights.end()))
      return c;
  }
  const int id = reuse_or_append(classes_, free_classes_);
  if (heap_pos_.size() < classes_.size()) heap_pos_.push_back(-1);
  same_key.push_back(id);
  Class& c = classes_[static_cast<std::size_t>(id)];
  c.key = key;
  c.count = 0;
  c.frozen = false;
  c.limiter = -1;
  c.new_limiter = -1;
  c.rate = 0;
  c.new_rate = 0;
  c.cap = cap;
  c.served = 0;
  c.last_t = now;
  c.res.assign(resources.begin(), resources.end());
  c.weights.assign(weights.begin(), weights.end());
  c.members.clear();
  c.history.assign(1, {0.0, -1});
  c.pos.resize(c.res.size());
  for (std::size_t k = 0; k < c.res.size(); ++k) {
    Resource& R = res_.at(c.res[k]);
    c.pos[k] = static_cast<int>(R.classes.size());
    R.classes.push_back(id);
  }
  if (c.res.empty()) {
    // Only its own cap limits it: its rate is known now.
    c.rate = cap;
    c.new_rate = cap;
  }
  return id;
}

// A class without flows leaves its resources' lists and its key's list.
void FlowEngine::drop_class(int id) {
  Class& c = classes_[static_cast<std::size_t>(id)];
  for (std::size_t k = 0; k < c.res.size(); ++k) {
    Resource& R = res_[c.res[k]];
    const int p = c.pos[k];
    const int last = R.classes.back();
    R.classes[p] = last;
    R.classes.pop_back();
    if (last != id) {
      Class& other = classes_[static_cast<std::size_t>(last)];
      for (std::size_t j = 0; j < other.res.size(); ++j) {
        if (other.res[j] == c.res[k]) {
          other.pos[j] = p;
          break;
        }
      }
    }
  }
  // The key's list stays, empty or not: a pipeline's route forms and empties its class piece after piece, and
  // keeping the list saves a map node and a vector allocated each time (at most one list per route ever seen).
  std::vector<int>& same_key = classes_by_key_[c.key];
  same_key.erase(std::find(same_key.begin(), same_key.end(), id));
  unschedule(id);
  free_classes_.push_back(id);
}

void FlowEngine::advance(Class& c, double now) {
  if (c.rate > 0) c.served += c.rate * (now - c.last_t);
  c.last_t = now;
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
  for (const int r : resources) {
    if (r < 0 || r >= resource_count()) throw std::out_of_range("FlowEngine::start: no such resource");
  }
  const int cid = class_for(now, resources, weights, cap > 0 ? cap : 0);
  const int id = reuse_or_append(flows_, free_flows_);
  Class& c = classes_[static_cast<std::size_t>(cid)];
  // The class's count as of now, without moving its (last_t, served): the other flows' completion times stay
  // as computed, bit for bit, so flows that end together still do.
  const double served_now = c.rate > 0 ? c.served + c.rate * (now - c.last_t) : c.served;
  Flow& f = flows_[id];
  f.active = true;
  f.cls = cid;
  f.joined = served_now;
  f.mark = served_now + work;
  f.history_from = c.history.size() - 1;
  f.tag = tag;
  member_add(c, {f.mark, id});
  ++c.count;
  for (std::size_t k = 0; k < c.res.size(); ++k) {
    Resource& R = res_[c.res[k]];
    if (R.flows == 0) {
      R.busy_since = now;
      if (R.stats.first_busy_us < 0) R.stats.first_busy_us = now;
    }
    ++R.flows;
    if (weighted_) {
      const double w = c.weights.empty() ? 1.0 : c.weights[k];
      R.weight_sum += w;
      R.stats.work += work * w;
    } else {
      R.stats.work += work;
    }
    mark_dirty(c.res[k]);
  }
  reschedule(cid);
  ++active_;
  return id;
}

FlowEnd FlowEngine::finish(int flow, double now) {
  Flow& f = flows_.at(flow);
  if (!f.active) throw std::logic_error("FlowEngine::finish: flow is not active");
  const int cid = f.cls;
  Class& c = classes_[static_cast<std::size_t>(cid)];
  // Its work, by the limiters of the class's history entries its life spans.
  credits_.clear();
  for (std::size_t i = f.history_from; i < c.history.size(); ++i) {
    const double from = std::max(f.joined, c.history[i].first);
    const double to = i + 1 < c.history.size() ? std::min(f.mark, c.history[i + 1].first) : f.mark;
    if (!(to > from)) continue;
    const int limiter = c.history[i].second;
    const auto it = std::find_if(credits_.begin(), credits_.end(), [limiter](const auto& e) { return e.first == limiter; });
    if (it == credits_.end()) {
      credits_.emplace_back(limiter, to - from);
    } else {
      it->second += to - from;
    }
  }
  FlowEnd end;
  end.tag = f.tag;
  double best = -1;
  for (const auto& [r, w] : credits_) {
    if (w > best) {
      best = w;
      end.limiter = r;
    }
  }
  member_remove(c, f.member_pos);
  --c.count;
  for (std::size_t k = 0; k < c.res.size(); ++k) {
    const int r = c.res[k];
    Resource& R = res_[r];
    --R.flows;
    // An empty resource restarts its sum from exactly 0 (weighted sums drift by rounding).
    if (weighted_) R.weight_sum = R.flows == 0 ? 0.0 : R.weight_sum - (c.weights.empty() ? 1.0 : c.weights[k]);
    if (R.flows == 0) {
      R.stats.busy_us += now - R.busy_since;
      R.stats.last_busy_us = now;
    }
    mark_dirty(r);
  }
  f.active = false;
  f.cls = -1;
  free_flows_.push_back(flow);
  --active_;
  if (c.count == 0) {
    drop_class(cid);
  } else {
    reschedule(cid);
  }
  return end;
}

template <bool kWeighted>
void FlowEngine::freeze(int cid, double rate, int limiter) {
  Class& c = classes_[static_cast<std::size_t>(cid)];
  c.frozen = true;
  c.new_rate = rate;
  c.new_limiter = limiter;
  const double n = c.count;
  for (std::size_t k = 0; k < c.res.size(); ++k) {
    const int r = c.res[k];
    if (r == limiter) continue;
    Resource& R = res_[r];
    if constexpr (!kWeighted) {
      // Every weight 1: the weight left on a resource is its count of unfrozen flows.
      R.remaining -= rate * n;
      R.unfrozen -= c.count;
      if (R.unfrozen > 0) {
        // Exact arithmetic never lowers a share below the current level; rounding could.
        if (R.remaining < rate * R.unfrozen) R.remaining = rate * R.unfrozen;
        requeue(r);
      }
    } else {
      const double w = (c.weights.empty() ? 1.0 : c.weights[k]) * n;
      R.remaining -= rate * w;
      R.unfrozen_weight -= w;
      R.unfrozen -= c.count;
      if (R.unfrozen > 0) {
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
  comp_classes_.clear();
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
    for (const int cid : res_[r].classes) {
      Class& c = classes_[static_cast<std::size_t>(cid)];
      if (c.epoch == epoch_) continue;
      c.epoch = epoch_;
      comp_classes_.push_back(cid);
      for (const int r2 : c.res) {
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
    R.unfrozen = R.flows;
    if constexpr (kWeighted) {
      R.unfrozen_weight = R.weight_sum;
      if (R.unfrozen > 0) shares_.push_back({R.remaining / R.unfrozen_weight, r});
    } else {
      if (R.unfrozen > 0) shares_.push_back({R.remaining / R.unfrozen, r});
    }
  }
  for (const int cid : comp_classes_) {
    Class& c = classes_[static_cast<std::size_t>(cid)];
    c.frozen = false;
    if (c.cap > 0) shares_.push_back({c.cap, -(cid + 1)});
  }
  std::make_heap(shares_.begin(), shares_.end(), ShareLater{});
  while (!shares_.empty()) {
    std::pop_heap(shares_.begin(), shares_.end(), ShareLater{});
    const Share s = shares_.back();
    shares_.pop_back();
    if (s.id < 0) {
      const int cid = -s.id - 1;
      if (!classes_[static_cast<std::size_t>(cid)].frozen) freeze<kWeighted>(cid, s.value, -1);
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
    for (const int cid : R.classes) {
      if (!classes_[static_cast<std::size_t>(cid)].frozen) freeze<kWeighted>(cid, s.value, s.id);
    }
    R.unfrozen = 0;
    if constexpr (kWeighted) R.unfrozen_weight = 0;
    R.remaining = 0;
    push_requeued<kWeighted>();
  }

  // Saturation bookkeeping.
  for (const int r : comp_res_) {
    Resource& R = res_[r];
    const bool sat = R.flows > 0 && R.remaining <= R.capacity * kSaturationSlack;
    if (sat != R.saturated) {
      if (sat) {
        R.saturated_since = now;
      } else {
        R.stats.saturated_us += now - R.saturated_since;
      }
      R.saturated = sat;
    }
  }

  // New rates: advance the classes whose rate or limiter changed, note a new limiter, reschedule.
  for (const int cid : comp_classes_) {
    Class& c = classes_[static_cast<std::size_t>(cid)];
    if (c.new_rate == c.rate && c.new_limiter == c.limiter) continue;
    advance(c, now);
    if (c.new_limiter != c.limiter) {
      if (c.history.back().first == c.served) {
        c.history.back().second = c.new_limiter;  // nothing served under the one before
      } else {
        c.history.emplace_back(c.served, c.new_limiter);
      }
      c.limiter = c.new_limiter;
    }
    if (c.new_rate == c.rate) continue;
    c.rate = c.new_rate;
    reschedule(cid);
  }
}

std::pair<double, int> FlowEngine::next_completion() {
  if (completions_.empty()) return {0.0, -1};
  return {completions_.front().time, completions_.front().flow};
}

void FlowEngine::member_set(Class& c, int pos, const Member& m) {
  c.members[static_cast<std::size_t>(pos)] = m;
  flows_[static_cast<std::size_t>(m.flow)].member_pos = pos;
}

void FlowEngine::member_add(Class& c, const Member& m) {
  c.members.push_back(m);
  sift_up<kMemberArity>(c.members, static_cast<int>(c.members.size()) - 1, member_before,
                        [&](int pos, const Member& e) { member_set(c, pos, e); });
}

void FlowEngine::member_remove(Class& c, int pos) {
  erase_at<kMemberArity>(
      c.members, pos, member_before, [&](int at, const Member& e) { member_set(c, at, e); },
      [&](const Member& e) { return flows_[static_cast<std::size_t>(e.flow)].member_pos; });
}

void FlowEngine::reschedule(int cid) {
  const Class& c = classes_[static_cast<std::size_t>(cid)];
  if (c.members.empty() || !(c.rate > 0)) {
    unschedule(cid);
    return;
  }
  const Member& first = c.members.front();
  // Never before last_t: rounding can leave a served count a hair past a mark.
  schedule({c.last_t + std::max(0.0, first.mark - c.served) / c.rate, first.flow, cid});
}

void FlowEngine::heap_set(int pos, const Scheduled& entry) {
  completions_[static_cast<std::size_t>(pos)] = entry;
  heap_pos_[static_cast<std::size_t>(entry.cls)] = pos;
}

void FlowEngine::heap_up(int pos) {
  sift_up<kHeapArity>(completions_, pos, earlier, [this](int at, const Scheduled& e) { heap_set(at, e); });
}

void FlowEngine::heap_down(int pos) {
  sift_down<kHeapArity>(completions_, pos, earlier, [this](int at, const Scheduled& e) { heap_set(at, e); });
}

void FlowEngine::schedule(const Scheduled& entry) {
  int& pos = heap_pos_[static_cast<std::size_t>(entry.cls)];
  if (pos < 0) {
    completions_.push_back(entry);
    pos = static_cast<int>(completions_.size()) - 1;
    heap_up(pos);
  } else {
    Scheduled& old = completions_[static_cast<std::size_t>(pos)];
    const bool sooner = earlier(entry, old);
    old = entry;
    // Only one direction can move it: up when it ends sooner, down when later.
    if (sooner) {
      heap_up(pos);
    } else {
      heap_down(pos);
    }
  }
}

void FlowEngine::unschedule(int cid) {
  const int pos = heap_pos_[static_cast<std::size_t>(cid)];
  if (pos < 0) return;
  heap_pos_[static_cast<std::size_t>(cid)] = -1;
  erase_at<kHeapArity>(
      completions_, pos, earlier, [this](int at, const Scheduled& e) { heap_set(at, e); },
      [this](const Scheduled& e) { return heap_pos_[static_cast<std::size_t>(e.cls)]; });
}

}  // namespace artune::detail
