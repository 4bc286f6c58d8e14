#pragma once
// A parallel loop over independent items on a fixed number of threads.
//
// Each item writes only its own result slot, so the outcome does not depend
// on the number of threads or on which thread ran which item: callers get the
// same answer, bit for bit, with 1 or N threads. Items are handed out one at a
// time from a shared counter (items differ widely in cost: a 1 GiB plan on a
// 1,024-GPU cluster takes a thousand times longer than a 1 KiB one), and the
// calling thread works too, so `jobs` = 1 runs everything inline.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace artune {

/// The number of threads `jobs` stands for: 0 = every core the machine reports (at least 1).
inline int resolve_jobs(int jobs) {
  if (jobs > 0) return jobs;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

/// Runs body(i) once for every i in [0, count) on up to resolve_jobs(jobs) threads (never more threads than
/// items), the calling thread included. When items throw, the items not yet started are skipped and, after every
/// thread has ended, the exception of the smallest index that throws is rethrown. Items are handed out in index
/// order, so every item below a throwing one has started and run to its end: the exception rethrown is the same
/// whatever `jobs` is.
template <typename Body>
void parallel_for(std::size_t count, int jobs, Body&& body) {
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(resolve_jobs(jobs)), count);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::size_t error_index = count;
  auto work = [&] {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) return;
      try {
        body(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (i < error_index) {
          error_index = i;
          error = std::current_exception();
        }
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> pool;
  if (threads > 1) pool.reserve(threads - 1);
  try {
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (...) {
    // No thread could be started (resource limits): the threads that did start and this one finish the work.
  }
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace artune
