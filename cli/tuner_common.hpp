#pragma once
// What `artune autotune` and `artune calibrate` share: progress on stderr and the checks of the
// measurement flags, made before anything runs.

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "artune/executor/backend.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/search.hpp"  // ProgressFn

namespace artune::cli {

/// Progress on stderr: a redrawn bar on a terminal, a plain line per phase or 10 % step otherwise.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1) {}
  ~Progress() { finish(); }

  ProgressFn fn() {
    return [this](std::size_t done, std::size_t total, std::string_view what) { update(done, total, what); };
  }

  void update(std::size_t done, std::size_t total, std::string_view what) {
    if (quiet_ || total == 0) return;
    const int pct = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
    const std::string phase(what.substr(0, what.find(' ')));
    if (tty_) {
      const auto now = std::chrono::steady_clock::now();
      if (done < total && now - last_draw_ < std::chrono::milliseconds(80)) return;
      last_draw_ = now;
      constexpr int kWidth = 30;
      const int filled = pct * kWidth / 100;
      std::string text(what.substr(0, 60));
      fmt::print(stderr, "\r[{}{}] {:3d}% {:<60}", std::string(static_cast<std::size_t>(filled), '#'),
                 std::string(static_cast<std::size_t>(kWidth - filled), ' '), pct, text);
      std::fflush(stderr);
      drawn_ = true;
    } else {
      // One line per phase change and per 10 % step.
      const int step = pct / 10;
      if (phase != last_phase_ || step != last_step_) {
        fmt::print(stderr, "artune: {:3d}% {}\n", pct, what);
        last_phase_ = phase;
        last_step_ = step;
      }
    }
  }

  void finish() {
    if (drawn_) {
      fmt::print(stderr, "\r{:<100}\r", "");
      std::fflush(stderr);
      drawn_ = false;
    }
  }

  void note(const std::string& line) {
    finish();
    if (!quiet_) fmt::print(stderr, "artune: {}\n", line);
  }

 private:
  bool quiet_;
  bool tty_;
  bool drawn_ = false;
  std::string last_phase_;
  int last_step_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
};

/// The devices the cpu backend runs (one thread each): a documented cap so that a cluster topology
/// ends in one line naming -t instead of a thread or memory failure part-way through measuring.
inline constexpr std::size_t kCpuBackendMaxDevices = 256;

/// The measurement flags both subcommands share, checked before anything runs.
void check_measure_flags(int iters, int warmup, double timeout);

/// The backends that run every device of the topology in this process refuse topologies past their cap.
void check_backend_devices(BackendKind kind, const Topology& topo, std::string_view backend_flag);

/// Under mpirun the cpu backend would run every device as a thread in each process and ignore the ranks:
/// refused (rank 0 says why, the other ranks leave quietly with the same status; MPI is not started yet).
void refuse_cpu_under_mpirun(const std::string& backend, std::string_view flag, int world);

}  // namespace artune::cli
