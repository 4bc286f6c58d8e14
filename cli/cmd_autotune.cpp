// `artune autotune`: the flags, local and cluster tuning, the sparse crossover; the search is tuner/.

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "artune_config.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "cli/mpi_session.hpp"
#include "cli/tuner_common.hpp"
#include "artune/core/error.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/sizes.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/discovery.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/fusion.hpp"
#include "artune/tuner/nccl_target.hpp"
#include "artune/report/report.hpp"
#include "artune/tuner/autotune.hpp"
#include "artune/tuner/search.hpp"

namespace artune::cli {
namespace {

// More threads than this only add memory: the search has a few thousand (size, candidate) items.
constexpr int kMaxJobs = 1024;

struct AutotuneFlags {
  std::string topo;
  SweepFlags sweep;
  std::string type = "float";
  std::string op = "sum";
  std::string measure;
  std::string target = "artune";         ///< --target: artune (every plan family) or nccl (NCCL's own choices only)
  std::string collective = "allreduce";  ///< --collective: the table's collective (issue 17)
  std::string sparse;  ///< --sparse ROWS,WIDTH,DENSITY: dense all-reduce or sparse all-gather (issue 17)
  int top = 3;
  int jobs = 0;
  bool exhaustive = false;
  std::string calibration;
  std::string launch;  ///< --launch: how the program issues its NCCL calls (process, thread:G, graph); "" = process
  std::optional<std::string> nccl_version;  ///< --nccl-version: the NCCL release whose choice to model
  std::string profile;
  std::vector<std::string> fusion;
  std::vector<std::string> report_notes;
  std::string output;
  std::string report;
  int max_cycles = CandidateOptions{}.max_cycles;
  std::string segments = "1,2,4";
  int max_subchunks = -1;
  int iters = 5;
  int warmup = 2;
  std::string measure_max;
  double timeout = 60;
  bool json = false;
  bool quiet = false;
  bool tf = false;              ///< --tf: TF's choose_the_best columns in the printed table
  std::string min_gain = "auto";  ///< --min-gain PCT or auto (the validated model error of each size's regime)
  bool measure_given = false;  ///< --measure on the command line (even as '')
  bool output_given = false;
  bool report_given = false;
};

std::string command_line(const AutotuneFlags& f, bool discovered) {
  std::string cmd = "artune autotune";
  if (!discovered) {
    // A topology file by its absolute path, so that the line reruns from any folder (a name or generator as given).
    std::error_code ec;
    cmd += " -t " + shell_word(std::filesystem::is_regular_file(f.topo, ec)
                                   ? std::filesystem::absolute(f.topo).lexically_normal().string()
                                   : f.topo);
  }
  cmd += fmt::format(" -b {} -e {} -f {:g}", f.sweep.min_bytes, f.sweep.max_bytes, f.sweep.factor);
  if (f.type != "float") cmd += " -d " + shell_word(f.type);
  if (f.op != "sum") cmd += " --op " + shell_word(f.op);
  if (f.collective != "allreduce") cmd += " --collective " + shell_word(f.collective);
  if (!f.profile.empty()) cmd += " --profile " + shell_word(f.profile);
  if (!f.calibration.empty()) cmd += " --calibration " + shell_word(f.calibration);
  if (!f.launch.empty()) cmd += " --launch " + shell_word(f.launch);
  if (f.nccl_version) cmd += " --nccl-version " + shell_word(*f.nccl_version);
  if (!f.measure.empty()) {
    cmd +=
        fmt::format(" --measure {} --top {} --iters {} --warmup {}", shell_word(f.measure), f.top, f.iters, f.warmup);
    if (!f.measure_max.empty()) cmd += " --measure-max " + shell_word(f.measure_max);
  }
  if (f.max_cycles != CandidateOptions{}.max_cycles) cmd += fmt::format(" --max-cycles {}", f.max_cycles);
  if (f.segments != "1,2,4") cmd += " --segments " + shell_word(f.segments);
  if (f.max_subchunks != -1) cmd += fmt::format(" --max-subchunks {}", f.max_subchunks);
  if (f.min_gain != "auto") cmd += " --min-gain " + shell_word(f.min_gain);
  for (const auto& x : f.fusion) cmd += " --fusion " + shell_word(x);
  if (!f.output.empty()) cmd += " --out " + shell_word(f.output);
  if (!f.report.empty()) cmd += " --report " + shell_word(f.report);
  for (const auto& n : f.report_notes) cmd += " --note " + shell_word(n);
  return cmd;
}

/// "float,half" → each item, in order, without duplicates; InvalidInput naming `flag` on empty items.
template <typename T, typename Parse>
std::vector<T> parse_list(const std::string& text, const std::string& flag, Parse parse) {
  std::vector<T> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InvalidInput(fmt::format("{}: '{}' has an empty item", flag, text));
    const T value = parse(item);
    if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

nlohmann::json read_json_file(const std::string& path, const std::string& flag) {
  return read_json_input(path, flag);  // directories, devices, huge files and 1e400 all end as InvalidInput
}

/// The topology to tune and how it was found.
struct Resolved {
  Topology topo;
  bool discovered = false;
  std::vector<std::string> notes;
  std::string launcher;  ///< "mpirun -np N " in cluster mode (for the regenerate line)
};

/// -t, or this machine's discovered topology (the default built-in when it has no GPU).
Resolved resolve_local(AutotuneFlags& f, Progress& progress) {
  Resolved r;
  if (!f.topo.empty()) {
    r.topo = load_topology(f.topo);
    return r;
  }
  DiscoveryResult d = discover_local_machine();
  if (d.gpu_count == 0) {
    const std::string line =
        fmt::format("no GPU found on {}; tuning the default topology {}",
                    d.hostname.empty() ? std::string("this machine") : d.hostname, kDefaultTopology);
    // A warning, not progress: -q must not hide that the table is not this machine's.
    fmt::print(stderr, "artune: warning: {}\n", line);
    r.notes.push_back(line);
    f.topo = std::string(kDefaultTopology);
    r.topo = load_topology(f.topo);
  } else {
    progress.note(fmt::format("discovered {} with {} GPUs", d.hostname, d.gpu_count));
    r.notes.push_back(fmt::format("topology discovered on {} ({} GPUs)", d.hostname, d.gpu_count));
    r.topo = std::move(d.topology);
    r.discovered = true;
  }
  return r;
}

void tune(AutotuneFlags& f, Resolved resolved, bool root);

#if ARTUNE_HAVE_MPI
/// Cluster mode: without -t every rank discovers its machine, rank 0 joins them (ranks on one host form one
/// machine) and sends the cluster to everyone; all ranks search (deterministically) and measure together.
void run_cluster_in(AutotuneFlags& f, MpiSession& mpi);

void run_cluster(AutotuneFlags& f) {
  // Errors every rank reaches alike (bad flags, a refused topology) are printed once, by rank 0, while MPI is
  // still up: MPI_Finalize synchronises the ranks, so no rank can leave (and make mpirun end the job) before
  // rank 0's line is out. Every rank then leaves with the error's status, without an abort banner.
  std::optional<int> status;
  {
    MpiSession mpi;
    try {
      run_cluster_in(f, mpi);
    } catch (const Error& e) {
      if (mpi.rank() == 0) print_error(e.what());
      std::fflush(stdout);
      std::fflush(stderr);
      status = exit_status(e.code());
    }
  }
  if (status) std::exit(*status);
}

/// The topology to suggest for GPU-less hosts: every rank a participant, grouped by host.
std::string host_ranks_generator(const std::vector<ClusterMachine>& machines) {
  const std::size_t per = machines.front().ranks.size();
  for (const auto& m : machines) {
    if (m.ranks.size() != per) return "a topology file with one GPU node per rank";
  }
  return machines.size() == 1 ? fmt::format("-t uniform:{}", per)
                              : fmt::format("-t uniform:{}x{}", machines.size(), per);
}

void run_cluster_in(AutotuneFlags& f, MpiSession& mpi) {
  const bool root = mpi.rank() == 0;
  Resolved r;
  if (!f.topo.empty()) {
    r.topo = load_topology(f.topo);
  } else {
    const auto machines = gather_machines(mpi, [] { return discover_local_machine(); });
    std::string cluster_text;
    if (root) {
      std::vector<std::string> hosts;
      bool any_without_gpu = false;
      for (const auto& m : machines) {
        hosts.push_back(m.discovery.hostname);
        if (m.discovery.gpu_count == 0) any_without_gpu = true;
      }
      if (any_without_gpu) {
        // Never tune a machine other than the one the ranks run on (a default 8-GPU table cannot run with these
        // ranks): refuse and say how to describe the hosts' ranks.
        std::vector<std::string> without;
        for (const auto& m : machines) {
          if (m.discovery.gpu_count == 0) without.push_back(m.discovery.hostname);
        }
        cluster_text = nlohmann::json{{"error", fmt::format("cluster mode: no GPU found on {} ({} of {} host(s), {} "
                                                            "MPI ranks); give the topology to tune with -t, e.g. {} "
                                                            "for these ranks as they are, with --measure mpi",
                                                            fmt::join(without, ", "), without.size(), machines.size(),
                                                            mpi.size(), host_ranks_generator(machines))}}
                           .dump();
      } else {
        const Topology joined =
            join_cluster(machines, NetworkSpec{}, fmt::format("cluster of {}", fmt::join(hosts, ",")));
        cluster_text = nlohmann::json{{"topology", topology_to_json(joined)},
                                      {"note", fmt::format("cluster discovered under mpirun: {} machine(s) ({})",
                                                           hosts.size(), fmt::join(hosts, ", "))}}
                           .dump();
      }
    }
    const auto doc = nlohmann::json::parse(broadcast_string(cluster_text));
    if (doc.contains("error")) throw InvalidInput(doc["error"].get<std::string>());
    r.notes.push_back(doc["note"].get<std::string>());
    r.topo = topology_from_json(doc["topology"], "cluster");
    r.discovered = true;
  }
  r.notes.push_back(fmt::format("cluster mode: {} MPI ranks; rank 0 wrote the results", mpi.size()));
  r.launcher = fmt::format("mpirun -np {} ", mpi.size());
  tune(f, std::move(r), root);
}
#endif

void run_autotune(AutotuneFlags& f) {
  if (const auto world = launcher_world_size(); world && *world > 1) {
    refuse_cpu_under_mpirun(f.measure, "--measure", *world);
#if ARTUNE_HAVE_MPI
    run_cluster(f);
    return;
#else
    throw Unsupported("autotune under mpirun needs an artune built with MPI (meson -Dmpi=enabled)");
#endif
  }
  Progress progress(f.quiet);
  tune(f, resolve_local(f, progress), true);
}

// autotune --sparse ROWS,WIDTH,DENSITY (issue 17): the tensor's dense all-reduce against its sparse
// all-reduce (all-gather of indices and rows) from simulated times, and the crossover density of a
// table of WIDTH-wide rows at every size of the sweep.
void run_sparse(const AutotuneFlags& f, const Topology& topo, const CostModel& model, DataType type) {
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t comma = f.sparse.find(',', at);
    parts.push_back(f.sparse.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (parts.size() != 3) throw InvalidInput(fmt::format("--sparse: '{}' is not ROWS,WIDTH,DENSITY", f.sparse));
  const auto rows = static_cast<std::int64_t>(parse_size(parts[0], "--sparse ROWS"));
  const auto width = static_cast<std::int64_t>(parse_size(parts[1], "--sparse WIDTH"));
  double density = 0;
  try {
    std::size_t used = 0;
    density = std::stod(parts[2], &used);
    if (used != parts[2].size()) throw std::invalid_argument(parts[2]);
  } catch (const std::exception&) {
    throw InvalidInput(fmt::format("--sparse: DENSITY '{}' is not a number", parts[2]));
  }
  const SparseDecision d = decide_sparse(topo, model, rows, width, density, type);
  const std::size_t es = element_size(type);
  std::vector<SparseDecision> per_size;
  for (const std::uint64_t bytes : sweep_sizes(f.sweep)) {
    const auto table_rows = static_cast<std::int64_t>(bytes / (es * static_cast<std::uint64_t>(width)));
    if (table_rows >= 1) per_size.push_back(decide_sparse(topo, model, table_rows, width, 1.0 / table_rows, type));
  }
  auto to_json = [&](const SparseDecision& x) { return sparse_decision_to_json(x, type); };
  if (f.json) {
    nlohmann::json doc{{"topology", topo.name()}, {"type", to_string(type)}, {"tensor", to_json(d)}};
    doc["crossover"] = nlohmann::json::array();
    for (const auto& x : per_size) doc["crossover"].push_back(to_json(x));
    print_json(doc);
    return;
  }
  const int n = static_cast<int>(topo.gpus().size());
  fmt::print("# artune autotune --sparse: topology {} ({} ranks), {} rows x {} {}, density {:g} ({} rows per rank)\n",
             topo.name(), n, rows, width, to_string(type), density, d.nnz);
  fmt::print("# dense all-reduce  {:<8} {:>12.2f} us\n", d.dense_spec, d.dense_us);
  fmt::print("# sparse all-gather {:<8} {:>12.2f} us\n", d.sparse_spec, d.sparse_us);
  fmt::print("# pick: {} (sparse wins at densities up to {:.4g}; 1/n = {:.4g})\n", d.sparse ? "sparse" : "dense",
             d.crossover, n > 0 ? 1.0 / n : 0.0);
  fmt::print("#\n# crossover density per table size (rows of {} {}):\n", width, to_string(type));
  fmt::print("# {:>12}  {:>10}  {:>8}  {:>12}  {:>8}  {:>9}\n", "size", "rows", "dense", "dense(us)", "sparse",
             "crossover");
  for (const auto& x : per_size) {
    fmt::print("  {:>12}  {:>10}  {:>8}  {:>12.2f}  {:>8}  {:>9.4g}\n", static_cast<std::uint64_t>(x.rows * width) * es,
               x.rows, x.dense_spec, x.dense_us, x.sparse_spec, x.crossover);
  }
}

void tune(AutotuneFlags& f, Resolved resolved, bool root) {
  Progress progress(f.quiet || !root);
  const bool discovered = resolved.discovered;
  std::vector<std::string> notes = resolved.notes;
  const Topology& topo = resolved.topo;

  if (f.measure_given && f.measure.empty()) throw InvalidInput("--measure: empty backend name");
  if (f.output_given && f.output.empty()) throw InvalidInput("--out: empty file name");
  if (f.report_given && f.report.empty()) throw InvalidInput("--report: empty folder name");
  check_measure_flags(f.iters, f.warmup, f.timeout);
  if (f.top < 1) throw InvalidInput(fmt::format("--top: {} must be ≥ 1", f.top));
  if (f.jobs < 0 || f.jobs > kMaxJobs) {
    throw InvalidInput(fmt::format("-j/--jobs: {} is not in 0..{} (0 = every core)", f.jobs, kMaxJobs));
  }
  {
    const int g = static_cast<int>(topo.gpus_of_machine(0).size());
    if (f.max_subchunks != -1 && (f.max_subchunks < 1 || f.max_subchunks > g)) {
      throw InvalidInput(
          fmt::format("--max-subchunks: {} is not -1 (GPUs per machine) or in 1..{}", f.max_subchunks, g));
    }
  }
  if (!f.output.empty()) check_output_file(f.output, "--out");
  if (!f.report.empty()) check_output_folder(f.report, "--report");

  SearchOptions so;
  so.sizes = sweep_sizes(f.sweep);
  // Several types and ops tune into one table file (one table per pair, types outer): mixed precision needs
  // float and half/bfloat16 plans side by side.
  const std::vector<DataType> types = parse_list<DataType>(
      f.type, "-d/--datatype", [](const std::string& t) { return parse_data_type(t, "-d/--datatype"); });
  const std::vector<ReduceOp> ops =
      parse_list<ReduceOp>(f.op, "--op", [](const std::string& o) { return parse_reduce_op(o, "--op"); });
  so.type = types.front();
  so.op = ops.front();
  std::optional<BackendKind> measure;
  if (!f.measure.empty()) measure = parse_backend_kind(f.measure, "--measure");
  if (measure) check_backend_devices(*measure, topo, "--measure");
  BackendProfile profile = BackendProfile::kNccl;
  if (measure) profile = profile_for(*measure);
  if (!f.profile.empty()) profile = parse_backend_profile(f.profile, "--profile");
  so.model = CostModel::defaults(profile);
  if (!f.calibration.empty()) {
    so.model.apply_overlay(read_json_file(f.calibration, "--calibration"), f.calibration);
    so.calibration = f.calibration;
    notes.push_back("cost model calibrated by " + f.calibration);
  }
  if (!f.launch.empty()) {
    so.model.launch = parse_launch_mode(f.launch, topo.gpus_per_machine(), "--launch");
    notes.push_back("NCCL calls issued as --launch " + to_string(so.model.launch));
  }
  if (f.nccl_version) {
    so.model.nccl_release = parse_nccl_release(*f.nccl_version, "--nccl-version");
    notes.push_back(describe_nccl_choice(so.model.nccl_release) + " (--nccl-version)");
  }
  const Collective kind = parse_collective_kind(f.collective);
  if (kind != Collective::kAllReduce && !f.fusion.empty()) {
    throw InvalidInput("--collective: --fusion packs all-reduce gradients; drop one of them");
  }
  if (f.target == "nccl") {
    // NCCL's algorithm x protocol (x channels) only: the tables the NCCL tuner plugin reads (docs/nccl-plugin.md),
    // one per collective.
    if (measure) check_nccl_measurement(*measure);  // real NCCL only, each candidate forced (exit 2/3 otherwise)
    so.generate = [kind](const Topology& t, const CandidateOptions& o) { return generate_nccl_candidates(t, o, kind); };
  } else if (f.target != "artune") {
    throw InvalidInput(fmt::format("--target: '{}' is not artune or nccl", f.target));
  }
  // A table per collective (issue 17): the all-gather or reduce-scatter families instead of all-reduce's.
  if (kind != Collective::kAllReduce) so.candidates.collective = kind;
  if (!f.sparse.empty()) {
    run_sparse(f, topo, so.model, types.front());
    return;
  }
  so.candidates.max_cycles = f.max_cycles;
  so.candidates.max_subchunks = f.max_subchunks;
  so.candidates.segments = parse_int_list(f.segments, "--segments");
  for (int s : so.candidates.segments) {
    if (s < 1 || s > 64) throw InvalidInput(fmt::format("--segments: {} is not in 1..64", s));
  }
  if (f.max_cycles < 1) throw InvalidInput("--max-cycles: must be ≥ 1");
  so.progress = progress.fn();
  so.jobs = f.jobs;
  so.exhaustive = f.exhaustive;
  if (f.min_gain != "auto") {
    char* end = nullptr;
    const double pct = std::strtod(f.min_gain.c_str(), &end);
    if (f.min_gain.empty() || end == nullptr || *end != '\0' || !(pct >= 0 && pct <= 1000)) {
      throw InvalidInput(fmt::format("--min-gain: '{}' is not auto or a percentage from 0 to 1000", f.min_gain));
    }
    so.min_gain = pct / 100.0;
  }
  so.prune = !measure && f.report.empty();  // measuring needs the top K, a report every family's figures
  std::vector<GradientList> fusion_lists;
  for (const auto& path : f.fusion) fusion_lists.push_back(load_gradient_list(path));  // fail before the search

  // How `run --table` finds the topology again without -t: a name or generator as given, a file by its absolute
  // path; a discovered topology has no such name.
  std::string topology_source;
  if (!discovered) {
    std::error_code ec;
    topology_source =
        std::filesystem::is_regular_file(f.topo, ec) ? std::filesystem::absolute(f.topo).string() : f.topo;
  }

  AutotuneRequest request;
  request.search = so;
  request.types = types;
  request.ops = ops;
  if (measure) {
    MeasureOptions mo;
    mo.backend = *measure;
    mo.top_k = f.target == "nccl" ? kNcclMeasureAll : f.top;
    mo.iterations = f.iters;
    mo.warmup = f.warmup;
    mo.timeout_s = f.timeout;
    if (!f.measure_max.empty()) mo.max_bytes = parse_size(f.measure_max, "--measure-max");
    mo.progress = progress.fn();
    request.measure = mo;
  }
  request.fusion = std::move(fusion_lists);
  request.topology_source = topology_source;
  request.note = [&progress](const std::string& line) { progress.note(line); };
  request.stage_done = [&progress] { progress.finish(); };
  AutotuneResult tuned = autotune(topo, request);
  for (const auto& line : tuned.notes) notes.push_back(line);
  const std::vector<SearchResult>& results = tuned.results;
  const std::vector<SearchOptions>& searched = tuned.searched;
  const std::vector<FusionReport>& fusion = tuned.fusion;
  const SearchResult& result = results.front();  // the report's

  if (!root) return;  // cluster mode: rank 0 writes and prints
  const std::vector<DecisionTable> tables = tuned.tables();
  if (!f.output.empty()) write_decision_tables(f.output, tables);
  if (!f.report.empty()) {
    ReportInput in;
    in.command = resolved.launcher + command_line(f, discovered);
    in.title = topo.name();
    in.notes = notes;
    for (const auto& n : f.report_notes) in.notes.push_back(n);
    if (measure) {
      in.notes.push_back(
          fmt::format("top {} candidates per size measured on the {} backend ({} iterations after {} "
                      "warm-up), verified with #wrong = 0",
                      f.top, f.measure, f.iters, f.warmup));
    }
    if (results.size() > 1) {
      std::vector<std::string> others;
      for (std::size_t i = 1; i < results.size(); ++i) {
        others.push_back(fmt::format("{} {}", to_string(searched[i].type), to_string(searched[i].op)));
      }
      in.notes.push_back(fmt::format("this report covers {} {}; the table file also holds {} (printed by the command)",
                                     to_string(so.type), to_string(so.op), fmt::join(others, ", ")));
    }
    in.fusion = fusion;
    write_report(f.report, topo, result, in);
  }

  if (f.json) {
    nlohmann::json doc = tables_to_json(tables);
    if (!fusion.empty()) {
      doc["fusion"] = nlohmann::json::array();
      for (const auto& fr : fusion) {
        nlohmann::json one = fusion_to_json(fr.result, fr.list);
        one["sparse"] = nlohmann::json::array();
        for (std::size_t i = 0; i < fr.sparse.size(); ++i) {
          one["sparse"].push_back(sparse_decision_to_json(fr.sparse[i], fr.list.type));
          one["sparse"].back()["name"] = fr.list.names[fr.list.sparse[i].tensor];
        }
        doc["fusion"].push_back(std::move(one));
      }
    }
    print_json(doc);
  } else {
    std::size_t simulations = 0, pruned = 0;
    for (const auto& r : results) simulations += r.simulations, pruned += r.pruned;
    const std::size_t pairs = results.size() * result.set.candidates.size() * result.sizes.size();
    fmt::print("# {} candidates ({} rejected), {} sizes, cost model profile {}{}{}\n", result.set.candidates.size(),
               result.set.rejected.size(), result.sizes.size(), to_string(so.model.profile),
               so.calibration.empty() ? "" : ", calibrated by " + so.calibration,
               so.model.nccl_release == kModelledNcclRelease
                   ? ""
                   : ", " + describe_nccl_choice(so.model.nccl_release) + " (--nccl-version)");
    fmt::print("# {} simulations for {} (candidate, size) pairs{}\n", simulations, pairs,
               so.exhaustive ? " (--exhaustive)"
                             : fmt::format("; {} pruned by their lower bound, the others interpolated where verified "
                                           "affine",
                                           pruned));
    TableColumns columns;
    columns.tf = f.tf;
    for (const auto& r : results) fmt::print("{}", format_decision_table(r.table, columns));
    if (f.tf) fmt::print("# TF choose_the_best: {}\n", tf_choose_the_best_reason(topo, so.sizes.back()));
    for (const auto& fr : fusion) {
      const auto& best = fr.result.options.at(fr.result.best);
      const auto& flat = fr.result.options.at(fr.result.best_no_overlap);
      fmt::print(
          "# fusion {}: {} tensors, {} bytes; best pack size {} ({} packs): step {:.0f} us = backward {:.0f} us "
          "+ {:.0f} us exposed all-reduce; without overlap: {} ({} packs), {:.0f} us of all-reduce\n",
          fr.list.model, fr.result.tensors, fr.result.total_bytes, pack_size_text(best.bytes_per_pack),
          best.pack_bytes.size(), best.step_us, best.backward_us, best.exposed_us, pack_size_text(flat.bytes_per_pack),
          flat.pack_bytes.size(), flat.total_us);
      for (std::size_t i = 0; i < fr.sparse.size(); ++i) {
        fmt::print("{}\n", sparse_choice_line(fr.list.names[fr.list.sparse[i].tensor], fr.sparse[i]));
      }
      if (!fr.result.separate.empty()) {
        fmt::print(
            "# fusion {}: {} sparse tensors outside the packs ({} of {} bytes packed); at pack size {}: {:.0f} us of "
            "sparse all-reduce + {:.0f} us of packed all-reduce + {:.0f} us of packing = {:.0f} us without overlap\n",
            fr.list.model, fr.result.separate.size(), fr.result.packed_bytes, fr.result.total_bytes,
            pack_size_text(best.bytes_per_pack), best.separate_us, best.allreduce_us, best.packing_us, best.total_us);
      }
    }
    if (!f.output.empty()) fmt::print("# decision table written to {}\n", f.output);
    if (!f.report.empty()) fmt::print("# report written to {}/REPORT.md\n", f.report);
  }
  if (tuned.wrong != 0) {
    throw Error(ErrorCode::kWrongResult, fmt::format("{} wrong elements while measuring: {}", tuned.wrong,
                                                     fmt::join(tuned.wrong_plans, "; ")));
  }
}

}  // namespace

void add_autotune_command(CLI::App& app) {
  auto flags = std::make_shared<AutotuneFlags>();
  CLI::App* at = app.add_subcommand(
      "autotune",
      "Search every candidate plan generated from the topology, simulate it at every size, optionally measure the "
      "best for real, and write a decision table (size ranges -> plan)");
  at->add_option("-t,--topology", flags->topo,
                 "topology: built-in name, generator (uniform:8, 4xdgx1-v100) or JSON file; default: discover this "
                 "machine (without GPUs: dgx1-v100)");
  add_sweep_flags(at, flags->sweep);
  at->add_option("-d,--datatype", flags->type,
                 "element type(s), comma-separated: one table per type and op in one file (float, double, half, "
                 "bfloat16, int32, int64)")
      ->capture_default_str();
  at->add_option("--op", flags->op, "reduce op(s), comma-separated (sum, prod, min, max, avg)")->capture_default_str();
  at->add_option("--target", flags->target,
                 "candidates: artune (every plan family) or nccl (NCCL's algorithm x protocol x channels only, for "
                 "--collective's collective: the table for the NCCL tuner plugin, libnccl-tuner-artune.so, named by "
                 "ARTUNE_TUNER_TABLE)")
      ->capture_default_str();
  at->add_option("--sparse", flags->sparse,
                 "ROWS,WIDTH,DENSITY: an embedding gradient touching DENSITY of ROWS rows of WIDTH values per rank; "
                 "pick dense all-reduce or sparse all-gather from simulated times and print the crossover density "
                 "per size of the -b/-e sweep");
  at->add_option(
        "--collective", flags->collective,
        "the table's collective: allreduce, allgather (ring, bruck, rd, nccl, 2d, trees; on clusters the hybrids "
        "nccl/ring, nccl/bruck, nccl/rd) or reducescatter (ring, halving, nccl, 2d, trees; nccl/ring, nccl/halving); "
        "run "
        "--table then runs that collective")
      ->capture_default_str();
  at->add_option("--measure", flags->measure,
                 "run the top candidates per size for real on this backend (cpu, mpi, cuda, nccl; with --target nccl: "
                 "every candidate, on nccl)");
  at->add_option("-j,--jobs", flags->jobs,
                 "threads simulating candidates (0 = every core); the table is the same for every value")
      ->capture_default_str();
  at->add_flag("--exhaustive", flags->exhaustive,
               "simulate every candidate at every size (default: interpolate where a candidate's time is verified "
               "affine in size; picks, runners-up and NCCL are simulated either way)");
  at->add_option("--top", flags->top, "candidates per size to measure")->capture_default_str();
  at->add_option("--iters", flags->iters, "timed iterations per measurement")->capture_default_str();
  at->add_option("--warmup", flags->warmup, "warm-up iterations per measurement")->capture_default_str();
  at->add_option("--measure-max", flags->measure_max, "measure only sizes up to this many bytes (K/M/G)");
  at->add_option("--timeout", flags->timeout, "seconds before a stuck backend run fails")->capture_default_str();
  at->add_option("--calibration", flags->calibration, "cost-model overlay JSON written by artune calibrate");
  at->add_option("--launch", flags->launch, kLaunchHelp);
  at->add_option("--nccl-version", flags->nccl_version, kNcclVersionHelp);
  at->add_option("--profile", flags->profile,
                 "cost-model profile (nccl, cuda, cpu, mpi); default: the --measure backend's, else nccl");
  at->add_option("--fusion", flags->fusion,
                 "gradient tensor list JSON (e.g. configs/fusion/resnet50.json): choose the group_by_size pack size "
                 "(repeatable)");
  add_out_option(at, flags->output, fmt::format("write the decision table here ({})", kOutputPathHelp));
  at->add_option("--report", flags->report, "write REPORT.md, results.json and plots into this folder");
  at->add_option("--note", flags->report_notes, "a line for the report's notes (repeatable)");
  at->add_option("--max-cycles", flags->max_cycles, "NVLink Hamiltonian ring orders kept (best first)")
      ->capture_default_str();
  at->add_option("--segments", flags->segments, "pipeline depths to try (comma-separated)")->capture_default_str();
  at->add_option("--max-subchunks", flags->max_subchunks,
                 "ring subchunks tried up to this (-1: GPUs per machine; powers of two beyond 4)")
      ->capture_default_str();
  at->add_flag("--json", flags->json, "print the decision table as JSON");
  at->add_flag("-q,--quiet", flags->quiet, "no progress output (warnings still print)");
  at->add_option("--min-gain", flags->min_gain,
                 fmt::format("percent a plan must beat NCCL's own choice by (predicted) to replace it; auto: the "
                             "model's validated error for each size's regime ({:g}% up to 64K, {:g}% below 64M, {:g}% "
                             "from 64M on one machine, {:g}% across machines); 0: the fastest prediction wins",
                             kValidatedModelError.small_pct, kValidatedModelError.medium_pct,
                             kValidatedModelError.large_single_pct, kValidatedModelError.large_multi_pct))
      ->capture_default_str();
  at->add_flag("--tf", flags->tf, "also print TF's choose_the_best pick and its time per range");
  at->callback([flags, at] {
    flags->measure_given = at->count("--measure") > 0;
    warn_deprecated_output(at);
    flags->output_given = output_given(at);
    flags->report_given = at->count("--report") > 0;
    run_autotune(*flags);
  });
}

}  // namespace artune::cli
