// What a new user tripped over, through the CLI: run --table without -t and
// with the plan per row, --out for output files (-o deprecated where it named
// one), several types and ops in one table, topo import's NVLink lane rate,
// and calibrate's progress over its validation runs.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.hpp"
#include "tests/test_support.hpp"

namespace fs = std::filesystem;

namespace {

using artune_test::CliResult;
using artune_test::run_artune;

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

std::string source_root() { return artune_test::require_env("ARTUNE_SOURCE_ROOT"); }

// A small simulated table: uniform:4, 4K and 64K.
CliResult tune(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"autotune", "-b",         "4K", "-e",           "64K", "-f",
                                   "16",       "--segments", "1",  "--max-cycles", "1",   "-q"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_artune(args);
}

}  // namespace

TEST_CASE("cli_ux.run_table_without_t_and_plan_per_row") {
  const artune_test::ScratchDir scratch("artune-ux");
  const std::string table = scratch.file("t.json");
  const CliResult t = tune({"-t", "uniform:4", "--out", table});
  INFO(t.err);
  REQUIRE(t.status == 0);
  const auto doc = nlohmann::json::parse(slurp(table));
  CHECK(doc["topology"]["source"] == "uniform:4");
  // No -t: the table names its topology (a generator here).
  const CliResult run =
      run_artune({"run", "--table", table, "-b", "4K", "-e", "64K", "-f", "16", "-n", "1", "-w", "0"});
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("topology uniform:4") != std::string::npos);
  CHECK(run.out.find("#wrong  plan") != std::string::npos);
  // Each row names the plan the table picked at that size.
  std::vector<std::string> labels;
  for (const auto& range : doc["ranges"]) {
    for (std::size_t i = 0; i < range["points"].size(); ++i) labels.push_back(range["plan"]["label"]);
  }
  REQUIRE(labels.size() == 2);
  std::istringstream lines(run.out);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != '#') rows.push_back(line);
  }
  REQUIRE(rows.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(rows[i].size() >= labels[i].size());
    CHECK(rows[i].substr(rows[i].size() - labels[i].size()) == labels[i]);
  }
  // --json carries the plan per row as well.
  const CliResult json =
      run_artune({"run", "--table", table, "-b", "4K", "-e", "64K", "-f", "16", "-n", "1", "-w", "0", "--json"});
  REQUIRE(json.status == 0);
  const auto rj = nlohmann::json::parse(json.out);
  REQUIRE(rj["rows"].size() == 2);
  CHECK(rj["rows"][0]["plan"] == labels[0]);
  CHECK(rj["rows"][1]["plan"] == labels[1]);
  // -t still works and still has to match.
  CHECK(run_artune({"run", "-t", "uniform:4", "--table", table, "-b", "4K", "-e", "4K", "-n", "1", "-w", "0"}).status ==
        0);
  const CliResult other = run_artune({"run", "-t", "uniform:8", "--table", table, "-b", "4K", "-e", "4K"});
  CHECK(other.status == 2);
  CHECK(other.err.find("not for 'uniform:8'") != std::string::npos);
}

TEST_CASE("cli_ux.run_table_warns_once_when_priced_for_another_backend") {
  // autotune prices plans for GPUs (profile nccl) unless told otherwise: run --table on the cpu backend says so in
  // one line, whatever the number of sizes; a table tuned with --profile cpu runs without it.
  const artune_test::ScratchDir scratch("artune-ux-profile");
  const std::string gpu_table = scratch.file("gpu.json");
  const std::string cpu_table = scratch.file("cpu.json");
  REQUIRE(tune({"-t", "uniform:4", "--out", gpu_table}).status == 0);
  REQUIRE(tune({"-t", "uniform:4", "--profile", "cpu", "--out", cpu_table}).status == 0);
  const std::vector<std::string> sizes = {"-b", "4K", "-e", "64K", "-f", "16", "-n", "1", "-w", "0"};
  std::vector<std::string> args = {"run", "--table", gpu_table, "--backend", "cpu"};
  args.insert(args.end(), sizes.begin(), sizes.end());
  const CliResult gpu = run_artune(args);
  INFO(gpu.err);
  REQUIRE(gpu.status == 0);
  CHECK(gpu.err == "artune: warning: --table " + gpu_table +
                       " was priced with the nccl cost profile (GPUs), not the cpu backend's (host threads): its "
                       "picks may not be the fastest here (tune for the cpu profile, or measure on the cpu backend): "
                       "artune autotune --profile cpu, or --measure cpu\n");
  args[2] = cpu_table;
  const CliResult cpu = run_artune(args);
  CHECK(cpu.status == 0);
  CHECK(cpu.err.empty());
}

