#pragma once
// A capacitated directed graph with maximum flows and minimum cuts, on LEMON's push-relabel (Preflow).
// The cut bound and the tree packing ask it every question they have about a topology's capacity; LEMON
// stays behind this header.

#include <memory>
#include <utility>
#include <vector>

namespace artune::synthesis {

/// A directed graph of `nodes` vertices whose arcs carry capacities (GB/s, or any unit).
class FlowNetwork {
 public:
  /// A graph with vertices 0..nodes−1 and no arcs.
  explicit FlowNetwork(int nodes);
  ~FlowNetwork();
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;
  FlowNetwork(FlowNetwork&&) noexcept;
  FlowNetwork& operator=(FlowNetwork&&) noexcept;

  /// Adds an arc and returns its index (0, 1, … in order of addition).
  int add_arc(int from, int to, double capacity);
  /// Changes an arc's capacity (≥ 0).
  void set_capacity(int arc, double capacity);
  /// An arc's capacity.
  double capacity(int arc) const;
  /// The tail and head of an arc.
  std::pair<int, int> ends(int arc) const;
  /// Number of vertices.
  int nodes() const;
  /// Number of arcs.
  int arcs() const;

  /// The maximum flow value from `source` to `target` (source ≠ target). With `source_side`, also the
  /// vertices on the source side of a minimum cut (those the residual graph reaches from `source`).
  double max_flow(int source, int target, std::vector<bool>* source_side = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace artune::synthesis
