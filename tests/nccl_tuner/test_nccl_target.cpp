// `artune autotune --target nccl`: candidates are NCCL's own algorithm × protocol pairs only, and the
// table it writes steers the plugin (dlopened as NCCL does) to the table's pick at every tuned size.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "artune_config.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "tests/cli_runner.hpp"
#if ARTUNE_HAVE_NCCL_BACKEND
#include "artune/executor/cuda/cuda_backend.hpp"
#endif
#include "tests/nccl_tuner/plugin_loader.hpp"
#include "tests/test_support.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/nccl_target.hpp"
#include "artune/tuner/search.hpp"

namespace {

/// The channel count of a spec's `.cN`, 0 without one.
int channels_of(const std::string& spec) {
  const std::size_t c = spec.rfind(".c");
  return c == std::string::npos ? 0 : std::stoi(spec.substr(c + 2));
}

std::vector<std::string> labels(const artune::CandidateSet& set) {
  std::vector<std::string> out;
  for (const auto& c : set.candidates) out.push_back(c.label());
  return out;
}

/// Cost-table indices of a spec "nccl.ALGO.PROTO[.cN]" (tuner_abi.h order).
std::pair<int, int> indices_of(const std::string& spec) {
  const std::string rest = spec.substr(5);
  const std::string algo = rest.substr(0, rest.find('.'));
  const std::string after = rest.substr(rest.find('.') + 1);
  const std::string proto = after.substr(0, after.find('.'));
  const int a = algo == "tree"       ? ARTUNE_NCCL_ALGO_TREE
                : algo == "ring"     ? ARTUNE_NCCL_ALGO_RING
                : algo == "nvls"     ? ARTUNE_NCCL_ALGO_NVLS
                : algo == "nvlstree" ? ARTUNE_NCCL_ALGO_NVLS_TREE
                                     : -1;
  const int p = proto == "ll"      ? ARTUNE_NCCL_PROTO_LL
                : proto == "ll128" ? ARTUNE_NCCL_PROTO_LL128
                                   : ARTUNE_NCCL_PROTO_SIMPLE;
  return {a, p};
}

}  // namespace

