// Topology graph helpers: NVLink Hamiltonian cycles, link-disjoint rings, NVLink cliques.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

// Brute force: undirected Hamiltonian cycles of the NVLink graph (direct NVLink lanes between
// GPUs), counting every permutation of 1..G−1 after GPU 0 that closes a cycle, halved for direction.
int brute_force_cycles(const Topology& t) {
  const auto gpus = t.gpus_of_machine(0);
  const int n = static_cast<int>(gpus.size());
  std::vector<int> perm(static_cast<std::size_t>(n - 1));
  std::iota(perm.begin(), perm.end(), 1);
  int directed = 0;
  do {
    bool ok = t.nvlink_lanes(gpus[0], gpus[static_cast<std::size_t>(perm.front())]) > 0 &&
              t.nvlink_lanes(gpus[static_cast<std::size_t>(perm.back())], gpus[0]) > 0;
    for (std::size_t i = 0; ok && i + 1 < perm.size(); ++i) {
      ok = t.nvlink_lanes(gpus[static_cast<std::size_t>(perm[i])], gpus[static_cast<std::size_t>(perm[i + 1])]) > 0;
    }
    directed += ok ? 1 : 0;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return directed / 2;
}

}  // namespace

TEST_CASE("graph.dgx1_hamiltonian_cycles") {
  // DGX-1's NVLink graph is two K4 quads joined by the matching i ↔ i+4 (the prism K4 × K2, on
  // P100 and V100 alike; V100 only doubles some links). Counting by hand: a cycle crosses the
  // matching twice or four times. Twice, through i and j: C(4,2) = 6 choices, times 2 Hamiltonian
  // paths i→j in each K4: 6·2·2 = 24. Four times: a perfect matching of each quad (3 each), and
  // they must differ or the cycle splits in two: 3·2 = 6. Total 30; the brute force below agrees.
  for (const std::string name : {"dgx1-v100", "dgx1-p100"}) {
    const Topology& t = topo(name);
    CHECK(brute_force_cycles(t) == 30);
    const auto cycles = nvlink_hamiltonian_cycles(t, 0, 1000);
    CHECK(cycles.size() == 30);
    std::set<std::vector<int>> unique(cycles.begin(), cycles.end());
    CHECK(unique.size() == 30);
    for (const auto& c : cycles) {
      CHECK(c.front() == 0);
      CHECK(c[1] < c.back());  // one direction per cycle
    }
    CHECK(nvlink_hamiltonian_cycles(t, 0, 5).size() == 5);
  }
  // uniform:5 is complete: 4!/2 = 12 cycles.
  CHECK(nvlink_hamiltonian_cycles(topo("uniform:5"), 0, 1000).size() == 12);
  CHECK(nvlink_hamiltonian_cycles(topo("pcie-8gpu"), 0, 1000).empty());
  CHECK(throws_mentioning([] { nvlink_hamiltonian_cycles(topo("dgx1-v100"), 3, 10); }, {"machine 3"}));
}

TEST_CASE("graph.nvlink_cliques") {
  using Groups = std::vector<std::vector<int>>;
  CHECK(nvlink_cliques(topo("dgx1-v100"), 0) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(nvlink_cliques(topo("dgx1-p100"), 0) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  std::vector<int> all(16);
  std::iota(all.begin(), all.end(), 0);
  CHECK(nvlink_cliques(topo("dgx2"), 0) == Groups{all});
  CHECK(nvlink_cliques(topo("pcie-8gpu"), 0) == Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  CHECK(nvlink_cliques(topo("4xdgx1-v100"), 3) == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("graph.link_disjoint_rings_are_hamiltonian") {
  for (const std::string name : {"dgx1-v100", "dgx1-p100", "dgx2", "uniform:8", "pcie-8gpu"}) {
    const Topology& t = topo(name);
    const int n = static_cast<int>(t.gpus_of_machine(0).size());
    for (const auto& ring : link_disjoint_rings(t, 0, 64)) {
      std::vector<int> sorted = ring;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int> all(static_cast<std::size_t>(n));
      std::iota(all.begin(), all.end(), 0);
      CHECK(sorted == all);
    }
  }
  // uniform:8 (complete, 7 links per GPU): at least the 3 undirected cycles of K8's Hamiltonian
  // decomposition, both ways.
  CHECK(link_disjoint_rings(topo("uniform:8"), 0, 64).size() >= 6);
}
