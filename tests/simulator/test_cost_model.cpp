// Cost-model defaults, JSON round trip and calibration overlays.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;

namespace {
std::string overlay_error(const char* text) {
  CostModel m = CostModel::defaults();
  try {
    m.apply_overlay(nlohmann::json::parse(text), "calib.json");
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("cost_model.nccl_defaults_follow_nccl_tables") {
  const CostModel m = CostModel::defaults(BackendProfile::kNccl);
  CHECK(m.profile == BackendProfile::kNccl);
  CHECK(m.group_base_latency_us == 8.4);
  CHECK(m.group_hop_latency_us == 3.4);
  CHECK(m.op_overhead_us == 3.4);
  CHECK(m.link_for(LinkKind::kNvLink).efficiency == 0.8);
  // PCIe (and SYS: PCIe + QPI) and network (PCIe + network) hops cost NCCL's 5.7 and 14 µs in all.
  const double pcie = m.link_for(LinkKind::kPcie).alpha_us;
  CHECK(m.op_overhead_us + pcie == doctest::Approx(5.7));
  CHECK(m.op_overhead_us + pcie + m.link_for(LinkKind::kSmp).alpha_us == doctest::Approx(5.7));
  CHECK(m.op_overhead_us + pcie + m.link_for(LinkKind::kNetwork).alpha_us == doctest::Approx(14.0));
  CHECK(m.reduce_for(NodeKind::kGpu) > m.reduce_for(NodeKind::kCpu));
  CHECK(m.transfer_cap_gbps == 0);
  CHECK_THROWS_AS(m.reduce_for(NodeKind::kNic), InvalidInput);
}

TEST_CASE("cost_model.profiles_differ") {
  const CostModel cpu = CostModel::defaults(BackendProfile::kCpu);
  const CostModel mpi = CostModel::defaults(BackendProfile::kMpi);
  const CostModel cuda = CostModel::defaults(BackendProfile::kCuda);
  CHECK(cpu.op_overhead_us == 1.0);
  CHECK(cpu.transfer_cap_gbps > 0);
  CHECK(cpu.reduce_for(NodeKind::kGpu) == cpu.reduce_for(NodeKind::kCpu));  // host threads stand in for GPUs
  CHECK(mpi.op_overhead_us > cpu.op_overhead_us);
  CHECK(cuda.op_overhead_us == 5.0);
  CHECK(parse_backend_profile("mpi") == BackendProfile::kMpi);
  CHECK(to_string(BackendProfile::kCuda) == "cuda");
  CHECK_THROWS_AS(parse_backend_profile("gloo"), InvalidInput);
}

TEST_CASE("cost_model.json_round_trip") {
  for (const auto profile :
       {BackendProfile::kNccl, BackendProfile::kCuda, BackendProfile::kCpu, BackendProfile::kMpi}) {
    const CostModel m = CostModel::defaults(profile);
    CostModel other =
        CostModel::defaults(profile == BackendProfile::kCpu ? BackendProfile::kNccl : BackendProfile::kCpu);
    other.apply_overlay(m.to_json(), "roundtrip");
    CHECK(other == m);
  }
}

TEST_CASE("cost_model.overlay_replaces_only_given_fields") {
  CostModel m = CostModel::defaults();
  m.apply_overlay(nlohmann::json::parse(R"({"op_overhead_us": 7.5,
      "links": {"nvlink": {"efficiency": 0.5}},
      "devices": {"cpu": {"reduce_gbps": 12}}})"),
                  "calib.json");
  CHECK(m.op_overhead_us == 7.5);
  CHECK(m.link_for(LinkKind::kNvLink).efficiency == 0.5);
  CHECK(m.link_for(LinkKind::kNvLink).alpha_us == 0.0);
  CHECK(m.reduce_for(NodeKind::kCpu) == 12.0);
  CHECK(m.memory_for(NodeKind::kCpu) == CostModel::defaults().memory_for(NodeKind::kCpu));
  CHECK(m.group_base_latency_us == 8.4);
}

TEST_CASE("cost_model.overlay_errors_name_source_and_path") {
  CHECK(overlay_error(R"({"bogus": 1})").rfind("calib.json: bogus: unknown key", 0) == 0);
  CHECK(overlay_error(R"({"op_overhead_us": "fast"})") == "calib.json: op_overhead_us: must be a number, not a string");
  CHECK(overlay_error(R"({"op_overhead_us": -1})") == "calib.json: op_overhead_us: must be a finite number ≥ 0");
  CHECK(overlay_error(R"({"links": {"nvlink": {"efficiency": 1.5}}})") ==
        "calib.json: links.nvlink.efficiency: must be in (0, 1]");
  CHECK(overlay_error(R"({"links": {"nvlink": {"efficiency": 0}}})") ==
        "calib.json: links.nvlink.efficiency: must be in (0, 1]");
  CHECK(overlay_error(R"({"links": {"warp": {}}})").rfind("calib.json: links.warp: unknown link kind", 0) == 0);
  CHECK(overlay_error(R"({"links": {"pcie": {"beta": 1}}})").rfind("calib.json: links.pcie.beta: unknown key", 0) == 0);
  CHECK(overlay_error(R"({"devices": {"gpu": {"reduce_gbps": 0}}})") ==
        "calib.json: devices.gpu.reduce_gbps: must be a finite number > 0");
  CHECK(overlay_error(R"({"devices": {"tpu": {}}})").rfind("calib.json: devices.tpu: unknown device kind", 0) == 0);
  CHECK(overlay_error(R"([1, 2])") == "calib.json: must be an object, not an array");
  CHECK(overlay_error(R"({"profile": "gloo"})").rfind("calib.json: profile: 'gloo' is not a backend", 0) == 0);
  // A failed overlay leaves the model as it was.
  CostModel m = CostModel::defaults();
  CHECK_THROWS_AS(m.apply_overlay(nlohmann::json::parse(R"({"op_overhead_us": 9, "bogus": 1})"), "x"), InvalidInput);
  CHECK(m == CostModel::defaults());
}

TEST_CASE("cost_model.host_overlay_round_trip") {
  CostModel m = CostModel::defaults(BackendProfile::kCpu);
  m.apply_overlay(nlohmann::json::parse(R"({"host": {"run_overhead_us": 12.5, "cores": 2, "cache_bytes": 16777216,
      "cache_gbps": 40, "dram_gbps": 9.5}})"),
                  "calib.json");
  CHECK(m.host == HostModel{12.5, true, 2.0, 16777216.0, 40.0, 9.5});  // serial_devices kept from the cpu profile
  const nlohmann::json j = m.to_json();
  CHECK(j["host"]["cache_bytes"] == 16777216.0);
  CHECK(j["host"]["serial_devices"] == true);
  CostModel other = CostModel::defaults(BackendProfile::kNccl);
  other.apply_overlay(j, "roundtrip");
  CHECK(other == m);
  // A GPU profile writes the host model off, and reading it back turns a host overlay off again.
  const CostModel nccl = CostModel::defaults(BackendProfile::kNccl);
  CHECK(nccl.to_json()["host"] == nlohmann::json::parse(R"({"run_overhead_us": 0.0, "serial_devices": false,
      "cores": 0.0, "cache_bytes": 0.0, "cache_gbps": 0.0, "dram_gbps": 0.0})"));
  m.apply_overlay(nccl.to_json(), "roundtrip");
  CHECK(m == nccl);
}

