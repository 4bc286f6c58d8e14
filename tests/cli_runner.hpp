// Runs the built `artune` binary (ARTUNE_BIN, set by meson test) or any shell
// command line from a doctest test, capturing its output and exit status.
// Shared by the CLI tests of every module; header-only, include after doctest.

#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace artune_test {

/// What a command did: exit status, its stdout (stderr too where the command merged it), its stderr when kept apart.
struct CliResult {
  int status = -1;  ///< exit code; 128 + signal when a signal ended it
  std::string out;
  std::string err;
  double seconds = 0;  ///< wall time, for tests that check a fault ends the job instead of hanging
};

/// `s` as one POSIX shell word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The environment variable `name`; fails the test when meson test did not set it.
inline std::string require_env(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE_MESSAGE(v != nullptr, name << " is not set (run through meson test)");
  return v;
}

/// Path of the built artune binary.
inline std::string artune_bin() { return require_env("ARTUNE_BIN"); }

/// True in a sanitizer build (meson test sets ARTUNE_SANITIZE from -Db_sanitize): ASan reserves terabytes of
/// address space, so address-space limits (ulimit -v) cannot apply there.
inline bool sanitized_build() {
  const char* v = std::getenv("ARTUNE_SANITIZE");
  return v != nullptr && *v != '\0' && std::string(v) != "none";
}

/// "ulimit -v KIB && " for a shell command line, or "" in a sanitizer build (the time limit still holds).
inline std::string memory_limit_prefix(long kib) {
  if (sanitized_build()) return "";
  std::string prefix = "ulimit -v ";
  prefix += std::to_string(kib);
  prefix += " && ";
  return prefix;
}

/// Runs a shell command line and captures its stdout; append " 2>&1" to capture stderr as well.
inline CliResult run_shell(const std::string& command) {
  CliResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

/// Occurrences of `what` in `text` (e.g. how many ranks printed a line under mpirun).
inline int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

/// Runs `artune ARGS` (each argument quoted), capturing stdout and stderr separately.
inline CliResult run_artune(const std::vector<std::string>& args) {
  char pattern[] = "/tmp/artune_cli_err_XXXXXX";
  const int fd = ::mkstemp(pattern);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string err_path = pattern;
  // Removed on every way out, a failed check's exception included.
  struct Remove {
    const std::string& path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_err{err_path};
  std::string cmd = shell_quote(artune_bin());
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " 2>";
  cmd += shell_quote(err_path);
  CliResult r = run_shell(cmd);
  std::ifstream in(err_path);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

}  // namespace artune_test
