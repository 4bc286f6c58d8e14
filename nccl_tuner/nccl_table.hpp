#pragma once
// What the NCCL tuner plugin needs of a decision table written by
// `artune autotune --target nccl`: the rank and machine counts it was tuned
// for, its collective and, per size range, NCCL's algorithm × protocol (and
// channel count) to run.
//
// This reader is the plugin's own: the plugin is loaded into programs that
// never link artune, so it must not pull in the tuner, the simulator or the
// executor (and with them CUDA, MPI and NCCL itself). It compiles in only
// core's JSON reading (json_input, json_reader), so its messages read as
// artune's loaders' do ("SOURCE: PATH: must be X, not Y"), and it turns
// their InvalidInput into TableError (nothing else leaves it). It reads the fields of the table schema that
// tuner/decision_table.cpp writes ("schema", "schema_version", "topology",
// "ranges[].min_bytes/max_bytes/plan.family/plan.spec/plan.collective") and
// ignores the rest.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_tuner/tuner_abi.h"

namespace artune::nccl_tuner {

/// A table the plugin cannot use; what() is one line naming the source and the reason.
class TableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// NCCL's choice for one size range, as cost-table indices (tuner_abi.h); -1 = left to NCCL.
struct Pick {
  int algo = -1;   ///< ARTUNE_NCCL_ALGO_* row; -1: NCCL's own choice (spec "nccl")
  int proto = -1;  ///< ARTUNE_NCCL_PROTO_* column; -1: NCCL's cheapest protocol for `algo`
  int channels = 0;  ///< `.cN`: NCCL's nChannels for the pick; 0: NCCL's own count
  friend bool operator==(const Pick&, const Pick&) = default;
};

/// One size range of the table.
struct Range {
  std::uint64_t min_bytes = 0;  ///< smallest tuned size of the range
  std::uint64_t max_bytes = 0;  ///< largest tuned size of the range
  std::string spec;             ///< the plan's spec ("nccl.ring.ll128.c8"), for log lines
  Pick pick;
};

/// The table as the plugin uses it.
struct Table {
  std::size_t ranks = 0;      ///< GPUs the table was tuned for (= NCCL's nRanks)
  std::size_t machines = 0;   ///< machines (= NCCL's nNodes)
  int collective = artuneNcclFuncAllReduce;  ///< artuneNcclFunc of the ranges' plans ("collective"; absent: all-reduce)
  std::vector<Range> ranges;  ///< ascending, non-overlapping, at least one

  /// The range for `bytes`, as artune's own lookup: the last range whose min_bytes ≤ bytes, else the first.
  const Range& lookup(std::uint64_t bytes) const;
};

/// Largest table file the plugin reads (a table of thousands of sizes is well under 1 MiB).
inline constexpr std::size_t kMaxTableBytes = std::size_t{64} << 20;

/// Parses a spec of an NCCL candidate: "nccl" (NCCL's choice) or "nccl.ALGO[.PROTO][.cN]" with
/// ALGO ∈ ring, tree, nvls, nvlstree, pat, PROTO ∈ ll, ll128, simple and N ∈ 1..64 channels (the grammar of
/// algorithms/spec.hpp parse_nccl_variant). TableError naming `where` otherwise.
Pick parse_nccl_spec(std::string_view spec, std::string_view where);
/// Parses a table's JSON text; TableError "SOURCE: PATH: reason" on anything malformed, when a range's
/// plan is not one of NCCL's own choices (a table tuned over artune's plans), or when its ranges tune
/// different collectives.
Table parse_table(std::string_view text, std::string_view source);
/// Reads a regular file of at most kMaxTableBytes and parses it; TableError on any failure.
Table read_table(const std::string& path);
/// The text of a regular file of at most kMaxTableBytes (no FIFO, device or folder); TableError naming it.
std::string read_regular_file(const std::string& path);
/// TableError unless the table was tuned for `ranks` GPUs on `machines` machines.
void check_fits(const Table& table, std::size_t ranks, std::size_t machines, std::string_view source);

/// Makes `pick` the cheapest entry of NCCL's cost table `costs` for one collective (row-major numAlgo × numProto,
/// as NCCL passes it): its cost becomes 0, as NCCL's own v2 adapter does. Entries NCCL marked unsupported
/// (negative cost) are never touched; returns false, changing nothing, when the pick is unsupported or
/// outside the table or is NCCL's own choice.
bool apply_pick(const Pick& pick, float* costs, int num_algo, int num_proto);

/// "all-reduce", "all-gather", "reduce-scatter" for a table's collective ("?" for the others).
const char* collective_name(int collective);
/// "ring", "tree", … for a cost-table row ("?" when unknown).
const char* algo_name(int algo);
/// "ll", "ll128", "simple" for a column ("?" when unknown).
const char* proto_name(int proto);

}  // namespace artune::nccl_tuner
