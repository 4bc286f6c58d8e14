// Reports that read right: measured picks within the run-to-run spread keep the
// previous or simpler plan, hysteresis picks are marked with their true margin,
// the gain over TF compares like with like, and the plots use log axes and
// show time as well as busbw. Checked on the functions and on generated files.

#include <doctest/doctest.h>

#include <set>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_support.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/algorithms/registry.hpp"
#include "artune/report/report.hpp"
#include "artune/tuner/search.hpp"

using namespace artune;
namespace fs = std::filesystem;

namespace {

Measurement timed(double us, double spread_pct, std::int64_t wrong = 0) {
  Measurement m;
  m.figures.time_us = us;
  m.backend = "cpu";
  m.wrong = wrong;
  m.iterations = 5;
  m.spread_pct = spread_pct;
  return m;
}

using artune_test::slurp;

}  // namespace

TEST_CASE("report.measured_choice_within_spread") {
  // Candidate 3 is fastest by 2%, but both runs vary by 5%: a tie.
  const std::vector<std::pair<std::size_t, Measurement>> close = {
      {3, timed(100, 5)}, {1, timed(102, 5)}, {7, timed(101, 1)}};
  CHECK(measured_choice(close, std::nullopt) == std::optional<std::size_t>(1));  // simplest (lowest index) in the tie
  CHECK(measured_choice(close, 7) == std::optional<std::size_t>(7));             // the previous pick stays
  CHECK(measured_choice(close, 9) == std::optional<std::size_t>(1));             // a previous pick not measured here
  // Beyond the spread the fastest wins.
  const std::vector<std::pair<std::size_t, Measurement>> apart = {{3, timed(100, 1)}, {1, timed(110, 2)}};
  CHECK(measured_choice(apart, 1) == std::optional<std::size_t>(3));
  // Wrong runs never win, and none correct means no measured pick.
  const std::vector<std::pair<std::size_t, Measurement>> wrong = {{0, timed(50, 50, 1)}, {2, timed(100, 0)}};
  CHECK(measured_choice(wrong, 0) == std::optional<std::size_t>(2));
  CHECK_FALSE(measured_choice({{0, timed(50, 0, 3)}}, std::nullopt).has_value());
}

TEST_CASE("report.gain_vs_tf_like_with_like") {
  SizePoint p;
  p.predicted.time_us = 80;
  p.tf_predicted.time_us = 60;
  // Predicted against predicted (the pick may have won on measurement: the basis says so).
  TfGain g = gain_vs_tf(p);
  CHECK(g.basis == "predicted");
  CHECK(g.ratio == doctest::Approx(0.75));
  // The pick measured but TF's pick not: still predicted vs predicted, never measured vs predicted.
  p.measured = timed(40, 1);
  g = gain_vs_tf(p);
  CHECK(g.basis == "predicted");
  CHECK(g.ratio == doctest::Approx(0.75));
  // Both measured: measured vs measured.
  p.tf_measured = timed(50, 1);
  g = gain_vs_tf(p);
  CHECK(g.basis == "measured");
  CHECK(g.ratio == doctest::Approx(1.25));
  CHECK(gain_vs_tf(SizePoint{}).basis.empty());
}

TEST_CASE("report.hysteresis_marked_with_true_margin") {
  // A wide hysteresis (50%) keeps earlier picks far behind the fastest: each such size says so.
  const Topology topo = load_topology("uniform:4");
  SearchOptions so;
  so.sizes = {1024, 4096, 16384, 65536, 262144, 1048576, 4194304};
  so.keep_within = 0.5;
  // The mpi profile: under the GPU profiles NCCL's own choice is the fastest at every size of uniform:4, so no
  // earlier pick would be kept.
  so.model = CostModel::defaults(BackendProfile::kMpi);
  so.candidates.max_cycles = 1;
  so.candidates.segments = {1};
  so.min_gain = 0;  // hysteresis alone (min-gain has its own test)
  const SearchResult r = search(topo, so);
  int kept = 0;
  for (std::size_t s = 0; s < r.sizes.size(); ++s) {
    const SizeScores& sc = r.sizes[s];
    const TableRange& range = r.table.lookup(sc.bytes);
    const SizePoint* point = nullptr;
    for (const auto& p : range.points) {
      if (p.bytes == sc.bytes) point = &p;
    }
    REQUIRE(point != nullptr);
    const std::size_t fastest = sc.ranking.front();
    const double fastest_us = sc.predicted[fastest]->time_us;
    const double pick_us = sc.predicted[r.pick[s]]->time_us;
    if (pick_us > fastest_us) {
      ++kept;
      CHECK(point->kept == "hysteresis");
      CHECK(point->fastest == r.set.candidates[fastest].label());
      CHECK(point->behind_fastest_pct == doctest::Approx(100.0 * (pick_us / fastest_us - 1.0)));
      CHECK(point->behind_fastest_pct <= 50.0 + 1e-9);
    } else {
      CHECK(point->kept.empty());
    }
  }
  REQUIRE(kept > 0);
  const std::string text = format_decision_table(r.table);
  CHECK(text.find("kept by hysteresis") != std::string::npos);

  const artune_test::ScratchDir scratch("artune-report");
  ReportInput in;
  in.command = "artune autotune -t uniform:4";
  write_report(scratch.path().string(), topo, r, in);
  const std::string md = slurp(scratch.path() / "REPORT.md");
  CHECK(md.find("| kept | TF (us) | gain vs TF | basis |") != std::string::npos);
  CHECK(md.find("hysteresis: ") != std::string::npos);
  CHECK(md.find("| predicted |") != std::string::npos);
  CHECK(md.find("`*` marks a pick kept") != std::string::npos);
  // The kept points carry their reason in results.json too.
  const auto results = nlohmann::json::parse(slurp(scratch.path() / "results.json"));
  int kept_json = 0;
  for (const auto& range : results["decision_table"]["ranges"]) {
    for (const auto& p : range["points"]) kept_json += p.contains("kept") ? 1 : 0;
  }
  CHECK(kept_json == kept);
  // Both plots are rendered where gnuplot is installed.
  if (!gnuplot_png_terminal().empty()) {
    CHECK(fs::exists(scratch.path() / "busbw.png"));
    CHECK(fs::exists(scratch.path() / "time.png"));
    CHECK(md.find("![time.png](time.png)") != std::string::npos);
  }
}

