// Ranking GPU subsets for a job (allocation.hpp).

#include "artune/tuner/allocation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/algorithms/synthesis/tree_packing.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parallel.hpp"
#include "artune/core/parameters.hpp"
#include "artune/simulator/bound.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/subset.hpp"
#include "artune/tuner/search.hpp"

namespace artune {

namespace {

double simulated_us(const Topology& topo, std::string_view spec, const AllocationOptions& o, int segments) {
  BuildOptions build;
  build.count = static_cast<std::int64_t>(o.bytes / element_size(o.type));
  build.collective = o.collective;
  build.segments = segments;
  build.verify = false;  // the family's plans are verified when the tuner takes them; here only timed
  const Plan plan = build_plan(topo, parse_collective_spec(o.collective, spec), build);
  return simulate(plan, topo, o.model, element_size(o.type)).time_us;
}

double busbw(const AllocationOptions& o, int ranks, double us) {
  return us > 0 ? static_cast<double>(o.bytes) / (us * 1e3) * bus_factor(o.collective, ranks) : 0.0;
}

SubsetScore score(const Topology& topo, std::vector<int> gpus, const AllocationOptions& o) {
  SubsetScore s;
  std::sort(gpus.begin(), gpus.end(), [&](int a, int b) {
    return topo.nodes()[static_cast<std::size_t>(a)].global_index <
           topo.nodes()[static_cast<std::size_t>(b)].global_index;
  });
  s.gpus = gpus;
  s.list = gpu_list_text(topo, gpus);
  const Topology sub = gpus.size() == topo.gpus().size()
                           ? topo
                           : subset_topology(topo, gpus, fmt::format("{}[{}]", topo.name(), s.list));
  const int n = static_cast<int>(gpus.size());
  s.bound = effective_bound(sub, {}, o.collective, o.model);
  if (!s.bound.cuts.empty()) s.bound_cut = cut_text(sub, s.bound.cuts.front());
  const double bytes = static_cast<double>(o.bytes);
  if (n >= 2) {
    try {
      s.nccl_us = simulated_us(sub, "nccl", o, 1);
    } catch (const InvalidInput&) {
      s.nccl_us = 0;  // NCCL's model needs the same number of GPUs on every machine
    }
  }
  switch (o.plans) {
    case AllocationPlans::kBound:
      s.best_plan = "bound";
      s.best_us = s.bound.time_us(bytes);
      break;
    case AllocationPlans::kTrees: {
      // The trees family's own tuner candidates (its specs at their pipeline depths), on the subset.
      s.best_us = std::numeric_limits<double>::infinity();
      std::vector<CandidateSeed> seeds;
      if (n >= 2) {
        CandidateContext context{.topo = sub,
                                 .machines = sub.machine_count(),
                                 .gpus = static_cast<int>(sub.nodes_of_kind(NodeKind::kGpu, 0).size())};
        for (const Family* family : families(o.collective)) {
          if (family->name == std::string_view("trees") && family->candidates) family->candidates(context, seeds);
        }
      }
      if (seeds.empty()) {
        for (int m = 0; m < sub.machine_count(); ++m) {
          if (sub.gpus_of_machine(m).size() > static_cast<std::size_t>(synthesis::kMaxTreePackingParticipants)) {
            throw InvalidInput(fmt::format(
                "plans 'trees': the tree families pack at most {} GPUs of one machine ({} asked for); use bound or all",
                synthesis::kMaxTreePackingParticipants, o.k));
          }
        }
        // One GPU, or machines that differ, where the family is no tuner candidate: its plan as the spec builds it.
        CandidateSeed seed;
        seed.spec = "trees";
        seeds.push_back(seed);
      }
      for (const CandidateSeed& seed : seeds) {
        for (int seg : seed.depths.empty() ? std::vector<int>{1} : seed.depths) {
          const double us = simulated_us(sub, seed.spec, o, seg);
          if (us < s.best_us) {
            s.best_us = us;
            Candidate picked;
            picked.spec = seed.spec;
            picked.segments = seg;
            s.best_plan = picked.label();
          }
        }
      }
      break;
    }
    case AllocationPlans::kAll: {
      SearchOptions search_options;
      search_options.sizes = {o.bytes};
      search_options.type = o.type;
      search_options.model = o.model;
      search_options.candidates.collective = o.collective;
      search_options.jobs = 1;
      const SearchResult result = search(sub, search_options);
      const std::size_t pick = result.pick.front();
      s.best_plan = result.set.candidates[pick].label();
      s.best_us = result.sizes.front().predicted[pick]->time_us;
      for (const std::size_t c : result.sizes.front().ranking) {
        const Candidate& cand = result.set.candidates[c];
        const double us = result.sizes.front().predicted[c]->time_us;
        const bool trees = cand.family == "trees";
        std::string& plan = trees ? s.trees_plan : s.others_plan;
        double& time = trees ? s.trees_us : s.others_us;
        if (plan.empty()) {
          plan = cand.label();
          time = us;
        }
      }
      break;
    }
  }
  s.best_busbw_gbps = busbw(o, n, s.best_us);
  s.nccl_busbw_gbps = busbw(o, n, s.nccl_us);
  return s;
}

std::uint64_t choose(std::uint64_t n, std::uint64_t k) {
  std::uint64_t c = 1;
  for (std::uint64_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > kMaxAllocationSubsets * 1000) return c;
  }
  return c;
}

}  // namespace

