// The nccl-tests output reader on published logs (tests/logs/data, sources in its README.md) and on
// damaged copies of them: every fixture reads, fields land where nccl-tests printed them, and a damaged or
// truncated table is one InvalidInput naming the file and line.

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "artune/core/error.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "tests/logs/log_fixtures.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using namespace artune::logs;
using artune_test::error_of;
using artune_test::slurp;

namespace {

std::string fixture_text(const std::string& name) { return slurp(artune_test::log_data_dir() / name); }

// `text` with its first occurrence of `from` replaced by `to` (the test fails when there is none).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "fixture lacks '", from, "'");
  return text.replace(at, from.size(), to);
}

int line_of(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  REQUIRE(at != std::string::npos);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

}  // namespace

TEST_CASE("nccl_tests_log.every_fixture_reads") {
  int files = 0;
  for (const auto& f : artune_test::log_fixtures()) {
    INFO(f.file);
    const auto runs = read_nccl_tests((artune_test::log_data_dir() / f.file).string());
    if (f.tables == 0) {
      CHECK(runs.empty());
      continue;
    }
    ++files;
    REQUIRE(static_cast<int>(runs.size()) == f.tables);
    for (const auto& r : runs) {
      CHECK(!r.rows.empty());
      CHECK(r.ranks() == f.ranks);
      for (const auto& row : r.rows) CHECK(row.line > r.header_line);
    }
  }
  CHECK(files >= 10);
}

TEST_CASE("nccl_tests_log.header_and_rows_as_printed") {
  const auto runs = read_nccl_tests((artune_test::log_data_dir() / "together-h100-all_reduce_ring.log").string());
  REQUIRE(runs.size() == 1);
  const TestRun& r = runs.front();
  CHECK(r.program == "all_reduce_perf");
  CHECK(r.tests_version == "2.17.9");
  CHECK(r.nccl_version_code == 22602);
  CHECK(r.nccl_version == "2.26.2");
  CHECK(r.threads == 1);
  CHECK(r.gpus_per_thread == 8);
  CHECK(r.min_bytes == 8);
  CHECK(r.max_bytes == 8589934592ULL);
  CHECK(r.warmup_iters == 5);
  CHECK(r.iters == 20);
  CHECK(r.agg_iters == 1);
  CHECK(r.validation == 1);
  CHECK(r.graph == 0);
  REQUIRE(r.devices.size() == 8);
  CHECK(r.devices[3].rank == 3);
  CHECK(r.devices[3].device == 3);
  CHECK(r.devices[3].host == "gpu-dp-2jvzl-pqq7p");
  CHECK(r.devices[3].bus_id == "0000:3b:00");
  CHECK(r.devices[3].name == "NVIDIA H100 80GB HBM3");
  CHECK(r.hosts().size() == 1);
  CHECK(r.ranks() == 8);
  CHECK(r.copies() == 1);
  REQUIRE(r.rows.size() == 31);
  const TestRow& first = r.rows.front();
  CHECK(first.bytes == 8);
  CHECK(first.count == 2);
  CHECK(first.type == "float");
  CHECK(first.redop == "sum");
  CHECK(first.root == -1);
  REQUIRE(first.out_of_place);
  CHECK(first.out_of_place->time_us == doctest::Approx(34.98));
  CHECK(first.in_place.time_us == doctest::Approx(34.52));
  CHECK(first.out_of_place->check == 0.0);
  const TestRow& last = r.rows.back();
  CHECK(last.bytes == 8589934592ULL);
  CHECK(last.out_of_place->time_us == doctest::Approx(40838.9));
  CHECK(last.out_of_place->busbw_gbps == doctest::Approx(368.09));
  CHECK(last.in_place.busbw_gbps == doctest::Approx(368.62));
  CHECK(r.avg_busbw_gbps == doctest::Approx(122.955));
  CHECK(r.footer);
  CHECK(r.bus_factor == doctest::Approx(1.75).epsilon(0.002));  // 2(n−1)/n for 8 ranks
  CHECK(r.size_per_count == 1);
  CHECK(r.columns.front() == "size");
}

