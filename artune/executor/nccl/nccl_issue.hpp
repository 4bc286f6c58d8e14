#pragma once
// The order in which the nccl backend issues a rank's program (nccl_program.hpp)
// on its stream, behind an interface so tests record it without NCCL or a GPU.
//
// A run issues every step, then waits once (a CUDA event: no host sleep). Back to
// back (`artune run --back-to-back`, nccl-tests' timing loop), the n runs' steps
// are issued one after the other on the same stream with no wait in between and
// one wait at the end; stream order keeps run k+1 behind run k on this rank, and
// NCCL's own matching of sends, receives and collectives does across ranks. With
// a CUDA graph (`--graph`), one run is captured once (the capture is kept until the
// next prepare or pointer change) and launched n times, then one wait.

#include "artune/executor/nccl/nccl_program.hpp"

namespace artune::nccl {

/// Where a program's calls go: the backend's NCCL/CUDA calls, or a test's recorder.
class StepIssuer {
 public:
  virtual ~StepIssuer() = default;
  /// Issues one step on the rank's stream (asynchronous; a group end returns once NCCL enqueued the group).
  virtual void issue(const Step& step) = 0;
  /// Waits until everything issued so far has finished (the run's one host synchronisation).
  virtual void wait() = 0;
  /// True when a captured run is ready to launch.
  virtual bool captured() const = 0;
  /// Starts capturing the stream's work into a graph (nothing runs until launched).
  virtual void begin_capture() = 0;
  /// Ends the capture and instantiates the graph.
  virtual void end_capture() = 0;
  /// Ends a capture that failed half way (the stream leaves capture mode; nothing is kept).
  virtual void cancel_capture() noexcept = 0;
  /// Launches the captured run on the stream.
  virtual void launch_captured() = 0;
};

/// Issues every step of `program` in order (one run, no wait).
void issue_steps(const Program& program, StepIssuer& issuer);
/// One run, then one wait.
void issue_run(const Program& program, StepIssuer& issuer);
/// `n` runs back to back, then one wait. `graph`: capture one run first unless captured (a failing step
/// cancels the capture), launch it n times.
void issue_back_to_back(const Program& program, int n, bool graph, StepIssuer& issuer);

}  // namespace artune::nccl
