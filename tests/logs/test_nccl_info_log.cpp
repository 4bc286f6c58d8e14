// The NCCL INFO reader on published logs (tests/logs/data, sources in its README.md): rings, trees, network
// devices and connections, graph search lines, environment and TUNING picks as NCCL printed them, and one
// InvalidInput naming the file and line for a recognised line that cannot be read.

#include <doctest/doctest.h>

#include <string>

#include "artune/core/error.hpp"
#include "artune/logs/nccl_info_log.hpp"
#include "tests/logs/log_fixtures.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using namespace artune::logs;
using artune_test::error_of;

namespace {

InfoLog fixture(const std::string& name) { return read_nccl_info((artune_test::log_data_dir() / name).string()); }

}  // namespace

TEST_CASE("nccl_info_log.every_fixture_reads") {
  int with_info = 0;
  for (const auto& f : artune_test::log_fixtures()) {
    INFO(f.file);
    const InfoLog log = fixture(f.file);
    if (f.kind == "nccl-info") {
      CHECK_FALSE(log.empty());
      ++with_info;
    }
  }
  CHECK(with_info >= 3);
}

TEST_CASE("nccl_info_log.rings_trees_and_ranks") {
  // NVIDIA/nccl#1412: two machines of 8 GPUs, 8 ring channels.
  const InfoLog log = fixture("nccl1412-2x8-info.log");
  CHECK(log.nranks == 16);
  CHECK(log.nnodes == 2);
  CHECK(log.hosts == std::vector<std::string>{"swat1-04"});
  REQUIRE(log.rings.size() == 5);
  CHECK(log.ring_channels() == 8);
  CHECK(log.rings[0].channel == 0);
  CHECK(log.rings[0].ranks == std::vector<int>{0, 5, 4, 7, 6, 3, 2, 1, 8, 13, 12, 15, 14, 11, 10, 9});
  CHECK(log.rings[3].channel == 3);  // printed after the Trees line
  REQUIRE(log.trees.size() == 8);
  CHECK(log.trees[0].rank == 1);
  CHECK(log.trees[0].up == 0);
  CHECK(log.trees[0].down == std::vector<int>{2});
  CHECK(log.trees[1].down.empty());
}

TEST_CASE("nccl_info_log.network_devices_and_connections") {
  // NVIDIA/nccl#1357: four IB NICs with SHARP.
  const InfoLog a = fixture("nccl1357-2x8-h100-info.log");
  REQUIRE(a.net_devices.size() == 4);
  CHECK(a.net_devices[2].name == "mlx5_4");
  CHECK(a.net_devices[2].port == 1);
  CHECK(a.net_devices[2].link == "IB/SHARP");
  CHECK(a.net_devices[2].transport == "IB");
  CHECK(a.net_devices[2].host == "qh100-gpu20");
  CHECK(a.nranks == 16);
  // NVIDIA/nccl#302 (NCCL 2.5): a launcher's rank tag before each line, both trees of a channel per entry.
  const InfoLog b = fixture("nccl302-ib-info.log");
  REQUIRE(b.net_devices.size() == 5);
  CHECK(b.net_devices[3].link == "RoCE");
  CHECK(b.net_devices[0].host == "crow-ib-new-nccl-256-info-19");
  REQUIRE(b.trees.size() == 4);
  CHECK(b.trees[3].down == std::vector<int>{153, 146, 162});
  CHECK(b.trees[3].up == 154);
  // NVIDIA/nccl#1814: which network device each channel's connection uses.
  const InfoLog c = fixture("nccl1814-net-info.log");
  REQUIRE(c.net_connections.size() == 12);
  CHECK(c.net_connections[0].channel == 3);
  CHECK(c.net_connections[0].from_rank == 47);
  CHECK(c.net_connections[0].to_rank == 39);
  CHECK_FALSE(c.net_connections[0].send);
  CHECK(c.net_connections[0].transport == "IBext_v8");
  CHECK(c.net_connections[0].device == 2);
  CHECK(c.devices_used().at("hostname-test") == std::vector<int>{1, 2});
}

