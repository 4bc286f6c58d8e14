// `artune run`: executes a plan for real on a backend and prints an
// nccl-tests-style table (size, count, type, redop, time, algbw, busbw, #wrong).
// Under mpirun (mpi, nccl backends) every rank runs the sweep and only rank 0 prints.

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "artune/core/error.hpp"
#include "artune/core/types.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/executor/mpi/launcher.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/decision_table.hpp"

namespace artune::cli {

namespace {

struct RunFlags {
  std::string topology{kDefaultTopology};
  std::string spec = "xring";
  std::string backend = "cpu";
  SweepFlags sweep{"32M", "32M", 2.0};
  std::string type = "float";
  std::string op = "sum";
  std::string collective = "allreduce";
  bool collective_given = false;
  int iterations = 20;
  int warmup = 5;
  int check = 1;
  double timeout_s = 60;
  int machine_index = -1;
  bool machine_index_given = false;
  int segments = 1;
  std::string gpu_perm;
  std::string table;  // --table: plans from an autotune decision table (tuner/decision_table.hpp)
  bool json = false;
  bool back_to_back = false;    // --back-to-back: nccl-tests timing (n iterations in flight, one wait)
  bool graph = false;           // --graph: nccl back to back as n launches of one captured CUDA graph
  bool topology_given = false;  // -t on the command line (else --table names the topology)
};

void run_with(const RunFlags& f, BackendKind kind, Topology& topo, std::unique_ptr<HarnessBackend>& backend);

void check_count(int value, int min, const char* flag) {
  if (value < min || value > kMaxIterations) {
    throw InvalidInput(fmt::format("{}: {} must be between {} and {}", flag, value, min, kMaxIterations));
  }
}

void run_command(const RunFlags& f) {
  const BackendKind kind = parse_backend_kind(f.backend, "--backend");
  const bool distributed = kind == BackendKind::kMpi || kind == BackendKind::kNccl;
  Topology topo;  // outlives the backend, which keeps a pointer to it
  std::unique_ptr<HarnessBackend> backend;
  try {
    run_with(f, kind, topo, backend);
  } catch (const Error& e) {
    if (!distributed) throw;
    // Under mpirun rank 0 reports and the others stay quiet. The message goes out before
    // the backend shuts down (finalising MPI, or aborting the job when a peer is stuck):
    // once any rank exits non-zero, mpirun may kill the rest.
    if (backend ? backend->is_root() : launcher_rank().value_or(-1) <= 0) print_error(e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    backend.reset();
    std::exit(exit_status(e.code()));
  }
}

void run_with(const RunFlags& f, BackendKind kind, Topology& topo, std::unique_ptr<HarnessBackend>& backend) {
  SweepConfig config;
  config.sizes = sweep_sizes(f.sweep);
  config.type = parse_data_type(f.type, "-d/--datatype");
  config.op = parse_reduce_op(f.op, "-o/--op");
  config.iterations = f.iterations;
  config.warmup = f.warmup;
  config.check = f.check;
  config.back_to_back = f.back_to_back;
  check_count(f.iterations, 1, "-n/--iters");
  check_count(f.warmup, 0, "-w/--warmup_iters");
  check_count(f.check, 0, "-c/--check");
  if (!(f.timeout_s > 0 && f.timeout_s <= kMaxTimeoutSeconds)) {
    throw InvalidInput(fmt::format("--timeout: {} must be > 0 and ≤ {:.0f} seconds", f.timeout_s, kMaxTimeoutSeconds));
  }
  if (f.segments < 1) throw InvalidInput("--segments: must be ≥ 1");
  if (f.graph && !f.back_to_back) throw InvalidInput("--graph: only with --back-to-back");
  if (f.graph && kind != BackendKind::kNccl && kind != BackendKind::kCuda) {
    throw InvalidInput(fmt::format("--graph: the {} backend runs no CUDA graphs (nccl or cuda only)", to_string(kind)));
  }
  const std::size_t es = element_size(config.type);
  for (const std::uint64_t size : config.sizes) {
    if (size % es != 0) {
      throw InvalidInput(fmt::format("{}: size {} is not a multiple of the {} element size ({} bytes)",
                                     size_flag(size, config.sizes), size, to_string(config.type), es));
    }
  }
  if (f.machine_index_given) {
    if (f.machine_index < 0 || f.machine_index > kMaxMachineIndex) {
      throw InvalidInput(
          fmt::format("--machine-index: {} must be between 0 and {}", f.machine_index, kMaxMachineIndex));
    }
    if (kind != BackendKind::kMpi && kind != BackendKind::kNccl) {
      throw InvalidInput(fmt::format(
          "--machine-index: only for the mpi and nccl backends (--backend {} runs in one process)", to_string(kind)));
    }
  }
  // With --table and no -t, the table names its topology: built-in names and generators load by name, a file
  // by the absolute path autotune recorded; a discovered topology has no name to load, so -t is required then.
  std::vector<DecisionTable> tables;
  std::string table_profile;  // the cost profile the table was priced with (its cost_model.profile)
  std::string topology_arg = f.topology;
  if (!f.table.empty()) {
    try {
      tables = read_decision_tables(f.table);
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("--table: {}", e.what()));  // the flag, then the file's own message
    }
    if (!f.topology_given) {
      std::string source = tables.front().topology_source;
      if (source.empty()) {
        // Tables written before "source" existed: their name loads when it is a built-in or a generator
        // (the fingerprint check below still has the last word).
        try {
          if (load_topology(tables.front().topology_name).fingerprint() == tables.front().fingerprint) {
            source = tables.front().topology_name;
          }
        } catch (const Error&) {}
      }
      if (source.empty()) {
        throw InvalidInput(
            fmt::format("--table: {} was tuned on a discovered topology ('{}') that has no name to "
                        "load; give that topology with -t (e.g. the file of `artune topo discover --out`)",
                        f.table, tables.front().topology_name));
      }
      if (source.front() == '/' && !std::filesystem::exists(source)) {
        throw InvalidInput(
            fmt::format("--table: {} was tuned on the topology file {}, which does not exist here; give "
                        "the topology with -t",
                        f.table, source));
      }
      topology_arg = source;
    }
  }
  topo = load_topology(topology_arg);
  BuildOptions base;
  base.reduce_op = config.op;
  base.collective = parse_collective_kind(f.collective);
  base.segments = f.segments;
  if (!f.gpu_perm.empty()) base.gpu_perm = parse_int_list(f.gpu_perm, "--gpu-perm");
  if (kind == BackendKind::kCpu && topo.gpus().size() > static_cast<std::size_t>(kMaxCpuDevices)) {
    // Refused before building a plan of that size (seconds for a thousand GPUs).
    throw InvalidInput(
        fmt::format("-t/--topology: {} has {} GPUs; the cpu backend runs one thread per device and "
                    "takes at most {} (use a smaller topology or the mpi backend)",
                    topology_arg, topo.gpus().size(), kMaxCpuDevices));
  }
  if (f.machine_index_given && f.machine_index >= topo.machine_count()) {
    throw InvalidInput(fmt::format("--machine-index: {} but topology {} has {} machine(s)", f.machine_index,
                                   topology_arg, topo.machine_count()));
  }
  PlanFactory make_plan;
  if (f.table.empty()) {
    make_plan = spec_plan_factory(topo, f.spec, base);
  } else {
    // A table file may hold one table per (type, op): pick by -d and -o.
    const auto has = [&](auto pred) { return std::any_of(tables.begin(), tables.end(), pred); };
    if (!has([&](const DecisionTable& t) { return t.type == config.type; })) {
      std::vector<std::string> types;
      for (const auto& t : tables) {
        if (std::find(types.begin(), types.end(), to_string(t.type)) == types.end())
          types.emplace_back(to_string(t.type));
      }
      throw InvalidInput(fmt::format("-d/--datatype: {} but the table {} was tuned for {}", to_string(config.type),
                                     f.table, fmt::join(types, ", ")));
    }
    if (!has([&](const DecisionTable& t) { return t.type == config.type && t.op == config.op; })) {
      std::vector<std::string> ops;
      for (const auto& t : tables) {
        if (t.type == config.type) ops.emplace_back(to_string(t.op));
      }
      throw InvalidInput(fmt::format("-o/--op: {} but the table {} was tuned for {}", to_string(config.op), f.table,
                                     fmt::join(ops, ", ")));
    }
    DecisionTable table = select_table(tables, config.type, config.op, f.table);
    // The table's collective (autotune --collective) is what runs; --collective may only repeat it.
    const Collective tuned = table.ranges.empty() ? Collective::kAllReduce : table.ranges.front().plan.collective;
    if (f.collective_given && tuned != base.collective) {
      throw InvalidInput(fmt::format("--collective: {} but the table {} was tuned for {}",
                                     collective_flag_name(base.collective), f.table, collective_flag_name(tuned)));
    }
    base.collective = tuned;
    try {
      check_table_topology(table, topo, f.table);
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("--table: {}", e.what()));
    }
    if (table.cost_model.is_object() && table.cost_model.contains("profile") &&
        table.cost_model["profile"].is_string()) {
      table_profile = table.cost_model["profile"].get<std::string>();
    }
    make_plan = table_plan_factory(std::move(table), topo, element_size(config.type), config.op);
  }

