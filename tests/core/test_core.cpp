#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "artune/core/error.hpp"
#include "tests/test_support.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/nccl_release.hpp"
#include "artune/core/sizes.hpp"
#include "artune/core/types.hpp"

using namespace artune;

namespace {

using artune_test::error_of;

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("core.parse_size") {
  CHECK(parse_size("64", "-b") == 64);
  CHECK(parse_size("4K", "-b") == 4096);
  CHECK(parse_size("1M", "-b") == 1048576);
  CHECK(parse_size("2G", "-b") == 2147483648ull);
  CHECK(parse_size("8kB", "-b") == 8192);
  CHECK_THROWS_AS(parse_size("", "-b"), InvalidInput);
  CHECK_THROWS_AS(parse_size("12Q", "-b"), InvalidInput);
  CHECK_THROWS_AS(parse_size("-1", "-b"), InvalidInput);
  CHECK_THROWS_AS(parse_size("99999999999999999999", "-b"), InvalidInput);
  CHECK_THROWS_WITH(parse_size("x", "-e/--maxbytes"), doctest::Contains("-e/--maxbytes"));
}

TEST_CASE("core.format_size") {
  CHECK(format_size(1024) == "1K");
  CHECK(format_size(64ull << 20) == "64M");
  CHECK(format_size(1000) == "1000");
}

TEST_CASE("core.size_sweep") {
  const auto sweep = size_sweep(1024, 1u << 20, 2);
  REQUIRE(sweep.size() == 11);
  CHECK(sweep.front() == 1024);
  CHECK(sweep.back() == (1u << 20));
  CHECK(size_sweep(8, 8, 2) == std::vector<std::uint64_t>{8});
  CHECK_THROWS_AS(size_sweep(0, 8, 2), InvalidInput);
  CHECK_THROWS_AS(size_sweep(16, 8, 2), InvalidInput);
  CHECK_THROWS_AS(size_sweep(8, 16, 1.0), InvalidInput);
  // Non-finite factors and sizes beyond the documented limit name their parameter.
  CHECK_THROWS_WITH(size_sweep(8, 16, INFINITY), doctest::Contains("parameter step_factor"));
  CHECK_THROWS_WITH(size_sweep(8, 16, NAN), doctest::Contains("parameter step_factor"));
  CHECK(size_sweep(kMaxMessageBytes, kMaxMessageBytes, 2).size() == 1);
  CHECK_THROWS_WITH(size_sweep(8, kMaxMessageBytes + 1, 2), doctest::Contains("parameter max_bytes"));
  CHECK_THROWS_WITH(size_sweep(kMaxMessageBytes * 2, kMaxMessageBytes * 2, 2),
                    doctest::Contains("parameter min_bytes"));
}

TEST_CASE("core.read_input_file") {
  char pattern[] = "/tmp/artune_core_input_XXXXXX";
  const int fd = mkstemp(pattern);
  REQUIRE(fd >= 0);
  close(fd);
  const std::string path = pattern;
  {
    std::ofstream out(path);
    out << "0123456789";
  }
  CHECK(read_input_file(path, "--x") == "0123456789");
  CHECK(starts_with(error_of([&] { read_input_file(path, "--x", 9); }), "--x: '" + path + "': 10 bytes is more"));
  CHECK(starts_with(error_of([] { read_input_file("/nonexistent/a.json", "--x"); }), "--x: '/nonexistent/a.json': "));
  CHECK(contains(error_of([] { read_input_file("/tmp", "--x"); }), "is a directory"));
  CHECK(error_of([] { read_input_file("", "--x"); }) == "--x: empty file name");
  // A device without an end stops at the limit instead of filling memory.
  CHECK(starts_with(error_of([] { read_input_file("/dev/zero", "", 1 << 20); }), "/dev/zero: more than"));
  CHECK(read_input_file("/dev/null", "--x").empty());
  std::remove(path.c_str());
}

TEST_CASE("core.parse_json_input") {
  CHECK(parse_json_input(R"({"a": [1, 2]})", "x.json")["a"][1] == 2);
  CHECK(starts_with(error_of([] { parse_json_input("{\n  \"a\": }", "x.json"); }),
                    "x.json: line 2, column 8: malformed JSON: syntax error"));
  CHECK(starts_with(error_of([] { parse_json_input("", "x.json"); }), "x.json: line 1, column 1: malformed JSON"));
  // Numbers beyond a double are nlohmann out_of_range errors, not parse errors: still InvalidInput.
  CHECK(error_of([] { parse_json_input(R"({"a": 1e400})", "x.json"); }) ==
        "x.json: malformed JSON: number overflow parsing '1e400'");
  CHECK(contains(error_of([] { parse_json_input(std::string(1000, '[') + std::string(1000, ']'), "x.json"); }),
                 "nested deeper than"));
  CHECK(parse_json_input(std::string(200, '[') + std::string(200, ']'), "x.json").is_array());
}

TEST_CASE("core.types") {
  CHECK(element_size(DataType::kFloat16) == 2);
  CHECK(element_size(DataType::kInt64) == 8);
  CHECK(parse_data_type("float32") == DataType::kFloat32);
  CHECK(parse_data_type("bf16") == DataType::kBFloat16);
  CHECK(parse_reduce_op("AVG") == ReduceOp::kAvg);
  CHECK_THROWS_AS(parse_data_type("float128"), InvalidInput);
  CHECK_THROWS_AS(parse_reduce_op("xor"), InvalidInput);
  for (DataType t : all_data_types()) CHECK(parse_data_type(to_string(t)) == t);
  for (ReduceOp o : all_reduce_ops()) CHECK(parse_reduce_op(to_string(o)) == o);
}

TEST_CASE("core.exit_status") {
  CHECK(exit_status(ErrorCode::kInvalidInput) == 2);
  CHECK(exit_status(ErrorCode::kUnsupported) == 2);
  CHECK(exit_status(ErrorCode::kWrongResult) == 1);
  CHECK(exit_status(ErrorCode::kTimeout) == 3);
  CHECK(exit_status(ErrorCode::kInternal) == 4);
}

TEST_CASE("core.internal_error") {
  const int count = 3;
  ARTUNE_CHECK(count == 3, std::string("never built"));
  try {
    ARTUNE_CHECK(count == 4, "count is " + std::to_string(count));
    FAIL("ARTUNE_CHECK did not throw");
  } catch (const InternalError& e) {
    CHECK(e.code() == ErrorCode::kInternal);
    const std::string what = e.what();
    CHECK(what.rfind("internal error: count is 3 (tests/core/test_core.cpp:", 0) == 0);
    CHECK(what.size() > std::string(", please report").size());
    CHECK(what.substr(what.size() - std::string(", please report").size()) == ", please report");
  }
}

TEST_CASE("core.nccl_release") {
  CHECK(parse_nccl_release("2.21", "--nccl-version") == NcclRelease{2, 21, 0});
  CHECK(parse_nccl_release("2.21.5", "--nccl-version") == NcclRelease{2, 21, 5});
  CHECK(parse_nccl_release("2.21.5-1", "--nccl-version") == NcclRelease{2, 21, 5});      // a git tag
  CHECK(parse_nccl_release("2.21.5+cuda12.4", "--nccl-version") == NcclRelease{2, 21, 5});  // NCCL's banner
  CHECK(parse_nccl_release("2.30.1", "--nccl-version") == NcclRelease{2, 30, 1});  // newer: the newest tables
  CHECK(to_string(NcclRelease{2, 21, 5}) == "2.21.5");
  CHECK(to_string(kModelledNcclRelease) == "2.28.9");
  // Headers name the tables a release newer than the model's is modelled with.
  CHECK(describe_nccl_choice(NcclRelease{2, 21, 5}) == "NCCL 2.21.5's choice");
  CHECK(describe_nccl_choice(kModelledNcclRelease) == "NCCL 2.28.9's choice");
  CHECK(describe_nccl_choice(NcclRelease{2, 30, 1}) ==
        "NCCL 2.30.1's choice (2.28.9's tables, the newest the model carries)");
  CHECK(NcclRelease{2, 21, 5} < NcclRelease{2, 23, 0});
  CHECK(NcclRelease{2, 9, 9} < NcclRelease{2, 19, 0});  // numerically, not as text
  for (const char* bad : {"", "2", "2.", ".21", "2.x", "2.21.5.1", "v2.21", "2,21", "2.21a", "2.-1", "2.1000"}) {
    CAPTURE(bad);
    CHECK_FALSE(read_nccl_release(bad));
    CHECK_THROWS_WITH_AS(parse_nccl_release(bad, "--nccl-version"), doctest::Contains("--nccl-version: '"),
                         InvalidInput);
  }
  // Older than the model's oldest release: readable, but refused by name.
  CHECK(read_nccl_release("2.17.1") == NcclRelease{2, 17, 1});
  CHECK_FALSE(nccl_release_modelled(NcclRelease{2, 18, 6}));
  CHECK(nccl_release_modelled(kOldestModelledNcclRelease));
  CHECK(error_of([] { (void)parse_nccl_release("2.17.1", "--nccl-version"); }) ==
        "--nccl-version: NCCL 2.17.1 is older than the oldest release whose choice the model reproduces (2.19); leave "
        "it out to model NCCL 2.28.9");
}