TEST_CASE("cli_ux.run_table_topology_file_and_discovered") {
  const artune_test::ScratchDir scratch("artune-ux");
  const std::string topo = scratch.file("mine.json");
  fs::copy_file(source_root() + "/tests/topology/data/small_machine.json", topo);
  const std::string table = scratch.file("t.json");
  const CliResult t = tune({"-t", topo, "--out", table});
  INFO(t.err);
  REQUIRE(t.status == 0);
  // The file is recorded by its absolute path and loaded from there.
  const auto doc = nlohmann::json::parse(slurp(table));
  CHECK(doc["topology"]["source"] == fs::absolute(topo).string());
  const CliResult ok = run_artune({"run", "--table", table, "-b", "4K", "-e", "4K", "-n", "1", "-w", "0"});
  INFO(ok.err);
  CHECK(ok.status == 0);
  // Gone: -t is required, and the message says so.
  fs::remove(topo);
  const CliResult gone = run_artune({"run", "--table", table, "-b", "4K", "-e", "4K"});
  CHECK(gone.status == 2);
  CHECK(gone.err.find("which does not exist here; give the topology with -t") != std::string::npos);
  // A table of a discovered topology (or one written before the field existed) names no source.
  auto edited = doc;
  edited["topology"].erase("source");
  edited["topology"]["name"] = "host-a";
  spit(table, edited.dump());
  const CliResult discovered = run_artune({"run", "--table", table, "-b", "4K", "-e", "4K"});
  CHECK(discovered.status == 2);
  CHECK(discovered.err.find("has no name to load; give that topology with -t") != std::string::npos);
}

TEST_CASE("cli_ux.out_everywhere_o_deprecated") {
  const artune_test::ScratchDir scratch("artune-ux");
  // autotune: --out writes; -o still does, with one warning line on stderr.
  const CliResult out = tune({"-t", "uniform:4", "--out", scratch.file("a.json")});
  CHECK(out.status == 0);
  CHECK(fs::exists(scratch.file("a.json")));
  CHECK(out.err.find("deprecated") == std::string::npos);
  const CliResult old = tune({"-t", "uniform:4", "-o", scratch.file("b.json")});
  CHECK(old.status == 0);
  CHECK(fs::exists(scratch.file("b.json")));
  CHECK(artune_test::count_of(old.err,
                              "artune: warning: -o/--output for the output file of `autotune` is deprecated; "
                              "use --out") == 1);
  const CliResult both = tune({"-t", "uniform:4", "-o", scratch.file("c.json"), "--out", scratch.file("d.json")});
  CHECK(both.status == 2);
  CHECK(both.err.find("--out: also given as -o/--output") != std::string::npos);
  // Bad --out names the flag.
  const CliResult bad = tune({"-t", "uniform:4", "--out", scratch.file("nodir/t.json")});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--out: ") != std::string::npos);
  // topo import: the same pair.
  const std::string smi = source_root() + "/tests/topology/data/dgx1_v100_topo_m.txt";
  CHECK(run_artune({"topo", "import", "--from", "nvidia-smi", smi, "--out", scratch.file("i.json")}).status == 0);
  CHECK(fs::exists(scratch.file("i.json")));
  const CliResult imp = run_artune({"topo", "import", "--from", "nvidia-smi", smi, "-o", scratch.file("j.json")});
  CHECK(imp.status == 0);
  CHECK(fs::exists(scratch.file("j.json")));
  CHECK(imp.err.find("-o/--output for the output file of `import` is deprecated") != std::string::npos);
  // run/plan/simulate keep -o as the reduction op.
  CHECK(run_artune({"plan", "-t", "uniform:4", "-s", "xring", "--count", "16", "-o", "max"}).status == 0);
}

