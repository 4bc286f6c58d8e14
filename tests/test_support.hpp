// Small helpers shared by the doctest suites of every module.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "artune/core/error.hpp"

namespace artune_test {

/// The message of the artune::InvalidInput that `f` throws ("" when it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const artune::InvalidInput& e) {
    return e.what();
  }
  return "";
}

/// The whole content of a file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Prepares `plan` on `backend`, runs it twice (so reuse across runs is covered) and returns #wrong of
/// the second run.
template <typename Backend, typename Plan, typename Type, typename Op>
std::int64_t wrong_after_runs(Backend& backend, const Plan& plan, Type type, Op op) {
  backend.prepare(plan, type, op);
  std::int64_t wrong = 0;
  for (int it = 0; it < 2; ++it) {
    backend.fill_inputs(it);
    backend.run();
    wrong = backend.count_wrong(it);
  }
  return wrong;
}

/// A fresh, empty folder under the system temp dir, removed with everything in it
/// when the test ends (also when a REQUIRE fails).
class ScratchDir {
 public:
  /// Creates "<tmp>/<prefix>-<pid>-<n>".
  explicit ScratchDir(const std::string& prefix) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// The folder.
  const std::filesystem::path& path() const { return path_; }
  /// A path inside the folder, as a string.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace artune_test