TEST_CASE("nccl_target.candidates_are_nccl_pairs_nccl_enables") {
  const artune::Topology dgx1 = artune::load_topology("dgx1-v100");
  const artune::CandidateSet set = artune::generate_nccl_candidates(dgx1, {});
  // V100: no NVLS (sm90+ with NVSwitch), PAT is not an all-reduce algorithm; Tree and Ring with every protocol,
  // each on the search's 6 channels and on 1, 2 and 4.
  CHECK(labels(set) == std::vector<std::string>{
                           "nccl.tree.ll",     "nccl.tree.ll.c1",     "nccl.tree.ll.c2",     "nccl.tree.ll.c4",
                           "nccl.tree.ll128",  "nccl.tree.ll128.c1",  "nccl.tree.ll128.c2",  "nccl.tree.ll128.c4",
                           "nccl.tree.simple", "nccl.tree.simple.c1", "nccl.tree.simple.c2", "nccl.tree.simple.c4",
                           "nccl.ring.ll",     "nccl.ring.ll.c1",     "nccl.ring.ll.c2",     "nccl.ring.ll.c4",
                           "nccl.ring.ll128",  "nccl.ring.ll128.c1",  "nccl.ring.ll128.c2",  "nccl.ring.ll128.c4",
                           "nccl.ring.simple", "nccl.ring.simple.c1", "nccl.ring.simple.c2", "nccl.ring.simple.c4",
                           "nccl"});
  CHECK(set.rejected.empty());
  for (const auto& c : set.candidates) CHECK(c.family == "nccl");

  // The generator agrees with the NCCL model's own cost table (a second derivation, through nccl::search and
  // nccl::cost_table): exactly the pairs it enables for each collective, each on the search's channels and the
  // powers of two below, on machines with NVSwitch or not. The literal lists below pin what that is.
  for (const char* name : {"dgx-h100", "dgx-a100", "uniform:2x8", "pcie-8gpu"}) {
    for (const artune::Collective coll :
         {artune::Collective::kAllReduce, artune::Collective::kAllGather, artune::Collective::kReduceScatter}) {
      CAPTURE(name);
      CAPTURE(artune::to_string(coll));
      const artune::Topology topo = artune::load_topology(name);
      const auto graph = artune::nccl::search(topo, topo.gpus());
      const auto table = artune::nccl::cost_table(graph, coll);
      std::vector<std::string> want;
      for (int a = 0; a < artune::nccl::kAlgos; ++a) {
        const auto algo = static_cast<artune::nccl::Algo>(a);
        for (int p = 0; p < artune::nccl::kProtos; ++p) {
          if (!(table.bandwidth[a][p] > 0)) continue;
          const std::string pair = fmt::format("nccl.{}.{}", artune::nccl::to_string(algo),
                                               artune::nccl::to_string(static_cast<artune::nccl::Proto>(p)));
          want.push_back(pair);
          for (int c = algo == artune::nccl::Algo::kNvls ? 2 : 1; c < artune::nccl::max_channels(graph, algo); c *= 2) {
            want.push_back(fmt::format("{}.c{}", pair, c));
          }
        }
      }
      want.push_back("nccl");
      const artune::CandidateSet got = artune::generate_nccl_candidates(topo, {}, coll);
      CHECK(labels(got) == want);
      CHECK(got.rejected.empty());
      for (const auto& c : got.candidates) CHECK(c.collective == coll);
    }
  }
  // Literal lists for two machines, written out rather than recomputed: DGX H100 (NCCL's 16 ring/tree channels,
  // so .c1 to .c8; NVLS Simple from 2 heads: .c2, .c4) and two PCIe-and-network machines (one channel, no LL128:
  // NCCL enables LL128 only on NVLink within one machine).
  const auto h100 = labels(artune::generate_nccl_candidates(artune::load_topology("dgx-h100"), {}));
  CHECK(h100 == std::vector<std::string>{
                    "nccl.tree.ll",       "nccl.tree.ll.c1",     "nccl.tree.ll.c2",     "nccl.tree.ll.c4",
                    "nccl.tree.ll.c8",    "nccl.tree.ll128",     "nccl.tree.ll128.c1",  "nccl.tree.ll128.c2",
                    "nccl.tree.ll128.c4", "nccl.tree.ll128.c8",  "nccl.tree.simple",    "nccl.tree.simple.c1",
                    "nccl.tree.simple.c2", "nccl.tree.simple.c4", "nccl.tree.simple.c8", "nccl.ring.ll",
                    "nccl.ring.ll.c1",    "nccl.ring.ll.c2",     "nccl.ring.ll.c4",     "nccl.ring.ll.c8",
                    "nccl.ring.ll128",    "nccl.ring.ll128.c1",  "nccl.ring.ll128.c2",  "nccl.ring.ll128.c4",
                    "nccl.ring.ll128.c8", "nccl.ring.simple",    "nccl.ring.simple.c1", "nccl.ring.simple.c2",
                    "nccl.ring.simple.c4", "nccl.ring.simple.c8", "nccl.nvls.simple",   "nccl.nvls.simple.c2",
                    "nccl.nvls.simple.c4", "nccl"});
  CHECK(labels(artune::generate_nccl_candidates(artune::load_topology("uniform:2x8"), {})) ==
        std::vector<std::string>{"nccl.tree.ll", "nccl.tree.simple", "nccl.ring.ll", "nccl.ring.simple", "nccl"});
  CHECK(labels(artune::generate_nccl_candidates(artune::load_topology("uniform:2x8"), {},
                                                artune::Collective::kAllGather)) ==
        std::vector<std::string>{"nccl.ring.ll", "nccl.ring.simple", "nccl"});

  // The release's search says which channel counts there are: 2 x Oracle BM.GPU4.8's 8 fused dual-port NICs give
  // 8 channels from NCCL 2.24 (1, 2 and 4 below them), its 16 ports 16 before (8 too).
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  const artune::Topology oci =
      artune::load_topology(std::string(root != nullptr ? root : ".") + "/tests/simulator/data/2xoci-bm-gpu4.8.json");
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  const auto fused = labels(artune::generate_nccl_candidates(oci, {}));
  CHECK(has(fused, "nccl.ring.simple.c4"));
  CHECK_FALSE(has(fused, "nccl.ring.simple.c8"));
  artune::CandidateOptions before_fusion;
  before_fusion.nccl_release = artune::NcclRelease{2, 19, 3};
  CHECK(has(labels(artune::generate_nccl_candidates(oci, before_fusion)), "nccl.ring.simple.c8"));

  CHECK_THROWS_WITH_AS(artune::generate_nccl_candidates(artune::load_topology("uniform:1"), {}),
                       doctest::Contains("parameter target nccl: 'uniform:1' has 1 GPU(s)"), artune::Unsupported);
}

