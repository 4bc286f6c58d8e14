// Where to allocate a job (tuner/allocation.hpp): every k-subset of a DGX-1's free GPUs ranked, the two
// NVLink quads first for four GPUs; penalties; the trees and NCCL figures beside the bound; bad requests.

#include <doctest/doctest.h>

#include "artune/core/error.hpp"
#include "artune/topology/io.hpp"
#include "artune/topology/subset.hpp"
#include "artune/tuner/allocation.hpp"

using namespace artune;

TEST_CASE("allocation.dgx1_quads_first") {
  const Topology t = load_topology("dgx1-v100");
  AllocationOptions o;
  o.k = 4;
  const Allocation a = rank_subsets(t, t.gpus(), o);
  REQUIRE(a.ranked.size() == 70);
  CHECK(a.ranked[0].list == "0,1,2,3");
  CHECK(a.ranked[1].list == "4,5,6,7");
  // Each quad's four GPUs take in 6+5+5+6… lanes among themselves: busbw 96 GB/s at the bound, 76 % of the
  // whole machine's 126.
  CHECK(a.ranked[0].best_busbw_gbps == doctest::Approx(96));
  CHECK(a.machine.best_busbw_gbps == doctest::Approx(126));
  CHECK(a.ranked[0].best_plan == "bound");
  CHECK(a.ranked[0].nccl_us > a.ranked[0].best_us);
  for (std::size_t i = 1; i < a.ranked.size(); ++i) CHECK(a.ranked[i - 1].best_us <= a.ranked[i].best_us);
}

TEST_CASE("allocation.free_list_and_every_k") {
  const Topology t = load_topology("dgx1-v100");
  const std::vector<int> free = parse_gpu_selection(t, "0,1,2,4,5,6", "free");
  AllocationOptions o;
  std::size_t total = 0;
  for (int k = 1; k <= 6; ++k) {
    o.k = k;
    total += rank_subsets(t, free, o).ranked.size();
  }
  CHECK(total == 63);  // 2^6 − 1
  o.k = 4;
  const Allocation a = rank_subsets(t, free, o);
  CHECK(a.ranked.size() == 15);
  CHECK(a.ranked[0].list == "1,2,5,6");
}

TEST_CASE("allocation.trees_plans") {
  const Topology t = load_topology("dgx1-v100");
  AllocationOptions o;
  o.k = 5;
  o.plans = AllocationPlans::kTrees;
  o.bytes = std::uint64_t{64} << 20;
  const std::vector<int> free = parse_gpu_selection(t, "0,1,2,4,5", "free");
  const Allocation a = rank_subsets(t, free, o);
  REQUIRE(a.ranked.size() == 1);
  const SubsetScore& s = a.ranked[0];
  CHECK(s.best_plan.rfind("trees", 0) == 0);
  CHECK(s.best_us >= s.bound.time_us(static_cast<double>(o.bytes)));
  CHECK(s.nccl_us / s.best_us >= 1.4);
}

TEST_CASE("allocation.bad_requests") {
  const Topology t = load_topology("dgx1-v100");
  AllocationOptions o;
  o.k = 9;
  CHECK_THROWS_AS(rank_subsets(t, t.gpus(), o), InvalidInput);
  o.k = 0;
  CHECK_THROWS_AS(rank_subsets(t, t.gpus(), o), InvalidInput);
  const Topology big = load_topology("4xdgx-h100");
  o.k = 16;
  CHECK_THROWS_WITH_AS(rank_subsets(big, big.gpus(), o), doctest::Contains("subsets"), InvalidInput);
  CHECK(parse_allocation_plans("trees", "x") == AllocationPlans::kTrees);
  CHECK_THROWS_AS(parse_allocation_plans("best", "--plans"), InvalidInput);
}