TEST_CASE("cost_model.host_overlay_errors_name_the_field") {
  CHECK(overlay_error(R"({"host": 3})") == "calib.json: host: must be an object, not a number");
  CHECK(overlay_error(R"({"host": {"cores": -1}})") == "calib.json: host.cores: must be a finite number ≥ 0");
  CHECK(overlay_error(R"({"host": {"cores": 0.001}})") ==
        "calib.json: host.cores: must be 0 (no limit) or in [0.01, 1e+06] (got 0.001)");
  CHECK(overlay_error(R"({"host": {"cores": "two"}})") == "calib.json: host.cores: must be a number, not a string");
  CHECK(overlay_error(R"({"host": {"run_overhead_us": 2e6}})") ==
        "calib.json: host.run_overhead_us: must be at most 1e+06 µs (got 2e+06)");
  CHECK(overlay_error(R"({"host": {"cache_bytes": 1e16}})") ==
        "calib.json: host.cache_bytes: must be at most 1e+15 (got 1e+16)");
  CHECK(overlay_error(R"({"host": {"cache_gbps": -3}})") == "calib.json: host.cache_gbps: must be a finite number ≥ 0");
  CHECK(overlay_error(R"({"host": {"dram_gbps": 1e-9}})") ==
        "calib.json: host.dram_gbps: must be at least 1e-06 GB/s (got 1e-09)");
  CHECK(overlay_error(R"({"host": {"serial_devices": 1}})") ==
        "calib.json: host.serial_devices: must be true or false, not a number");
  CHECK(
      overlay_error(R"({"host": {"threads": 4}})").rfind("calib.json: host.threads: unknown key (run_overhead_us", 0) ==
      0);
  // One line, and a bad field leaves the model as it was.
  CHECK(overlay_error(R"({"host": {"cores": -1}})").find('\n') == std::string::npos);
  CostModel m = CostModel::defaults(BackendProfile::kCpu);
  CHECK_THROWS_AS(m.apply_overlay(nlohmann::json::parse(R"({"host": {"cores": 2, "dram_gbps": -1}})"), "x"),
                  InvalidInput);
  CHECK(m == CostModel::defaults(BackendProfile::kCpu));
}

