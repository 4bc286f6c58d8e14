// The NCCL tuner plugin as NCCL sees it: dlopened, symbols looked up by name,
// init with a table from ARTUNE_TUNER_TABLE, getCollInfo on synthetic cost
// tables at sizes across the table's ranges. Built twice by meson: plain and
// with AddressSanitizer (plugin and this program), see tests/nccl_tuner/meson.build.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "tests/nccl_tuner/plugin_loader.hpp"
#include "tests/test_support.hpp"

namespace {

using artune_test::count_level;
using artune_test::nccl_choice;
using artune_test::plugin_log;
using artune_test::PluginLib;
using Costs = float[ARTUNE_NCCL_NUM_ALGORITHMS][ARTUNE_NCCL_NUM_PROTOCOLS];

constexpr int kTree = ARTUNE_NCCL_ALGO_TREE, kRing = ARTUNE_NCCL_ALGO_RING, kNvls = ARTUNE_NCCL_ALGO_NVLS;
constexpr int kLL = ARTUNE_NCCL_PROTO_LL, kLL128 = ARTUNE_NCCL_PROTO_LL128, kSimple = ARTUNE_NCCL_PROTO_SIMPLE;

/// A cost table like NCCL's for 8 GPUs on one machine: CollNet and PAT unsupported (-1), NVLS Simple only,
/// NVLSTree unsupported on one machine; the rest positive times that grow with the size so that NCCL's own
/// pick (Ring LL at small sizes, Ring Simple at large) differs from the table's picks below.
void fill_costs(Costs& c, std::uint64_t bytes) {
  const float mb = static_cast<float>(bytes) / 1e6f;
  for (auto& row : c) {
    for (float& v : row) v = ARTUNE_NCCL_ALGO_PROTO_IGNORE;
  }
  c[kTree][kLL] = 9 + 40 * mb;
  c[kTree][kLL128] = 12 + 20 * mb;
  c[kTree][kSimple] = 30 + 12 * mb;
  c[kRing][kLL] = 5 + 45 * mb;
  c[kRing][kLL128] = 11 + 15 * mb;
  c[kRing][kSimple] = 25 + 10 * mb;
  c[kNvls][kSimple] = 40 + 11 * mb;
}

/// A table as `artune autotune --target nccl` writes it (the fields the plugin reads, plus a few it ignores).
nlohmann::json table_json(int gpus, int machines,
                          const std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>>& ranges,
                          const std::string& collective = "") {
  nlohmann::json doc;
  doc["schema"] = "artune.decision_table";
  doc["schema_version"] = 1;
  doc["created_by"] = "artune test";
  doc["topology"] = {{"name", "synthetic"}, {"fingerprint", "x"}, {"gpus", gpus}, {"machines", machines}};
  doc["type"] = "float32";
  doc["op"] = "sum";
  doc["ranges"] = nlohmann::json::array();
  for (const auto& [lo, hi, spec] : ranges) {
    doc["ranges"].push_back({{"min_bytes", lo},
                             {"max_bytes", hi},
                             {"plan", {{"family", spec.rfind("nccl", 0) == 0 ? "nccl" : "ring"}, {"spec", spec}}},
                             {"points", nlohmann::json::array()}});
    // As candidate_to_json writes it: "collective" only for the collectives other than all-reduce.
    if (!collective.empty()) doc["ranges"].back()["plan"]["collective"] = collective;
  }
  return doc;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// Sets ARTUNE_TUNER_TABLE for one scope (unset = nullptr).
class TableEnv {
 public:
  explicit TableEnv(const char* value) {
    if (value == nullptr) {
      ::unsetenv("ARTUNE_TUNER_TABLE");
    } else {
      ::setenv("ARTUNE_TUNER_TABLE", value, 1);
    }
  }
  ~TableEnv() { ::unsetenv("ARTUNE_TUNER_TABLE"); }
};

// The table every pick test uses: ranges with gaps between tuned sizes, as autotune writes them.
const std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>> kRanges = {
    {8, 4096, "nccl.tree.ll"},
    {16384, 262144, "nccl.ring.ll128"},
    {1048576, 4194304, "nccl.tree"},  // algorithm only: NCCL's cheapest Tree protocol
    {16777216, 67108864, "nccl"},     // NCCL's own choice
    {268435456, 1073741824, "nccl.nvls.simple"},
};

/// The (algorithm, protocol) the table steers to at `bytes`, or NCCL's own pick where it leaves it.
std::pair<int, int> expected(std::uint64_t bytes) {
  Costs c;
  fill_costs(c, bytes);
  if (bytes < 16384) return {kTree, kLL};
  if (bytes < 1048576) return {kRing, kLL128};
  if (bytes < 16777216) {
    int best = kLL;
    for (int p : {kLL128, kSimple}) best = c[kTree][p] < c[kTree][best] ? p : best;
    return {kTree, best};
  }
  if (bytes < 268435456) return nccl_choice(c);
  return {kNvls, kSimple};
}

/// Sizes across the table: every range's ends, the gaps between ranges, below the first, above the last.
const std::vector<std::uint64_t> kSizes = {1,        8,        1000,      4096,      8192,      16384,      100000,
                                           262144,   500000,   1048576,   2000000,   4194304,   8388608,    16777216,
                                           50000000, 67108864, 100000000, 268435456, 536870912, 1073741824, 1ull << 34};

/// Checks that getCollInfo (through `call`) leaves every size's cost table exactly as NCCL filled it.
template <typename Call>
void check_untouched(Call call) {
  for (const std::uint64_t bytes : kSizes) {
    for (const int coll : {artuneNcclFuncAllReduce, artuneNcclFuncAllGather}) {
      Costs c, before;
      fill_costs(c, bytes);
      fill_costs(before, bytes);
      int channels = 7;
      call(static_cast<artuneNcclFunc>(coll), bytes, c, &channels);
      CHECK(std::memcmp(c, before, sizeof c) == 0);
      CHECK(channels == 7);
    }
  }
}

}  // namespace

TEST_CASE("nccl_tuner.symbols_by_name") {
  const PluginLib lib;
  const auto* v6 = lib.symbol<artuneNcclTunerV6>("ncclTunerPlugin_v6");
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  const auto* v4 = lib.symbol<artuneNcclTunerV4>("ncclTunerPlugin_v4");
  const auto* v3 = lib.symbol<artuneNcclTunerV3>("ncclTunerPlugin_v3");
  const auto* v2 = lib.symbol<artuneNcclTunerV2>("ncclTunerPlugin_v2");
  REQUIRE(v6 != nullptr);
  REQUIRE(v5 != nullptr);
  REQUIRE(v4 != nullptr);
  REQUIRE(v3 != nullptr);
  REQUIRE(v2 != nullptr);
  for (const char* name : {v6->name, v5->name, v4->name, v3->name, v2->name}) CHECK(std::string(name) == "artune");
  // (function pointers compared as booleans: doctest cannot print them)
  CHECK((v6->init != nullptr && v6->getCollInfo != nullptr && v6->finalize != nullptr));
  CHECK((v6->getChunkSize == nullptr));  // optional in v6: NCCL keeps its chunk size
  CHECK((v5->init != nullptr && v5->getCollInfo != nullptr && v5->finalize != nullptr));
  CHECK((v4->init != nullptr && v4->getCollInfo != nullptr && v4->destroy != nullptr));
  CHECK((v3->init != nullptr && v3->getCollInfo != nullptr && v3->destroy != nullptr));
  CHECK((v2->init != nullptr && v2->getCollInfo != nullptr && v2->destroy != nullptr));
  // Nothing but the tuner symbols leaves the library (hidden visibility): no artune or nlohmann symbol.
  CHECK(lib.symbol<void>("_ZN6artune11nccl_tuner10read_tableERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE") ==
        nullptr);
}

TEST_CASE("nccl_tuner.v5_picks_the_table_choice_at_every_size") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string path = dir.file("table.json");
  write_text(path, table_json(8, 1, kRanges).dump(1));
  const TableEnv env(path.c_str());
  const PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  REQUIRE(v5 != nullptr);
  plugin_log().clear();
  void* ctx = nullptr;
  artuneNcclNvlDomainInfo nvl{1, 8, 8};
  artuneNcclTunerConstants constants{};
  REQUIRE(v5->init(&ctx, 42, 8, 1, artune_test::record_log, &nvl, &constants) == artuneNcclSuccess);
  REQUIRE(ctx != nullptr);
  CHECK(count_level(artuneNcclLogWarn) == 0);
  REQUIRE(count_level(artuneNcclLogInfo) == 1);
  CHECK(plugin_log().front().flags == ARTUNE_NCCL_LOG_TUNING);
  CHECK(plugin_log().front().text.find(
            "5 all-reduce size range(s) for 8 ranks on 1 node(s): 8-4096 nccl.tree.ll 16384-262144 nccl.ring.ll128 "
            "1048576-4194304 nccl.tree 16777216-67108864 nccl 268435456-1073741824 nccl.nvls.simple") !=
        std::string::npos);

