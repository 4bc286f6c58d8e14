#pragma once
// Test-only fault injection for the executor (never set in production):
// ARTUNE_TEST_FAULT=KIND:rankR:iterN plants a fault on rank R at the start of
// its N-th run() (1-based, counted over the backend's lifetime):
//   stop  the rank raises SIGSTOP (stops responding; peers must time out),
//   kill  the rank raises SIGKILL (dies; the launcher must end the job),
//   flip  one input element of rank R is changed before the run (#wrong must see it),
//   boot  the N-th bootstrap step of rank R (counted per backend: the PCI bus id query, the NCCL
//         unique id, …) fails with a BackendFailure (every rank must agree and throw, none hang).
// The cpu backend honours flip; the mpi backend stop, kill and flip; the nccl backend boot.

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "artune/core/error.hpp"
#include "artune_config.hpp"

namespace artune {

/// A planted fault (kind empty = none).
struct TestFault {
  std::string kind;  ///< "stop", "kill", "flip", "boot" or empty
  int rank = -1;
  int iteration = -1;  ///< 1-based run() count
  /// True when this fault fires on `rank` at run number `run`.
  bool fires(const char* which, int on_rank, int run) const {
    return kind == which && rank == on_rank && iteration == run;
  }
};

/// Reads ARTUNE_TEST_FAULT; InvalidInput when it is set but malformed. `enabled` is false in a build without the
/// tests (-Dtests=false, ARTUNE_HAVE_TEST_FAULTS 0): the variable is then ignored, no fault can be planted in
/// production.
inline TestFault read_test_fault(bool enabled = ARTUNE_HAVE_TEST_FAULTS) {
  TestFault f;
  if (!enabled) return f;
  const char* text = std::getenv("ARTUNE_TEST_FAULT");
  if (text == nullptr || *text == '\0') return f;
  char kind[16] = {0};
  int rank = -1;
  int iter = -1;
  char tail = 0;
  if (std::sscanf(text, "%15[a-z]:rank%d:iter%d%c", kind, &rank, &iter, &tail) != 3 || rank < 0 || iter < 1) {
    throw InvalidInput(fmt::format("ARTUNE_TEST_FAULT: '{}': expected stop|kill|flip|boot:rankR:iterN", text));
  }
  f.kind = kind;
  if (f.kind != "stop" && f.kind != "kill" && f.kind != "flip" && f.kind != "boot") {
    throw InvalidInput(
        fmt::format("ARTUNE_TEST_FAULT: '{}': unknown fault '{}' (stop, kill, flip, boot)", text, f.kind));
  }
  f.rank = rank;
  f.iteration = iter;
  return f;
}

}  // namespace artune
