// Issue 25 through the built binary: GPU subsets in -t, `artune bound`, `artune alloc`, simulate's bound%
// column, and the trees family run on the cpu and mpi backends with #wrong = 0; every mistake is one line and
// exit 2.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

using artune_test::run_artune;
using artune_test::run_shell;

namespace {

void expect_bad(const std::vector<std::string>& args, const std::string& needle) {
  const auto r = run_artune(args);
  INFO(args[0] << " … " << r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(artune_test::count_of(r.err, "\n") <= 1);
}

}  // namespace

TEST_CASE("cli_bound.bound") {
  const auto r = run_artune({"bound", "-t", "dgx1-v100[0,1,2,4,5]"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("effective (profile nccl)        79.20") != std::string::npos);
  CHECK(r.out.find("nominal                         97.20") != std::string::npos);
  CHECK(r.out.find("volume") != std::string::npos);
  const auto j = run_artune({"bound", "-t", "dgx1-v100", "--collective", "allgather", "--json"});
  REQUIRE(j.status == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["effective"]["busbw_gbps"].get<double>() == doctest::Approx(126));
  CHECK(doc["effective"]["cuts"][0]["receivers"].size() == 2);
  CHECK(doc["gpus"] == 8);
  const auto h = run_artune({"bound", "-t", "dgx-h100"});
  CHECK(h.out.find("in-network reduction (NVLS) and a partition: 2(5-1) buffers between 5 parts") !=
        std::string::npos);
  CHECK(h.out.find("{gpu0,gpu1,gpu2,gpu3} | {gpu4} | {gpu5} | {gpu6} | {gpu7}: 16 links") != std::string::npos);
  const auto hj = run_artune({"bound", "-t", "dgx-h100", "--json"});
  REQUIRE(hj.status == 0);
  const auto hdoc = nlohmann::json::parse(hj.out);
  CHECK(hdoc["effective"]["cuts"][0]["what"] == "partition");
  CHECK(hdoc["effective"]["cuts"][0]["parts"].size() == 5);
  CHECK(hdoc["effective"]["in_network"] == true);
}

TEST_CASE("cli_bound.packed_trees") {
  // Beside the bound, what trees packed over the routes carry: at it where the two-way split binds (an NVLink pair
  // under one PCIe switch) and where a partition's flows bind (staged edges loading PCIe uplinks that its links
  // between parts count once), below it on NVLS machines by the switches' reduction, absent on clusters.
  const auto two_way = run_artune({"bound", "-t", "dgx1-v100[0,1,4]"});
  REQUIRE(two_way.status == 0);
  CHECK(two_way.out.find("effective (profile nccl)        38.67        29.00  a cut splitting the GPUs, crossed both "
                         "ways at once") != std::string::npos);
  CHECK(
      two_way.out.find("# effective two-way split cut: {gpu1} <-> {gpu0,gpu4} at once: 6 links (nvlink+pcie+smp) full, "
                       "76.00 GB/s; every result crosses it both ways, on links that cannot carry both: algbw <= "
                       "29.00 GB/s") != std::string::npos);
  CHECK(two_way.out.find("effective (profile nccl)        38.67        29.00  100.0 %\n") != std::string::npos);
  const auto r = run_artune({"bound", "-t", "dgx1-v100[0,1,2,3,4,5]"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("# trees packed over the routes") != std::string::npos);
  CHECK(r.out.find("effective (profile nccl)        90.83        54.50  partition: 2(3-1) buffers between 3 parts, as "
                   "flows") != std::string::npos);
  CHECK(r.out.find("effective (profile nccl)        90.83        54.50  100.0 %\n") != std::string::npos);
  const auto rj = run_artune({"bound", "-t", "dgx1-v100[0,1,2,3,4,5]", "--json"});
  REQUIRE(rj.status == 0);
  const auto rdoc = nlohmann::json::parse(rj.out);
  CHECK(rdoc["effective"]["cuts"][0]["what"] == "partition");
  CHECK(rdoc["effective"]["cuts"][0]["as_flows"] == true);
  CHECK(rdoc["effective"]["cuts"][0]["parts"].size() == 3);
  const auto whole = run_artune({"bound", "-t", "dgx1-v100", "--json"});
  REQUIRE(whole.status == 0);
  const auto doc = nlohmann::json::parse(whole.out);
  CHECK(doc["effective"]["packed_trees"]["fraction"].get<double>() == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(doc["nominal"]["packed_trees"]["busbw_gbps"].get<double>() == doctest::Approx(156).epsilon(1e-6));
  const auto h = run_artune({"bound", "-t", "dgx-h100"});
  CHECK(h.out.find("58.1 %: the bound counts the switches' reduction (NVLS), which trees do not use") !=
        std::string::npos);
  const auto c = run_artune({"bound", "-t", "2xdgx-a100", "--json"});
  REQUIRE(c.status == 0);
  CHECK(nlohmann::json::parse(c.out)["effective"]["packed_trees"].is_null());
  CHECK(run_artune({"bound", "-t", "2xdgx-a100"}).out.find("trees packed") == std::string::npos);
  expect_bad({"simulate", "-t", "uniform:25", "-s", "rbtrees", "-b", "1M", "-e", "1M"},
             "tree packing takes at most 24 GPUs of one machine (25 given)");
  expect_bad({"alloc", "-t", "uniform:26", "-k", "25", "--plans", "trees"},
             "plans 'trees': the tree families pack at most 24 GPUs of one machine (25 asked for)");
}

TEST_CASE("cli_bound.alloc") {
  const auto r = run_artune({"alloc", "-t", "dgx1-v100", "-k", "4", "--top", "2"});
  REQUIRE(r.status == 0);
  CHECK(r.out.find("1  0,1,2,3") != std::string::npos);
  CHECK(r.out.find("2  4,5,6,7") != std::string::npos);
  const auto j = run_artune({"alloc", "-t", "dgx1-v100", "--free", "0,1,2,4,5,6", "-k", "4", "--json"});
  REQUIRE(j.status == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["subsets"] == 15);
  CHECK(doc["ranked"][0]["gpus"] == "1,2,5,6");
  CHECK(doc["ranked"][0]["penalty_vs_best"].get<double>() == 0.0);
  CHECK(doc["ranked"][1]["penalty_vs_best"].get<double>() > 0.0);
  CHECK(doc["machine"]["best_busbw_gbps"].get<double>() == doctest::Approx(126));
}

TEST_CASE("cli_bound.simulate_bound_column") {
  const auto r = run_artune({"simulate", "-t", "dgx1-v100[0,1,2,4,5]", "-s", "trees", "--segments", "16", "-b", "256M",
                             "-e", "256M", "--json"});
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["bound"]["busbw_gbps"].get<double>() == doctest::Approx(79.2));
  const double pct = doc["results"][0]["bound_pct"].get<double>();
  CHECK(pct > 70);
  CHECK(pct <= 100);
  const auto t = run_artune({"simulate", "-t", "uniform:4", "-s", "xring", "-b", "1M", "-e", "1M"});
  CHECK(t.out.find("bound%") != std::string::npos);
}

TEST_CASE("cli_bound.trees_run_exact") {
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"-s", "trees"},
                                                {"-s", "trees2", "-o", "avg", "-d", "half"},
                                                {"-s", "trees", "--collective", "allgather"},
                                                {"-s", "trees", "--collective", "reducescatter", "-o", "max"},
                                                {"-s", "rbtrees", "-o", "avg", "-d", "bfloat16", "--segments", "4"},
                                                {"-s", "prings", "-o", "avg", "--segments", "2"}}) {
    std::vector<std::string> args = {"run", "-t", "dgx1-v100[0,1,2,4,5]", "--backend", "cpu", "-b", "1K", "-e", "64K",
                                     "-f",  "8"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_artune(args);
    INFO(extra[1] << " " << r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
  // A cluster: trees in every machine, rings across (the cpu backend's workers stand in for both machines), for the
  // three collectives.
  for (const char* collective : {"allreduce", "allgather", "reducescatter"}) {
    const auto c = run_artune({"run", "-t", "2xpcie-8gpu", "-s", "trees", "--collective", collective, "--backend", "cpu",
                               "-b", "1K", "-e", "256K", "-f", "16", "-o", "avg", "--segments", "4"});
    INFO(collective << ": " << c.err);
    CHECK(c.status == 0);
    CHECK(c.out.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
  // The all-reduce in slices (trees#P: each step of a slice after the same step of the slice before).
  const auto sliced = run_artune({"run", "-t", "2xpcie-8gpu", "-s", "trees#4", "--backend", "cpu", "-b", "1K", "-e",
                                  "256K", "-f", "16", "-o", "avg", "--segments", "2"});
  INFO("trees#4: " << sliced.err);
  CHECK(sliced.status == 0);
  CHECK(sliced.out.find("# Out of bounds values : 0 OK") != std::string::npos);
  // Under mpirun: one rank per GPU, the staged copies on the ranks of the CPUs' plan devices.
  for (const char* spec : {"trees", "trees#3", "rbtrees", "prings"}) {
    const auto m = run_shell(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -s KILL 120 mpirun -np 5 "
        "--oversubscribe " +
        artune_test::artune_bin() + " run -t 'dgx1-v100[0,1,2,4,5]' -s '" + spec + "'" +
        " --backend mpi -b 4K -e 64K -f 16 2>&1");
    if (m.out.find("mpirun: not found") != std::string::npos) break;
    INFO(spec << ": " << m.out);
    CHECK(m.status == 0);
    CHECK(m.out.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
}

TEST_CASE("cli_bound.trees_lowered") {
  // Without a GPU: what the cuda and nccl backends would do with the plan (the staged copies in host memory).
  const auto cuda =
      run_artune({"plan", "-t", "dgx1-v100[0,1,2,4,5]", "-s", "trees", "--count", "4096", "--lower", "cuda"});
  CHECK(cuda.status == 0);
  CHECK(cuda.out.find("cpu0 -> host memory") != std::string::npos);
  const auto nccl =
      run_artune({"plan", "-t", "dgx1-v100[0,1,2,4,5]", "-s", "trees2", "--count", "4096", "--lower", "nccl"});
  CHECK(nccl.status == 0);
  CHECK(nccl.out.find("nccl lowering of trees2") != std::string::npos);
  const auto rb =
      run_artune({"plan", "-t", "dgx1-v100[0,1,2,4,5]", "-s", "rbtrees", "--count", "4096", "--lower", "cuda"});
  CHECK(rb.status == 0);
  CHECK(rb.out.find("-> host memory") != std::string::npos);
  const auto rings = run_artune({"plan", "-t", "dgx1-v100", "-s", "prings", "--count", "4096", "--lower", "cuda"});
  CHECK(rings.status == 0);
  CHECK(rings.out.find("-> host memory") != std::string::npos);
}

TEST_CASE("cli_bound.packed_rings_at_the_bound") {
  // On the whole DGX-1 V100 every GPU takes in alike: the packed rings (LP 126 GB/s busbw, the bound) simulate at
  // 96.8 % of the bound at 256 MiB and 4 segments, past NCCL's rings (modelled), which keep to NVLink; docs/bound.md.
  const auto rings = run_artune({"simulate", "-t", "dgx1-v100", "-s", "prings", "--segments", "4", "-b", "256M", "-e",
                                 "256M", "--json"});
  const auto nccl = run_artune({"simulate", "-t", "dgx1-v100", "-s", "nccl", "-b", "256M", "-e", "256M", "--json"});
  REQUIRE(rings.status == 0);
  REQUIRE(nccl.status == 0);
  const auto r = nlohmann::json::parse(rings.out)["results"][0];
  const auto n = nlohmann::json::parse(nccl.out)["results"][0];
  CHECK(r["bound_pct"].get<double>() == doctest::Approx(96.8).epsilon(0.001));
  CHECK(r["busbw_gbps"].get<double>() > n["busbw_gbps"].get<double>());
}

TEST_CASE("cli_bound.bad_input") {
  expect_bad({"bound", "-t", "dgx1-v100[9]"}, "GPU 9 does not exist");
  expect_bad({"bound", "-t", "dgx1-v100[0,0]"}, "named twice");
  expect_bad({"bound", "--collective", "broadcast"}, "--collective");
  expect_bad({"simulate", "-t", "dgx1-v100[0,x]", "-s", "trees"}, "'x' is neither a GPU index");
  expect_bad({"alloc", "-k", "0"}, "-k/--gpus");
  expect_bad({"alloc", "-k", "9"}, "-k/--gpus: 9 GPUs asked for, 8 free");
  expect_bad({"alloc", "-k", "2", "--free", "0,0"}, "--free: GPU 'gpu0' is named twice");
  expect_bad({"alloc", "-k", "2", "--plans", "best"}, "--plans");
  expect_bad({"alloc", "-k", "2", "--size", "3"}, "--size");
  expect_bad({"alloc", "-k", "16", "-t", "4xdgx-h100"}, "subsets");
  expect_bad({"alloc"}, "--gpus");
}

TEST_CASE("cli_bound.help") {
  for (const char* cmd : {"bound", "alloc"}) {
    const auto r = run_artune({cmd, "--help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("Examples:") != std::string::npos);
  }
}
