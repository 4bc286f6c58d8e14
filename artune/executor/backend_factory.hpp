#pragma once
// The one place that knows every backend: make_backend picks the one a BackendKind names, or
// says why this build or machine lacks it. backend.cpp (the interface) includes none of them.

#include <memory>

#include "artune/executor/backend.hpp"

namespace artune {

/// Creates a backend (its timeout saturated by effective_timeout_s); Unsupported when this build or
/// machine lacks it ("no CUDA device available"), BackendFailure when the device query fails otherwise.
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options);

}  // namespace artune
