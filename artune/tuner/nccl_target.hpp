#pragma once
// `artune autotune --target nccl`: the search restricted to NCCL's own
// choices, so that the decision table can steer NCCL through the tuner plugin
// (nccl_tuner/, libnccl-tuner-artune.so) in programs that never call artune.

#include "artune/executor/backend.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/candidates.hpp"

namespace artune {

/// NCCL's algorithm × protocol pairs that NCCL enables for an all-reduce over every GPU of `topo` (its cost
/// table, simulator/nccl_model.hpp), as candidates `nccl.ALGO.PROTO`, then plain `nccl` (NCCL's own pick, the
/// baseline; last, so that a tie goes to the explicit pair the plugin can steer to). Each is built and verified
/// like generate_candidates' (at options.verify_count elements). Unsupported (one line) on a topology without
/// two GPUs or whose machines hold different GPU counts (NCCL's model needs the same count on each).
CandidateSet generate_nccl_candidates(const Topology& topo, const CandidateOptions& options);

/// `--target nccl --measure BACKEND`, checked before any search: only real NCCL measures NCCL's own choices
/// (InvalidInput naming --measure for another backend), and it needs the nccl backend in this build and a CUDA
/// device here (Unsupported, one line, otherwise). The nccl backend forces each candidate's algorithm and
/// protocol on its communicator (executor/nccl/nccl_forced_choice.hpp), so every candidate is measured as such.
void check_nccl_measurement(BackendKind backend);

/// Candidates per size measured with --target nccl --measure nccl: all of them (NCCL has at most 5 x 3 + 1).
inline constexpr int kNcclMeasureAll = 64;

}  // namespace artune
