#include "artune/core/error.hpp"

namespace artune {

int exit_status(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kWrongResult: return 1;
    case ErrorCode::kInvalidInput:
    case ErrorCode::kUnsupported: return 2;
    case ErrorCode::kBackendFailure:
    case ErrorCode::kTimeout: return 3;
    case ErrorCode::kInternal: return 4;
  }
  return 3;
}

void check_failed(const char* file, int line, const std::string& what) {
  std::string path = file;
  while (path.rfind("../", 0) == 0) path.erase(0, 3);  // Meson compiles from the build folder
  throw InternalError(what + " (" + path + ":" + std::to_string(line) + ")");
}

}  // namespace artune
