#pragma once
// Tuning into decision tables, for every caller: `artune autotune` (cli/cmd_autotune.cpp keeps only its flags,
// its report and its printing) and the communicator's in-memory tuning (artune/comm/plan_source.cpp). One table
// per data type × reduce op (types outer), each searched over the candidates (search.hpp), optionally measured
// on a backend (measure_top), and tensor fusion tuned over the tables.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "artune/core/types.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/fusion.hpp"
#include "artune/tuner/search.hpp"

namespace artune {

/// A fusion result and the gradient list it was computed for.
struct FusionReport {
  GradientList list;
  FusionResult result;
  std::vector<SparseDecision> sparse;  ///< the choice of each tensor list.sparse marks, in its order
};

/// What to tune.
struct AutotuneRequest {
  SearchOptions search;                             ///< sizes, cost model, candidates, pruning (type, op: below)
  std::vector<DataType> types{DataType::kFloat32};  ///< one table per type × op, types outer
  std::vector<ReduceOp> ops{ReduceOp::kSum};
  std::optional<MeasureOptions> measure;  ///< run the top candidates per size on a backend and pick on that
  std::vector<GradientList> fusion;       ///< tune tensor fusion for each list over the tables
  std::string topology_source;            ///< recorded in every table (how `run --table` finds the topology)
  /// Progress: a line worth showing ("tuning float16 sum"; sizes left unmeasured), and the end of a stage.
  std::function<void(const std::string&)> note;
  std::function<void()> stage_done;
};

/// What the tuning found.
struct AutotuneResult {
  std::vector<SearchResult> results;    ///< per type × op, in the request's order
  std::vector<SearchOptions> searched;  ///< the options each was searched with (its type and op)
  std::vector<FusionReport> fusion;     ///< per gradient list of the request
  std::vector<std::string> notes;       ///< lines for a report (sizes not measured for memory)
  std::int64_t wrong = 0;               ///< wrong elements seen while measuring
  std::vector<std::string> wrong_plans;  ///< "label at size" of each measured plan that had some
  /// The tables, in the results' order.
  std::vector<DecisionTable> tables() const;
};

/// Tunes `request` on `topo`. InvalidInput for bad options (search's), Unsupported where the measuring backend
/// is missing; wrong results are counted, not thrown (AutotuneResult::wrong).
AutotuneResult autotune(const Topology& topo, const AutotuneRequest& request);

}  // namespace artune
