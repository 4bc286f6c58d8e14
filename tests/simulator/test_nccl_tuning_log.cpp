// NCCL's own choice against the model's: published TUNING lines ("N Bytes -> Algo A proto P time T", printed by
// NCCL under NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING; tests/simulator/data/nccl_tuning_published.json keeps them
// with their sources) are read with artune's NCCL INFO reader, and for each line the model's NCCL (nccl::search,
// nccl::choose on the line's topology) is asked for its pick at that size and for its cost-table time of NCCL's
// pick (nccl::algo_time). The test prints one row per line between "<!-- nccl-tuning:begin -->" and
// "<!-- nccl-tuning:end -->" (docs/accuracy.md quotes it), and holds the model to what the rows show today:
// which lines agree and how far each time is, so that a change to the cost table that moves them is seen.
// Issue 26's targets (≥ 95% of the picks agree, the time within 5%) are printed beside.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/algorithms/plan.hpp"
#include "artune/core/input.hpp"
#include "artune/logs/nccl_info_log.hpp"
#include "artune/simulator/nccl_model.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using json = nlohmann::json;

namespace {

std::string data_path() {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::string(root != nullptr ? root : ".") + "/tests/simulator/data/nccl_tuning_published.json";
}

struct Outcome {
  std::string log;
  std::uint64_t bytes = 0;
  std::string nccl_pick, model_pick;
  bool agree = false;
  double nccl_time = 0, model_time = 0;  ///< NCCL's printed time; the model's cost-table time of NCCL's pick
  double error_pct() const { return 100.0 * (model_time - nccl_time) / nccl_time; }
};

std::vector<Outcome> evaluate() {
  const json doc = json::parse(read_input_file(data_path(), "nccl_tuning_published.json"));
  REQUIRE(doc.at("schema") == "artune-nccl-tuning-published/1");
  std::vector<Outcome> out;
  for (const json& entry : doc.at("logs")) {
    const std::string id = entry.at("id").get<std::string>();
    CAPTURE(id);
    REQUIRE(!entry.at("source").get<std::string>().empty());
    std::string text;
    for (const json& line : entry.at("lines")) text += line.get<std::string>() + "\n";
    const logs::InfoLog info = logs::parse_nccl_info(text, id);
    REQUIRE(info.picks.size() == entry.at("lines").size());
    const Topology topo = load_topology(entry.at("topology").get<std::string>());
    const Collective coll = parse_collective_kind(entry.at("collective").get<std::string>());
    nccl::Graph g = nccl::search(topo, topo.gpus());
    // The log's NCCL chose with its own release's cost table.
    g.release = parse_nccl_release(entry.at("nccl_version").get<std::string>(), id);
    const nccl::CostTable table = nccl::cost_table(g, coll);
    for (const logs::InfoPick& pick : info.picks) {
      Outcome o;
      o.log = id;
      o.bytes = pick.bytes;
      o.nccl_pick = pick.algo + "/" + pick.proto;
      o.nccl_time = pick.time_us;
      const nccl::Forced nccls = nccl::parse_variant(pick.algo + "." + pick.proto, id);
      const nccl::Choice mine = nccl::choose(g, static_cast<double>(pick.bytes), {}, id, coll);
      o.model_pick = fmt::format("{}/{}", nccl::to_string(mine.algo), nccl::to_string(mine.proto));
      o.agree = o.model_pick == o.nccl_pick;
      o.model_time = nccl::algo_time(g, table, *nccls.algo, *nccls.proto, static_cast<double>(pick.bytes), coll);
      out.push_back(o);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("nccl_tuning.picks_against_nccls_own_logs") {
  const std::vector<Outcome> rows = evaluate();
  REQUIRE(!rows.empty());
  std::string table =
      "<!-- nccl-tuning:begin -->\n| log | bytes | NCCL's pick | model's pick | NCCL's time (µs) | "
      "model's time of NCCL's pick (µs) | error |\n|---|---:|---|---|---:|---:|---:|\n";
  int agree = 0, within = 0;
  for (const Outcome& o : rows) {
    agree += o.agree;
    within += std::fabs(o.error_pct()) <= 5.0;
    table += fmt::format("| {} | {} | {} | {}{} | {:.2f} | {:.2f} | {:+.2f}% |\n", o.log, o.bytes, o.nccl_pick,
                         o.model_pick, o.agree ? "" : " (differs)", o.nccl_time, o.model_time, o.error_pct());
  }
  table += fmt::format(
      "\n{} of {} picks agree ({:.0f}%; target ≥ 95%); {} of {} times within 5% (target: all)\n"
      "<!-- nccl-tuning:end -->\n",
      agree, rows.size(), 100.0 * agree / rows.size(), within, rows.size());
  MESSAGE(table);
  // What the rows show today (see the printed table and docs/accuracy.md): a change that moves them must update
  // both. NVIDIA/nccl#1453's seven lines (NCCL 2.21, 3 × 8 H100), costed with NCCL 2.21's table (the log's
  // release): Tree/LL and Tree/LL128 agree, with times within 5%. At 512 KiB NCCL 2.21 picks NVLSTree/Simple;
  // with 2.21's NVLSTree latency (NET step 14 µs, not 2.28.9's 20.9) and bandwidth formula the model's time of that
  // pick is 56.28 µs against NCCL's 59.55 (with 2.28.9's table: 69.56, +16.8 %), a hair above its Tree/LL128
  // (56.0 µs), which it keeps. NCCL's figures there fit a tree graph of 8 channels at 24 GB/s per channel across
  // machines (NVLSTree 8 × 24/2 × 5/6 = 80 GB/s gives 53 + 6.55 = 59.55 µs exactly) where the model's search on
  // the 3xdgx-h100 topology (400 Gb/s NICs) finds 48; the log states no NICs, so the topology stays.
  REQUIRE(rows.size() == 7);
  struct Expect {
    std::uint64_t bytes;
    bool agree;
    double error_pct;
  };
  const Expect expect[] = {{8, true, -0.0},      {256, true, -0.02},    {512, true, -0.04},    {1024, true, -0.08},
                           {65536, true, -5.00}, {131072, true, -2.37}, {524288, false, -5.50}};
  REQUIRE(std::size(expect) == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(rows[i].bytes);
    CHECK(rows[i].bytes == expect[i].bytes);
    CHECK(rows[i].agree == expect[i].agree);
    CHECK(std::fabs(rows[i].error_pct() - expect[i].error_pct) <= 0.01);
  }
  // The 8 B line in closed form: NCCL's Tree/LL latency on 3 machines of 8 GPUs is tuning.cc's base 6.8 µs plus
  // 2·((8−1)·0.6 + log2i(3)·5.0) = 25.2 µs; the bytes add under a nanosecond.
  CHECK(rows[0].nccl_time == doctest::Approx(25.2).epsilon(1e-4));
  CHECK(rows[0].model_time == doctest::Approx(25.2).epsilon(1e-4));
}
