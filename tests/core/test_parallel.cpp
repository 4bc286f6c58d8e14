// parallel_for: every item runs exactly once on any number of threads, and
// the exception that comes out is the same whatever the number of threads.

#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "artune/core/parallel.hpp"

using artune::parallel_for;
using artune::resolve_jobs;

TEST_CASE("parallel.every_item_once") {
  for (const int jobs : {1, 2, 5, 64}) {
    for (const std::size_t count : {0u, 1u, 3u, 1000u}) {
      std::vector<std::atomic<int>> hits(count);
      parallel_for(count, jobs, [&](std::size_t i) { hits[i].fetch_add(1); });
      for (std::size_t i = 0; i < count; ++i) CHECK(hits[i].load() == 1);
    }
  }
}

TEST_CASE("parallel.threads_used") {
  // jobs = 1 runs inline on the calling thread; more jobs use other threads too (never more than items).
  const std::thread::id caller = std::this_thread::get_id();
  bool all_inline = true;
  parallel_for(50, 1, [&](std::size_t) { all_inline = all_inline && std::this_thread::get_id() == caller; });
  CHECK(all_inline);
  std::atomic<int> running{0};
  std::atomic<int> peak{0};
  parallel_for(4, 4, [&](std::size_t) {
    const int now = running.fetch_add(1) + 1;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {}
    // Hold every item until four run at once (or a generous spin bound), so the peak shows the pool's width.
    for (int spin = 0; spin < 2000000 && peak.load() < 4; ++spin) std::this_thread::yield();
    running.fetch_sub(1);
  });
  CHECK(peak.load() == 4);
  CHECK(resolve_jobs(3) == 3);
  CHECK(resolve_jobs(0) >= 1);
}

TEST_CASE("parallel.smallest_throwing_index_wins") {
  // Items 17 and 400 throw; whatever the thread count, the caller sees item 17's exception.
  for (const int jobs : {1, 2, 8}) {
    std::atomic<int> ran_below{0};
    try {
      parallel_for(1000, jobs, [&](std::size_t i) {
        if (i < 17) ran_below.fetch_add(1);
        if (i == 17 || i == 400) throw std::runtime_error("item " + std::to_string(i));
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "item 17");
    }
    CHECK(ran_below.load() == 17);  // every item before the throwing one ran
  }
}
