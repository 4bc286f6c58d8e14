// Decision tables: structure, size-range merging, lookup, JSON round trip,
// atomic writing, and refusal of corrupt files and other topologies.

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <unistd.h>

#include "artune/core/error.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/decision_table.hpp"
#include "tests/test_support.hpp"

using namespace artune;
namespace fs = std::filesystem;

namespace {

Candidate cand(std::string family, std::string spec, int segments = 1) {
  Candidate c;
  c.family = std::move(family);
  c.spec = std::move(spec);
  c.segments = segments;
  return c;
}

SizeChoice choice(std::uint64_t bytes, const Candidate& c, double time_us) {
  SizeChoice ch;
  ch.plan = c;
  ch.point.bytes = bytes;
  ch.point.count = static_cast<std::int64_t>(bytes / 4);
  ch.point.predicted = Figures{time_us, bytes / (time_us * 1e3), 1.5 * bytes / (time_us * 1e3)};
  ch.point.runner_up = "nccl";
  ch.point.runner_up_predicted = Figures{time_us * 1.25, 0, 0};
  ch.point.margin_pct = 25;
  ch.point.tf_pick = "hiercopy#8";
  ch.point.tf_predicted = Figures{time_us * 2, 0, 0};
  // NCCL's own choice for "vs NCCL" (written and read back only when present; see json_round_trip).
  if (bytes >= 1024) ch.point.nccl_predicted = Figures{time_us * 1.5, 0, 0};
  return ch;
}

DecisionTable sample_table(const Topology& topo) {
  DecisionTable t;
  t.created_by = "artune test";
  t.topology_name = topo.name();
  t.fingerprint = topo.fingerprint();
  t.gpus = static_cast<int>(topo.gpus().size());
  t.machines = topo.machine_count();
  t.cost_model = nlohmann::json{{"op_overhead_us", 1.0}};
  Candidate ring = cand("ring", "xring");
  ring.gpu_perm = {0, 2, 1, 3};
  Candidate shuffle = cand("shuffle", "shuffle");
  shuffle.gather = {"cpu0"};
  std::vector<SizeChoice> choices = {choice(1024, shuffle, 10), choice(2048, shuffle, 11), choice(4096, ring, 12),
                                     choice(8192, cand("ring", "xring", 4), 14)};
  choices[2].point.measured = Measurement{Figures{13, 0.3, 0.45}, "cpu", 0, 5};
  t.measured_backend = "cpu";
  t.ranges = merge_ranges(choices);
  return t;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("artune-test-table-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

using artune_test::error_of;

}  // namespace

TEST_CASE("decision_table.merge_ranges") {
  const Candidate a = cand("ring", "xring"), b = cand("nccl", "nccl");
  const auto ranges = merge_ranges(
      {choice(1024, a, 1), choice(2048, a, 2), choice(4096, b, 3), choice(8192, b, 4), choice(16384, a, 5)});
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0].min_bytes == 1024);
  CHECK(ranges[0].max_bytes == 2048);
  CHECK(ranges[0].points.size() == 2);
  CHECK(ranges[1].plan == b);
  CHECK(ranges[1].min_bytes == 4096);
  CHECK(ranges[1].max_bytes == 8192);
  CHECK(ranges[2].min_bytes == 16384);
  CHECK(ranges[2].max_bytes == 16384);
  CHECK(ranges[2].plan == a);
  // Same spec but another pipeline depth is another plan: it opens a new range.
  const auto split = merge_ranges({choice(1024, a, 1), choice(2048, cand("ring", "xring", 2), 1)});
  CHECK(split.size() == 2);
  // Sizes must ascend.
  CHECK_THROWS_AS(merge_ranges({choice(2048, a, 1), choice(1024, a, 1)}), InvalidInput);
}

TEST_CASE("decision_table.lookup") {
  const Topology topo = load_topology("uniform:4");
  const DecisionTable t = sample_table(topo);
  REQUIRE(t.ranges.size() == 3);
  CHECK(t.lookup(1).plan.family == "shuffle");  // below the tuned span: first range
  CHECK(t.lookup(2048).plan.family == "shuffle");
  CHECK(t.lookup(3000).plan.family == "shuffle");  // between tuned sizes: the range below
  CHECK(t.lookup(4096).plan.gpu_perm == std::vector<int>{0, 2, 1, 3});
  CHECK(t.lookup(8192).plan.segments == 4);
  CHECK(t.lookup(1ull << 40).plan.segments == 4);  // above: last range
}

