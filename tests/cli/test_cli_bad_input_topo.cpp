// Hostile input to `artune topo show|import|discover`: every case must end with
// exit status 2 and exactly one stderr line "artune: …" naming the flag, file or
// field at fault, under a time limit (a hang shows as status 124) and a memory
// limit (an attempt to read /dev/zero to its end fails instead of exhausting memory).

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;

constexpr int kTimeLimitS = 60;
constexpr long kMemoryLimitKiB = 8L << 20;

using artune_test::shell_quote;

// A fresh folder of fixture files, removed at the end of the test case.
class Dir {
 public:
  Dir() {
    char pattern[] = "/tmp/artune_bad_topo_XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  fs::path path_;
};

artune_test::CliResult run_limited(const std::vector<std::string>& args) {
  char pattern[] = "/tmp/artune_bad_topo_err_XXXXXX";
  const int fd = ::mkstemp(pattern);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::string cmd = artune_test::memory_limit_prefix(kMemoryLimitKiB);
  cmd += "timeout ";
  cmd += std::to_string(kTimeLimitS);
  cmd += ' ';
  cmd += shell_quote(artune_test::artune_bin());
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " </dev/null 2>";
  cmd += shell_quote(pattern);
  artune_test::CliResult r = artune_test::run_shell("(" + cmd + ")");
  std::ifstream in(pattern);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  std::remove(pattern);
  return r;
}

// Exit 2, one line "artune: …" containing every one of `names`.
void expect_bad(const std::vector<std::string>& args, const std::vector<std::string>& names) {
  std::string shown;
  for (const auto& a : args) shown += " " + a;
  const auto r = run_limited(args);
  INFO("artune" << shown << " -> status " << r.status << ", stderr: " << r.err);
  CHECK(r.status == 2);
  REQUIRE(!r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(r.err.rfind("artune: ", 0) == 0);
  CHECK(r.err.size() <= 300);
  CHECK(r.err.find("internal error") == std::string::npos);
  for (const auto& name : names) CHECK_MESSAGE(r.err.find(name) != std::string::npos, "missing: ", name);
}

std::string two_gpu_json(const std::string& link_fields) {
  return R"({"devices": [{"id": "gpu0", "kind": "gpu"}, {"id": "gpu1", "kind": "gpu"}],
             "links": [{"a": "gpu0", "b": "gpu1", "kind": "nvlink", )" +
         link_fields + "}]}";
}

std::string data_path(const std::string& name) {
  return artune_test::require_env("ARTUNE_SOURCE_ROOT") + "/tests/topology/data/" + name;
}

}  // namespace

TEST_CASE("cli_bad_input_topo.show_json_files") {
  Dir dir;
  const auto overflow = dir.write("overflow.json", two_gpu_json(R"("bandwidth": 1e400)"));
  expect_bad({"topo", "show", "-t", overflow}, {"overflow.json", "1e400"});
  const auto tiny = dir.write("tiny.json", two_gpu_json(R"("bandwidth": 1e-300)"));
  expect_bad({"topo", "show", "-t", tiny}, {"tiny.json: links[0].bandwidth: must be at least 1e-06 (got 1e-300)"});
  const auto slow = dir.write("slow.json", two_gpu_json(R"("bandwidth": 10, "latency": 1e10)"));
  expect_bad({"topo", "show", "-t", slow}, {"slow.json: links[0].latency: must be at most 1e+09 (got 1e+10)"});
  // The smallest bandwidth allowed still loads.
  const auto ok = dir.write("ok.json", two_gpu_json(R"("bandwidth": 1e-6)"));
  CHECK(run_limited({"topo", "show", "-t", ok}).status == 0);
  expect_bad({"topo", "show", "-t", "/dev/zero"}, {"/dev/zero", "bytes"});
}

TEST_CASE("cli_bad_input_topo.show_large_matrices") {
  expect_bad({"topo", "show", "-t", "4096xdgx2", "--json"}, {"--json", "65536 GPUs", "1024"});
  const auto all = run_limited({"topo", "show", "-t", "65xdgx2", "--all"});
  CHECK(all.status == 0);
  CHECK(all.out.find("Matrices omitted for 1040 GPUs: --all prints them up to 1024 GPUs.") != std::string::npos);
  CHECK(all.out.find("Device peer to peer matrix") == std::string::npos);
}

TEST_CASE("cli_bad_input_topo.import") {
  Dir dir;
  expect_bad({"topo", "import", "--from", "nvidia-smi", "/dev/zero"}, {"/dev/zero", "bytes"});
  expect_bad({"topo", "import", "--from", "nccl-xml", "/dev/zero"}, {"/dev/zero", "bytes"});
  expect_bad({"topo", "import", "--from", "nvidia-smi", data_path("dgx1_v100_topo_m.txt"), "--name", ""},
             {"--name", "empty"});

  // A matrix of 1025 GPUs: one more than a machine may have.
  std::string text = "\t";
  const int n = 1025;
  for (int j = 0; j < n; ++j) text += "GPU" + std::to_string(j) + "\t";
  text += "CPU Affinity\n";
  for (int i = 0; i < n; ++i) {
    text += "GPU" + std::to_string(i);
    for (int j = 0; j < n; ++j) text += i == j ? "\tX" : "\tSYS";
    text += "\t0-1\n";
  }
  const auto many = dir.write("many.txt", text);
  expect_bad({"topo", "import", "--from", "nvidia-smi", many}, {"many.txt: line 1", "1024 GPU"});

  // An NVLink whose GPU-class target is the bus id of a NIC in the same file.
  const auto nic_target = dir.write("nic_target.xml", R"(<system version="1">
  <cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:06:00.0" class="0x030200" link_speed="8 GT/s" link_width="16">
      <gpu dev="0" sm="70" rank="0" gdr="1">
        <nvlink target="0000:07:00.0" count="1" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:07:00.0" class="0x020000" link_speed="8 GT/s" link_width="16">
      <nic>
        <net name="mlx5_0" dev="0" speed="100000" port="1" gdr="1"/>
      </nic>
    </pci>
  </cpu>
</system>
)");
  expect_bad({"topo", "import", "--from", "nccl-xml", nic_target}, {"nic_target.xml", "0000:07:00.0", "NIC"});
}

TEST_CASE("cli_bad_input_topo.import_nvlink_outside_file_noted") {
  Dir dir;
  const auto outside = dir.write("outside.xml", R"(<system version="1">
  <cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:06:00.0" class="0x030200" link_speed="8 GT/s" link_width="16">
      <gpu dev="0" sm="70" rank="0" gdr="1">
        <nvlink target="0000:ff:00.0" count="2" tclass="0x030200"/>
      </gpu>
    </pci>
  </cpu>
</system>
)");
  const auto r = run_limited({"topo", "import", "--from", "nccl-xml", outside});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("1 NVLink target(s) not in the file ignored (0000:ff:00.0; NCCL skips them too)") !=
        std::string::npos);
}

TEST_CASE("cli_bad_input_topo.discover_flags") {
  expect_bad({"topo", "discover", "--nic-bandwidth", "nan"}, {"--nic-bandwidth", "(got nan)"});
  expect_bad({"topo", "discover", "--nic-bandwidth", "0"},
             {"--nic-bandwidth: must be a number from 1e-06 to 1e+09 (got 0)"});
  expect_bad({"topo", "discover", "--nic-bandwidth", "1e300"}, {"--nic-bandwidth", "(got 1e+300)"});
  expect_bad({"topo", "discover", "--net-latency", "-1"}, {"--net-latency: must be a number from 0 to 1e+09 (got -1)"});
  expect_bad({"topo", "discover", "--oversubscription", "0.5"}, {"--oversubscription", "(got 0.5)"});
  expect_bad({"topo", "discover", "--require-gpu", "--allow-no-gpu"}, {"--require-gpu", "--allow-no-gpu"});
  expect_bad({"topo", "discover", "--hostname", ""}, {"--hostname", "empty"});
}

TEST_CASE("cli_bad_input_topo.nic_fabric") {
  // A NIC's fabric (topology JSON `fabric`, net_kind.hpp): a bad value is one line naming the field, exit 2, on
  // every command that loads the topology.
  Dir dir;
  auto cluster = [&](const std::string& name, const std::string& fabric) {
    return dir.write(name,
                     R"({"machines": [{"config": "dgx-h100", "count": 2}], "network": {"fabric": )" + fabric + "}}");
  };
  const auto kind = cluster("kind.json", R"("infiniband")");
  expect_bad({"topo", "show", "-t", kind}, {"kind.json: network.fabric: unknown network kind 'infiniband'"});
  expect_bad({"simulate", "-t", kind, "-s", "nccl"}, {"kind.json: network.fabric", "infiniband"});
  const auto eff = cluster("eff.json", R"({"kind": "efa", "efficiency": 2})");
  expect_bad({"simulate", "-t", eff, "-s", "nccl"}, {"eff.json: network.fabric.efficiency: must be in (0, 1] (got 2)"});
  expect_bad({"autotune", "-t", eff, "-q"}, {"eff.json: network.fabric.efficiency"});
  const auto proto = cluster("proto.json", R"({"protocols": ["LL"]})");
  expect_bad({"simulate", "-t", proto, "-s", "nccl"},
             {"proto.json: network.fabric.protocols[0]: unknown protocol 'LL'"});
  const auto step = cluster("step.json", R"({"extra_step_us": -3})");
  expect_bad({"simulate", "-t", step, "-s", "nccl"},
             {"step.json: network.fabric.extra_step_us: must be >= 0 (got -3)"});
  // A good one loads and changes NCCL's pick: EFA runs Simple only.
  const auto efa = cluster("efa.json", R"("efa")");
  const auto r = run_limited({"simulate", "-t", efa, "-s", "nccl", "-b", "8", "-e", "8"});
  CHECK(r.status == 0);
  CHECK(r.out.find("/simple/") != std::string::npos);
  const auto ll = run_limited({"simulate", "-t", efa, "-s", "nccl.ring.ll", "-b", "8", "-e", "8"});
  CHECK(ll.status == 2);
  CHECK(ll.err.find('\n') == ll.err.size() - 1);
  CHECK(ll.err.find("the network (efa) allows only simple") != std::string::npos);
}
