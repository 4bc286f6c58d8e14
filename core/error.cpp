#include "core/error.hpp"

namespace artune {

int exit_status(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kWrongResult: return 1;
    case ErrorCode::kInvalidInput:
    case ErrorCode::kUnsupported: return 2;
    case ErrorCode::kBackendFailure:
    case ErrorCode::kTimeout: return 3;
  }
  return 3;
}

}  // namespace artune