TEST_CASE("nccl_info_log.fused_network_devices") {
  // NIC fusion (NCCL 2.24 on): net_ib.cc prints "NET/IB : Made virtual device [%d] name=%s speed=%d ndevs=%d" for
  // every device the topology search made (NVIDIA/nccl v2.28.9-1, src/transport/net_ib.cc; one port alone too),
  // and the channels connect through those devices, numbered after the ports (src/graph/topo.cc,
  // ncclTopoProcessNet). Lines in that format: two dual-port NICs fused, a connection through each.
  const std::string text =
      "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
      "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB "
      "ib0:10.0.0.1<0>\n"
      "h:1:2 [0] NCCL INFO NET/IB : Made virtual device [4] name=mlx5_0+mlx5_1 speed=400000 ndevs=2\n"
      "h:1:2 [0] NCCL INFO NET/IB : Made virtual device [5] name=mlx5_2+mlx5_3 speed=400000 ndevs=2\n"
      "h:1:2 [0] NCCL INFO NET/IB : Made virtual device [5] name=mlx5_2+mlx5_3 speed=400000 ndevs=2\n"
      "h:1:2 [0] NCCL INFO Channel 00/0 : 15[7] -> 0[0] [receive] via NET/IB/4\n"
      "h:1:2 [0] NCCL INFO Channel 01/0 : 15[7] -> 0[0] [receive] via NET/IB/5\n";
  const InfoLog a = parse_nccl_info(text, "fused.log");
  CHECK(a.net_devices.size() == 4);
  REQUIRE(a.virtual_devices.size() == 2);  // the repeated line once
  CHECK(a.virtual_devices[0].index == 4);
  CHECK(a.virtual_devices[0].name == "mlx5_0+mlx5_1");
  CHECK(a.virtual_devices[0].ports == 2);
  CHECK(a.virtual_devices[0].transport == "IB");
  CHECK(a.virtual_devices[1].line == 4);
  CHECK(a.devices_used().at("h") == std::vector<int>{4, 5});
  CHECK(a.ports_of("h", 4) == 2);
  CHECK(a.ports_of("h", 0) == 1);
  CHECK(a.ports_of("other", 4) == 1);
  CHECK(error_of([&] {
          parse_nccl_info("h:1:2 [0] NCCL INFO NET/IB : Made virtual device [x] name=mlx5_0 speed=1 ndevs=1\n",
                          "bad.log");
        }).rfind("bad.log:1:", 0) == 0);
  CHECK(error_of([&] {
          parse_nccl_info("h:1:2 [0] NCCL INFO NET/IB : Made virtual device [4] name=mlx5_0 speed=1\n", "bad.log");
        }).rfind("bad.log:1:", 0) == 0);
}

TEST_CASE("nccl_info_log.search_fallback_environment_and_picks") {
  // NVIDIA/nccl#1876: the ring search found no path and fell back to one channel at 0.1 GB/s.
  const InfoLog a = fixture("nccl1876-leonardo-info.log");
  CHECK(a.search_fallbacks == 1);
  REQUIRE(a.graphs.size() == 1);
  CHECK(a.graphs[0].pattern == 1);
  CHECK(a.graphs[0].channels == 1);
  CHECK(a.graphs[0].bw_intra == doctest::Approx(0.1));
  CHECK(a.graphs[0].type_intra == "SYS");
  CHECK(a.graphs[0].type_inter == "SYS");
  // NVIDIA/nccl#1453: 3 machines of 8 H100, NCCL_CROSS_NIC from the environment, rings printed to 20 ranks.
  const InfoLog b = fixture("nccl1453-3x8-h100-init-info.log");
  CHECK(b.nranks == 24);
  CHECK(b.nnodes == 3);
  CHECK(b.env.at("NCCL_CROSS_NIC") == "2");
  REQUIRE(b.rings.size() == 2);
  CHECK(b.rings[0].channels == 16);
  CHECK(b.rings[0].ranks.size() == 20);
  // NCCL 2.21's TUNING lines: numbers for algorithm and protocol, and its time estimate.
  const InfoLog c = fixture("nccl1453-3x8-h100-tuning-info.log");
  REQUIRE(c.picks.size() == 13);
  CHECK(c.picks[0].bytes == 65536);
  CHECK(c.picks[0].algo == "tree");
  CHECK(c.picks[0].proto == "ll");
  CHECK(c.picks[0].time_us == doctest::Approx(37.798233));
  CHECK(c.picks[6].bytes == 131072);
  CHECK(c.picks[6].proto == "ll128");
  // NCCL 2.25+ names them and adds the channels.
  const InfoLog d = parse_nccl_info(
      "h:1:2 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}\n", "new.log");
  REQUIRE(d.picks.size() == 1);
  CHECK(d.picks[0].function == "AllReduce");
  CHECK(d.picks[0].algo == "ring");
  CHECK(d.picks[0].proto == "simple");
  CHECK(d.picks[0].channel_hi == 7);
}

