#pragma once
// Reader of nccl-tests output (NVIDIA/nccl-tests `all_reduce_perf`, `all_gather_perf`, `reduce_scatter_perf`
// and the other `*_perf` programs): the header (nccl-tests and NCCL versions, `nThread`/`nGpus`, sizes,
// iterations, `validation` (-c), `graph` (-G)), the `Using devices` lines (rank, host, device, PCI id, name),
// and every table with its out-of-place and in-place columns, as the program prints them
// (NVIDIA/nccl-tests src/util.cu; older releases print `error` instead of `#wrong`, no `root` or no `redop`
// column, no `#` before the header lines; `--report-cputime` prints `cputime`, `-T` adds timestamps).
//
// A file holds any number of runs (one per table: several runs pasted one after another, or one program
// sweeping several configurations). Lines that are not part of a table are skipped (NCCL's INFO lines,
// shell prompts, `mpirun` chatter), so a log pasted into an issue reads as printed; `mpirun --tag-output`
// prefixes (`[1,0]<stdout>:`) are stripped. A table that cannot be read is InvalidInput naming the file
// and line: a row whose fields do not match the table's columns or are not numbers, a size that is not its
// element count times the type's size, an algorithm bandwidth that is not the size over the time, a bus
// bandwidth factor that changes within a table.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace artune::logs {

/// One `#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:29:00] NVIDIA H100 80GB HBM3` line.
struct TestDevice {
  int rank = 0;
  int group = 0;        ///< 0 when the line has no `Group` (older releases)
  std::string host;     ///< the host name as printed
  int device = 0;       ///< CUDA device index on that host
  std::string bus_id;   ///< the PCI id between brackets ("0000:29:00", or "0x1b" in older releases)
  std::string name;     ///< the GPU's name ("NVIDIA H100 80GB HBM3")
  int line = 0;         ///< 1-based line of the file
};

/// One half of a row: out-of-place or in-place.
struct TestResult {
  double time_us = 0;     ///< `time` (or `cputime`)
  double algbw_gbps = 0;  ///< `algbw`
  double busbw_gbps = 0;  ///< `busbw`
  /// `#wrong` (elements) or, in older releases, `error` (largest difference); nullopt when printed `N/A` (-c 0).
  std::optional<double> check;
};

/// One row of a table.
struct TestRow {
  int line = 0;                ///< 1-based line of the file
  std::uint64_t bytes = 0;     ///< `size` (B): the whole buffer (all-gather: every rank's block)
  std::uint64_t count = 0;     ///< `count` (elements; all-gather/reduce-scatter: per rank in current releases)
  std::string type;            ///< `type` ("float", "half", "bfloat16", "int32", …)
  std::string redop;           ///< `redop` ("sum", "none" for all-gather); "" when the table has no such column
  int root = -1;               ///< `root` (-1 where none); -1 when the table has no such column
  std::optional<TestResult> out_of_place;  ///< absent in trace replays (in-place only)
  TestResult in_place;
};

/// One table with the header lines that precede it.
struct TestRun {
  std::string source;          ///< the file, as named to the reader
  int header_line = 0;         ///< line of the table's column header
  int end_line = 0;            ///< line of the last row, or of the footer when there is one
  std::string program;         ///< "all_reduce_perf", … ("Collective test starting" or a command line); "" unknown
  std::string tests_version;   ///< "2.17.9" from `# nccl-tests version`; "" when not printed
  int nccl_version_code = 0;   ///< 22602 (`nccl-library=`, or from an `NCCL version 2.26.2` line); 0 unknown
  std::string nccl_version;    ///< "2.26.2+cuda12.4" as printed by NCCL, or "2.26.2" from the code; "" unknown
  int threads = 0;             ///< `nThread` (-t); 0 when the parameter line is missing
  int gpus_per_thread = 0;     ///< `nGpus` (-g); 0 when the parameter line is missing
  std::uint64_t min_bytes = 0, max_bytes = 0;  ///< `minBytes`, `maxBytes`
  int warmup_iters = -1, iters = -1, agg_iters = -1;  ///< -1 when not printed
  int validation = -1;         ///< `validation` (-c): 1 checked, 0 not; -1 not printed
  int graph = -1;              ///< `graph` (-G): CUDA graph launches per iteration, 0 none; -1 not printed
  std::vector<TestDevice> devices;  ///< `Using devices` lines (in rank order as printed)
  /// Environment settings the text shows before the table: `NAME=VALUE` tokens of command lines (`-x
  /// NCCL_ALGO=Ring`, `NCCL_PROTO=Simple ./all_reduce_perf`) and NCCL's "NAME set by environment to VALUE".
  std::map<std::string, std::string> env;
  std::vector<std::string> columns;  ///< the table's column names as printed ("size", "count", "type", …)
  std::vector<TestRow> rows;
  std::optional<double> avg_busbw_gbps;  ///< the footer's `Avg bus bandwidth`
  /// busbw / algbw of the table's rows (2(n−1)/n for all-reduce, (n−1)/n for all-gather and reduce-scatter,
  /// 1 for broadcast and reduce); 0 when no row has enough digits to tell.
  double bus_factor = 0;
  double bus_factor_low = 0, bus_factor_high = 0;  ///< the range the printed digits leave for it
  /// size / (count × type bytes) of the table's rows: 1 for all-reduce, the ranks for all-gather and
  /// reduce-scatter in current nccl-tests; 0 when every count is 0.
  std::uint64_t size_per_count = 0;
  bool footer = false;         ///< the footer (`Out of bounds values` / `Avg bus bandwidth`) was seen
  /// Rows cut by another process's NCCL log line written into them (skipped: their figures are lost).
  int interrupted_rows = 0;

  /// Ranks of the run: the distinct ranks of the device lines when there are any, else what the rows' sizes
  /// and bus bandwidth factor imply (0 when nothing tells).
  int ranks() const;
  /// How many runs printed into this one table: the most times a rank appears among the device lines (2 when
  /// two jobs wrote the same file at once, each row then printed once per job); 1 without device lines.
  int copies() const;
  /// The hosts of the ranks' first device lines, in order of first appearance.
  std::vector<std::string> hosts() const;
};

/// Bytes of an nccl-tests type name ("float" 4, "half" 2, "int8" 1, …); 0 for an unknown name.
int type_bytes(std::string_view type);

/// Reads every run of nccl-tests text; `source` names it in messages ("FILE:LINE: reason").
/// InvalidInput on a table that cannot be read. A text without any table gives an empty list.
std::vector<TestRun> parse_nccl_tests(std::string_view text, std::string_view source);
/// Reads a file (read_input_file's checks) and parses it.
std::vector<TestRun> read_nccl_tests(const std::string& path);

}  // namespace artune::logs