AllocationPlans parse_allocation_plans(std::string_view text, std::string_view what) {
  if (text == "bound") return AllocationPlans::kBound;
  if (text == "trees") return AllocationPlans::kTrees;
  if (text == "all") return AllocationPlans::kAll;
  throw InvalidInput(fmt::format("{}: '{}' is not bound, trees or all", what, text));
}

Allocation rank_subsets(const Topology& topo, const std::vector<int>& free_gpus, const AllocationOptions& o) {
  const int n = static_cast<int>(free_gpus.size());
  if (o.k < 1 || o.k > n) {
    throw InvalidInput(fmt::format("{}: {} GPUs asked for, {} free", parameter("gpus"), o.k, n));
  }
  const std::uint64_t subsets = choose(static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(o.k));
  if (subsets > kMaxAllocationSubsets) {
    throw InvalidInput(fmt::format("{}: {} subsets of {} of {} free GPUs is more than the {} artune ranks",
                                   parameter("gpus"), subsets, o.k, n, kMaxAllocationSubsets));
  }
  if (o.bytes < element_size(o.type) || o.bytes % element_size(o.type) != 0) {
    throw InvalidInput(fmt::format("{}: {} bytes is not a whole number of {} elements", parameter("max_bytes"), o.bytes,
                                   to_string(o.type)));
  }
  // The k-subsets in lexicographic order of positions in free_gpus.
  std::vector<std::vector<int>> sets;
  std::vector<int> pick(static_cast<std::size_t>(o.k));
  for (int i = 0; i < o.k; ++i) pick[static_cast<std::size_t>(i)] = i;
  while (true) {
    std::vector<int> gpus;
    for (int i : pick) gpus.push_back(free_gpus[static_cast<std::size_t>(i)]);
    sets.push_back(std::move(gpus));
    int i = o.k - 1;
    while (i >= 0 && pick[static_cast<std::size_t>(i)] == n - o.k + i) --i;
    if (i < 0) break;
    ++pick[static_cast<std::size_t>(i)];
    for (int j = i + 1; j < o.k; ++j) pick[static_cast<std::size_t>(j)] = pick[static_cast<std::size_t>(j - 1)] + 1;
  }
  Allocation out;
  out.ranked.resize(sets.size());
  parallel_for(sets.size(), o.jobs, [&](std::size_t i) { out.ranked[i] = score(topo, sets[i], o); });
  out.machine = score(topo, topo.gpus(), o);
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const SubsetScore& a, const SubsetScore& b) {
    if (a.best_us != b.best_us) return a.best_us < b.best_us;
    return a.nccl_us < b.nccl_us;
  });
  return out;
}

}  // namespace artune