TEST_CASE("nccl_tests_log.all_gather_and_reduce_scatter_sizes") {
  for (const std::string name : {"together-h100-all_gather_ring.log", "together-h100-reduce_scatter_ring.log"}) {
    INFO(name);
    const auto runs = read_nccl_tests((artune_test::log_data_dir() / name).string());
    REQUIRE(runs.size() == 1);
    // Current nccl-tests print the per-rank count and the whole buffer's size: size = count × 4 B × 8 ranks.
    CHECK(runs[0].size_per_count == 8);
    CHECK(runs[0].bus_factor == doctest::Approx(0.875).epsilon(0.002));
    CHECK(runs[0].ranks() == 8);
    CHECK(runs[0].rows.front().bytes == 0);  // the zero-byte rows nccl-tests prints below one element per rank
  }
}

TEST_CASE("nccl_tests_log.two_jobs_in_one_file") {
  // Two single-machine jobs wrote into the same file: every header twice, every row once per job.
  const auto runs = read_nccl_tests((artune_test::log_data_dir() / "together-h100-slurm-all_reduce_default.log").string());
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].copies() == 2);
  CHECK(runs[0].ranks() == 8);
  CHECK(runs[0].hosts().size() == 1);
  CHECK(runs[0].rows.size() == 28);
}

TEST_CASE("nccl_tests_log.command_lines_name_the_program_and_environment") {
  const auto runs = read_nccl_tests((artune_test::log_data_dir() / "a3mega-2x8-h100-all_reduce.log").string());
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].program == "all_reduce_perf");
  CHECK(runs[0].ranks() == 16);
  CHECK(runs[0].hosts().size() == 2);
  const std::string text =
      "NCCL_ALGO=Tree NCCL_PROTO=Simple ./build/all_reduce_perf -b 8 -e 16 -g 1\n" +
      fixture_text("together-h100-all_reduce_ring.log").substr(
          fixture_text("together-h100-all_reduce_ring.log").find("# nThread"));
  const auto forced = parse_nccl_tests(text, "forced.log");
  REQUIRE(forced.size() == 1);
  CHECK(forced[0].program == "all_reduce_perf");
  CHECK(forced[0].env.at("NCCL_ALGO") == "Tree");
  CHECK(forced[0].env.at("NCCL_PROTO") == "Simple");
  // NCCL's own line, as NCCL_DEBUG=INFO prints it.
  const auto info = parse_nccl_tests("h:1:2 [0] NCCL INFO NCCL_ALGO set by environment to ring\n" + text, "info.log");
  CHECK(info[0].env.at("NCCL_ALGO") == "Tree");  // the later command line wins
}

TEST_CASE("nccl_tests_log.several_runs_and_tagged_output") {
  const std::string one = fixture_text("together-h100-all_reduce_ring.log");
  const std::string two = one + "\n" + fixture_text("together-h100-all_gather_ring.log");
  const auto runs = parse_nccl_tests(two, "two.log");
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].program == "all_reduce_perf");
  CHECK(runs[1].program == "all_gather_perf");
  CHECK(runs[1].rows.front().line > runs[0].end_line);
  // mpirun --tag-output prefixes every line.
  std::string tagged;
  std::size_t start = 0;
  while (start < one.size()) {
    const std::size_t end = std::min(one.find('\n', start), one.size());
    tagged += "[1,0]<stdout>:" + one.substr(start, end - start) + "\n";
    start = end + 1;
  }
  const auto t = parse_nccl_tests(tagged, "tagged.log");
  REQUIRE(t.size() == 1);
  CHECK(t[0].rows.size() == 31);
  CHECK(t[0].ranks() == 8);
}