TEST_CASE("cost_model.gpu_rates_follow_the_architecture") {
  // A GPU of a known architecture reduces and copies at its generation's rate (HBM bandwidth × the fraction a
  // reduce and a copy reach: V100's figures for sm60–sm80, the H200 measurement's for sm90 and later); others at
  // the GPU kind's V100 figures. Host profiles have no GPUs, only threads standing in for them.
  const CostModel m = CostModel::defaults(BackendProfile::kNccl);
  Node gpu;
  gpu.kind = NodeKind::kGpu;
  gpu.arch = "sm70";
  CHECK(m.reduce_for(gpu) == doctest::Approx(300.0));
  CHECK(m.memory_for(gpu) == doctest::Approx(400.0));
  gpu.arch = "sm80";
  CHECK(m.reduce_for(gpu) == doctest::Approx(1555.0 / 3));
  CHECK(m.memory_for(gpu) == doctest::Approx(1555.0 / 2 * 400.0 / 450.0));
  gpu.arch = "sm90";
  CHECK(m.reduce_for(gpu) == doctest::Approx(3350.0 / 3 * 3720.0 / 4800.0));
  CHECK(m.memory_for(gpu) == doctest::Approx(3350.0 / 2 * 3870.0 / 4800.0));
  gpu.arch = "";
  CHECK(m.reduce_for(gpu) == m.reduce_for(NodeKind::kGpu));
  gpu.arch = "sm999";
  CHECK(m.memory_for(gpu) == m.memory_for(NodeKind::kGpu));
  CHECK(CostModel::defaults(BackendProfile::kCpu).gpu_arch.empty());
  // The whole model round-trips through its JSON (the overlay schema).
  CostModel back = CostModel::defaults(BackendProfile::kCpu);
  back.apply_overlay(m.to_json(), "model.json");
  CHECK(back == m);
  // A calibration of this machine's GPUs holds for all of them, whatever their architecture.
  CostModel calibrated = m;
  calibrated.apply_overlay(nlohmann::json::parse(R"({"devices": {"gpu": {"reduce_gbps": 123}}})"), "c.json");
  gpu.arch = "sm90";
  CHECK(calibrated.reduce_for(gpu) == doctest::Approx(123.0));
  CHECK(calibrated.gpu_arch.empty());
  CostModel bad = m;
  CHECK_THROWS_WITH_AS(bad.apply_overlay(nlohmann::json::parse(R"({"gpu_arch": {"sm42": {"reduce_gbps": 5}}})"), "o.json"),
                       doctest::Contains("gpu_arch.sm42: needs both"), InvalidInput);
}

TEST_CASE("cost_model.h100_plans_reduce_faster_than_v100_rates") {
  // The same ring on the built-in DGX H100 (sm90) is faster with its generation's reduce rate than with the GPU
  // kind's V100 rate.
  const Topology topo = load_topology("dgx-h100");
  BuildOptions o;
  o.count = 1 << 28;
  const Plan plan = build_plan(topo, "xring", o);
  const CostModel h100 = CostModel::defaults(BackendProfile::kNccl);
  CostModel v100_rates = h100;
  v100_rates.gpu_arch.clear();
  CHECK(simulate(plan, topo, h100, 4).time_us < simulate(plan, topo, v100_rates, 4).time_us);
}

