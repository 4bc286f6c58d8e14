#include "artune/executor/nccl/nccl_issue.hpp"

namespace artune::nccl {

void issue_steps(const Program& program, StepIssuer& issuer) {
  for (const Step& step : program.steps) issuer.issue(step);
}

void issue_run(const Program& program, StepIssuer& issuer) {
  issue_steps(program, issuer);
  issuer.wait();
}

void issue_back_to_back(const Program& program, int n, bool graph, StepIssuer& issuer) {
  if (graph && n > 0) {
    if (!issuer.captured()) {
      issuer.begin_capture();
      try {
        issue_steps(program, issuer);
      } catch (...) {
        issuer.cancel_capture();
        throw;
      }
      issuer.end_capture();
    }
    for (int i = 0; i < n; ++i) issuer.launch_captured();
  } else {
    for (int i = 0; i < n; ++i) issue_steps(program, issuer);
  }
  issuer.wait();
}

}  // namespace artune::nccl
