// The tuner's size limits: autotune refuses topologies no plan can cover before building per-machine
// matrices, and measuring on the cpu backend skips (and lists) the sizes whose plans do not fit in memory.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/search.hpp"

using namespace artune;

TEST_CASE("search.refuses_topologies_past_the_plan_limit") {
  const Topology big = load_topology("33xuniform:256");  // 8448 GPUs
  SearchOptions options;
  options.sizes = {1024};
  std::string msg;
  try {
    search(big, options);
  } catch (const InvalidInput& e) {
    msg = e.what();
  }
  CHECK(msg == "topology '33xuniform:256': 8448 GPUs is more than artune's limit of 8192 ranks per plan");
}

TEST_CASE("search.measure_skips_sizes_that_do_not_fit") {
  const Topology topo = load_topology("uniform:2");
  SearchOptions so;
  so.sizes = {1024, 4096, 65536, 1 << 20};
  so.model = CostModel::defaults(BackendProfile::kCpu);
  SearchResult result = search(topo, so);
  MeasureOptions mo;
  mo.backend = BackendKind::kCpu;
  mo.top_k = 2;
  mo.iterations = 1;
  mo.warmup = 0;
  // Every plan at 64 KiB holds at least the two 64 KiB user buffers plus the verification's two copies.
  mo.memory_budget_bytes = 200 * 1024;
  measure_top(result, topo, so, mo);
  CHECK(result.unmeasured_for_memory == std::vector<std::uint64_t>{65536, 1 << 20});
  CHECK(result.sizes[0].measured.size() == 3);  // the top 2 and TF's choose_the_best
  CHECK(result.sizes[1].measured.size() == 3);
  CHECK(result.sizes[2].measured.empty());
  CHECK(result.sizes[3].measured.empty());
  // The table keeps the predicted picks there (no measured figures), the measured ones below.
  CHECK(result.table.lookup(1024).points.front().measured.has_value());
  CHECK(!result.table.lookup(1 << 20).points.back().measured.has_value());
}

TEST_CASE("search.host_bytes_for_run_counts_buffers_and_verification") {
  const Topology topo = load_topology("uniform:2");
  Candidate ring;
  ring.family = "ring";
  ring.spec = "xring";
  const Plan plan = build_candidate(topo, ring, 1000, ReduceOp::kSum);
  std::uint64_t elements = 0;
  for (const auto& device : plan.buffers) {
    for (const auto n : device) elements += static_cast<std::uint64_t>(n);
  }
  CHECK(elements >= 2000);  // both user buffers
  CHECK(host_bytes_for_run(plan, 4) == (elements + 2000) * 4);
  CHECK(host_memory_budget() > 0);
}
