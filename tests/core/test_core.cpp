#include <doctest/doctest.h>

#include "core/error.hpp"
#include "core/sizes.hpp"
#include "core/types.hpp"

using namespace artune;

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
}