TEST_CASE("cost_model.launch_mode") {
  // --launch's grammar: one process per GPU (the default), one thread driving G GPUs, CUDA graph replay.
  CHECK(parse_launch_mode("process", 8, "--launch") == LaunchMode{});
  CHECK(parse_launch_mode("thread:8", 8, "--launch") == LaunchMode{8, false});
  CHECK(parse_launch_mode("thread:2", 8, "--launch") == LaunchMode{2, false});
  CHECK(parse_launch_mode("thread", 4, "--launch") == LaunchMode{4, false});
  CHECK(parse_launch_mode("graph", 8, "--launch") == LaunchMode{1, true});
  CHECK(to_string(LaunchMode{}) == "process");
  CHECK(to_string(LaunchMode{8, false}) == "thread:8");
  CHECK(to_string(LaunchMode{1, true}) == "graph");
  for (const char* bad : {"", "threads", "thread:", "thread:0", "thread:-1", "thread:9", "thread:8x", "Graph", "g8"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_launch_mode(bad, 8, "--launch"), doctest::Contains("--launch: '"), InvalidInput);
  }
  // "thread" needs the machines' GPU count: a cluster of unequal machines has none.
  CHECK_THROWS_AS(parse_launch_mode("thread", -1, "--launch"), InvalidInput);
  // In an overlay and back.
  CostModel m = CostModel::defaults();
  CHECK(m.launch == LaunchMode{});
  m.apply_overlay(nlohmann::json::parse(R"({"launch": {"gpus_per_thread": 8}})"), "calib.json");
  CHECK(m.launch == LaunchMode{8, false});
  CostModel other = CostModel::defaults();
  other.apply_overlay(m.to_json(), "roundtrip");
  CHECK(other == m);
  CHECK(overlay_error(R"({"launch": {"gpus_per_thread": 0}})").rfind("calib.json: launch.gpus_per_thread: ", 0) == 0);
  CHECK(overlay_error(R"({"launch": {"gpus_per_thread": 1.5}})").rfind("calib.json: launch.gpus_per_thread: ", 0) == 0);
  CHECK(overlay_error(R"({"launch": {"gpus_per_thread": 1e9}})").rfind("calib.json: launch.gpus_per_thread: ", 0) == 0);
  CHECK(overlay_error(R"({"launch": {"cuda_graph": 1}})").rfind("calib.json: launch.cuda_graph: ", 0) == 0);
  CHECK(overlay_error(R"({"launch": {"graph": true}})").rfind("calib.json: launch.graph: unknown key", 0) == 0);
  CHECK(overlay_error(R"({"launch": 8})").rfind("calib.json: launch: must be an object", 0) == 0);
}

TEST_CASE("cost_model.nccl_release_in_an_overlay") {
  CostModel m = CostModel::defaults();
  CHECK(m.nccl_release == kModelledNcclRelease);
  CHECK(m.to_json()["nccl_release"] == "2.28.9");
  m.apply_overlay(nlohmann::json::parse(R"({"nccl_release": "2.21.5"})"), "calib.json");
  CHECK(m.nccl_release == NcclRelease{2, 21, 5});
  CostModel other = CostModel::defaults();
  other.apply_overlay(m.to_json(), "roundtrip");
  CHECK(other == m);
  CHECK(overlay_error(R"({"nccl_release": 2.21})").rfind("calib.json: nccl_release: must be an NCCL release", 0) == 0);
  CHECK(overlay_error(R"({"nccl_release": "two"})") ==
        "calib.json: nccl_release: 'two' is not an NCCL release (MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 2.21.5)");
  CHECK(overlay_error(R"({"nccl_release": "2.18.6"})").rfind("calib.json: nccl_release: NCCL 2.18.6 is older", 0) == 0);
}

TEST_CASE("cost_model.launch_mode_moves_only_nccl_launches") {
  // The simulator charges nccl::launch_us(gpus_per_thread, cuda_graph) per NCCL call: the same plan on a model
  // that issues from one thread per 8 GPUs takes 7 launches more per call, with a CUDA graph one fewer.
  const Topology t = load_topology("dgx-h100");
  BuildOptions o;
  o.count = 2;
  const Plan plan = build_plan(t, "nccl", o);
  CostModel m = CostModel::defaults();
  const double base = simulate(plan, t, m, 4).time_us;
  m.launch = LaunchMode{8, false};
  CHECK(simulate(plan, t, m, 4).time_us - base == doctest::Approx(7 * 2.6));
  m.launch = LaunchMode{1, true};
  CHECK(base - simulate(plan, t, m, 4).time_us == doctest::Approx(2.6));
  // A plan of point-to-point steps issues no NCCL collective: its time does not change.
  const Plan ring = build_plan(t, "xring", o);
  CostModel graph = CostModel::defaults();
  graph.launch = LaunchMode{8, true};
  CHECK(simulate(ring, t, graph, 4).time_us == simulate(ring, t, CostModel::defaults(), 4).time_us);
}
