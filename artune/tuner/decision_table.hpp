#pragma once
// The decision table autotune writes: per contiguous size range the plan to run,
// with predicted (and, when measured, measured) figures. Bound to one topology
// by its fingerprint so a table tuned on one machine is refused on another.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/core/decision_table_schema.hpp"
#include "artune/core/types.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/candidates.hpp"

namespace artune {

/// Time and bandwidths of one all-reduce (predicted or measured).
struct Figures {
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  friend bool operator==(const Figures&, const Figures&) = default;
};

/// A real run of a plan at one size.
struct Measurement {
  Figures figures;         ///< mean time over the timed iterations
  std::string backend;     ///< cpu, mpi, cuda, nccl
  std::int64_t wrong = 0;  ///< #wrong summed over ranks (must be 0 to be kept)
  int iterations = 0;      ///< timed iterations
  double spread_pct = 0;   ///< run-to-run spread: interquartile range of the iterations / median, in %
  friend bool operator==(const Measurement&, const Measurement&) = default;
};

/// One tuned size: the pick's figures, its runner-up and TF's pick.
struct SizePoint {
  std::uint64_t bytes = 0;
  std::int64_t count = 0;               ///< elements
  Figures predicted;                    ///< the pick, simulated
  std::optional<Measurement> measured;  ///< the pick, run for real
  std::string runner_up;                ///< label of the best plan of another family ("" if none)
  Figures runner_up_predicted;
  std::optional<Measurement> runner_up_measured;
  double margin_pct = 0;                   ///< runner-up time / pick time − 1, in %, measured when both were measured
  std::string tf_pick;                     ///< label of TF's choose_the_best pick
  Figures tf_predicted;                    ///< TF's pick, simulated (time 0 when it cannot build here)
  std::optional<Measurement> tf_measured;  ///< TF's pick, run for real (when it was among the measured)
  /// Why the pick is not the fastest at this size: "" (it is the fastest), "hysteresis" (the previous size's pick,
  /// kept while within SearchOptions::keep_within of the fastest prediction), "min-gain" (NCCL's own choice, kept
  /// because the fastest prediction beats it by less than SearchOptions::min_gain) or "spread" (measured candidates
  /// closer than their run-to-run spread: the previous or simpler one is kept).
  std::string kept;
  std::string fastest;            ///< label of the fastest candidate when kept != ""
  double behind_fastest_pct = 0;  ///< pick time / fastest time − 1, in % (same basis as the margin)
  Figures nccl_predicted;         ///< NCCL's own choice (spec nccl), simulated (time 0 when not a candidate)
  /// The min-cut bound (simulator/bound.hpp) at this size and the model's rates (time 0 when unknown: tables
  /// written before issue 25, topologies without GPUs).
  Figures bound;
  friend bool operator==(const SizePoint&, const SizePoint&) = default;
};

/// A contiguous size range with one plan.
struct TableRange {
  std::uint64_t min_bytes = 0;  ///< smallest tuned size in the range
  std::uint64_t max_bytes = 0;  ///< largest tuned size in the range
  Candidate plan;
  std::vector<SizePoint> points;  ///< the tuned sizes, ascending
  friend bool operator==(const TableRange&, const TableRange&) = default;
};

/// One tuned size before merging.
struct SizeChoice {
  Candidate plan;
  SizePoint point;
};

/// A whole decision table.
struct DecisionTable {
  int schema_version = kDecisionTableSchemaVersion;
  std::string created_by;  ///< "artune 0.1.0"
  std::string topology_name;
  std::string topology_source;  ///< how to load it again: autotune's -t (a built-in name, a generator or
                                ///< a file's absolute path); "" for a discovered topology
  std::string fingerprint;      ///< Topology::fingerprint() of the tuned topology
  int gpus = 0;
  int machines = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  nlohmann::json cost_model;       ///< CostModel::to_json() of the model used
  std::string calibration;         ///< overlay file applied ("" = defaults)
  std::string measured_backend;    ///< backend of --measure ("" = predictions only)
  std::vector<TableRange> ranges;  ///< ascending, non-overlapping

  /// The range for a size: the last range whose min_bytes ≤ bytes (the first range below the tuned span).
  const TableRange& lookup(std::uint64_t bytes) const;
  friend bool operator==(const DecisionTable&, const DecisionTable&) = default;
};

/// Merges ascending per-size choices into ranges: neighbours with the same plan (same label) share a range.
std::vector<TableRange> merge_ranges(const std::vector<SizeChoice>& choices);

/// The table as JSON (schema documented in README.md, "Decision table format").
nlohmann::json table_to_json(const DecisionTable& table);
/// Reads a table from JSON; InvalidInput "SOURCE: field.path: reason" on anything malformed.
DecisionTable table_from_json(const nlohmann::json& doc, std::string_view source);
/// Writes the table with write_output_file (core/output_file.hpp): atomic replacement in the target's folder.
void write_decision_table(const std::string& path, const DecisionTable& table);
/// Reads and validates a table file holding one table (refuses corrupt files with a one-line reason, and files
/// with several tables: pick one with read_decision_tables + select_table).
DecisionTable read_decision_table(const std::string& path);
/// Refuses (InvalidInput, one line) a table tuned for another topology than `topo`.
void check_table_topology(const DecisionTable& table, const Topology& topo, std::string_view source);
/// Reads a table and checks it belongs to `topo`.
DecisionTable load_decision_table(const std::string& path, const Topology& topo);
/// Reads a table file and returns its table for (type, op), checked against `topo` (a file may hold several).
DecisionTable load_decision_table(const std::string& path, const Topology& topo, DataType type, ReduceOp op);

/// Several tables (one per type and op) as one JSON document: a version-1 document for one table, else version 2.
nlohmann::json tables_to_json(const std::vector<DecisionTable>& tables);
/// Reads a version-1 (one table) or version-2 (several) document; InvalidInput "SOURCE: field.path: reason".
std::vector<DecisionTable> tables_from_json(const nlohmann::json& doc, std::string_view source);
/// Writes one or several tables atomically (see tables_to_json).
void write_decision_tables(const std::string& path, const std::vector<DecisionTable>& tables);
/// Reads and validates every table of a file.
std::vector<DecisionTable> read_decision_tables(const std::string& path);
/// The table for (type, op); InvalidInput naming `source` and listing the tables it holds otherwise.
const DecisionTable& select_table(const std::vector<DecisionTable>& tables, DataType type, ReduceOp op,
                                  std::string_view source);

/// The plan the table picks for a message of `bytes`, built for `count` elements (and proven by the verifier unless
/// `verify` is false): the one way a table's pick becomes a plan (run --table, fusion, the communicator's buckets).
Plan plan_from_table(const DecisionTable& table, const Topology& topo, std::uint64_t bytes, std::int64_t count,
                     ReduceOp op, bool verify);
/// What `artune run --table` needs for one size: the plan the table picks for `count` elements of `element_bytes`.
Plan plan_from_table(const DecisionTable& table, const Topology& topo, std::int64_t count, std::size_t element_bytes,
                     ReduceOp op);

/// A plan factory for `artune run --table` (compatible with executor/harness/runner.hpp's PlanFactory): for `count`
/// elements, the table's pick for count · element_bytes bytes, built on `topo` and proven by the verifier.
/// `topo` must outlive the factory.
std::function<Plan(std::int64_t count)> table_plan_factory(DecisionTable table, const Topology& topo,
                                                           std::size_t element_bytes, ReduceOp op);

/// write_output_file(path, text) (core/output_file.hpp), under the name earlier callers use.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace artune