TEST_CASE("cli_ux.several_types_and_ops_in_one_table") {
  const artune_test::ScratchDir scratch("artune-ux");
  const std::string table = scratch.file("m.json");
  const CliResult t = tune({"-t", "uniform:4", "-d", "float,half", "--op", "sum,max", "--out", table});
  INFO(t.err);
  REQUIRE(t.status == 0);
  CHECK(artune_test::count_of(t.out, "# decision table: uniform:4") == 4);
  const auto doc = nlohmann::json::parse(slurp(table));
  CHECK(doc["schema_version"] == 2);
  REQUIRE(doc["tables"].size() == 4);
  CHECK(doc["tables"][0]["type"] == "float");
  CHECK(doc["tables"][0]["op"] == "sum");
  CHECK(doc["tables"][3]["type"] == "half");
  CHECK(doc["tables"][3]["op"] == "max");
  // run picks the table by -d and -o.
  const CliResult half =
      run_artune({"run", "--table", table, "-d", "half", "-o", "max", "-b", "4K", "-e", "4K", "-n", "1", "-w", "0"});
  INFO(half.err);
  CHECK(half.status == 0);
  CHECK(half.out.find("half") != std::string::npos);
  const CliResult dbl = run_artune({"run", "--table", table, "-d", "double", "-b", "4K", "-e", "4K"});
  CHECK(dbl.status == 2);
  CHECK(dbl.err.find("-d/--datatype: double but the table " + table + " was tuned for float, half") !=
        std::string::npos);
  const CliResult avg = run_artune({"run", "--table", table, "-o", "avg", "-b", "4K", "-e", "4K"});
  CHECK(avg.status == 2);
  CHECK(avg.err.find("-o/--op: avg but the table " + table + " was tuned for sum, max") != std::string::npos);
  // Tables written before (one type, schema version 1, no "source") still run, their built-in name loading.
  const CliResult shipped = run_artune({"run", "--table", source_root() + "/reports/dgx1-v100/table.json", "-b", "4K",
                                        "-e", "4K", "-n", "1", "-w", "0"});
  INFO(shipped.err);
  CHECK(shipped.status == 0);
  CHECK(shipped.out.find("topology dgx1-v100") != std::string::npos);
  // Empty list items are refused naming the flag.
  const CliResult empty = tune({"-t", "uniform:4", "-d", "float,,half"});
  CHECK(empty.status == 2);
  CHECK(empty.err.find("-d/--datatype: 'float,,half' has an empty item") != std::string::npos);
}

