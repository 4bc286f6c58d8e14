#pragma once
// What a GPU backend will do with a plan, without a GPU: the cuda lowering
// (placement, streams, steps, events, CUDA graph nodes, per-round fan-in of
// every group phase) or the nccl lowering (per rank: NCCL groups, sends and
// receives, collectives on communicators, staging). `artune plan --lower`
// prints it; tests pin it.

#include <nlohmann/json.hpp>

#include <string>

#include "artune/algorithms/plan.hpp"

namespace artune {

class Topology;

/// The backend whose lowering is shown.
enum class LowerTarget { kCuda, kNccl };
/// Parses "cuda" or "nccl"; InvalidInput naming `what` otherwise.
LowerTarget parse_lower_target(std::string_view text, std::string_view what = "parameter lower_target");

/// How to lower.
struct LowerOptions {
  LowerTarget target = LowerTarget::kCuda;
  int gpus = 0;     ///< cuda: GPUs the plan devices are mapped onto (0 = one per GPU plan device)
  bool p2p = true;  ///< cuda: every GPU pair has peer access (false: every cross-GPU reduce is staged)
};

/// The lowered program as JSON (cuda: {"backend","gpus","placement","streams","events","steps","graph",
/// "fan_in","max_fan_in"}; nccl: {"backend","ranks":[{"rank","devices","staging","comms","steps"}],
/// "communicators"}).
nlohmann::json lowering_json(const Plan& plan, const Topology& topo, const LowerOptions& options);
/// The same as text: a summary, then every section (the CLI's default output).
std::string lowering_text(const Plan& plan, const Topology& topo, const LowerOptions& options);

}  // namespace artune
