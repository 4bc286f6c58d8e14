// Hostile flags for `artune run` that used to be accepted, crash or wake the OOM killer: each must end
// with exit status 2 and exactly one stderr line "artune: …" naming the flag at fault, quickly and
// before anything large is allocated.

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;

struct Case {
  std::vector<std::string> args;   // after "run"
  std::vector<std::string> names;  // substrings the error line must carry
};

void check_refused(const Case& c) {
  std::vector<std::string> args{"run"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const artune_test::CliResult r = artune_test::run_artune(args);
  std::string text = "artune";
  for (const auto& a : args) text += " " + a;
  INFO("command: ", text);
  INFO("stderr: ", r.err);
  CHECK(r.status == 2);
  REQUIRE(!r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(r.err.rfind("artune: ", 0) == 0);
  CHECK(r.err.find("internal error") == std::string::npos);
  for (const std::string& name : c.names) CHECK_MESSAGE(r.err.find(name) != std::string::npos, "missing: ", name);
}

}  // namespace

TEST_CASE("cli_bad_input_run.memory") {
  // Refused from the plan's buffer sizes against available memory, never allocated.
  for (const char* size : {"1T", "64G"}) check_refused({{"-b", size, "-e", size}, {"-e/--maxbytes", "GiB"}});
  // Up front: the sweep's largest size is checked before the small ones run.
  check_refused({{"-b", "1K", "-e", "1T"}, {"-e/--maxbytes"}});
}

TEST_CASE("cli_bad_input_run.iteration_counts") {
  check_refused({{"-n", "2000000000"}, {"-n/--iters", "1000000"}});
  check_refused({{"-n", "0"}, {"-n/--iters"}});
  check_refused({{"-w", "2000000000"}, {"-w/--warmup_iters"}});
  check_refused({{"-c", "2000000000"}, {"-c/--check"}});
  check_refused({{"-c", "-1"}, {"-c/--check"}});
}

TEST_CASE("cli_bad_input_run.timeout") {
  for (const char* t : {"inf", "1e300", "-inf", "nan", "0", "1000001"})
    check_refused({{"--timeout", t}, {"--timeout"}});
  // The largest allowed timeout still runs (the deadline arithmetic saturates instead of overflowing).
  const artune_test::CliResult ok =
      artune_test::run_artune({"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "-n", "1", "--timeout", "1000000"});
  INFO(ok.err);
  CHECK(ok.status == 0);
}

TEST_CASE("cli_bad_input_run.cpu_device_cap") {
  check_refused({{"-t", "128xdgx-h100", "-b", "1K", "-e", "1K"}, {"-t/--topology", "256"}});
  check_refused({{"-t", "uniform:2x200", "-b", "1K", "-e", "1K"}, {"-t/--topology", "256"}});
}

TEST_CASE("cli_bad_input_run.sizes_not_multiple_of_element") {
  check_refused({{"-b", "3", "-e", "3"}, {"-b/--minbytes", "element size"}});
  check_refused({{"-b", "8", "-e", "24", "-f", "1.5", "-d", "double"}, {"-b/-e/-f", "double"}});
  check_refused({{"-b", "8", "-e", "12", "-f", "1.5", "-d", "double"}, {"-e/--maxbytes", "double"}});
}

TEST_CASE("cli_bad_input_run.machine_index") {
  check_refused({{"--machine-index", "-7"}, {"--machine-index"}});
  check_refused({{"--machine-index", "5"}, {"--machine-index"}});
  check_refused({{"--machine-index", "0", "--backend", "cpu"}, {"--machine-index"}});
}

TEST_CASE("cli_bad_input_run.table_type_and_op") {
  char pattern[] = "/tmp/artune_run_table_XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  const fs::path dir = pattern;
  const std::string table = (dir / "table.json").string();
  const artune_test::CliResult made =
      artune_test::run_artune({"autotune", "-t", "uniform:4", "-b", "1K", "-e", "64K", "-q", "--out", table});
  INFO(made.err);
  REQUIRE(made.status == 0);
  check_refused(
      {{"-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", table, "-d", "double"}, {"-d/--datatype", "float"}});
  check_refused({{"-t", "uniform:4", "-b", "1K", "-e", "1K", "--table", table, "-o", "max"}, {"-o/--op", "sum"}});
  const artune_test::CliResult ok =
      artune_test::run_artune({"run", "-t", "uniform:4", "-b", "1K", "-e", "1K", "-n", "1", "--table", table});
  INFO(ok.err);
  CHECK(ok.status == 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
}