TEST_CASE("cli_ux.import_nvlink_lane_rate") {
  const std::string smi = source_root() + "/tests/topology/data/dgx1_v100_topo_m.txt";
  // The NV2 pair 0-3 of a DGX-1: 2 lanes × the lane rate.
  auto nv2_bandwidth = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"topo", "import", "--from", "nvidia-smi", smi};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_artune(args);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto doc = nlohmann::json::parse(r.out);
    double bw = 0;
    for (const auto& l : doc["links"]) {
      if (l["kind"] == "nvlink" && l.value("lanes", 1) == 2) bw = l["bandwidth"].get<double>();
    }
    return bw;
  };
  CHECK(nv2_bandwidth({}) == doctest::Approx(50.0));
  CHECK(nv2_bandwidth({"--gpu", "p100"}) == doctest::Approx(40.0));
  CHECK(nv2_bandwidth({"--gpu", "b200"}) == doctest::Approx(100.0));
  CHECK(nv2_bandwidth({"--gpu", "a100", "--nvlink-lane-gbps", "30"}) == doctest::Approx(60.0));
  const CliResult bad = run_artune({"topo", "import", "--from", "nvidia-smi", smi, "--gpu", "k80"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--gpu: 'k80' is not one of p100, v100, a100, h100, h200, b200") != std::string::npos);
  const CliResult zero = run_artune({"topo", "import", "--from", "nvidia-smi", smi, "--nvlink-lane-gbps", "0"});
  CHECK(zero.status == 2);
  CHECK(zero.err.find("--nvlink-lane-gbps: 0 must be > 0") != std::string::npos);
  const CliResult xml = run_artune({"topo", "import", "--from", "nccl-xml",
                                    source_root() + "/tests/topology/data/dgx1_v100_nccl.xml", "--gpu", "a100"});
  CHECK(xml.status == 2);
  CHECK(xml.err.find("--gpu: only for --from nvidia-smi") != std::string::npos);
}

TEST_CASE("cli_ux.calibrate_progress_covers_validation") {
  // Without a terminal, progress prints a line per phase change and 10 % step: the whole-plan training and
  // validation runs must move the percentage instead of sitting near 100 %.
  // Sizes far enough apart for the copy fits to see bandwidth on a noisy host. A host too loaded for any fit
  // (calibrate refuses with "no bandwidth can be fitted", exit 3) gets up to two more tries.
  CliResult r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = run_artune({"calibrate", "-t", "uniform:2", "--backend", "cpu", "-b", "64K", "-e", "16M", "-f", "16", "--iters",
                    "5", "--warmup", "1"});
    if (!(r.status == 3 && r.err.find("no bandwidth can be fitted") != std::string::npos)) break;
  }
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::istringstream lines(r.err);
  std::string line;
  int first_whole = -1;
  int last_whole = -1;
  while (std::getline(lines, line)) {
    int pct = 0;
    char what[64] = {};
    if (std::sscanf(line.c_str(), "artune: %d%% %63s", &pct, what) != 2) continue;
    const std::string phase = what;
    if (phase == "training" || phase == "validating") {
      if (first_whole < 0) first_whole = pct;
      last_whole = pct;
    }
  }
  REQUIRE(first_whole >= 0);
  CHECK(first_whole < 80);  // the whole-plan runs are a real share of the work
  CHECK(last_whole >= 90);
  CHECK(last_whole < 100);
}

