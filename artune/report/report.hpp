#pragma once
// The autotune report: REPORT.md, results.json and plots rendered by gnuplot.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "artune/topology/topology.hpp"
#include "artune/tuner/autotune.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/fusion.hpp"
#include "artune/tuner/search.hpp"

namespace artune {

/// Everything a report shows.
struct ReportInput {
  std::string command;             ///< the command line that regenerates the report
  std::string title;               ///< e.g. "dgx1-v100"
  std::vector<std::string> notes;  ///< extra lines (discovery notes, calibration used, …)
  std::vector<FusionReport> fusion;
  nlohmann::json calibration;  ///< calibration summary (null when none)
};

/// Best predicted busbw per family and size: families in first-seen order, values per size (NaN where none).
struct FamilyCurves {
  std::vector<std::string> families;
  std::vector<std::vector<double>> busbw;    ///< [family][size]
  std::vector<std::vector<double>> time_us;  ///< [family][size]
};
/// The per-family best curves of a search.
FamilyCurves family_curves(const SearchResult& result);

/// How the pick compares with TF's choose_the_best at one size, like with like.
struct TfGain {
  double ratio = 0;   ///< TF's time / the pick's time (> 1: the pick is faster)
  std::string basis;  ///< "measured" (both measured), "predicted" (both simulated), "" (no figure)
};
/// The gain over TF's pick: measured vs measured when both were measured, else predicted vs predicted.
TfGain gain_vs_tf(const SizePoint& p);

/// What a family plot shows.
enum class PlotMetric { kBusbw, kTime };
/// The gnuplot script of a per-family plot on log-log axes: `data` holds one row per size (size, busbw of each
/// family, time of each family; '?' where missing), `png` is the image to write.
std::string family_plot_script(const FamilyCurves& curves, const std::vector<std::uint64_t>& sizes, PlotMetric metric,
                               const std::string& title, const std::string& terminal, const std::string& png,
                               const std::string& data);
/// The gnuplot script of the speed-up plot: per family, NCCL's time over the family's best time (columns after the
/// busbw and time columns of `data`), on a linear axis.
std::string speedup_plot_script(const FamilyCurves& curves, const std::vector<std::uint64_t>& sizes,
                                const std::string& title, const std::string& terminal, const std::string& png,
                                const std::string& data);
/// gnuplot's line style of a family: NCCL thick and black, every other family one colour in every report.
std::string family_style(std::string_view family);

/// Crossover notes: where the best family changes along the sizes, and the gain over TF's pick.
std::vector<std::string> crossover_notes(const SearchResult& result);

/// Markdown summary of a topology (node counts, link kinds, GPU path-type matrix).
std::string topology_summary_markdown(const Topology& topo);

/// Optional columns of the printed decision table.
struct TableColumns {
  bool tf = false;  ///< TF's choose_the_best pick and its time (autotune --tf)
};
/// The decision table as a fixed-width text table (what autotune prints at the end): per range the pick's figures,
/// the runner-up's margin, NCCL's own choice and the pick's gain over it, and a closing line saying where the table
/// differs from NCCL's own choice.
std::string format_decision_table(const DecisionTable& table, const TableColumns& columns = {});
/// "=" when the pick is NCCL's own choice at this size (same simulated time), else NCCL's time / the pick's
/// ("1.38x"); "-" without an NCCL baseline.
std::string vs_nccl_text(const SizePoint& p);

/// Finds a PNG terminal of gnuplot ("pngcairo", else "png"); empty when gnuplot is missing.
std::string gnuplot_png_terminal();

/// `text` as a gnuplot string literal (single quotes, quotes doubled, control characters escaped visibly):
/// names and specs from input files reach gnuplot only through this.
std::string gnuplot_quote(std::string_view text);

/// Runs gnuplot on the script file `script` (a name inside `work`) from argv, without a shell, with `work`
/// as its current folder and its stderr in work/gnuplot.err; its exit status, -1 when it could not run.
int run_gnuplot(const std::filesystem::path& work, const std::string& script);

/// Writes DIR/REPORT.md, DIR/results.json, DIR/busbw.png and DIR/time.png (and DIR/measured.png when measured);
/// creates DIR. Plots are skipped with a note in REPORT.md when gnuplot is missing.
void write_report(const std::string& dir, const Topology& topo, const SearchResult& result, const ReportInput& input);

}  // namespace artune
