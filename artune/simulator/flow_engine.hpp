#pragma once
// Max-min fair sharing of resources among concurrent flows (private to the
// simulator). A resource is a directed link (capacity in bytes/µs), a
// device's compute engine (capacity 1: work is measured in idle-device µs) or
// a host resource shared by every host thread (cores, memory bandwidth). A
// flow at rate x uses w·x of each resource it crosses: w is 1 unless the
// flow gives weights (a host op measured in thread-µs uses its one-thread
// rate in bytes of each link and of memory bandwidth per thread-µs), and the
// weighted max-min share of a resource is its capacity over the weights of
// the flows it still has to fix.
// Rates are found by progressive filling, recomputed at settle() only over
// the resources and flows connected (through shared resources) to a flow that
// started or ended since the previous settle(). Everything is deterministic:
// ids are assigned in call order, lists are vectors, ties break by index.
//
// Flows over the same resources with the same weights and cap always get the same rate: they form one class,
// and the filling, the rates and the completion heap work on classes. A class counts the work each of its
// flows has been served since it formed; a flow ends when that count reaches its mark (the count when it
// started plus its work), so a change of the class's rate moves one entry of the completion heap, however
// many flows the class holds (a plan's pipelined copies put dozens of flows on each route at once).

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace artune::detail {

/// Statistics of one resource over a run.
struct ResourceStats {
  double work = 0;          ///< units that crossed it (bytes for links)
  double busy_us = 0;       ///< time with ≥ 1 flow
  double saturated_us = 0;  ///< time its capacity was fully allocated (it limited some flow)
  double first_busy_us = -1;  ///< when its first flow started (-1: none did)
  double last_busy_us = 0;    ///< when its last flow ended
};

/// What finish() reports about a flow.
struct FlowEnd {
  std::int64_t tag = -1;  ///< the caller's tag given to start()
  int limiter = -1;       ///< resource that limited the flow for most of its work (-1: its own cap)
};

/// Flows over shared resources with max-min fair rates.
class FlowEngine {
 public:
  /// One resource per capacity (units per µs; each > 0). Only a `weighted` engine takes flows with weights
  /// (the others skip the bookkeeping).
  explicit FlowEngine(std::vector<double> capacities, bool weighted = false);

  /// Number of resources.
  int resource_count() const { return static_cast<int>(res_.size()); }
  /// Starts a flow of `work` (> 0) units over distinct `resources`, at most `cap` units/µs (0 = no cap; a
  /// flow with no resources needs a cap). `weights` is empty (1 on every resource) or, on a weighted engine,
  /// one finite weight > 0 per resource. Rates take effect at the next settle(). Returns the flow id.
  int start(double now, double work, std::span<const int> resources, double cap, std::int64_t tag,
            std::span<const double> weights = {});
  /// Ends a flow at `now` (its completion time, as next_completion() reported it).
  FlowEnd finish(int flow, double now);
  /// Recomputes rates of the flows connected to those started or finished since the last call.
  void settle(double now);
  /// Earliest completion among active flows as {time, flow}; flow is -1 when none is active.
  std::pair<double, int> next_completion();
  /// Current rate of an active flow (units/µs); 0 before its first settle().
  double rate(int flow) const;
  /// Statistics of a resource (complete once every flow has finished and settle() ran).
  const ResourceStats& stats(int resource) const { return res_.at(resource).stats; }
  /// Number of active flows.
  int active_flows() const { return active_; }

 private:
  struct Resource {
    double capacity = 0;
    std::vector<int> classes;  // classes with active flows over it
    int flows = 0;             // its active flows (Σ the classes' counts)
    ResourceStats stats;
    double busy_since = 0;
    double saturated_since = 0;
    bool saturated = false;
    bool dirty = false;
    bool requeued = false;  // in requeued_: its share changed while flows were being fixed
    std::uint32_t epoch = 0;
    double weight_sum = 0;  // weighted engines: Σ weights of its active flows
    // progressive-filling scratch
    double remaining = 0;
    double unfrozen_weight = 0;
    int unfrozen = 0;
  };
  // A flow waiting for its class's served count to reach its mark.
  struct Member {
    double mark = 0;
    int flow = -1;
  };
  // Flows over the same resources, weights and cap. What settle() reads of every class it visits comes first.
  struct Class {
    std::uint32_t epoch = 0;
    bool frozen = false;
    int count = 0;  // active flows
    int limiter = -1;
    int new_limiter = -1;
    double rate = 0;  // of each of its flows
    double new_rate = 0;
    double cap = 0;
    double served = 0;  // work served to each flow since the class formed, as of last_t
    double last_t = 0;
    std::vector<int> res;         // resources it crosses
    std::vector<int> pos;         // its index in each resource's class list
    std::vector<double> weights;  // empty: 1 on every resource
    std::vector<Member> members;  // binary min-heap by (mark, flow)
    // (served count when it began, limiter): a new entry each time the limiter changes; a flow's work is
    // credited to the limiters of the entries its life spans.
    std::vector<std::pair<double, int>> history;
    std::uint64_t key = 0;
  };
  struct Flow {
    bool active = false;
    int cls = -1;
    int member_pos = -1;           // its index in its class's members
    double mark = 0;               // served count at which it ends
    double joined = 0;             // served count when it started
    std::size_t history_from = 0;  // its class's history entry when it started
    std::int64_t tag = -1;
  };
  struct Share {
    double value;
    int id;  // resource index, or -(class + 1) for a class's own cap
  };
  struct ShareLater {
    bool operator()(const Share& a, const Share& b) const {
      if (a.value != b.value) return a.value > b.value;
      return a.id > b.id;
    }
  };

  void mark_dirty(int r);
  // The class of a flow starting at `now` over these resources, made when none is active.
  int class_for(double now, std::span<const int> resources, std::span<const double> weights, double cap);
  void drop_class(int c);
  void advance(Class& c, double now);
  // The class's members heap: binary, the first to end (mark, then flow) on top.
  static constexpr int kMemberArity = 2;
  static bool member_before(const Member& a, const Member& b) {
    return a.mark < b.mark || (a.mark == b.mark && a.flow < b.flow);
  }
  void member_set(Class& c, int pos, const Member& m);
  void member_add(Class& c, const Member& m);
  void member_remove(Class& c, int pos);
  // Where the class's first flow ends, in the completion heap (nowhere when its rate is 0 or it has none).
  void reschedule(int c);
  // Progressive filling fixes the flows of one resource (or one class's cap) at a time; the shares of the other
  // resources those flows cross change with each, and each such resource enters the share heap once, with its share
  // after the last (requeue, then push_requeued), rather than once per class fixed.
  void requeue(int r);
  template <bool kWeighted>
  void push_requeued();
  template <bool kWeighted>
  void freeze(int c, double rate, int limiter);
  template <bool kWeighted>
  void settle_impl(double now);
  // Indexed min-heap of the classes by the (completion, flow) of their first flow to end, 4-ary (half the depth of
  // a binary heap, the four children in one cache line), each class's position kept apart (heap_pos_).
  struct Scheduled {
    double time = 0;  // predicted end at the current rate
    int flow = -1;
    int cls = -1;
  };
  static constexpr int kHeapArity = 4;
  static bool earlier(const Scheduled& a, const Scheduled& b) {
    return a.time < b.time || (a.time == b.time && a.flow < b.flow);
  }
  void heap_set(int pos, const Scheduled& entry);
  void heap_up(int pos);
  void heap_down(int pos);
  void schedule(const Scheduled& entry);
  void unschedule(int c);

  std::vector<Resource> res_;
  std::vector<Flow> flows_;
  std::vector<int> free_flows_;
  std::vector<Class> classes_;
  std::vector<int> free_classes_;
  std::unordered_map<std::uint64_t, std::vector<int>> classes_by_key_;  // active classes by a hash of their route
  std::vector<int> dirty_;
  std::vector<Scheduled> completions_;  // indexed heap of the classes
  std::vector<int> heap_pos_;           // per class id: its position in completions_, -1 when not scheduled
  std::vector<Share> shares_;           // heap scratch
  std::vector<int> requeued_;           // scratch: resources whose share changed since the last push_requeued
  std::vector<int> comp_res_;           // scratch
  std::vector<int> comp_classes_;       // scratch
  std::vector<std::pair<int, double>> credits_;  // scratch of finish(): work by limiter, in order of first use
  std::uint32_t epoch_ = 0;
  int active_ = 0;
  bool weighted_ = false;  // flows may have weights: shares divide by weight sums
};

}  // namespace artune::detail
