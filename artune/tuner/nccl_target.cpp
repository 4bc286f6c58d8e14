#include "artune/tuner/nccl_target.hpp"

#include <fmt/format.h>

#include "artune_config.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

#if ARTUNE_HAVE_NCCL_BACKEND
#include "artune/executor/cuda/cuda_backend.hpp"
#endif

namespace artune {

void check_nccl_measurement(BackendKind backend) {
  if (backend != BackendKind::kNccl) {
    throw InvalidInput(
        fmt::format("{} {}: {} nccl measures NCCL's own choices with real NCCL only "
                    "({} nccl, under mpirun with one GPU per rank)",
                    parameter("measure"), to_string(backend), parameter("target"), parameter("measure")));
  }
#if ARTUNE_HAVE_NCCL_BACKEND
  if (cuda_device_count() <= 0) {
    throw Unsupported(
        fmt::format("{} nccl: no CUDA device available here; {} nccl alone tunes with NCCL's model "
                    "(predicted), or run it on a GPU machine under mpirun",
                    parameter("measure"), parameter("target")));
  }
#else
  throw Unsupported(parameter("measure") +
                    " nccl: this build has no nccl backend (NCCL, CUDA and MPI were not all found at configure time)");
#endif
}

std::vector<int> nccl_channel_counts(const nccl::Graph& graph, nccl::Algo algo) {
  std::vector<int> out;
  for (int c = nccl::min_channels(algo); c < nccl::max_channels(graph, algo); c *= 2) out.push_back(c);
  return out;
}

CandidateSet generate_nccl_candidates(const Topology& topo, const CandidateOptions& options, Collective collective) {
  if (topo.gpus().size() < 2) {
    throw Unsupported(fmt::format("{} nccl: '{}' has {} GPU(s); NCCL's choices need at least 2", parameter("target"),
                                  topo.name(), topo.gpus().size()));
  }
  nccl::Graph graph;
  try {
    graph = nccl::search(topo, topo.gpus(), options.nccl_release);
  } catch (const Error& e) {
    throw Unsupported(
        fmt::format("{} nccl: NCCL's model does not apply to '{}': {}", parameter("target"), topo.name(), e.what()));
  }
  const nccl::CostTable table = nccl::cost_table(graph, collective);
  CandidateSet set;
  auto add = [&](Candidate c) {
    try {
      (void)build_candidate(topo, c, options.verify_count, ReduceOp::kSum);  // verifies the plan
      set.candidates.push_back(std::move(c));
    } catch (const Error& e) {
      set.rejected.push_back(fmt::format("{}: {}", c.label(), e.what()));
    }
  };
  // NCCL's order of rows (Tree, Ring, NVLS, NVLSTree, PAT); a pair NCCL disables here has bandwidth 0. Each
  // pair on the search's channels (NCCL's own count), then on fewer: the powers of two below it.
  for (const nccl::Algo a :
       {nccl::Algo::kTree, nccl::Algo::kRing, nccl::Algo::kNvls, nccl::Algo::kNvlsTree, nccl::Algo::kPat}) {
    for (const nccl::Proto p : {nccl::Proto::kLL, nccl::Proto::kLL128, nccl::Proto::kSimple}) {
      if (!(table.bandwidth[static_cast<int>(a)][static_cast<int>(p)] > 0)) continue;
      const std::string pair = fmt::format("nccl.{}.{}", nccl::to_string(a), nccl::to_string(p));
      add(Candidate{"nccl", pair, {}, {}, 1, collective});
      for (const int channels : nccl_channel_counts(graph, a)) {
        add(Candidate{"nccl", fmt::format("{}.c{}", pair, channels), {}, {}, 1, collective});
      }
    }
  }
  add(Candidate{"nccl", "nccl", {}, {}, 1, collective});
  return set;
}

}  // namespace artune