TEST_CASE("report.plots_use_log_axes_and_show_time") {
  FamilyCurves curves;
  curves.families = {"ring", "tree"};
  const std::vector<std::uint64_t> sizes = {1024, 65536};
  const std::string busbw = family_plot_script(curves, sizes, PlotMetric::kBusbw, "t", "png", "b.png", "f.dat");
  const std::string time = family_plot_script(curves, sizes, PlotMetric::kTime, "t", "png", "t.png", "f.dat");
  for (const std::string* s : {&busbw, &time}) {
    CHECK(s->find("set logscale x 2") != std::string::npos);
    CHECK(s->find("set logscale y 10") != std::string::npos);
  }
  // Columns: size, busbw of each family (2, 3), then time of each family (4, 5), each family in its own style.
  const std::string ring = family_style("ring"), tree = family_style("tree");
  CHECK(busbw.find("using 1:2 with linespoints " + ring + " title 'ring'") != std::string::npos);
  CHECK(busbw.find("using 1:3 with linespoints " + tree + " title 'tree'") != std::string::npos);
  CHECK(busbw.find("set ylabel 'busbw (GB/s)'") != std::string::npos);
  CHECK(time.find("using 1:4 with linespoints " + ring + " title 'ring'") != std::string::npos);
  CHECK(time.find("using 1:5 with linespoints " + tree + " title 'tree'") != std::string::npos);
  CHECK(time.find("set ylabel 'time (us)'") != std::string::npos);
  // The speed-up plot: NCCL's time over each family's (columns 6, 7), on a linear axis.
  const std::string speedup = speedup_plot_script(curves, sizes, "t", "png", "s.png", "f.dat");
  CHECK(speedup.find("set logscale y") == std::string::npos);
  CHECK(speedup.find("using 1:6 with linespoints " + ring + " title 'ring'") != std::string::npos);
  CHECK(speedup.find("using 1:7 with linespoints " + tree + " title 'tree'") != std::string::npos);
}

TEST_CASE("report.family_colours_are_stable") {
  // A family keeps its colour whatever else a report plots; NCCL is always the thick black baseline.
  CHECK(family_style("nccl") == "lw 3 lc rgb '#000000'");
  CHECK(family_style("ring") == family_style("ring"));
  std::set<std::string> styles;
  // The shipped families are told apart: every family of every collective has a colour of its own.
  std::set<std::string> names = {"hybrid"};
  for (const Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    for (const Family* f : families(c)) names.insert(f->name);
  }
  for (const std::string& f : names) styles.insert(family_style(f));
  CHECK(names.size() >= 10);
  CHECK(styles.size() == names.size());
  CHECK(family_style("no-such-family") == family_style("no-such-family"));
}

TEST_CASE("report.spread_ties_marked_in_generated_report") {
  // Two sizes measured by hand: at the second, the fastest candidate beats the previous pick by less than the
  // runs' spread, so the previous pick stays, marked "spread", and the report shows the spread.
  const Topology topo = load_topology("uniform:4");
  SearchOptions so;
  so.sizes = {4096, 8192};
  so.candidates.max_cycles = 1;
  so.candidates.segments = {1};
  SearchResult r = search(topo, so);
  REQUIRE(r.sizes[0].ranking.size() >= 2);
  const std::size_t a = r.sizes[0].ranking[0];
  const std::size_t b = r.sizes[0].ranking[1];
  r.sizes[0].measured = {{a, timed(100, 1)}, {b, timed(150, 1)}};
  r.sizes[1].measured = {{a, timed(104, 6)}, {b, timed(100, 2)}};
  for (std::size_t s = 0; s < 2; ++s) {
    r.pick[s] = *measured_choice(r.sizes[s].measured, s > 0 ? std::optional<std::size_t>(r.pick[s - 1]) : std::nullopt);
    for (const auto& [c, m] : r.sizes[s].measured) {
      if (c == r.pick[s]) r.sizes[s].measured_pick = m;
    }
  }
  CHECK(r.pick[0] == a);
  CHECK(r.pick[1] == a);  // 4% slower than b, within a's 6% spread: kept
  rebuild_table(r, topo, so);
  REQUIRE(r.table.ranges.size() == 1);  // one range, not a flip
  const SizePoint& p = r.table.ranges[0].points[1];
  CHECK(p.kept == "spread");
  CHECK(p.fastest == r.set.candidates[b].label());
  CHECK(p.behind_fastest_pct == doctest::Approx(4.0));
  CHECK(p.measured->spread_pct == doctest::Approx(6.0));
  const std::string text = format_decision_table(r.table);
  CHECK(text.find("kept by spread (4.0% behind the fastest") != std::string::npos);
  CHECK(text.find("within the measured run-to-run spread") != std::string::npos);
  const artune_test::ScratchDir scratch("artune-report");
  ReportInput in;
  in.command = "artune autotune -t uniform:4 --measure cpu";
  write_report(scratch.path().string(), topo, r, in);
  const std::string md = slurp(scratch.path() / "REPORT.md");
  CHECK(md.find("| 6.0% | spread: 4.0% behind `" + r.set.candidates[b].label() + "` |") != std::string::npos);
}
