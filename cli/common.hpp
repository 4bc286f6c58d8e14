#pragma once
// Flags and output helpers shared by the subcommands.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/simulator/cost_model.hpp"
#include "artune/topology/topology.hpp"

namespace artune::cli {

/// nccl-tests size sweep flags -b/-e/-f.
struct SweepFlags {
  std::string min_bytes = "1K";  ///< -b
  std::string max_bytes = "1G";  ///< -e
  double factor = 2.0;           ///< -f
};

/// Adds -b/--minbytes, -e/--maxbytes, -f/--stepfactor to a subcommand.
void add_sweep_flags(CLI::App* cmd, SweepFlags& flags);
/// The byte sizes of the sweep (InvalidInput naming the flag on bad values).
std::vector<std::uint64_t> sweep_sizes(const SweepFlags& flags);
/// The flag that set `size` of a sweep's `sizes`, for an error about it: -b/--minbytes, -e/--maxbytes or -b/-e/-f.
std::string size_flag(std::uint64_t size, const std::vector<std::uint64_t>& sizes);
/// The documented limits on plans and sizes, for --help footers.
std::string plan_limits_help();
/// `text` as one POSIX shell word for the command lines artune prints (a report's "regenerate with"):
/// unchanged when it holds only safe characters, else single-quoted; control characters appear escaped.
std::string shell_word(std::string_view text);
/// Prints JSON to stdout, indented, with a trailing newline.
void print_json(const nlohmann::json& doc);
/// Splits "0,3,2,1" into integers; InvalidInput naming `flag` on an empty list, empty items
/// ("0,,1", a trailing comma) and items that are not integers.
std::vector<int> parse_int_list(const std::string& text, const std::string& flag);
/// Splits "cpu0,gpu2,m1/gpu3" into topology node indices; InvalidInput naming `flag` on an empty
/// list, empty items and ids the topology does not have.
std::vector<int> parse_node_list(const Topology& topo, const std::string& text, const std::string& flag);

/// Output files take one long flag everywhere: `--out FILE`. `-o` is the reduction op in run, plan and
/// simulate (as in nccl-tests); where `-o`/`--output` used to name the output file (autotune, calibrate,
/// topo import, topo discover) it still does for a deprecation period, with a one-line warning on stderr
/// (`warn_deprecated_output`). Returns the --out option.
CLI::Option* add_out_option(CLI::App* cmd, std::string& target, const std::string& help);
/// Prints the deprecation warning when the old -o/--output spelling was used on `cmd` (call from its callback);
/// InvalidInput when both spellings were given.
void warn_deprecated_output(CLI::App* cmd);
/// Whether the output file was given (by --out or the old -o/--output).
bool output_given(CLI::App* cmd);

/// The cost model of `--backend` (else the calibration overlay's profile, else nccl) with the `--calibration`
/// overlay applied; InvalidInput naming the flags when the overlay was fitted for another backend.
/// --launch's help, shared by simulate and autotune.
inline constexpr const char* kLaunchHelp =
    "how the program issues its NCCL calls, charged per call: process (one process per GPU, the default), thread:G "
    "(one thread driving G GPUs: all_reduce_perf -g G), thread (every GPU of a machine), graph (CUDA graph replay: "
    "all_reduce_perf -G)";

/// --nccl-version's help, shared by simulate and autotune.
inline constexpr const char* kNcclVersionHelp =
    "the NCCL release whose choice of algorithm and protocol to model (its cost table, e.g. 2.21.5; 2.19 or later; "
    "default 2.28.9, the tables the model carries)";

CostModel cost_model_from_flags(const std::string& backend, bool has_backend, const std::string& calibration,
                                bool has_calibration);

/// Prints `message` as the command's one error line on stderr ("artune: …"): control characters escaped,
/// overlong text cut.
void print_error(std::string_view message);

}  // namespace artune::cli