TEST_CASE("decision_table.json_round_trip") {
  const Topology topo = load_topology("uniform:4");
  const DecisionTable t = sample_table(topo);
  const nlohmann::json doc = table_to_json(t);
  CHECK(doc["schema"] == "artune.decision_table");
  CHECK(doc["schema_version"] == kDecisionTableSchemaVersion);
  CHECK(doc["topology"]["fingerprint"] == topo.fingerprint());
  CHECK(doc["ranges"].size() == 3);
  CHECK(doc["ranges"][1]["plan"]["label"] == "xring perm=0,2,1,3");
  CHECK(doc["ranges"][0]["plan"]["gather"] == nlohmann::json::array({"cpu0"}));
  CHECK(doc["ranges"][1]["points"][0]["measured"]["backend"] == "cpu");
  CHECK(doc["ranges"][0]["points"][0]["tf_choose_the_best"]["label"] == "hiercopy#8");
  const DecisionTable back = table_from_json(doc, "t.json");
  CHECK(back == t);
}

TEST_CASE("decision_table.atomic_write") {
  TempDir dir;
  const Topology topo = load_topology("uniform:4");
  const DecisionTable t = sample_table(topo);
  const std::string path = (dir.path / "table.json").string();
  {
    std::ofstream old(path);
    old << "previous contents";
  }
  write_decision_table(path, t);
  // Only the table remains: the temporary was renamed over the target.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 1);
  CHECK(read_decision_table(path) == t);
  CHECK(load_decision_table(path, topo) == t);
  // A folder that does not exist: a one-line InvalidInput, nothing written.
  const std::string missing = (dir.path / "nope" / "table.json").string();
  const std::string msg = error_of([&] { write_decision_table(missing, t); });
  CHECK(msg.find("does not exist") != std::string::npos);
  CHECK(!fs::exists(missing));
}

