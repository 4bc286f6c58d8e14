#pragma once
// The one error hierarchy of artune. Every failure that reaches a user is an
// artune::Error carrying a code; the CLI maps the code to an exit status.

#include <stdexcept>
#include <string>

namespace artune {

/// What kind of failure an Error reports; decides the command's exit code.
enum class ErrorCode {
  kInvalidInput,    ///< bad file, flag, field or parameter (exit 2)
  kUnsupported,     ///< valid request this build or machine cannot serve (exit 2)
  kBackendFailure,  ///< a library call (CUDA, NCCL, MPI, OS) failed (exit 3)
  kTimeout,         ///< a peer did not answer in time (exit 3)
  kWrongResult,     ///< a run produced wrong values (exit 1)
  kInternal,        ///< a broken invariant inside artune: a bug, whatever the input (exit 4)
};

/// Base of all artune exceptions: a message and an ErrorCode.
class Error : public std::runtime_error {
 public:
  /// Builds an error with a one-line message.
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The error's code.
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

/// Invalid input: the message names the file, flag or field.
class InvalidInput : public Error {
 public:
  /// Builds an invalid-input error.
  explicit InvalidInput(const std::string& message) : Error(ErrorCode::kInvalidInput, message) {}
};

/// A valid request that this build or machine cannot serve.
class Unsupported : public Error {
 public:
  /// Builds an unsupported error.
  explicit Unsupported(const std::string& message) : Error(ErrorCode::kUnsupported, message) {}
};

/// A failed call into CUDA, NCCL, MPI or the OS, with the call's text.
class BackendFailure : public Error {
 public:
  /// Builds a backend-failure error.
  explicit BackendFailure(const std::string& message) : Error(ErrorCode::kBackendFailure, message) {}
};

/// A peer that did not respond within the allowed time.
class Timeout : public Error {
 public:
  /// Builds a timeout error.
  explicit Timeout(const std::string& message) : Error(ErrorCode::kTimeout, message) {}
};

/// A broken invariant inside artune (a bug, not bad input): "internal error: WHAT (file:line), please report".
class InternalError : public Error {
 public:
  /// Builds an internal error around `what` (the invariant that broke, with its values).
  explicit InternalError(const std::string& what)
      : Error(ErrorCode::kInternal, "internal error: " + what + ", please report") {}
};

/// Throws InternalError naming `what` and the source line (ARTUNE_CHECK's failure path).
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);

/// The process exit status for an error code (0 ok, 1 wrong results, 2 bad input, 3 runtime failure,
/// 4 internal error).
int exit_status(ErrorCode code) noexcept;

}  // namespace artune

/// Checks an invariant of artune's own code: when `cond` is false, throws InternalError with `what` (a
/// std::string, built only on failure) and the source line. Bad input is never checked this way: it is an
/// InvalidInput naming the file, flag or field.
#define ARTUNE_CHECK(cond, what)                                   \
  do {                                                             \
    if (!(cond)) ::artune::check_failed(__FILE__, __LINE__, what); \
  } while (false)
