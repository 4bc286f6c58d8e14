#include "artune/executor/nccl/nccl_watchdog.hpp"

#include <fmt/format.h>

#include <utility>

namespace artune::nccl {

Watchdog::Watchdog(WatchTarget& target, std::chrono::nanoseconds period, bool threaded)
    : target_(target), period_(period) {
  if (threaded) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    armed_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::arm(std::string what, double timeout_s) {
  bool wake = false;
  {
    const std::lock_guard lock(mutex_);
    what_ = std::move(what);
    timeout_s_ = timeout_s;
    deadline_ = target_.now() +
                std::chrono::duration_cast<WatchTarget::Clock::duration>(std::chrono::duration<double>(timeout_s));
    verdict_ = WatchVerdict{};
    armed_ = true;
    wake = idle_;
  }
  if (wake) wake_.notify_one();
}

WatchVerdict Watchdog::disarm() {
  const std::lock_guard lock(mutex_);
  armed_ = false;
  return std::exchange(verdict_, WatchVerdict{});
}

bool Watchdog::check() {
  const std::lock_guard lock(mutex_);
  return check_locked();
}

bool Watchdog::check_locked() {
  if (!armed_ || verdict_.fired()) return false;
  std::string error = target_.async_error();
  if (!error.empty()) {
    verdict_ = {WatchVerdict::Kind::kFailed,
                fmt::format("nccl backend: {}: asynchronous NCCL error: {}; communicators aborted", what_, error)};
  } else if (target_.now() >= deadline_) {
    verdict_ = {WatchVerdict::Kind::kTimedOut,
                fmt::format("nccl backend: {} did not complete within {} s (a peer is stuck or gone); communicators "
                            "aborted",
                            what_, timeout_s_)};
  } else {
    return false;
  }
  target_.abort();
  return true;
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_ || verdict_.fired()) {
      idle_ = true;
      wake_.wait(lock, [this] { return stopping_ || (armed_ && !verdict_.fired()); });
      idle_ = false;
    } else {
      wake_.wait_for(lock, period_);
    }
    if (!stopping_) check_locked();
  }
}

}  // namespace artune::nccl
