#pragma once
// The static verifier: proves a plan correct before anything runs.

#include <string>
#include <vector>

#include "artune/algorithms/plan.hpp"

namespace artune {

/// Outcome of verification.
struct VerifyResult {
  bool ok = false;
  std::vector<std::string> problems;  ///< one line each, e.g. "op 17: races with op 12 on device 3 buffer 0 [64, 128)"
};

/// Symbolic execution of the plan's collective (all-reduce: every participant's buffer 0 ends holding
/// each input exactly once, avg scaled once; all-gather: every rank's block k holds rank k's input
/// alone, in rank order; reduce-scatter: rank k's block k holds each input exactly once, avg scaled
/// once), bounds, local dependencies and the race check.
VerifyResult verify(const Plan& plan);
/// verify(); throws InvalidInput with the first problem when the plan is wrong.
void verify_or_throw(const Plan& plan);

}  // namespace artune