TEST_CASE("decision_table.corrupt_refused") {
  TempDir dir;
  const Topology topo = load_topology("uniform:4");
  const std::string path = (dir.path / "t.json").string();
  const std::string text = table_to_json(sample_table(topo)).dump();
  auto write = [&](const std::string& s) {
    std::ofstream out(path, std::ios::trunc);
    out << s;
  };
  write(text.substr(0, text.size() / 2));  // truncated
  std::string msg = error_of([&] { read_decision_table(path); });
  CHECK(msg.find("t.json: line 1, column") != std::string::npos);
  CHECK(msg.find("malformed JSON") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
  write("{\"hello\": 1}");
  msg = error_of([&] { read_decision_table(path); });
  CHECK(msg.find("not a decision table") != std::string::npos);
  nlohmann::json doc = nlohmann::json::parse(text);
  doc["ranges"][1]["plan"].erase("spec");
  write(doc.dump());
  msg = error_of([&] { read_decision_table(path); });
  CHECK(msg.find("t.json: ranges[1].plan.spec: missing") != std::string::npos);
  doc = nlohmann::json::parse(text);
  doc["schema_version"] = 99;
  write(doc.dump());
  msg = error_of([&] { read_decision_table(path); });
  CHECK(msg.find("version 99 is not supported") != std::string::npos);
  doc = nlohmann::json::parse(text);
  doc["ranges"][2]["min_bytes"] = 1024;  // overlaps the first range
  write(doc.dump());
  msg = error_of([&] { read_decision_table(path); });
  CHECK(msg.find("ranges must ascend") != std::string::npos);
  doc = nlohmann::json::parse(text);
  doc["ranges"][1]["plan"]["label"] = "xring";  // edited parameters no longer match the label
  write(doc.dump());
  msg = error_of([&] { read_decision_table(path); });
  CHECK(msg.find("label") != std::string::npos);
  CHECK_THROWS_AS(read_decision_table((dir.path / "absent.json").string()), InvalidInput);
}

TEST_CASE("decision_table.fingerprint_mismatch_refused") {
  TempDir dir;
  const Topology four = load_topology("uniform:4");
  const Topology eight = load_topology("uniform:8");
  const std::string path = (dir.path / "t.json").string();
  write_decision_table(path, sample_table(four));
  const std::string msg = error_of([&] { load_decision_table(path, eight); });
  CHECK(msg.find("tuned for topology 'uniform:4'") != std::string::npos);
  CHECK(msg.find("uniform:8") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_NOTHROW(load_decision_table(path, four));
}

TEST_CASE("decision_table.new_fields_round_trip") {
  const Topology topo = load_topology("uniform:4");
  DecisionTable t = sample_table(topo);
  t.topology_source = "uniform:4";
  SizePoint& p = t.ranges.front().points.front();
  p.kept = "hysteresis";
  p.fastest = "xring";
  p.behind_fastest_pct = 0.7;
  p.tf_measured = Measurement{Figures{20, 0.1, 0.15}, "cpu", 0, 5, 3.5};
  p.measured = Measurement{Figures{9, 0.1, 0.15}, "cpu", 0, 5, 2.5};
  const DecisionTable back = table_from_json(table_to_json(t), "t.json");
  CHECK(back == t);
  CHECK(back.topology_source == "uniform:4");
  // Tables written before these fields existed still read: no source, no spread, no kept.
  nlohmann::json old = table_to_json(sample_table(topo));
  old["topology"].erase("source");
  for (auto& r : old["ranges"]) {
    for (auto& q : r["points"]) {
      if (q.contains("measured")) q["measured"].erase("spread_pct");
    }
  }
  const DecisionTable from_old = table_from_json(old, "old.json");
  CHECK(from_old.topology_source.empty());
  nlohmann::json bad = table_to_json(t);
  bad["ranges"][0]["points"][0]["kept"]["reason"] = "luck";
  CHECK_THROWS_WITH_AS(table_from_json(bad, "t.json"), doctest::Contains("t.json: ranges[0].points[0].kept.reason"),
                       InvalidInput);
}

TEST_CASE("decision_table.several_types_and_ops") {
  const Topology topo = load_topology("uniform:4");
  DecisionTable f = sample_table(topo);
  DecisionTable h = sample_table(topo);
  h.type = DataType::kFloat16;
  DecisionTable hm = sample_table(topo);
  hm.type = DataType::kFloat16;
  hm.op = ReduceOp::kMax;
  hm.ranges.pop_back();
  // One table: the version-1 document, unchanged.
  CHECK(tables_to_json({f}) == table_to_json(f));
  // Several: version 2 with each table inside.
  const nlohmann::json doc = tables_to_json({f, h, hm});
  CHECK(doc["schema_version"] == kDecisionTableMultiSchemaVersion);
  CHECK(doc["tables"].size() == 3);
  const auto back = tables_from_json(doc, "m.json");
  REQUIRE(back.size() == 3);
  CHECK(back[2] == hm);
  CHECK(select_table(back, DataType::kFloat16, ReduceOp::kMax, "m.json") == hm);
  CHECK(select_table(back, DataType::kFloat32, ReduceOp::kSum, "m.json") == f);
  CHECK_THROWS_WITH_AS(select_table(back, DataType::kFloat64, ReduceOp::kSum, "m.json"),
                       doctest::Contains("m.json: no table for double sum (it holds float sum, half sum, half max)"),
                       InvalidInput);
  // A version-1 file reads as one table through the same call.
  CHECK(tables_from_json(table_to_json(f), "one.json").size() == 1);
  // The single-table reader says how to pick from several.
  CHECK_THROWS_WITH_AS(table_from_json(doc, "m.json"),
                       doctest::Contains("holds 3 tables (float sum, half sum, half max)"), InvalidInput);
  // Two tables for one (type, op), or of another topology, are refused naming the entry.
  nlohmann::json dup = tables_to_json({f, h});
  dup["tables"][1]["type"] = "float";
  CHECK_THROWS_WITH_AS(tables_from_json(dup, "d.json"),
                       doctest::Contains("d.json: tables[1]: a second table for float sum"), InvalidInput);
  nlohmann::json other = tables_to_json({f, h});
  other["tables"][1]["topology"]["fingerprint"] = "0000";
  CHECK_THROWS_WITH_AS(tables_from_json(other, "o.json"), doctest::Contains("o.json: tables[1].topology.fingerprint"),
                       InvalidInput);
  // load_decision_table(path, topo, type, op) picks from a file.
  char name[] = "/tmp/artune_multi_XXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  ::close(fd);
  write_decision_tables(name, {f, h, hm});
  CHECK(load_decision_table(name, topo, DataType::kFloat16, ReduceOp::kMax) == hm);
  CHECK_THROWS_AS(read_decision_table(name), InvalidInput);
  fs::remove(name);
}

TEST_CASE("decision_table.integers_range_checked_before_narrowing") {
  const Topology topo = load_topology("uniform:4");
  const nlohmann::json good = table_to_json(sample_table(topo));
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json doc = good;
    edit(doc);
    return error_of([&] { table_from_json(doc, "t.json"); });
  };
  // 2^32 + 1 would run as 1 segment, 2^32 as GPU 0, if narrowed without a check.
  std::string msg = refused([](nlohmann::json& d) { d["ranges"][0]["plan"]["segments"] = 4294967297ULL; });
  CHECK(msg.find("ranges[0].plan.segments: must be between 1 and 4096 (got 4294967297)") != std::string::npos);
  msg = refused([](nlohmann::json& d) { d["ranges"][1]["plan"]["gpu_perm"][0] = 4294967296ULL; });
  CHECK(msg.find("gpu_perm[0]: must be between 0 and") != std::string::npos);
  msg = refused([](nlohmann::json& d) { d["ranges"][1]["plan"]["gpu_perm"][0] = -1; });
  CHECK(msg.find("gpu_perm[0]: must be between 0 and") != std::string::npos);
  msg = refused([](nlohmann::json& d) { d["topology"]["gpus"] = 18446744073709551615ULL; });
  CHECK(msg.find("topology.gpus: 18446744073709551615 is out of range") != std::string::npos);
  msg = refused([](nlohmann::json& d) { d["schema_version"] = 4294967297ULL; });
  CHECK(msg.find("schema_version: must be between") != std::string::npos);
  msg = refused([](nlohmann::json& d) { d["ranges"][1]["points"][0]["measured"]["iterations"] = 4294967301ULL; });
  CHECK(msg.find("iterations: must be between 0 and") != std::string::npos);
}
