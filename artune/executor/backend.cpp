#include "artune/executor/backend.hpp"

#include <fmt/format.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

void Backend::run_on(std::span<void* const> user) {
  (void)user;
  throw Unsupported(fmt::format("{} backend: cannot run on caller buffers", name()));
}

void Backend::swap_slot(PlanSlot& slot) {
  (void)slot;
  throw Unsupported(fmt::format("{} backend: cannot hold several plans", name()));
}

void Backend::run_on_streams(std::span<void* const> user, std::span<void* const> streams) {
  (void)user;
  (void)streams;
  throw Unsupported(fmt::format("{} backend: no CUDA streams", name()));
}

double effective_timeout_s(double seconds) {
  if (!(seconds > 0))
    throw InvalidInput(fmt::format("{}: {} must be a number of seconds > 0", parameter("timeout_s"), seconds));
  return std::min(seconds, kMaxTimeoutSeconds);
}

namespace {

// The first number after `key` in a /proc or /sys file (0 when absent or unreadable).
std::uint64_t read_number(const char* path, const std::string& key, bool* found) {
  std::ifstream in(path);
  std::string word;
  *found = false;
  if (key.empty()) {
    std::uint64_t v = 0;
    if (in >> v) *found = true;
    return v;
  }
  while (in >> word) {
    if (word == key) {
      std::uint64_t v = 0;
      if (in >> v) *found = true;
      return v;
    }
  }
  return 0;
}

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

}  // namespace

std::uint64_t available_host_memory() {
  std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
  bool found = false;
  const std::uint64_t avail_kb = read_number("/proc/meminfo", "MemAvailable:", &found);
  if (found) {
    best = avail_kb * 1024;
  } else {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) best = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  }
  // cgroup v2: memory.max is "max" (no limit; fails to parse as a number) or bytes.
  bool have_max = false;
  bool have_current = false;
  const std::uint64_t cg_max = read_number("/sys/fs/cgroup/memory.max", "", &have_max);
  const std::uint64_t cg_current = read_number("/sys/fs/cgroup/memory.current", "", &have_current);
  if (have_max && have_current) best = std::min(best, cg_max > cg_current ? cg_max - cg_current : 0);
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    best = std::min(best, static_cast<std::uint64_t>(as.rlim_cur));
  }
  return best;
}

void check_host_memory(double needed, std::int64_t count, DataType type, std::string_view who) {
  const double available = static_cast<double>(available_host_memory());
  if (needed <= 0.9 * available) return;
  const double message = static_cast<double>(count) * static_cast<double>(element_size(type));
  throw InvalidInput(
      fmt::format("{}: a {}-byte message ({} {}) needs {} of host buffers ({}), more than the {} this machine "
                  "has available (90% usable); use a smaller size",
                  parameter("max_bytes"), static_cast<std::uint64_t>(message), count, to_string(type), gib(needed), who,
                  gib(available)));
}

}  // namespace artune