  for (const std::uint64_t bytes : kSizes) {
    CAPTURE(bytes);
    Costs c, before;
    fill_costs(c, bytes);
    fill_costs(before, bytes);
    int channels = 0;
    REQUIRE(v5->getCollInfo(ctx, artuneNcclFuncAllReduce, bytes, 1, reinterpret_cast<float**>(c),
                            ARTUNE_NCCL_NUM_ALGORITHMS, ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels) == artuneNcclSuccess);
    CHECK(nccl_choice(c) == expected(bytes));
    CHECK(channels == 0);  // no `.cN` in this table: channels stay NCCL's
    int changed = 0;
    for (int a = 0; a < ARTUNE_NCCL_NUM_ALGORITHMS; ++a) {
      for (int p = 0; p < ARTUNE_NCCL_NUM_PROTOCOLS; ++p) {
        // Unsupported entries stay unsupported; at most the pick changes, to cost 0.
        if (before[a][p] < 0) CHECK(c[a][p] == ARTUNE_NCCL_ALGO_PROTO_IGNORE);
        if (c[a][p] != before[a][p]) {
          ++changed;
          CHECK(c[a][p] == 0.0f);
          CHECK(std::make_pair(a, p) == expected(bytes));
        }
      }
    }
    // NCCL's own choice (16M..64M ranges and the gap below the next) changes nothing.
    CHECK(changed == (bytes >= 16777216 && bytes < 268435456 ? 0 : 1));
    // Other collectives pass through unchanged (the table tunes all-reduce only).
    Costs other, other_before;
    fill_costs(other, bytes);
    fill_costs(other_before, bytes);
    v5->getCollInfo(ctx, artuneNcclFuncAllGather, bytes, 1, reinterpret_cast<float**>(other),
                    ARTUNE_NCCL_NUM_ALGORITHMS, ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
    CHECK(std::memcmp(other, other_before, sizeof other) == 0);
  }
  CHECK(plugin_log().size() == 1);  // getCollInfo never logs (it runs per collective)
  CHECK(v5->finalize(ctx) == artuneNcclSuccess);
}

TEST_CASE("nccl_tuner.unsupported_pick_leaves_the_table") {
  // The table picks NVLS at 1 GiB, but NCCL marked NVLS unsupported here (e.g. no NVSwitch multicast).
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string path = dir.file("table.json");
  write_text(path, table_json(8, 1, kRanges).dump());
  const TableEnv env(path.c_str());
  const PluginLib lib;
  const auto* v6 = lib.symbol<artuneNcclTunerV6>("ncclTunerPlugin_v6");
  void* ctx = nullptr;
  plugin_log().clear();
  REQUIRE(v6->init(&ctx, 1, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
  Costs c, before;
  fill_costs(c, 1u << 30);
  c[kNvls][kSimple] = ARTUNE_NCCL_ALGO_PROTO_IGNORE;
  std::memcpy(before, c, sizeof c);
  int channels = 0;
  v6->getCollInfo(ctx, artuneNcclFuncAllReduce, 1u << 30, 1, reinterpret_cast<float**>(c), ARTUNE_NCCL_NUM_ALGORITHMS,
                  ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
  CHECK(std::memcmp(c, before, sizeof c) == 0);
  // A smaller table than NCCL's (numAlgo 2: Tree and Ring only) is indexed by its own shape.
  float small[2][3] = {{9, 8, 7}, {6, 5, 4}};
  v6->getCollInfo(ctx, artuneNcclFuncAllReduce, 100000, 1, reinterpret_cast<float**>(small), 2, 3, 0, &channels);
  CHECK(small[kRing][kLL128] == 0.0f);
  CHECK(small[kTree][kLL] == 9.0f);
  v6->finalize(ctx);
}

TEST_CASE("nccl_tuner.v4_v3_v2_interfaces") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string path = dir.file("table.json");
  write_text(path, table_json(16, 2, kRanges).dump());
  const TableEnv env(path.c_str());
  const PluginLib lib;
  plugin_log().clear();
  const auto* v4 = lib.symbol<artuneNcclTunerV4>("ncclTunerPlugin_v4");
  const auto* v3 = lib.symbol<artuneNcclTunerV3>("ncclTunerPlugin_v3");
  const auto* v2 = lib.symbol<artuneNcclTunerV2>("ncclTunerPlugin_v2");
  void* c4 = nullptr;
  void* c3 = nullptr;
  void* c2 = nullptr;
  REQUIRE(v4->init(16, 2, artune_test::record_log, &c4) == artuneNcclSuccess);
  REQUIRE(v3->init(16, 2, artune_test::record_log, &c3) == artuneNcclSuccess);
  REQUIRE(v2->init(16, 2, artune_test::record_log, &c2) == artuneNcclSuccess);
  CHECK(count_level(artuneNcclLogWarn) == 0);
  for (const std::uint64_t bytes : kSizes) {
    CAPTURE(bytes);
    Costs a, b;
    fill_costs(a, bytes);
    fill_costs(b, bytes);
    int channels = 0;
    v4->getCollInfo(c4, artuneNcclFuncAllReduce, bytes, 1, reinterpret_cast<float**>(a), ARTUNE_NCCL_NUM_ALGORITHMS,
                    ARTUNE_NCCL_NUM_PROTOCOLS, 1, &channels);
    v3->getCollInfo(c3, artuneNcclFuncAllReduce, bytes, 1, reinterpret_cast<float**>(b), ARTUNE_NCCL_NUM_ALGORITHMS,
                    ARTUNE_NCCL_NUM_PROTOCOLS, &channels);
    CHECK(nccl_choice(a) == expected(bytes));
    CHECK(nccl_choice(b) == expected(bytes));
    // v2 answers an algorithm and a protocol, only where the table names both and NVLS is supported.
    int algo = -1, proto = -1;
    v2->getCollInfo(c2, artuneNcclFuncAllReduce, bytes, 0, 1, 1, &algo, &proto, &channels);
    const bool both = bytes < 1048576 || bytes >= 268435456;
    CHECK(std::make_pair(algo, proto) == (both ? expected(bytes) : std::make_pair(-1, -1)));
    algo = proto = -1;
    v2->getCollInfo(c2, artuneNcclFuncAllReduce, bytes, 0, /*nvlsSupport=*/0, 1, &algo, &proto, &channels);
    CHECK(std::make_pair(algo, proto) == (both && bytes < 268435456 ? expected(bytes) : std::make_pair(-1, -1)));
  }
  v4->destroy(c4);
  v3->destroy(c3);
  v2->destroy(c2);
}

TEST_CASE("nccl_tuner.bad_tables_log_once_and_change_nothing") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string good = table_json(8, 1, kRanges).dump();
  struct Case {
    std::string name;
    std::string text;    // file content ("" = no file written)
    std::string reason;  // part of the warning
  };
  const std::vector<Case> cases = {
      {"missing.json", "", "cannot open"},
      {"truncated.json", good.substr(0, good.size() / 2), "malformed JSON"},
      {"garbage.json", "\x01\x02 not json %s %n", ": line 1, column 1: malformed JSON"},
      {"array.json", "[1,2,3]", ": must be an object, not an array"},
      {"schema.json", R"({"schema":"artune.plan","ranges":[]})",
       ": schema: must be \"artune.decision_table\", not \"artune.plan\" (not a decision table)"},
      {"version.json",
       [] {
         auto d = table_json(8, 1, kRanges);
         d["schema_version"] = 2;
         return d.dump();
       }(),
       ": schema_version: must be 1, not 2 (this plugin reads version 1)"},
      {"no_gpus.json",
       [] {
         auto d = table_json(8, 1, kRanges);
         d["topology"].erase("gpus");
         return d.dump();
       }(),
       ": topology.gpus: missing"},
      {"zero_machines.json", table_json(8, 0, kRanges).dump(), ": topology.machines: must be ≥ 1, not 0"},
      {"no_ranges.json",
       [] {
         auto d = table_json(8, 1, kRanges);
         d["ranges"] = nlohmann::json::array();
         return d.dump();
       }(),
       ": ranges: must hold at least one size range, not an empty array"},
      {"ranges_object.json",
       [] {
         auto d = table_json(8, 1, kRanges);
         d["ranges"] = nlohmann::json::object();
         return d.dump();
       }(),
       ": ranges: must be an array, not an object"},
      {"overlap.json", table_json(8, 1, {{8, 4096, "nccl.ring"}, {4096, 8192, "nccl.tree"}}).dump(),
       ": ranges[1].min_bytes: must be above the previous range's max_bytes 4096, not 4096"},
      {"reversed.json", table_json(8, 1, {{4096, 8, "nccl.ring"}}).dump(),
       ": ranges[0].max_bytes: must be ≥ min_bytes 4096, not 8"},
      {"bad_bytes.json",
       [] {
         auto d = table_json(8, 1, kRanges);
         d["ranges"][1]["min_bytes"] = -5;
         return d.dump();
       }(),
       ": ranges[1].min_bytes: must be a non-negative integer, not -5"},
      {"string_bytes.json",
       [] {
         auto d = table_json(8, 1, kRanges);
         d["ranges"][0]["max_bytes"] = "4K";
         return d.dump();
       }(),
       ": ranges[0].max_bytes: must be a non-negative integer, not a string"},
      {"artune_plans.json", table_json(8, 1, {{8, 4096, "xring#2"}, {8192, 65536, "nccl.ring"}}).dump(),
       ": ranges[0].plan.family: must be \"nccl\", not \"ring\" (plan 'xring#2' is not one of NCCL's choices"},
      {"bad_algo.json", table_json(8, 1, {{8, 4096, "nccl.collnet.simple"}}).dump(),
       ": ranges[0].plan.spec: must be one of NCCL's choices (nccl or nccl.ALGO[.PROTO][.cN]), not "
       "'nccl.collnet.simple'"},
      {"ranks.json", table_json(16, 2, kRanges).dump(),
       "tuned for 16 GPUs on 2 machine(s), this communicator has 8 ranks on 1 node(s)"},
      {"nodes.json", table_json(8, 2, kRanges).dump(), "tuned for 8 GPUs on 2 machine(s)"},
  };
  const PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  for (const Case& k : cases) {
    CAPTURE(k.name);
    const std::string path = dir.file(k.name);
    if (!k.text.empty()) write_text(path, k.text);
    const TableEnv env(path.c_str());
    plugin_log().clear();
    void* ctx = nullptr;
    REQUIRE(v5->init(&ctx, 7, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
    check_untouched([&](artuneNcclFunc coll, std::uint64_t bytes, Costs& c, int* channels) {
      CHECK(v5->getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(c), ARTUNE_NCCL_NUM_ALGORITHMS,
                            ARTUNE_NCCL_NUM_PROTOCOLS, 0, channels) == artuneNcclSuccess);
    });
    REQUIRE(plugin_log().size() == 1);
    CHECK(plugin_log().front().level == artuneNcclLogWarn);
    CHECK(plugin_log().front().flags == ARTUNE_NCCL_LOG_TUNING);
    const std::string& text = plugin_log().front().text;
    CHECK(text.find(path) != std::string::npos);
    CHECK(text.find(k.reason) != std::string::npos);
    CHECK(text.find("NCCL's own choices kept") != std::string::npos);
    CHECK(v5->finalize(ctx) == artuneNcclSuccess);
  }
}

TEST_CASE("nccl_tuner.unset_directory_and_fifo") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string folder = dir.path().string();
  for (const char* value : {static_cast<const char*>(nullptr), "", folder.c_str(), fifo.c_str()}) {
    CAPTURE(value == nullptr ? "(unset)" : value);
    const TableEnv env(value);
    plugin_log().clear();
    void* ctx = nullptr;
    REQUIRE(v5->init(&ctx, 7, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
    check_untouched([&](artuneNcclFunc coll, std::uint64_t bytes, Costs& c, int* channels) {
      v5->getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(c), ARTUNE_NCCL_NUM_ALGORITHMS,
                      ARTUNE_NCCL_NUM_PROTOCOLS, 0, channels);
    });
    REQUIRE(plugin_log().size() == 1);
    CHECK(plugin_log().front().level == artuneNcclLogWarn);
    const std::string want =
        value == nullptr || *value == '\0' ? "ARTUNE_TUNER_TABLE is not set" : "not a regular file";
    CHECK(plugin_log().front().text.find(want) != std::string::npos);
    v5->finalize(ctx);
  }
  // A null logger (NCCL always passes one, but nothing may crash without it) and null outputs.
  const TableEnv env(nullptr);
  void* ctx = nullptr;
  CHECK(v5->init(&ctx, 7, 8, 1, nullptr, nullptr, nullptr) == artuneNcclSuccess);
  CHECK(v5->init(nullptr, 7, 8, 1, nullptr, nullptr, nullptr) == artuneNcclSuccess);
  CHECK(v5->getCollInfo(nullptr, artuneNcclFuncAllReduce, 8, 1, nullptr, 7, 3, 0, nullptr) == artuneNcclSuccess);
  CHECK(v5->finalize(ctx) == artuneNcclSuccess);
  CHECK(v5->finalize(nullptr) == artuneNcclSuccess);
}

namespace {

/// One getCollInfo through v5: the (algorithm, protocol) NCCL then picks and the nChannels it is left with.
struct Steered {
  std::pair<int, int> pick;
  int channels = 0;
  bool untouched = false;  ///< the cost table came back exactly as filled
};
Steered steer(const artuneNcclTunerV5* v5, void* ctx, artuneNcclFunc coll, std::uint64_t bytes) {
  Costs c, before;
  fill_costs(c, bytes);
  fill_costs(before, bytes);
  Steered out;
  v5->getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(c), ARTUNE_NCCL_NUM_ALGORITHMS,
                  ARTUNE_NCCL_NUM_PROTOCOLS, 0, &out.channels);
  out.pick = nccl_choice(c);
  out.untouched = std::memcmp(c, before, sizeof c) == 0;
  return out;
}

}  // namespace

TEST_CASE("nccl_tuner.channels_from_the_table_at_each_size") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string path = dir.file("table.json");
  write_text(path, table_json(8, 1,
                              {{8, 4096, "nccl.ring.ll.c2"},
                               {16384, 262144, "nccl.tree.c4"},  // algorithm and channels, NCCL's protocol
                               {1048576, 4194304, "nccl.ring.simple"},
                               {16777216, 1073741824, "nccl.nvls.simple.c16"}})
                       .dump());
  const TableEnv env(path.c_str());
  const PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  const auto* v2 = lib.symbol<artuneNcclTunerV2>("ncclTunerPlugin_v2");
  plugin_log().clear();
  void* ctx = nullptr;
  void* ctx2 = nullptr;
  REQUIRE(v5->init(&ctx, 1, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
  REQUIRE(v2->init(8, 1, artune_test::record_log, &ctx2) == artuneNcclSuccess);
  CHECK(count_level(artuneNcclLogWarn) == 0);
  struct Want {
    std::uint64_t bytes;
    std::pair<int, int> pick;
    int channels;  // 0: left as NCCL had it
  };
  for (const Want& w : std::vector<Want>{{8, {kRing, kLL}, 2},
                                         {4096, {kRing, kLL}, 2},
                                         {8192, {kRing, kLL}, 2},  // the gap: the range below's pick
                                         {16384, {kTree, kLL}, 4},
                                         {262144, {kTree, kLL128}, 4},
                                         {1048576, {kRing, kSimple}, 0},
                                         {16777216, {kNvls, kSimple}, 16},
                                         {1u << 30, {kNvls, kSimple}, 16}}) {
    CAPTURE(w.bytes);
    const Steered got = steer(v5, ctx, artuneNcclFuncAllReduce, w.bytes);
    CHECK(got.pick == w.pick);
    CHECK(got.channels == w.channels);
    // v2 sets algorithm, protocol and channels where the table names the protocol.
    int algo = -1, proto = -1, channels = 0;
    v2->getCollInfo(ctx2, artuneNcclFuncAllReduce, w.bytes, 0, 1, 1, &algo, &proto, &channels);
    const bool named = w.bytes < 16384 || w.bytes >= 1048576;
    CHECK(std::make_pair(algo, proto) == (named ? w.pick : std::make_pair(-1, -1)));
    CHECK(channels == (named ? w.channels : 0));
  }
  // An unsupported pick sets no channel count either: NCCL's choice stands whole.
  Costs c;
  fill_costs(c, 1u << 30);
  c[kNvls][kSimple] = ARTUNE_NCCL_ALGO_PROTO_IGNORE;
  int channels = 0;
  v5->getCollInfo(ctx, artuneNcclFuncAllReduce, 1u << 30, 1, reinterpret_cast<float**>(c), ARTUNE_NCCL_NUM_ALGORITHMS,
                  ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
  CHECK(channels == 0);
  CHECK(c[kNvls][kSimple] == ARTUNE_NCCL_ALGO_PROTO_IGNORE);
  v5->finalize(ctx);
  v2->destroy(ctx2);
}

TEST_CASE("nccl_tuner.one_table_per_collective") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string all_reduce = dir.file("allreduce.json");
  const std::string all_gather = dir.file("allgather.json");
  const std::string reduce_scatter = dir.file("reducescatter.json");
  constexpr std::uint64_t k64K = 65536, k1M = 1048576, k1G = 1073741824;
  write_text(all_reduce, table_json(8, 1, {{8, k64K, "nccl.tree.ll"}, {k1M, k1G, "nccl.ring.simple"}}).dump());
  write_text(all_gather,
             table_json(8, 1, {{8, k64K, "nccl.ring.ll128.c4"}, {k1M, k1G, "nccl.nvls.simple"}}, "allgather").dump());
  write_text(reduce_scatter,
             table_json(8, 1, {{8, k64K, "nccl.ring.ll"}, {k1M, k1G, "nccl.ring.simple.c8"}}, "reducescatter").dump());
  // Colon-separated, any order; an empty entry (a trailing ':') is skipped.
  const std::string value = all_gather + ":" + all_reduce + ":" + reduce_scatter + ":";
  const TableEnv env(value.c_str());
  const PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  plugin_log().clear();
  void* ctx = nullptr;
  REQUIRE(v5->init(&ctx, 1, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
  CHECK(count_level(artuneNcclLogWarn) == 0);
  REQUIRE(count_level(artuneNcclLogInfo) == 3);  // one line per table, in the variable's order
  CHECK(plugin_log()[0].text.find(all_gather + ": 2 all-gather size range(s) for 8 ranks on 1 node(s): 8-65536 "
                                               "nccl.ring.ll128.c4 1048576-1073741824 nccl.nvls.simple") !=
        std::string::npos);
  CHECK(plugin_log()[1].text.find(all_reduce + ": 2 all-reduce size range(s)") != std::string::npos);
  CHECK(plugin_log()[2].text.find(reduce_scatter + ": 2 reduce-scatter size range(s)") != std::string::npos);
  struct Want {
    artuneNcclFunc coll;
    std::uint64_t bytes;
    std::pair<int, int> pick;
    int channels;
  };
  for (const Want& w : std::vector<Want>{{artuneNcclFuncAllReduce, 1024, {kTree, kLL}, 0},
                                         {artuneNcclFuncAllReduce, 1u << 26, {kRing, kSimple}, 0},
                                         {artuneNcclFuncAllGather, 1024, {kRing, kLL128}, 4},
                                         {artuneNcclFuncAllGather, 1u << 26, {kNvls, kSimple}, 0},
                                         {artuneNcclFuncReduceScatter, 1024, {kRing, kLL}, 0},
                                         {artuneNcclFuncReduceScatter, 1u << 26, {kRing, kSimple}, 8}}) {
    CAPTURE(w.coll);
    CAPTURE(w.bytes);
    const Steered got = steer(v5, ctx, w.coll, w.bytes);
    CHECK(got.pick == w.pick);
    CHECK(got.channels == w.channels);
  }
  // Broadcast and reduce have no table: untouched at every size.
  for (const std::uint64_t bytes : kSizes) {
    for (const artuneNcclFunc coll : {artuneNcclFuncBroadcast, artuneNcclFuncReduce}) {
      const Steered got = steer(v5, ctx, coll, bytes);
      CHECK(got.untouched);
      CHECK(got.channels == 0);
    }
  }
  // Only an all-gather table: all-reduce and reduce-scatter pass through.
  v5->finalize(ctx);
  {
    const TableEnv only(all_gather.c_str());
    plugin_log().clear();
    REQUIRE(v5->init(&ctx, 1, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
    CHECK(count_level(artuneNcclLogWarn) == 0);
    CHECK(steer(v5, ctx, artuneNcclFuncAllGather, 1024).pick == std::make_pair(kRing, kLL128));
    CHECK(steer(v5, ctx, artuneNcclFuncAllReduce, 1024).untouched);
    CHECK(steer(v5, ctx, artuneNcclFuncReduceScatter, 1024).untouched);
    v5->finalize(ctx);
  }
}

TEST_CASE("nccl_tuner.bad_table_lists_log_once_and_change_nothing") {
  const artune_test::ScratchDir dir("artune-nccl-tuner");
  const std::string good = dir.file("allreduce.json");
  write_text(good, table_json(8, 1, kRanges).dump());
  const std::string gather = dir.file("allgather.json");
  write_text(gather, table_json(8, 1, {{8, 4096, "nccl.ring.ll"}}, "allgather").dump());
  const std::string second = dir.file("allreduce2.json");
  write_text(second, table_json(8, 1, {{8, 4096, "nccl.ring.ll"}}).dump());
  const std::string mixed = dir.file("mixed.json");
  auto doc = table_json(8, 1, {{8, 4096, "nccl.ring.ll"}, {8192, 65536, "nccl.ring.simple"}}, "allgather");
  doc["ranges"][1]["plan"]["collective"] = "reducescatter";
  write_text(mixed, doc.dump());
  const std::string broadcast = dir.file("broadcast.json");
  write_text(broadcast, table_json(8, 1, {{8, 4096, "nccl.ring.ll"}}, "broadcast").dump());
  const std::string channels = dir.file("channels.json");
  write_text(channels, table_json(8, 1, {{8, 4096, "nccl.ring.ll.c65"}}).dump());
  const std::string ranks = dir.file("ranks.json");
  write_text(ranks, table_json(16, 2, {{8, 4096, "nccl.ring.ll"}}, "allgather").dump());
  struct Case {
    std::string value;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {good + ":" + second, second + ": a second all-reduce table in ARTUNE_TUNER_TABLE (one table per collective)"},
      {gather + ":" + mixed, mixed + ": ranges[1].plan.collective: must be the first range's collective"},
      {good + ":" + broadcast,
       broadcast + ": ranges[0].plan.collective: must be allreduce, allgather or reducescatter, not 'broadcast'"},
      {channels, "must be one of NCCL's choices (nccl or nccl.ALGO[.PROTO][.cN]), not 'nccl.ring.ll.c65'"},
      {good + ":" + ranks, ranks + ": tuned for 16 GPUs on 2 machine(s)"},
      {good + ":" + dir.file("missing.json"), "missing.json: cannot open"},
      {":", "ARTUNE_TUNER_TABLE is not set"},
  };
  const PluginLib lib;
  const auto* v5 = lib.symbol<artuneNcclTunerV5>("ncclTunerPlugin_v5");
  for (const Case& k : cases) {
    CAPTURE(k.value);
    const TableEnv env(k.value.c_str());
    plugin_log().clear();
    void* ctx = nullptr;
    REQUIRE(v5->init(&ctx, 7, 8, 1, artune_test::record_log, nullptr, nullptr) == artuneNcclSuccess);
    // Nothing is steered, not even by the good tables of the list.
    check_untouched([&](artuneNcclFunc coll, std::uint64_t bytes, Costs& c, int* out_channels) {
      v5->getCollInfo(ctx, coll, bytes, 1, reinterpret_cast<float**>(c), ARTUNE_NCCL_NUM_ALGORITHMS,
                      ARTUNE_NCCL_NUM_PROTOCOLS, 0, out_channels);
    });
    REQUIRE(plugin_log().size() == 1);
    CHECK(plugin_log().front().level == artuneNcclLogWarn);
    CHECK(plugin_log().front().text.find(k.reason) != std::string::npos);
    CHECK(plugin_log().front().text.find("NCCL's own choices kept") != std::string::npos);
    v5->finalize(ctx);
  }
}
