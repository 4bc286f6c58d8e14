#pragma once
// Where a communicator's plans come from (internal), per collective, decided on its first use: a decision table
// read from a file (CommOptions::table …), a table tuned in memory (the tuner's search over the group's
// topology), or a fixed all-reduce spec (CommOptions::spec); and the plan each of its size buckets runs.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/tuner/decision_table.hpp"

namespace artune {

class Topology;

/// The default sizes tuned in memory: 4 B to 256 MiB, x2.
std::vector<std::uint64_t> default_tune_sizes();
/// The size buckets of a decision table: the sizes it was tuned at, ascending (InvalidInput when it has none).
std::vector<std::uint64_t> table_buckets(const DecisionTable& table);

class PlanSource {
 public:
  // The plans of one collective: its decision table (none for a fixed all-reduce spec) and size buckets.
  struct Tuning {
    bool ready = false;
    std::optional<DecisionTable> table;
    std::vector<std::uint64_t> buckets;  // bytes, ascending
    std::string profile;                 // cost-model profile of its table ("" for a fixed spec)
  };

  // Plans for `kind`'s backend on `topo` as `options` say (both outlive the source).
  PlanSource(BackendKind kind, const CommOptions& options, const Topology& topo);
  // The table and buckets of collective `c`, tuned or read on first use.
  Tuning& tuning(Collective c);
  // The plan `c` runs at size bucket `bucket`, built for `count` elements (and verified unless `verify` is false).
  Plan build(Collective c, std::int64_t count, ReduceOp op, int bucket, bool verify = true);
  // What the plan of `c` at `bucket` is: its label and table range (PlanInfo's first fields).
  PlanInfo describe(Collective c, int bucket);

 private:
  // The cost-model profile in-memory tuning uses (CommOptions::profile, else the backend's).
  BackendProfile tuning_profile() const;
  // One line on stderr, once per group, when a table or calibration was priced for another profile than the
  // backend's (`what` names it).
  void warn_profile(std::string_view what, std::string_view profile);

  BackendKind kind_;
  const CommOptions& options_;
  const Topology& topo_;
  std::array<Tuning, 3> tunings_;  // all-reduce, all-gather, reduce-scatter
  bool warned_profile_ = false;
};

}  // namespace artune