TEST_CASE("nccl_tests_log.damaged_tables_are_one_error_naming_the_line") {
  const std::string text = fixture_text("together-h100-all_reduce_ring.log");
  const std::string row = "     1048576        262144     float     sum      -1    46.52   22.54   39.44";
  const int line = line_of(text, row);
  const std::string where = "damaged.log:" + std::to_string(line) + ":";
  SUBCASE("truncated in the middle of a row") {
    const std::string cut = text.substr(0, text.find(row) + row.size());
    const std::string e = error_of([&] { parse_nccl_tests(cut, "damaged.log"); });
    CHECK(e.rfind(where, 0) == 0);
    CHECK(e.find("fields") != std::string::npos);
  }
  SUBCASE("one digit changed") {
    const std::string e = error_of([&] { parse_nccl_tests(replaced(text, row, replaced(row, "46.52", "96.52")), "damaged.log"); });
    CHECK(e.rfind(where, 0) == 0);
    CHECK(e.find("algbw") != std::string::npos);
  }
  SUBCASE("a bus bandwidth off the table's factor") {
    const std::string e = error_of([&] { parse_nccl_tests(replaced(text, row, replaced(row, "39.44", "19.44")), "damaged.log"); });
    CHECK(e.rfind(where, 0) == 0);
    CHECK(e.find("factor") != std::string::npos);
  }
  SUBCASE("a count that is not the size") {
    const std::string e = error_of([&] { parse_nccl_tests(replaced(text, row, replaced(row, "262144", "262145")), "damaged.log"); });
    CHECK(e.rfind(where, 0) == 0);
    CHECK(e.find("count") != std::string::npos);
  }
  SUBCASE("not a number") {
    const std::string e = error_of([&] { parse_nccl_tests(replaced(text, row, replaced(row, "22.54", "22.x4")), "damaged.log"); });
    CHECK(e.rfind(where, 0) == 0);
  }
  SUBCASE("an unknown type") {
    const std::string e = error_of([&] { parse_nccl_tests(replaced(text, row, replaced(row, "float", "flaot")), "damaged.log"); });
    CHECK(e.rfind(where, 0) == 0);
    CHECK(e.find("flaot") != std::string::npos);
  }
  // A file cut at a line break keeps the rows before it (the footer is missing, which the run records).
  const std::string at_break = text.substr(0, text.find(row));
  const auto runs = parse_nccl_tests(at_break, "cut.log");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].rows.size() == 17);
  CHECK_FALSE(runs[0].footer);
}

TEST_CASE("nccl_tests_log.headers_out_of_nccl_tests_order_are_refused") {
  // A header is the map every row is read by: one naming a leading column again after the time columns (what
  // libFuzzer made of a log, whose rows were then read past their last field), or whose two halves are laid out
  // differently, is one error naming its line, not a row read at the wrong places.
  const std::string text = fixture_text("together-h100-all_reduce_ring.log");
  const std::string header =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
      "#wrong ";
  const std::string where = "h.log:" + std::to_string(line_of(text, header)) + ":";
  const auto error_with = [&](const std::string& other) {
    return error_of([&] { parse_nccl_tests(replaced(text, header, other), "h.log"); });
  };
  std::string e = error_with(replaced(header, "#wrong ", "#wrong  type  redop  root  time  algbw  busbw  #wrong "));
  CHECK(e.rfind(where, 0) == 0);
  CHECK(e.find("'type' twice or after a time column") != std::string::npos);
  e = error_with(replaced(header, "time   algbw   busbw", "time   busbw   algbw"));
  CHECK(e.find("out of order") != std::string::npos);
  e = error_with(replaced(header, "busbw  #wrong     time", "busbw      time"));
  CHECK(e.rfind(where, 0) == 0);
  CHECK(e.find("halves differ") != std::string::npos);
}

TEST_CASE("nccl_tests_log.text_without_tables") {
  CHECK(parse_nccl_tests("", "empty.log").empty());
  CHECK(parse_nccl_tests("hello\nworld\n           8   2  float\n", "other.log").empty());  // a row outside a table
  CHECK(error_of([] { read_nccl_tests("/nonexistent/run.log"); }).find("/nonexistent/run.log") != std::string::npos);
}
