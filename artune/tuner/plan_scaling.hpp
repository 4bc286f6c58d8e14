#pragma once
// One candidate's plans over the sizes of a sweep, built once and scaled.
//
// Above the sizes where pieces run out (fewer elements than pieces, empty
// pipeline segments dropped), a builder's plan for k times the elements is its
// plan for the smaller count with every element count and offset multiplied
// by k: the same ops, the same dependencies. Building a plan (the emitter's
// region tracking, the pipeline transform) costs far more than multiplying its
// counts, so SweepPlans builds a candidate's plans size by size, smallest
// first, until two neighbours are such a scaling of each other (and the
// largest size is too, built to check); from then on every larger size is that
// anchor plan scaled, checked equal to the builder's plan at three sizes. A
// candidate whose plans never scale is built at every size, as before.
// Pipelined candidates scale their unpipelined plan and pipeline it per size.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/core/types.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/candidates.hpp"

namespace artune {

/// `plan` with every element count and offset multiplied by `factor` ≥ 1: the plan's count, its buffers' sizes and
/// each op's source and destination regions.
Plan scale_plan(const Plan& plan, std::int64_t factor);

/// Plans of one shape over the element counts of a sweep (ascending): `make(i)` builds the plan at counts[i] (or
/// throws InvalidInput/Unsupported where there is none); at() calls it size by size, smallest first, until two
/// neighbours' plans are a scaling of each other and the largest size's is the same scaling, then scales that
/// anchor for every larger size. Failures are remembered. Not thread-safe: one thread at a time per object.
class ScaledSweep {
 public:
  ScaledSweep(std::vector<std::int64_t> counts, std::function<Plan(std::size_t)> make);

  /// The plan at counts[i]; rethrows make's exception there. The reference stays valid until the next call.
  const Plan& at(std::size_t i);
  /// When the plan at counts[i] is the anchor's scaled: the factor (searching for the anchor as at() does).
  std::optional<std::int64_t> anchor_factor(std::size_t i);
  /// The anchor's plan (valid once anchor() is set).
  const Plan& anchor_plan() const { return base_; }
  /// Times make() was called (the other sizes were scaled or remembered).
  std::size_t builds() const { return builds_; }
  /// The size index whose plan the larger sizes scale, once found.
  std::optional<std::size_t> anchor() const { return anchor_; }

 private:
  /// make(i), or its remembered failure; true when it built (into built_).
  bool make_at(std::size_t i);
  void search_anchor(std::size_t up_to);

  std::vector<std::int64_t> counts_;
  std::function<Plan(std::size_t)> make_;
  std::size_t builds_ = 0;
  std::vector<std::exception_ptr> failed_;  ///< per size: make's exception there, once seen
  // The anchor search walks the sizes upwards from 0; next_ is the next size it builds.
  std::size_t next_ = 0;
  bool searched_ = false;
  std::optional<std::size_t> anchor_;
  Plan base_;     ///< the anchor's plan
  Plan current_;  ///< base_ scaled by current_factor_ (rewritten in place, no allocation)
  std::int64_t current_factor_ = 1;
  Plan built_;  ///< the last plan make() returned, at built_index_
  std::optional<std::size_t> built_index_;
};

/// One candidate's unverified plans (equal to build_candidate(…, verify = false)) at `counts`: its unpipelined
/// plan as one ScaledSweep, and, for segments > 1, pipeline() of it as another (pipeline's own splits only scale
/// once every op has as many elements as segments; a plan over the op limit is refused before any work).
/// simulate() and lower_bound() give the simulator's figures at each size under `model` with elements of
/// `element_bytes` (topo, candidate and model must outlive it): the sizes the anchor serves come from its plan
/// compiled once (CompiledPlan, when its program scales), so neither the scaled plan nor its compilation is made
/// there.
class SweepPlans {
 public:
  SweepPlans(const Topology& topo, const Candidate& candidate, std::vector<std::int64_t> counts, ReduceOp op,
             const CostModel& model, std::size_t element_bytes);
  SweepPlans(const SweepPlans&) = delete;  // pipelined_ refers to base_
  SweepPlans& operator=(const SweepPlans&) = delete;

  /// The plan at counts[i]; throws what build_candidate throws there.
  const Plan& at(std::size_t i) { return sweep().at(i); }
  /// simulate(at(i), …); throws what build_candidate and simulate throw there.
  SimResult simulate(std::size_t i);
  /// simulate_lower_bound(at(i), …); throws as simulate().
  double lower_bound(std::size_t i);
  /// Plans the builders built (the others were scaled from them).
  std::size_t builds() const { return base_.builds(); }

 private:
  ScaledSweep& sweep() { return pipelined_ ? *pipelined_ : base_; }
  /// The anchor's compiled plan and the factor for size i, when the anchor serves i and its program scales.
  std::optional<std::pair<CompiledPlan*, std::int64_t>> compiled_at(std::size_t i);

  const Topology& topo_;
  const CostModel& model_;
  std::size_t element_bytes_;
  ScaledSweep base_;
  std::optional<ScaledSweep> pipelined_;
  std::optional<CompiledPlan> compiled_;  ///< the anchor's plan, compiled (once the anchor is known)
};

}  // namespace artune