TEST_CASE("nccl_target.search_picks_explicit_pairs") {
  const artune::Topology topo = artune::load_topology("dgx-h100");
  artune::SearchOptions so;
  so.sizes = {1024, 65536, 1 << 20, 1 << 24, 1 << 28};
  so.generate = [](const artune::Topology& t, const artune::CandidateOptions& o) {
    return artune::generate_nccl_candidates(t, o);
  };
  const artune::SearchResult result = artune::search(topo, so);
  for (std::size_t s = 0; s < result.sizes.size(); ++s) {
    CAPTURE(s);
    const auto& scores = result.sizes[s];
    const auto& pick = result.set.candidates[result.pick[s]];
    // An explicit pair the plugin can steer to, never plain `nccl` (it only ever ties with one).
    CHECK(pick.spec.rfind("nccl.", 0) == 0);
    // NCCL's own choice is among the candidates and never beats the pick.
    const auto& own = scores.predicted[result.set.candidates.size() - 1];
    REQUIRE(own.has_value());
    CHECK(scores.predicted[result.pick[s]]->time_us <= own->time_us * (1 + so.keep_within));
  }
}

TEST_CASE("nccl_target.cli_table_steers_the_plugin") {
  const artune_test::ScratchDir dir("artune-nccl-target");
  const std::string table_path = dir.file("table.json");
  const auto tune = artune_test::run_artune(
      {"autotune", "-t", "dgx1-v100", "--target", "nccl", "-b", "1K", "-e", "256M", "-f", "8", "-q", "-o", table_path});
  INFO(tune.err);
  REQUIRE(tune.status == 0);
  const artune::DecisionTable table = artune::read_decision_table(table_path);
  REQUIRE(table.ranges.size() >= 2);

  ::setenv("ARTUNE_TUNER_TABLE", table_path.c_str(), 1);
  const artune_test::PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  REQUIRE(v5 != nullptr);
  artune_test::plugin_log().clear();
  void* ctx = nullptr;
  REQUIRE(v5->init(&ctx, 3, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
  ::unsetenv("ARTUNE_TUNER_TABLE");
  CHECK(artune_test::count_level(artuneNcclLogWarn) == 0);
  int points = 0;
  for (const auto& range : table.ranges) {
    for (const auto& point : range.points) {
      CAPTURE(point.bytes);
      ++points;
      // Every entry equal: NCCL's own pick would be Tree LL (its first supported entry); the table's must win.
      float costs[ARTUNE_NCCL_NUM_ALGORITHMS][ARTUNE_NCCL_NUM_PROTOCOLS];
      for (auto& row : costs) {
        for (float& v : row) v = 50.0f;
      }
      for (int a : {ARTUNE_NCCL_ALGO_COLLNET_DIRECT, ARTUNE_NCCL_ALGO_COLLNET_CHAIN, ARTUNE_NCCL_ALGO_NVLS,
                    ARTUNE_NCCL_ALGO_NVLS_TREE, ARTUNE_NCCL_ALGO_PAT}) {
        for (float& v : costs[a]) v = ARTUNE_NCCL_ALGO_PROTO_IGNORE;
      }
      int channels = 0;
      v5->getCollInfo(ctx, artuneNcclFuncAllReduce, point.bytes, 1, reinterpret_cast<float**>(costs),
                      ARTUNE_NCCL_NUM_ALGORITHMS, ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
      CHECK(artune_test::nccl_choice(costs) == indices_of(range.plan.spec));
    }
  }
  CHECK(points == 7);  // 1K, 8K, 64K, 512K, 4M, 32M, 256M
  v5->finalize(ctx);
}

TEST_CASE("nccl_target.cli_tables_per_collective_steer_the_plugin") {
  // One all-reduce and one all-gather table of a machine with one GPU on each of 4 machines (PAT enabled for
  // all-gather), read together through ARTUNE_TUNER_TABLE's ':' list.
  const artune_test::ScratchDir dir("artune-nccl-target");
  const std::string reduce_path = dir.file("allreduce.json");
  const std::string gather_path = dir.file("allgather.json");
  const std::vector<std::string> common = {"-t", "uniform:4x1", "--target", "nccl", "-b", "1K", "-e", "64M", "-f", "64",
                                           "-q"};
  auto tune = [&](const std::string& collective, const std::string& out) {
    std::vector<std::string> args = {"autotune", "--collective", collective, "-o", out};
    args.insert(args.end(), common.begin(), common.end());
    const auto r = artune_test::run_artune(args);
    INFO(r.err);
    REQUIRE(r.status == 0);
  };
  tune("allreduce", reduce_path);
  tune("allgather", gather_path);
  const artune::DecisionTable reduce = artune::read_decision_table(reduce_path);
  const artune::DecisionTable gather = artune::read_decision_table(gather_path);
  for (const auto& r : gather.ranges) {
    CHECK(r.plan.collective == artune::Collective::kAllGather);
    CHECK(r.plan.spec.rfind("nccl.", 0) == 0);
  }

  const std::string value = reduce_path + ":" + gather_path;
  ::setenv("ARTUNE_TUNER_TABLE", value.c_str(), 1);
  const artune_test::PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  artune_test::plugin_log().clear();
  void* ctx = nullptr;
  REQUIRE(v5->init(&ctx, 3, 4, 4, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
  ::unsetenv("ARTUNE_TUNER_TABLE");
  CHECK(artune_test::count_level(artuneNcclLogWarn) == 0);
  CHECK(artune_test::count_level(artuneNcclLogInfo) == 2);
  int points = 0;
  for (const auto& [coll, table] :
       {std::pair{artuneNcclFuncAllReduce, &reduce}, std::pair{artuneNcclFuncAllGather, &gather}}) {
    for (const auto& range : table->ranges) {
      for (const auto& point : range.points) {
        CAPTURE(point.bytes);
        CAPTURE(range.plan.spec);
        ++points;
        // Every entry NCCL could run equal (CollNet and NVLS unsupported), so only the plugin decides.
        float costs[ARTUNE_NCCL_NUM_ALGORITHMS][ARTUNE_NCCL_NUM_PROTOCOLS];
        for (auto& row : costs) {
          for (float& v : row) v = 50.0f;
        }
        for (int a : {ARTUNE_NCCL_ALGO_COLLNET_DIRECT, ARTUNE_NCCL_ALGO_COLLNET_CHAIN, ARTUNE_NCCL_ALGO_NVLS,
                      ARTUNE_NCCL_ALGO_NVLS_TREE}) {
          for (float& v : costs[a]) v = ARTUNE_NCCL_ALGO_PROTO_IGNORE;
        }
        int channels = 0;
        v5->getCollInfo(ctx, coll, point.bytes, 1, reinterpret_cast<float**>(costs), ARTUNE_NCCL_NUM_ALGORITHMS,
                        ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
        const std::string spec = range.plan.spec;
        if (spec != "nccl") {
          const std::string algo = spec.substr(5, spec.find('.', 5) - 5);
          const int a = algo == "pat" ? ARTUNE_NCCL_ALGO_PAT : indices_of(spec).first;
          CHECK(artune_test::nccl_choice(costs) == std::make_pair(a, indices_of(spec).second));
        }
        CHECK(channels == channels_of(spec));
      }
    }
  }
  CHECK(points == 2 * 3);  // 1K, 64K, 4M for each collective
  v5->finalize(ctx);
}

TEST_CASE("nccl_target.cli_bad_input") {
  const auto bad = artune_test::run_artune({"autotune", "-t", "dgx1-v100", "--target", "gloo", "-q"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--target: 'gloo' is not artune or nccl") != std::string::npos);
  const auto measure =
      artune_test::run_artune({"autotune", "-t", "uniform:4", "--target", "nccl", "--measure", "cpu", "-q"});
  CHECK(measure.status == 2);
  CHECK(measure.err ==
        "artune: --measure cpu: --target nccl measures NCCL's own choices with real NCCL only "
        "(--measure nccl, under mpirun with one GPU per rank)\n");
  CHECK(measure.out.empty());
  // --measure nccl needs real NCCL on a GPU: refused up front, in one line, where there is none.
  bool gpu = false;
#if ARTUNE_HAVE_NCCL_BACKEND
  gpu = artune::cuda_device_count() > 0;
#endif
  if (!gpu) {
    const auto nccl =
        artune_test::run_artune({"autotune", "-t", "uniform:4", "--target", "nccl", "--measure", "nccl", "-q"});
    CHECK((nccl.status == 2 || nccl.status == 3));
    CHECK(nccl.err.rfind("artune: --measure nccl: ", 0) == 0);
    CHECK(std::count(nccl.err.begin(), nccl.err.end(), '\n') == 1);
    CHECK(nccl.out.empty());
  }
  CHECK_THROWS_AS(artune::check_nccl_measurement(artune::BackendKind::kMpi), artune::InvalidInput);
  const auto one = artune_test::run_artune({"autotune", "-t", "uniform:1", "--target", "nccl", "-q"});
  CHECK(one.status == 2);
  CHECK(one.err.find("--target nccl: 'uniform:1' has 1 GPU(s)") != std::string::npos);
}
