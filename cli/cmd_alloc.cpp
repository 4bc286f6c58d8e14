// `artune alloc`: which k of a machine's free GPUs a job should ask for (tuner/allocation.hpp): every
// k-subset ranked by the predicted time of its best plan and of NCCL's, with its penalty against the best
// subset and against the whole machine.

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/core/error.hpp"
#include "artune/core/sizes.hpp"
#include "artune/core/types.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/subset.hpp"
#include "artune/tuner/allocation.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"

namespace artune::cli {

namespace {

struct AllocFlags {
  std::string topo = std::string(kDefaultTopology);
  std::string free;
  int k = 0;
  std::string size = "256M";
  std::string type = "float";
  std::string collective = "allreduce";
  std::string plans = "bound";
  std::string backend;
  std::string calibration;
  bool has_backend = false;
  bool has_calibration = false;
  int top = 0;
  int jobs = 0;
  bool json = false;
};

nlohmann::json score_json(const Topology& topo, const SubsetScore& s, double best_us, double machine_busbw) {
  nlohmann::json ids = nlohmann::json::array();
  for (int g : s.gpus) ids.push_back(topo.nodes()[static_cast<std::size_t>(g)].id);
  nlohmann::json cuts = nlohmann::json::array();
  for (const BoundCut& c : s.bound.cuts)
    cuts.push_back({{"what", c.what}, {"gbps", c.gbps}, {"rate_gbps", c.rate_gbps}});
  if (!cuts.empty()) cuts.front()["text"] = s.bound_cut;
  return {{"gpus", s.list},
          {"ids", ids},
          {"best_plan", s.best_plan},
          {"best_us", s.best_us},
          {"best_busbw_gbps", s.best_busbw_gbps},
          {"bound_busbw_gbps", s.bound.busbw_gbps},
          {"bound_fraction",
           s.best_busbw_gbps > 0 && s.bound.busbw_gbps > 0 ? s.best_busbw_gbps / s.bound.busbw_gbps : 0.0},
          {"bound_cuts", cuts},
          {"nccl_us", s.nccl_us},
          {"nccl_busbw_gbps", s.nccl_busbw_gbps},
          {"trees_plan", s.trees_plan},
          {"trees_us", s.trees_us},
          {"others_plan", s.others_plan},
          {"others_us", s.others_us},
          {"penalty_vs_best", best_us > 0 ? s.best_us / best_us - 1 : 0.0},
          {"busbw_vs_machine", machine_busbw > 0 ? s.best_busbw_gbps / machine_busbw : 0.0}};
}

void run_alloc(const AllocFlags& f) {
  const auto started = std::chrono::steady_clock::now();
  const Topology topo = load_topology(f.topo);
  const std::vector<int> free_gpus = f.free.empty() ? topo.gpus() : parse_gpu_selection(topo, f.free, "--free");
  if (f.k < 1 || f.k > static_cast<int>(free_gpus.size())) {
    throw InvalidInput(fmt::format("-k/--gpus: {} GPUs asked for, {} free", f.k, free_gpus.size()));
  }
  AllocationOptions o;
  o.k = f.k;
  o.bytes = parse_size(f.size, "--size");
  o.type = parse_data_type(f.type, "-d/--datatype");
  if (o.bytes == 0 || o.bytes % element_size(o.type) != 0) {
    throw InvalidInput(
        fmt::format("--size: {} bytes is not a whole number of {} elements", o.bytes, to_string(o.type)));
  }
  o.collective = parse_collective_kind(f.collective, "--collective");
  o.plans = parse_allocation_plans(f.plans, "--plans");
  o.model = cost_model_from_flags(f.backend, f.has_backend, f.calibration, f.has_calibration);
  if (f.jobs < 0) throw InvalidInput(fmt::format("-j/--jobs: {} must be >= 0", f.jobs));
  o.jobs = f.jobs;
  if (f.top < 0) throw InvalidInput(fmt::format("--top: {} must be >= 0", f.top));
  const Allocation a = rank_subsets(topo, free_gpus, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double best_us = a.ranked.front().best_us;
  const std::size_t shown =
      f.top > 0 ? std::min<std::size_t>(static_cast<std::size_t>(f.top), a.ranked.size()) : a.ranked.size();
  if (f.json) {
    nlohmann::json doc;
    doc["topology"] = topo.name();
    doc["free"] = gpu_list_text(topo, free_gpus);
    doc["k"] = f.k;
    doc["size"] = o.bytes;
    doc["type"] = std::string(to_string(o.type));
    doc["collective"] = std::string(collective_flag_name(o.collective));
    doc["plans"] = f.plans;
    doc["backend"] = std::string(to_string(o.model.profile));
    doc["subsets"] = a.ranked.size();
    doc["machine"] = score_json(topo, a.machine, a.machine.best_us, a.machine.best_busbw_gbps);
    nlohmann::json ranked = nlohmann::json::array();
    for (std::size_t i = 0; i < shown; ++i)
      ranked.push_back(score_json(topo, a.ranked[i], best_us, a.machine.best_busbw_gbps));
    doc["ranked"] = std::move(ranked);
    print_json(doc);
    return;
  }
  fmt::print("# artune alloc: {}, {} of {} free GPUs ({}), {} of {} ({}), plans: {}, profile {}\n", topo.name(), f.k,
             free_gpus.size(), gpu_list_text(topo, free_gpus), collective_flag_name(o.collective), format_size(o.bytes),
             to_string(o.type), f.plans, to_string(o.model.profile));
  fmt::print(
      "# {} subsets in {:.2f} s; whole machine ({} GPUs): best {} {:.2f} GB/s busbw, nccl {:.2f}, bound {:.2f}\n",
      a.ranked.size(), seconds, topo.gpus().size(), a.machine.best_plan, a.machine.best_busbw_gbps,
      a.machine.nccl_busbw_gbps, a.machine.bound.busbw_gbps);
  fmt::print("# {:>4}  {:<18}  {:<16}  {:>10}  {:>11}  {:>6}  {:>10}  {:>10}  {:>8}  {:>10}\n", "rank", "gpus",
             "best plan", "time(us)", "busbw(GB/s)", "bound%", "nccl(us)", "nccl busbw", "vs best", "vs machine");
  for (std::size_t i = 0; i < shown; ++i) {
    const SubsetScore& s = a.ranked[i];
    const double pct = s.bound.busbw_gbps > 0 ? 100.0 * s.best_busbw_gbps / s.bound.busbw_gbps : 0.0;
    const double machine = a.machine.best_busbw_gbps > 0 ? 100.0 * s.best_busbw_gbps / a.machine.best_busbw_gbps : 0.0;
    fmt::print("  {:>4}  {:<18}  {:<16}  {:>10.2f}  {:>11.2f}  {:>6.1f}  {:>10.2f}  {:>10.2f}  {:>+7.1f}%  {:>9.1f}%\n",
               i + 1, s.list, s.best_plan, s.best_us, s.best_busbw_gbps, pct, s.nccl_us, s.nccl_busbw_gbps,
               best_us > 0 ? 100.0 * (s.best_us / best_us - 1) : 0.0, machine);
  }
  const SubsetScore& top = a.ranked.front();
  if (!top.bound_cut.empty()) fmt::print("# rank 1 ({}): its bound is set by {}\n", top.list, top.bound_cut);
}

}  // namespace

void add_alloc_command(CLI::App& app) {
  auto flags = std::make_shared<AllocFlags>();
  CLI::App* cmd = app.add_subcommand("alloc", "Rank every k-subset of a machine's free GPUs for a job");
  cmd->footer(
      "Each subset keeps its GPUs with everything that connects them (as -t 'TOPO[LIST]' does) and is scored by\n"
      "the predicted time of its best plan at --size and of NCCL's (simulated), with the penalty against the\n"
      "best subset (time) and against the whole machine (busbw). --plans bound (the default) takes the min-cut\n"
      "bound as the best plan's time (a few max flows per subset: every k of 8 GPUs in well under a second);\n"
      "trees simulates the tree-packing family at its pipeline depths; all runs the whole tuner per subset.\n"
      "Examples:\n"
      "  artune alloc -t dgx1-v100 --free 0,1,2,4,5,6 -k 4\n"
      "  artune alloc -t dgx1-v100 -k 4 --plans trees --json\n");
  cmd->add_option("-t,--topology", flags->topo,
                  "topology: built-in name, generator (uniform:8, 4xdgx1-v100) or JSON file")
      ->capture_default_str();
  cmd->add_option("--free", flags->free, "free GPUs: indices, ranges a-b or ids (m1/gpu3); default every GPU");
  cmd->add_option("-k,--gpus", flags->k, "GPUs the job asks for")->required();
  cmd->add_option("--size", flags->size, "message size the plans are predicted at (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-d,--datatype", flags->type, "element type")->capture_default_str();
  cmd->add_option("--collective", flags->collective, "allreduce, allgather or reducescatter")->capture_default_str();
  cmd->add_option("--plans", flags->plans, "bound, trees or all (see below)")->capture_default_str();
  cmd->add_option("--backend", flags->backend, "cost profile: cuda, nccl, cpu, mpi (default nccl)")
      ->each([flags](const std::string&) { flags->has_backend = true; });
  cmd->add_option("--calibration", flags->calibration, "JSON cost-model overlay (from artune calibrate)")
      ->each([flags](const std::string&) { flags->has_calibration = true; });
  cmd->add_option("--top", flags->top, "print only the best N subsets (0 = all)")->capture_default_str();
  cmd->add_option("-j,--jobs", flags->jobs, "threads scoring subsets (0 = every core)")->capture_default_str();
  cmd->add_flag("--json", flags->json, "print the ranking as JSON (for schedulers)");
  cmd->callback([flags] { run_alloc(*flags); });
}

}  // namespace artune::cli
