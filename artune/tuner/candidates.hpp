#pragma once
// Tuning candidates: plans generated from the topology (rings along NVLink
// Hamiltonian cycles, link-disjoint multi-rings, hierarchical copy over NVLink
// cliques, shuffle gather devices, hybrids and 2-D plans for clusters,
// pipeline depths), each proven by the static verifier before it is scored.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/core/nccl_release.hpp"
#include "artune/core/types.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

/// One tunable plan: a spec plus the structured parameters the grammar cannot carry.
struct Candidate {
  std::string family;               ///< ring, mring, rechd, shuffle, hiercopy, nccl, tree, hybrid, 2d
  std::string spec;                 ///< spec text for build_plan (a single range)
  std::vector<int> gpu_perm;        ///< order of local GPUs inside each machine; empty = identity
  std::vector<std::string> gather;  ///< gather devices by topology node id (shuffle); empty = builder default
  int segments = 1;                 ///< pipeline depth (1 = none)
  Collective collective = Collective::kAllReduce;  ///< what it computes (autotune --collective; issue 17)

  /// Unique readable text, e.g. "xring#2 perm=0,3,2,1,5,6,7,4 seg=4".
  std::string label() const;
  /// Build options for `count` elements (gather ids resolved on `topo`; InvalidInput if one is unknown).
  BuildOptions build_options(const Topology& topo, std::int64_t count, ReduceOp op) const;
  friend bool operator==(const Candidate&, const Candidate&) = default;
};

/// Reads a label as Candidate::label() writes it ("xring#2 perm=0,3,2,1 seg=4": the spec, then perm=, gather= and
/// seg= in any order), so that a plan seen in a table or a dump can be pinned; InvalidInput naming `what`.
/// The family is left empty (building needs the spec and parameters only).
Candidate parse_candidate_label(std::string_view label, std::string_view what);
/// A candidate as JSON: {"family","spec","gpu_perm","gather","segments","label"} (+ "collective" unless all-reduce).
nlohmann::json candidate_to_json(const Candidate& candidate);
/// Reads candidate_to_json's output; InvalidInput naming `where` (e.g. "t.json: ranges[2].plan").
Candidate candidate_from_json(const nlohmann::json& doc, std::string_view where);
/// Builds the candidate's plan for `count` elements (with the pipeline transform applied), proven by the static
/// verifier unless `verify` is false (for callers that only simulate it and verify the plans they keep).
Plan build_candidate(const Topology& topo, const Candidate& candidate, std::int64_t count, ReduceOp op,
                     bool verify = true);

/// Knobs of candidate generation.
struct CandidateOptions {
  int max_cycles = 12;  ///< ring orders kept per machine (all when fewer; else best-first sample)
  int max_subchunks =
      -1;  ///< ring subchunks up to this (-1 = GPUs per machine): all when ≤ 4, else powers of two and the cap
  std::vector<int> segments = {1, 2, 4};  ///< pipeline depths tried on point-to-point families
  bool include_nccl = true;               ///< library collectives (nccl, hybrids with nccl)
  std::int64_t verify_count = 1000;       ///< elements used to build and verify each candidate
  int jobs = 0;                           ///< threads building and verifying them (0 = every core; same set)
  /// Whose families (all-reduce; all-gather or reduce-scatter for autotune --collective, issue 17).
  Collective collective = Collective::kAllReduce;
  /// The NCCL release whose search and cost table say which of NCCL's algorithms and channel counts to offer (the
  /// cost model's: autotune --nccl-version).
  NcclRelease nccl_release = kModelledNcclRelease;
};

/// What generation produced.
struct CandidateSet {
  std::vector<Candidate> candidates;  ///< verified, unique labels, stable order
  std::vector<std::string> rejected;  ///< "label: reason" for each that failed to build or verify
  /// Ops of each candidate's plan at the verification count (a measure of its simulation cost; empty when the
  /// set was not made by generate_candidates).
  std::vector<std::size_t> plan_ops;
  int hamiltonian_cycles = 0;             ///< NVLink Hamiltonian cycles found on machine 0 (before sampling)
  int disjoint_rings = 0;                 ///< link-disjoint rings found on machine 0
  std::vector<std::vector<int>> cliques;  ///< NVLink cliques of machine 0 (local GPU indices)
};

/// Generates and verifies the candidates for `topo`: every family of options.collective (registry.hpp) through
/// its candidates hook, TF's hybrids for all-reduce on clusters.
CandidateSet generate_candidates(const Topology& topo, const CandidateOptions& options = {});

/// TF's choice for comparison: cross_tower_ops.choose_the_best on one machine (hierarchical copy with
/// one pack per GPU on DGX-1-like DMA links, else nccl; non-GPU devices: reduction to one device) and
/// MultiWorkerAllReduce's default spec on clusters (pscpu/pscpu up to 2e5 bytes, then xring, 2 shards).
Candidate tf_choose_the_best(const Topology& topo, std::uint64_t bytes);
/// The one-line reason for tf_choose_the_best's pick (for reports).
std::string tf_choose_the_best_reason(const Topology& topo, std::uint64_t bytes);

}  // namespace artune