  BackendOptions options;
  options.timeout_s = f.timeout_s;
  options.machine_index = f.machine_index;
  options.nccl_graph = f.graph;
  options.topology = &topo;
  backend = make_backend(kind, options);
  // A table priced for another kind of executor (autotune's default profile is nccl's, GPUs) still runs, with one
  // warning line (from the root rank only).
  if (!table_profile.empty() && backend->is_root()) {
    const std::string line = profile_mismatch_warning(fmt::format("--table {}", f.table), table_profile, kind);
    if (!line.empty()) {
      const std::string own(to_string(profile_for(kind)));
      fmt::print(stderr, "artune: warning: {}: artune autotune --profile {}, or --measure {}\n", line, own,
                 to_string(kind));
    }
  }

  RunReport report;
  report.topology = topo.name().empty() ? topology_arg : topo.name();
  report.spec = f.table.empty() ? f.spec : "table:" + f.table;
  report.backend = std::string(to_string(kind));
  report.config = config;
  report.plan_column = !f.table.empty();
  report.collective = base.collective;
  const bool print_table = backend->is_root() && !f.json;
  // The header goes out once the sweep passed the backend's up-front checks: a sweep refused there (e.g. mpirun
  // -np 3 for a 4-rank plan, checked by check_plan on every rank before anything runs) prints its one-line error
  // and nothing else.
  report.rows = run_sweep(
      *backend, make_plan, config,
      [&](const RunRow& row) {
        if (print_table) print_run_row(stdout, row, report.plan_column);
      },
      [&] {
        if (print_table) print_run_header(stdout, report);
      });
  if (backend->is_root()) {
    if (f.json)
      print_json(run_report_to_json(report));
    else
      print_run_footer(stdout, report);
  }
  if (report.total_wrong() > 0) {
    throw Error(ErrorCode::kWrongResult,
                fmt::format("run: {} wrong elements (spec {} on {}, backend {})", report.total_wrong(), report.spec,
                            report.topology, report.backend));
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd =
      app.add_subcommand("run",
                         "Run an all-reduce plan for real and print an nccl-tests style table.\n"
                         "Inputs are small integers per (rank, index, iteration), exact in every type; #wrong counts\n"
                         "mismatching elements over all ranks and any wrong element makes the command exit 1.\n"
                         "Checks are refused where a narrow type cannot hold the exact result (sum: bfloat16 > 256,\n"
                         "half > 2048 ranks; avg: bfloat16 > 64, half > 512, uint8 > 85); -c 0 times them unchecked.\n"
                         "time(us) is the median of -n iterations after -w warm-ups (the slowest rank per iteration);\n"
                         "algbw = size/time, busbw = algbw*2(n-1)/n as nccl-tests. Backends: cpu (threads, one per\n"
                         "device), mpi (`mpirun -np RANKS artune run --backend mpi ...`, one rank per participant;\n"
                         "only rank 0 prints), cuda, nccl (when built, on GPUs).");
  CLI::Option* topology =
      cmd->add_option("-t,--topology", flags->topology,
                      "topology: built-in name, generator (uniform:8, uniform:2x8) or JSON file (with --table: default "
                      "the table's own topology)")
          ->capture_default_str();
  CLI::Option* spec =
      cmd->add_option("-s,--spec", flags->spec, "all-reduce spec (xring, rechd, pscpu, nccl/xring, 2d, ...)")
          ->capture_default_str();
  cmd->add_option("--table", flags->table,
                  "run, for each size, the plan an `artune autotune --out` decision table picks (the table for -d "
                  "and -o when it holds several)")
      ->excludes(spec);
  cmd->add_option("--backend", flags->backend, "cpu | mpi | cuda | nccl")->capture_default_str();
  add_sweep_flags(cmd, flags->sweep);
  cmd->add_option("-d,--datatype", flags->type, "float, double, half, bfloat16, int32, int64, uint8")
      ->capture_default_str();
  cmd->add_option("-o,--op", flags->op, "sum, prod, min, max, avg")->capture_default_str();
  cmd->add_option("--collective", flags->collective,
                  "allreduce, allgather (specs ring, bruck, rd, nccl, 2d, trees, nccl/ring, nccl/bruck, nccl/rd; "
                  "all_gather_perf "
                  "columns) or reducescatter (ring, halving, nccl, 2d, trees, nccl/ring, nccl/halving; "
                  "reduce_scatter_perf columns): "
                  "size = the whole buffer, busbw = "
                  "algbw*(n-1)/n; with --table: the table's own")
      ->capture_default_str()
      ->each([flags](const std::string&) { flags->collective_given = true; });
  cmd->add_option("-n,--iters", flags->iterations, fmt::format("timed iterations per size (1 to {})", kMaxIterations))
      ->capture_default_str();
  cmd->add_option("-w,--warmup_iters", flags->warmup, "warm-up iterations per size (not timed)")->capture_default_str();
  cmd->add_option("-c,--check", flags->check, "checked iterations per size (0: no check, #wrong N/A)")
      ->capture_default_str();
  cmd->add_option(
         "--timeout", flags->timeout_s,
         fmt::format("seconds without progress before a stuck peer ends the run (at most {:.0f})", kMaxTimeoutSeconds))
      ->capture_default_str();
  CLI::Option* machine =
      cmd->add_option("--machine-index", flags->machine_index,
                      "mpi/nccl: this rank's machine in the topology (checked; default: ARTUNE_MACHINE_INDEX)");
  cmd->add_option("--segments", flags->segments, "pipeline every op into K segments")->capture_default_str();
  cmd->add_option("--gpu-perm", flags->gpu_perm, "ring order of the local GPUs, e.g. 0,3,2,1,5,6,7,4");
  cmd->add_flag("--json", flags->json, "print the table as JSON");
  cmd->add_flag("--back-to-back", flags->back_to_back,
                "time the -n iterations as nccl-tests does: issued back to back, one wait at the end, time = total / n "
                "(cuda: n launches of the plan's CUDA graph; nccl: the n runs' NCCL calls issued on the stream, or "
                "with --graph one captured run launched n times); default: each iteration alone, the median");
  cmd->add_flag("--graph", flags->graph,
                "with --back-to-back on the nccl backend: capture one run into a CUDA graph and launch it n times "
                "(default: no graph, the calls issued n times; the cuda backend always uses its graph)");
  cmd->callback([flags, machine, topology] {
    flags->machine_index_given = machine->count() > 0;
    flags->topology_given = topology->count() > 0;
    run_command(*flags);
  });
}

}  // namespace artune::cli