TEST_CASE("nccl_info_log.unreadable_lines_name_the_file_and_line") {
  const std::string head = "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n";
  CHECK(error_of([&] { parse_nccl_info(head + "h:1:2 [0] NCCL INFO Channel 00/02 :    0   x\n", "bad.log"); })
            .rfind("bad.log:2:", 0) == 0);
  CHECK(error_of([&] { parse_nccl_info(head + "h:1:2 [0] NCCL INFO Channel 00/02 :    0   0\n", "bad.log"); })
            .rfind("bad.log:2:", 0) == 0);
  CHECK(error_of([&] { parse_nccl_info(head + "h:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0\n", "bad.log"); })
            .rfind("bad.log:2:", 0) == 0);
  CHECK(error_of([&] { parse_nccl_info(head + "h:1:2 [0] NCCL INFO AllReduce: 12 Bytes -> Algo FOO proto LL\n", "bad.log"); })
            .rfind("bad.log:2:", 0) == 0);
  CHECK(error_of([&] { parse_nccl_info(head + "h:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels x, bw 1/1\n", "bad.log"); })
            .rfind("bad.log:2:", 0) == 0);
  // A text without NCCL lines is an empty log, not an error.
  CHECK(parse_nccl_info("nothing here\n", "none.log").empty());
}

TEST_CASE("nccl_info_log.the_cost_table_nccl_prints") {
  // NCCL 2.30.4's table on 8 × H200 (C-TC/multi-gpu-programming-models, kept in
  // tests/simulator/data/nccl_tuning_published.json): three blocks of algorithms, five functions, LL/LL128/Simple.
  const std::string p = "h:1:2 [0] NCCL INFO ";
  const std::string text =
      p + "  Algorithm   |                            Tree                  |                            Ring                  |\n" +
      p + "  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |\n" +
      p + " Max NThreads |            512 |            640 |            512 |            512 |            640 |            512 |\n" +
      p + "    AllGather |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |    10.8/ 161.1 |    27.3/ 378.5 |    32.2/ 411.4 |\n" +
      p + "    AllReduce |    15.2/  43.6 |    31.5/ 128.8 |    64.4/ 165.6 |    15.0/  80.6 |    40.6/ 189.3 |    56.0/ 205.7 |\n" +
      p + "  Algorithm   |                             PAT                  |\n" +
      p + "  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |\n" +
      p + "    AllReduce |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |\n" +
      // A second communicator's table: the first one printed is kept.
      p + "  Algorithm   |                            Tree                  |                            Ring                  |\n" +
      p + "  Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |\n" +
      p + "    AllReduce |     9.9/   9.9 |     9.9/   9.9 |     9.9/   9.9 |     9.9/   9.9 |     9.9/   9.9 |     9.9/   9.9 |\n";
  const InfoLog log = parse_nccl_info(text, "table.log");
  REQUIRE(log.costs.size() == 15);  // 2 functions × 6 cells, and PAT's 3 (its padded Protocol line notwithstanding)
  const InfoCost& ring_ll = log.costs[9];
  CHECK(ring_ll.function == "AllReduce");
  CHECK(ring_ll.algo == "ring");
  CHECK(ring_ll.proto == "ll");
  CHECK(ring_ll.latency_us == 15.0);
  CHECK(ring_ll.bandwidth_gbps == 80.6);
  CHECK(ring_ll.line == 5);
  CHECK(log.costs[12].algo == "pat");
  CHECK(log.costs[14].proto == "simple");
  for (const InfoCost& c : log.costs) CHECK(c.latency_us != 9.9);
  // A cell that is not LATENCY/BANDWIDTH names the file and line.
  CHECK(error_of([&] {
          parse_nccl_info(p + "  Algorithm   |   Ring   |\n" + p + "  Protocol    |  LL |  LL128 |  Simple |\n" + p +
                              "    AllReduce |    15.0/  80.6 |    x/ 189.3 |    56.0/ 205.7 |\n",
                          "bad.log");
        }) == "bad.log:3: cost table cell 'x/ 189.3' is not LATENCY/BANDWIDTH");
  // Lines with '|' outside a table are not table rows.
  CHECK(parse_nccl_info(p + "a | b/c | d\n", "other.log").costs.empty());
}
