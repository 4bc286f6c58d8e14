// The published logs of tests/logs/data and what their sources say about them (fixtures.json; every
// source is listed in tests/logs/data/README.md).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace artune_test {

/// tests/logs/data under $ARTUNE_SOURCE_ROOT (meson test sets it), else under the working folder.
inline std::filesystem::path log_data_dir() {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  return std::filesystem::path(root != nullptr ? root : ".") / "tests" / "logs" / "data";
}

/// What a source says about the rows of one table: "slow" (misconfigured, below what the machine should
/// reach) or "normal", for the rows of at least `from_bytes` (and at most `to_bytes`, 0 = no bound).
struct Verdict {
  int table = 0;  ///< index of the table in its file
  std::string says;
  std::uint64_t from_bytes = 0;
  std::uint64_t to_bytes = 0;
  std::string quote;
};

/// One fixture file.
struct LogFixture {
  std::string file;
  std::string kind;      ///< "nccl-tests" (tables, maybe with NCCL INFO lines) or "nccl-info" (INFO only)
  std::string source;
  std::string machine;   ///< the machine as the source describes it
  std::string topology;  ///< artune's topology for it ("" when none describes it)
  std::string spec;      ///< what the run forced where the log does not show it ("" = the log says or NCCL chose)
  int tables = 0;        ///< nccl-tests tables in the file
  int ranks = 0;         ///< ranks of every table
  std::vector<Verdict> verdicts;
};

/// Every fixture of fixtures.json (REQUIRE-free: a malformed file throws, failing the test that reads it).
inline std::vector<LogFixture> log_fixtures() {
  std::ifstream in(log_data_dir() / "fixtures.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<LogFixture> out;
  for (const auto& j : doc.at("fixtures")) {
    LogFixture f;
    f.file = j.at("file").get<std::string>();
    f.kind = j.at("kind").get<std::string>();
    f.source = j.at("source").get<std::string>();
    f.machine = j.at("machine").get<std::string>();
    f.topology = j.value("topology", "");
    f.spec = j.value("spec", "");
    f.tables = j.at("tables").get<int>();
    f.ranks = j.at("ranks").get<int>();
    for (const auto& v : j.value("verdicts", nlohmann::json::array())) {
      Verdict d;
      d.table = v.value("table", 0);
      d.says = v.at("says").get<std::string>();
      d.from_bytes = v.value("from_bytes", std::uint64_t{0});
      d.to_bytes = v.value("to_bytes", std::uint64_t{0});
      d.quote = v.at("quote").get<std::string>();
      f.verdicts.push_back(std::move(d));
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace artune_test