TEST_CASE("cli_ux.autotune_table_against_nccl") {
  // NCCL's own choice is the baseline of every table: its time, the pick's gain over it ("=" where the pick is
  // NCCL's choice) and a closing line saying where the table differs; TF's choose_the_best only with --tf.
  // dgx1-v100: the packed rings 4.8 % faster at 32 MiB (NCCL kept: under the model's error below 64 MiB), 4 % at
  // 128 MiB (picked), 2.5 % at 512 MiB (NCCL kept: under the model's error on large messages); dgx-h100: NCCL's NVLS
  // at every size.
  const CliResult r = run_artune({"autotune", "-t", "dgx1-v100", "-b", "2K", "-e", "1G", "-f", "4", "-q"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("nccl(us)  vs NCCL") != std::string::npos);
  CHECK(r.out.find("TF choose_the_best") == std::string::npos);
  CHECK(r.out.find("=\n") != std::string::npos);               // a range that is NCCL's choice
  CHECK(r.out.find("kept by min-gain") != std::string::npos);  // NCCL kept where a plan beats it by little
  CHECK(r.out.find("# * 32M: nccl kept by min-gain (4.8% behind the fastest, prings seg=4)") != std::string::npos);
  CHECK(r.out.find("# differs from NCCL's own choice in 1 of 3 ranges: 128M") != std::string::npos);
  const CliResult h100 = run_artune({"autotune", "-t", "dgx-h100", "-b", "2K", "-e", "1G", "-f", "4", "-q"});
  REQUIRE(h100.status == 0);
  CHECK(h100.out.find("# the table is NCCL's own choice at every size") != std::string::npos);
  const CliResult tf = run_artune({"autotune", "-t", "pcie-8gpu", "-b", "1K", "-e", "1G", "-f", "4", "-q", "--tf"});
  REQUIRE(tf.status == 0);
  CHECK(tf.out.find("TF choose_the_best") != std::string::npos);
  CHECK(tf.out.find("# TF choose_the_best: ") != std::string::npos);
  // --min-gain 0: the fastest prediction wins, NCCL is no longer kept for the gain.
  const CliResult fastest =
      run_artune({"autotune", "-t", "dgx1-p100", "-b", "2K", "-e", "1G", "-f", "4", "-q", "--min-gain", "0"});
  REQUIRE(fastest.status == 0);
  CHECK(fastest.out.find("kept by min-gain") == std::string::npos);
  CHECK(fastest.out.find("# differs from NCCL's own choice in 2 of 3 ranges: 32M, 128M-512M") != std::string::npos);
  for (const char* bad : {"-1", "x", "2000"}) {
    const CliResult e = run_artune({"autotune", "-t", "pcie-8gpu", "-b", "1K", "-e", "1K", "-q", "--min-gain", bad});
    CHECK(e.status == 2);
    CHECK(e.err.find("--min-gain: ") != std::string::npos);
  }
  // --target nccl: where the table is NCCL's own choice and where it is not.
  const CliResult target =
      run_artune({"autotune", "-t", "uniform:2x8", "--target", "nccl", "-b", "1K", "-e", "1G", "-f", "4", "-q"});
  REQUIRE(target.status == 0);
  CHECK((target.out.find("# the table is NCCL's own choice at every size") != std::string::npos ||
         target.out.find("# differs from NCCL's own choice in ") != std::string::npos));
  // The cpu profile has no NCCL baseline, and says so.
  const CliResult cpu = run_artune({"autotune", "-t", "uniform:4", "--profile", "cpu", "-b", "1K", "-e", "64K", "-q"});
  REQUIRE_MESSAGE(cpu.status == 0, cpu.err);
  CHECK(cpu.out.find("# no NCCL baseline") != std::string::npos);
}

TEST_CASE("cli_ux.autotune_quiet_keeps_the_no_gpu_warning") {
  // -q hides progress, not the one warning that the table is not this machine's own.
  const CliResult r = run_artune({"autotune", "-q", "-b", "1K", "-e", "4K"});
  REQUIRE(r.status == 0);
  if (r.out.find("# decision table: dgx1-v100 ") != std::string::npos) {  // no GPU here: the default topology
    CHECK(r.err.find("artune: warning: no GPU found on ") != std::string::npos);
    CHECK(r.err.find("%") == std::string::npos);  // and no progress
  }
}

TEST_CASE("cli_ux.report_regenerate_line_names_the_topology_file_absolutely") {
  // The report's "Regenerate with" line reruns from any folder: a topology file given relative to the current
  // folder is written with its absolute path.
  artune_test::ScratchDir dir("artune-regen");
  const std::string topo = (dir.path() / "box.json").string();
  {
    std::ofstream(topo) << artune_test::slurp(std::string(std::getenv("ARTUNE_SOURCE_ROOT")) +
                                              "/tests/topology/data/small_machine.json");
  }
  const auto r = artune_test::run_shell("cd " + artune_test::shell_quote(dir.path().string()) + " && " +
                                        artune_test::shell_quote(artune_test::artune_bin()) +
                                        " autotune -t box.json -b 1K -e 4K -q --report rep >/dev/null 2>&1");
  REQUIRE(r.status == 0);
  const std::string report = artune_test::slurp(dir.path() / "rep" / "REPORT.md");
  CHECK(report.find("artune autotune -t " + std::filesystem::absolute(topo).lexically_normal().string() + " ") !=
        std::string::npos);
  CHECK(report.find("cost model: profile nccl, default constants") != std::string::npos);
}

TEST_CASE("cli_ux.autotune_launch_mode") {
  // autotune --launch: NCCL's calls cost what the program's way of issuing them costs (one thread driving 8 GPUs
  // launches 8 kernels per call), the table's cost model records it, and the regenerate line repeats it.
  auto nccl_time = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"autotune", "-t", "dgx-h100", "-b", "8", "-e", "8", "-q", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_artune(args);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    const nlohmann::json doc = nlohmann::json::parse(r.out);
    const nlohmann::json& table = doc.contains("tables") ? doc["tables"][0] : doc;
    return std::make_pair(table["ranges"][0]["points"][0]["nccl"]["predicted"]["time_us"].get<double>(),
                          table["cost_model"]["launch"]);
  };
  const auto [process, process_launch] = nccl_time({});
  const auto [thread, thread_launch] = nccl_time({"--launch", "thread:8"});
  CHECK(thread - process == doctest::Approx(7 * 2.6).epsilon(1e-6));
  CHECK(process_launch["gpus_per_thread"] == 1);
  CHECK(thread_launch["gpus_per_thread"] == 8);
  CHECK(thread_launch["cuda_graph"] == false);
}
