#include "artune/report/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artune/algorithms/registry.hpp"
#include "artune/core/error.hpp"
#include "artune/core/input.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/parameters.hpp"
#include "artune/core/sizes.hpp"
#include "artune/topology/io/io.hpp"

namespace artune {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt_time(double us) {
  if (!(us > 0)) return "-";
  if (us < 1000) return fmt::format("{:.1f}", us);
  return fmt::format("{:.0f}", us);
}

std::string fmt_bw(double gbps) {
  if (!(gbps > 0)) return "-";
  return fmt::format("{:.2f}", gbps);
}

std::string range_text(const TableRange& r) {
  if (r.min_bytes == r.max_bytes) return format_size(r.min_bytes);
  return fmt::format("{}-{}", format_size(r.min_bytes), format_size(r.max_bytes));
}

/// Runs `argv` (argv[0] looked up in PATH) without a shell: no input string is ever parsed as a command line.
/// The child runs in `cwd` (when not empty) with stdout on /dev/null and stderr into `err_path` (/dev/null when
/// empty). Returns its exit status, -1 when it could not start or ended by a signal.
int spawn_and_wait(const std::vector<std::string>& argv, const std::string& cwd, const std::string& err_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  if (::posix_spawn_file_actions_init(&actions) != 0) return -1;
  const std::string err = err_path.empty() ? std::string("/dev/null") : err_path;
  int rc = ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (rc == 0) {
    rc = ::posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  }
  if (rc == 0 && !cwd.empty()) rc = ::posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  pid_t pid = -1;
  if (rc == 0) rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  write_output_file(path.string(), text, parameter("report_dir"));
}

}  // namespace

std::string gnuplot_quote(std::string_view text) {
  // gnuplot interprets nothing inside single quotes except a doubled quote; a raw newline (or any control
  // character) would end the string and the command, so those are written as visible escapes instead.
  std::string out = "'";
  for (const char c : escape_control(text)) {
    if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

int run_gnuplot(const std::filesystem::path& work, const std::string& script) {
  return spawn_and_wait({"gnuplot", script}, work.string(), (work / "gnuplot.err").string());
}

namespace {

/// Writes `script` into `work`, runs gnuplot there and copies the PNG it wrote (`png`, a name inside `work`)
/// into `root` with the output writer; true when the plot was rendered.
bool render_plot(const std::filesystem::path& work, const std::filesystem::path& root, const std::string& png,
                 const std::string& script) {
  const std::string gp = std::filesystem::path(png).stem().string() + ".gp";
  write_text(work / gp, script);
  if (run_gnuplot(work, gp) != 0) return false;
  std::string image;
  try {
    image = read_input_file((work / png).string(), "gnuplot output");
  } catch (const InvalidInput&) {
    return false;
  }
  write_text(root / png, image);
  return true;
}

std::string xtics_for(const std::vector<std::uint64_t>& sizes) {
  std::vector<std::string> tics;
  const std::size_t step = sizes.size() > 12 ? (sizes.size() + 11) / 12 : 1;
  for (std::size_t i = 0; i < sizes.size(); i += step) {
    tics.push_back(fmt::format("\"{}\" {}", format_size(sizes[i]), sizes[i]));
  }
  return fmt::format("set xtics ({})\n", fmt::join(tics, ", "));
}

/// The margin cell: the runner-up's margin, marked with * when the pick is kept although not the fastest.
std::string margin_text(const SizePoint& p) {
  if (p.runner_up.empty()) return "-";
  return fmt::format("{:+.1f}%{}", p.margin_pct, p.kept.empty() ? "" : "*");
}

}  // namespace

TfGain gain_vs_tf(const SizePoint& p) {
  TfGain g;
  if (p.measured && p.tf_measured && p.measured->figures.time_us > 0 && p.tf_measured->figures.time_us > 0) {
    g.ratio = p.tf_measured->figures.time_us / p.measured->figures.time_us;
    g.basis = "measured";
  } else if (p.predicted.time_us > 0 && p.tf_predicted.time_us > 0) {
    g.ratio = p.tf_predicted.time_us / p.predicted.time_us;
    g.basis = "predicted";
  }
  return g;
}

std::string family_style(std::string_view family) {
  // NCCL, the baseline, is always a thick black line. Every other family keeps one colour in every report: its
  // position among all families of the registry (every collective), in a palette of distinguishable colours.
  if (family == "nccl") return "lw 3 lc rgb '#000000'";
  static const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#393b79", "#637939",
                                   "#843c39", "#7b4173", "#aec7e8", "#ff9896", "#98df8a", "#c5b0d5",
                                   "#ffbb78", "#9edae5", "#c49c94", "#f7b6d2"};
  std::vector<std::string> names;
  for (const Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter}) {
    for (const Family* f : families(c)) {
      if (std::find(names.begin(), names.end(), f->name) == names.end()) names.emplace_back(f->name);
    }
  }
  names.emplace_back("hybrid");  // the hierarchical library-inside hybrids, a tuner family of their own
  const auto it = std::find(names.begin(), names.end(), family);
  std::size_t index = 0;
  if (it != names.end()) {
    index = static_cast<std::size_t>(it - names.begin());
  } else {
    for (const char ch : family) index = index * 131 + static_cast<unsigned char>(ch);  // unknown: stable by name
  }
  return fmt::format("lw 2 lc rgb '{}'", kPalette[index % std::size(kPalette)]);
}

std::string speedup_plot_script(const FamilyCurves& curves, const std::vector<std::uint64_t>& sizes,
                                const std::string& title, const std::string& terminal, const std::string& png,
                                const std::string& data) {
  // On log-log time plots a 1.3x win is a few pixels: this plot shows every family's best time as NCCL's time over
  // it, on a linear axis (above 1: faster than NCCL's own choice).
  std::ostringstream gp;
  gp << fmt::format("set terminal {} size 960,600\n", terminal);
  gp << fmt::format("set termoption noenhanced\nset output {}\n", gnuplot_quote(png));
  gp << "set datafile missing '?'\nset logscale x 2\nset grid\nset key outside right\n";
  if (!sizes.empty()) gp << xtics_for(sizes);
  gp << fmt::format("set title {}\n",
                    gnuplot_quote(fmt::format("{}: speed-up over NCCL's own choice, best plan per family (predicted)",
                                              title)));
  gp << "set xlabel 'message size (bytes)'\nset ylabel 'NCCL time / plan time'\n";
  gp << "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#000000'\n";
  const std::size_t first = 2 + 2 * curves.families.size();  // after busbw and time per family
  std::vector<std::string> series;
  for (std::size_t f = 0; f < curves.families.size(); ++f) {
    series.push_back(fmt::format("{} using 1:{} with linespoints {} title {}", gnuplot_quote(data), first + f,
                                 family_style(curves.families[f]), gnuplot_quote(curves.families[f])));
  }
  gp << "plot " << fmt::format("{}", fmt::join(series, ", \\\n     ")) << "\n";
  return gp.str();
}

std::string family_plot_script(const FamilyCurves& curves, const std::vector<std::uint64_t>& sizes, PlotMetric metric,
                               const std::string& title, const std::string& terminal, const std::string& png,
                               const std::string& data) {
  const bool busbw = metric == PlotMetric::kBusbw;
  std::ostringstream gp;
  // Every name that comes from input (topology, families) and every path reaches gnuplot as a quoted string.
  gp << fmt::format("set terminal {} size 960,600\n", terminal);
  gp << fmt::format("set termoption noenhanced\nset output {}\n", gnuplot_quote(png));
  gp << "set datafile missing '?'\nset logscale x 2\nset logscale y 10\nset format y '%g'\nset grid\n";
  gp << (busbw ? "set key left top\n" : "set key left top\n");
  if (!sizes.empty()) gp << xtics_for(sizes);
  gp << fmt::format("set title {}\n", gnuplot_quote(fmt::format("{}: predicted {}, best plan per family (log scales)",
                                                                title, busbw ? "busbw" : "time")));
  gp << "set xlabel 'message size (bytes)'\n";
  gp << (busbw ? "set ylabel 'busbw (GB/s)'\n" : "set ylabel 'time (us)'\n");
  // Columns: size, then busbw per family, then time per family.
  const std::size_t first = busbw ? 2 : 2 + curves.families.size();
  std::vector<std::string> series;
  for (std::size_t f = 0; f < curves.families.size(); ++f) {
    series.push_back(fmt::format("{} using 1:{} with linespoints {} title {}", gnuplot_quote(data), first + f,
                                 family_style(curves.families[f]), gnuplot_quote(curves.families[f])));
  }
  gp << "plot " << fmt::format("{}", fmt::join(series, ", \\\n     ")) << "\n";
  return gp.str();
}

FamilyCurves family_curves(const SearchResult& result) {
  FamilyCurves curves;
  std::map<std::string, std::size_t> index;
  for (const auto& c : result.set.candidates) {
    if (!index.count(c.family)) {
      index[c.family] = curves.families.size();
      curves.families.push_back(c.family);
    }
  }
  const std::size_t n = result.sizes.size();
  curves.busbw.assign(curves.families.size(), std::vector<double>(n, kNaN));
  curves.time_us.assign(curves.families.size(), std::vector<double>(n, kNaN));
  for (std::size_t s = 0; s < n; ++s) {
    const auto& scores = result.sizes[s];
    for (std::size_t c = 0; c < scores.predicted.size(); ++c) {
      if (!scores.predicted[c]) continue;
      const std::size_t f = index.at(result.set.candidates[c].family);
      const double t = scores.predicted[c]->time_us;
      if (std::isnan(curves.time_us[f][s]) || t < curves.time_us[f][s]) {
        curves.time_us[f][s] = t;
        curves.busbw[f][s] = scores.predicted[c]->busbw_gbps;
      }
    }
  }
  return curves;
}

std::vector<std::string> crossover_notes(const SearchResult& result) {
  std::vector<std::string> notes;
  const auto& ranges = result.table.ranges;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const auto& r = ranges[i];
    if (i == 0) {
      notes.push_back(
          fmt::format("From {} the pick is {} ({}).", format_size(r.min_bytes), r.plan.label(), r.plan.family));
    } else if (ranges[i - 1].plan.family != r.plan.family) {
      notes.push_back(fmt::format("At {} the pick changes family: {} overtakes {} ({}).", format_size(r.min_bytes),
                                  r.plan.family, ranges[i - 1].plan.family, r.plan.label()));
    } else {
      notes.push_back(fmt::format("At {} the pick stays in {} but changes parameters: {}.", format_size(r.min_bytes),
                                  r.plan.family, r.plan.label()));
    }
  }
  // Gain over TF's choice at the smallest and largest sizes.
  const SizePoint* first = nullptr;
  const SizePoint* last = nullptr;
  for (const auto& r : ranges) {
    for (const auto& p : r.points) {
      if (!first) first = &p;
      last = &p;
    }
  }
  for (const SizePoint* p : {first, last}) {
    if (!p) continue;
    const TfGain g = gain_vs_tf(*p);
    if (g.basis.empty()) continue;
    const bool m = g.basis == "measured";
    notes.push_back(fmt::format("At {}: TF's choose_the_best ({}) {} {} us, the pick {} us ({:.2f}x, {} vs {}).",
                                format_size(p->bytes), p->tf_pick, m ? "measured" : "is predicted at",
                                fmt_time(m ? p->tf_measured->figures.time_us : p->tf_predicted.time_us),
                                fmt_time(m ? p->measured->figures.time_us : p->predicted.time_us), g.ratio, g.basis,
                                g.basis));
    if (first == last) break;
  }
  return notes;
}

std::string topology_summary_markdown(const Topology& topo) {
  std::ostringstream out;
  out << fmt::format("- name: `{}`", topo.name());
  if (!topo.description().empty()) out << fmt::format(" ({})", topo.description());
  out << "\n";
  out << fmt::format("- machines: {}, GPUs: {}\n", topo.machine_count(), topo.gpus().size());
  std::map<std::string, int> kinds;
  for (const auto& n : topo.nodes()) kinds[std::string(to_string(n.kind))]++;
  std::vector<std::string> parts;
  for (const auto& [k, v] : kinds) parts.push_back(fmt::format("{} {}", v, k));
  out << fmt::format("- nodes: {}\n", fmt::join(parts, ", "));
  std::map<std::pair<std::string, double>, int> links;
  for (const auto& l : topo.links()) links[{std::string(to_string(l.kind)), l.bandwidth_gbps}]++;
  parts.clear();
  for (const auto& [k, v] : links) parts.push_back(fmt::format("{} x {} {} GB/s", v, k.first, k.second));
  out << fmt::format("- directed links: {}\n", fmt::join(parts, ", "));
  if (topo.network()) {
    const auto& net = *topo.network();
    out << fmt::format("- network: {} GB/s per NIC, {} us, oversubscription {}\n", net.nic_bandwidth_gbps,
                       net.latency_us, net.oversubscription);
  }
  const auto& gpus = topo.gpus();
  if (!gpus.empty() && gpus.size() <= 16) {
    const auto paths = path_type_matrix(topo);
    const auto nvl = nvlink_matrix(topo);
    out << "\nGPU paths (nvidia-smi style):\n\n```\n     ";
    for (std::size_t j = 0; j < gpus.size(); ++j) out << fmt::format("{:>5}", fmt::format("GPU{}", j));
    out << "\n";
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      out << fmt::format("{:<5}", fmt::format("GPU{}", i));
      for (std::size_t j = 0; j < gpus.size(); ++j) {
        std::string cell;
        if (i == j)
          cell = "X";
        else if (nvl[i][j] > 0)
          cell = fmt::format("NV{}", nvl[i][j]);
        else
          cell = std::string(to_string(paths[i][j]));
        out << fmt::format("{:>5}", cell);
      }
      out << "\n";
    }
    out << "```\n";
  }
  return out.str();
}

std::string vs_nccl_text(const SizePoint& p) {
  if (p.nccl_predicted.time_us <= 0 || p.predicted.time_us <= 0) return "-";
  const double ratio = p.nccl_predicted.time_us / p.predicted.time_us;
  return std::abs(ratio - 1.0) < 1e-9 ? "=" : fmt::format("{:.2f}x", ratio);
}

std::string format_decision_table(const DecisionTable& table, const TableColumns& columns) {
  const bool measured = !table.measured_backend.empty();
  std::size_t plan_w = 4, size_w = 4, tf_w = 18;
  for (const auto& r : table.ranges) {
    plan_w = std::max(plan_w, r.plan.label().size());
    size_w = std::max(size_w, range_text(r).size());
    for (const auto& p : r.points) tf_w = std::max(tf_w, p.tf_pick.size());
  }
  std::ostringstream out;
  out << fmt::format("# decision table: {} ({} GPUs, {} machine{}), type {}, op {}{}\n", table.topology_name,
                     table.gpus, table.machines, table.machines == 1 ? "" : "s", to_string(table.type),
                     to_string(table.op),
                     measured ? fmt::format(", measured on {}", table.measured_backend) : std::string());
  out << "# figures at the largest size of each range; bound% = the min-cut bound's time / the pick's (artune bound); "
         "margin = runner-up (another family) vs pick; vs NCCL = NCCL's own choice's time / the pick's (=: the pick is "
         "NCCL's choice)\n";
  if (measured) {
    out << "# pred: simulated, meas: measured; margin (m) measured against measured, (p) simulated against simulated; "
           "nccl and vs NCCL simulated\n";
  }
  const char* t_head = measured ? "pred(us)" : "time(us)";
  std::string header = fmt::format("{:>{}}  {:<{}} {:>10} {:>8} {:>8}", "size", size_w, "plan", plan_w, t_head,
                                   measured ? "p.algbw" : "algbw", measured ? "p.busbw" : "busbw");
  if (measured) header += fmt::format(" {:>10} {:>8} {:>6} {:>7}", "meas(us)", "m.busbw", "#wrong", "spread");
  header += fmt::format(" {:>6} {:>11} {:>10} {:>8}", "bound%", "margin", measured ? "nccl.pred" : "nccl(us)", "vs NCCL");
  if (columns.tf) header += fmt::format("  {:<{}} {:>10}", "TF choose_the_best", tf_w, measured ? "TF.pred" : "TF(us)");
  out << header << "\n";
  int differ = 0, baseline = 0;
  std::vector<std::string> differing;
  for (const auto& r : table.ranges) {
    const SizePoint& p = r.points.back();
    std::string line =
        fmt::format("{:>{}}  {:<{}} {:>10} {:>8} {:>8}", range_text(r), size_w, r.plan.label(), plan_w,
                    fmt_time(p.predicted.time_us), fmt_bw(p.predicted.algbw_gbps), fmt_bw(p.predicted.busbw_gbps));
    if (measured) {
      if (p.measured) {
        line += fmt::format(" {:>10} {:>8} {:>6} {:>7}", fmt_time(p.measured->figures.time_us),
                            fmt_bw(p.measured->figures.busbw_gbps), p.measured->wrong,
                            fmt::format("{:.1f}%", p.measured->spread_pct));
      } else {
        line += fmt::format(" {:>10} {:>8} {:>6} {:>7}", "-", "-", "-", "-");
      }
    }
    std::string margin = margin_text(p);
    if (measured && !p.runner_up.empty()) margin += p.measured && p.runner_up_measured ? " (m)" : " (p)";
    const bool has_nccl = p.nccl_predicted.time_us > 0;
    const std::string bound_pct = p.bound.time_us > 0 && p.predicted.time_us > 0
                                      ? fmt::format("{:.1f}", 100.0 * p.bound.time_us / p.predicted.time_us)
                                      : std::string("-");
    line += fmt::format(" {:>6} {:>11} {:>10} {:>8}", bound_pct, margin, has_nccl ? fmt_time(p.nccl_predicted.time_us) : "-",
                        vs_nccl_text(p));
    if (columns.tf) line += fmt::format("  {:<{}} {:>10}", p.tf_pick, tf_w, fmt_time(p.tf_predicted.time_us));
    out << line << "\n";
    // Does the range differ from NCCL's own choice anywhere in it?
    bool any_nccl = false, same = true;
    for (const auto& q : r.points) {
      if (q.nccl_predicted.time_us <= 0) continue;
      any_nccl = true;
      same = same && vs_nccl_text(q) == "=";
    }
    if (any_nccl) {
      ++baseline;
      if (!same) {
        ++differ;
        differing.push_back(range_text(r));
      }
    }
  }
  // Picks kept although another candidate was faster, anywhere in a range (not only at its last size).
  for (const auto& r : table.ranges) {
    for (const auto& p : r.points) {
      if (p.kept.empty()) continue;
      const char* why = p.kept == "spread"      ? ", within the measured run-to-run spread"
                        : p.kept == "min-gain" ? ", less than the minimum gain over NCCL's own choice"
                                               : "";
      out << fmt::format("# * {}: {} kept by {} ({:.1f}% behind the fastest, {}){}\n", format_size(p.bytes),
                         r.plan.label(), p.kept, p.behind_fastest_pct, p.fastest, why);
    }
  }
  if (baseline == 0) {
    out << "# no NCCL baseline: NCCL is not a candidate of this cost profile\n";
  } else if (differ == 0) {
    out << "# the table is NCCL's own choice at every size\n";
  } else {
    out << fmt::format("# differs from NCCL's own choice in {} of {} range{}: {}\n", differ, baseline,
                       baseline == 1 ? "" : "s", fmt::join(differing, ", "));
  }
  return out.str();
}

std::string gnuplot_png_terminal() {
  static const std::string terminal = [] {
    // A fixed probe from argv: gnuplot missing from PATH fails to spawn (-1) like a missing terminal.
    for (const char* t : {"pngcairo", "png"}) {
      const std::string probe = fmt::format("set terminal {}; set output '/dev/null'; plot x", t);
      if (spawn_and_wait({"gnuplot", "-e", probe}, "", "") == 0) return std::string(t);
    }
    return std::string();
  }();
  return terminal;
}

namespace {

// The plots (PNG through gnuplot, in `root`): best busbw and time per family, the speed-up over NCCL, measured
// against predicted; and a note for each that could not be rendered.
struct RenderedPlots {
  std::vector<std::string> plots;  // file names in the report folder
  std::vector<std::string> notes;
};
RenderedPlots render_plots(const std::filesystem::path& root, const Topology& topo, const DecisionTable& table,
                           const std::vector<std::uint64_t>& sizes, const FamilyCurves& curves) {
  namespace fs = std::filesystem;
  const bool measured = !table.measured_backend.empty();
  std::vector<std::string> plot_notes;
  std::vector<std::string> plots;
  const std::string terminal = gnuplot_png_terminal();
  if (terminal.empty()) {
    plot_notes.push_back("Plots were not rendered: gnuplot with a PNG terminal was not found.");
  } else if (!sizes.empty()) {
    // gnuplot's inputs live in a private folder (mkdtemp, 0700) and gnuplot runs there, so the scripts name
    // files relatively; the PNGs are copied into the report with the output writer.
    const TempDir tmp("artune-report");
    const fs::path& work = tmp.path();
    // One data file (per family: busbw, then time), two plots on log axes: on a linear axis everything below
    // 64 KiB read as zero next to the GB/s of large messages.
    {
      // NCCL's own time at each size (the speed-up plot's numerator), where NCCL is the baseline.
      std::vector<double> nccl_us(sizes.size(), NAN);
      bool has_nccl = false;
      for (const auto& r : table.ranges) {
        for (const auto& p : r.points) {
          const auto at = std::find(sizes.begin(), sizes.end(), p.bytes);
          if (at != sizes.end() && p.nccl_predicted.time_us > 0) {
            nccl_us[static_cast<std::size_t>(at - sizes.begin())] = p.nccl_predicted.time_us;
            has_nccl = true;
          }
        }
      }
      std::ostringstream dat;
      auto cell = [](double v) { return std::isnan(v) || !(v > 0) ? std::string("?") : fmt::format("{:.6g}", v); };
      for (std::size_t s = 0; s < sizes.size(); ++s) {
        dat << sizes[s];
        for (const auto* metric : {&curves.busbw, &curves.time_us}) {
          for (std::size_t f = 0; f < curves.families.size(); ++f) dat << ' ' << cell((*metric)[f][s]);
        }
        for (std::size_t f = 0; f < curves.families.size(); ++f) dat << ' ' << cell(nccl_us[s] / curves.time_us[f][s]);
        dat << '\n';
      }
      write_text(work / "families.dat", dat.str());
      for (const PlotMetric metric : {PlotMetric::kBusbw, PlotMetric::kTime}) {
        const std::string name = std::string(metric == PlotMetric::kBusbw ? "busbw" : "time") + ".png";
        if (render_plot(work, root, name,
                        family_plot_script(curves, sizes, metric, topo.name(), terminal, name, "families.dat"))) {
          plots.push_back(name);
        } else {
          plot_notes.push_back(fmt::format("gnuplot failed to render {}.", name));
        }
      }
      if (has_nccl) {
        if (render_plot(work, root, "speedup.png",
                        speedup_plot_script(curves, sizes, topo.name(), terminal, "speedup.png", "families.dat"))) {
          plots.push_back("speedup.png");
        } else {
          plot_notes.push_back("gnuplot failed to render speedup.png.");
        }
      }
    }
    if (measured) {
      std::ostringstream dat;
      for (const auto& r : table.ranges) {
        for (const auto& p : r.points) {
          if (!p.measured) continue;
          dat << fmt::format("{} {:.6g} {:.6g}\n", p.bytes, p.predicted.time_us, p.measured->figures.time_us);
        }
      }
      write_text(work / "measured.dat", dat.str());
      std::ostringstream gp;
      gp << fmt::format("set terminal {} size 960,600\n", terminal);
      gp << "set termoption noenhanced\nset output 'measured.png'\n";
      gp << "set logscale xy 2\nset grid\nset key left top\n";
      gp << xtics_for(sizes);
      gp << fmt::format("set title {}\n", gnuplot_quote(fmt::format("{}: predicted vs measured time of the pick ({})",
                                                                    topo.name(), table.measured_backend)));
      gp << "set xlabel 'message size (bytes)'\nset ylabel 'time (us)'\nset format y '%g'\n";
      gp << "plot 'measured.dat' using 1:2 with linespoints title 'predicted', 'measured.dat' using 1:3 with "
            "linespoints title 'measured'\n";
      if (render_plot(work, root, "measured.png", gp.str())) {
        plots.push_back("measured.png");
      } else {
        plot_notes.push_back("gnuplot failed to render measured.png.");
      }
    }
  }
  return {plots, plot_notes};
}

// results.json: the command, the topology, the candidates, every family's best curve, the table, fusion and
// calibration.
nlohmann::json results_json(const Topology& topo, const SearchResult& result, const FamilyCurves& curves,
                            const std::vector<std::uint64_t>& sizes, const ReportInput& input) {
  const DecisionTable& table = result.table;
  nlohmann::json results;
  results["command"] = input.command;
  results["topology"] = {{"name", topo.name()},
                         {"fingerprint", topo.fingerprint()},
                         {"gpus", topo.gpus().size()},
                         {"machines", topo.machine_count()}};
  results["candidates"] = nlohmann::json::array();
  for (const auto& c : result.set.candidates) results["candidates"].push_back(c.label());
  results["rejected"] = result.set.rejected;
  results["hamiltonian_cycles"] = result.set.hamiltonian_cycles;
  results["disjoint_rings"] = result.set.disjoint_rings;
  nlohmann::json fam = nlohmann::json::object();
  for (std::size_t f = 0; f < curves.families.size(); ++f) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      if (std::isnan(curves.time_us[f][s])) continue;
      rows.push_back({{"bytes", sizes[s]}, {"time_us", curves.time_us[f][s]}, {"busbw_gbps", curves.busbw[f][s]}});
    }
    fam[curves.families[f]] = std::move(rows);
  }
  results["family_best"] = std::move(fam);
  results["decision_table"] = table_to_json(table);
  if (!input.fusion.empty()) {
    results["fusion"] = nlohmann::json::array();
    for (const auto& f : input.fusion) results["fusion"].push_back(fusion_to_json(f.result, f.list));
  }
  if (!input.calibration.is_null()) results["calibration"] = input.calibration;
  return results;
}

// REPORT.md's head: the command, the notes, the topology, the candidates and the decision table.
void summary_markdown(std::ostringstream& md, const Topology& topo, const SearchResult& result,
                      const ReportInput& input) {
  const DecisionTable& table = result.table;
  const bool measured = !table.measured_backend.empty();
  md << fmt::format("# artune autotune: {}\n\n", input.title.empty() ? topo.name() : input.title);
  md << "Regenerate with:\n\n```\n" << input.command << "\n```\n\n";
  for (const auto& n : input.notes) md << "- " << n << "\n";
  if (!input.notes.empty()) md << "\n";
  md << "## Topology\n\n" << topology_summary_markdown(topo) << "\n";
  md << "## Candidates\n\n";
  std::map<std::string, int> per_family;
  for (const auto& c : result.set.candidates) per_family[c.family]++;
  std::vector<std::string> parts;
  for (const auto& [k, v] : per_family) parts.push_back(fmt::format("{} {}", v, k));
  md << fmt::format("{} candidates, each proven by the static verifier: {}.", result.set.candidates.size(),
                    fmt::join(parts, ", "));
  md << fmt::format(" NVLink Hamiltonian cycles on machine 0: {}; link-disjoint rings: {}.",
                    result.set.hamiltonian_cycles, result.set.disjoint_rings);
  if (!result.set.rejected.empty()) md << fmt::format(" Rejected: {}.", result.set.rejected.size());
  md << "\n\n";
  md << "## Decision table\n\n";
  md << fmt::format(
      "Type {}, op {}; cost model: profile {}, {}{}.\n\n", to_string(table.type), to_string(table.op),
      table.cost_model.value("profile", std::string("?")),
      table.calibration.empty() ? "default constants" : "calibrated by " + table.calibration,
      measured ? fmt::format("; top candidates measured on the {} backend", table.measured_backend) : std::string());
  md << "| sizes | plan | family | time (us) | busbw (GB/s) |";
  if (measured) md << " measured (us) | measured busbw | #wrong |";
  md << " runner-up | margin | TF choose_the_best | TF time (us) | vs NCCL | bound% |\n";
  md << "|---|---|---|---:|---:|";
  if (measured) md << "---:|---:|---:|";
  md << "---|---:|---|---:|---:|---:|\n";
  for (const auto& r : table.ranges) {
    const SizePoint& p = r.points.back();
    md << fmt::format("| {} | `{}` | {} | {} | {} |", range_text(r), r.plan.label(), r.plan.family,
                      fmt_time(p.predicted.time_us), fmt_bw(p.predicted.busbw_gbps));
    if (measured) {
      if (p.measured) {
        md << fmt::format(" {} | {} | {} |", fmt_time(p.measured->figures.time_us),
                          fmt_bw(p.measured->figures.busbw_gbps), p.measured->wrong);
      } else {
        md << " - | - | - |";
      }
    }
    // vs NCCL: how much faster the pick is than NCCL's own choice (its algorithm, protocol and channels).
    const std::string vs_nccl = p.nccl_predicted.time_us > 0 && p.predicted.time_us > 0
                                    ? fmt::format("{:.2f}x", p.nccl_predicted.time_us / p.predicted.time_us)
                                    : "-";
    // bound%: the min-cut bound's time over the pick's (artune bound; 100 = no plan can be faster).
    const std::string bound_pct = p.bound.time_us > 0 && p.predicted.time_us > 0
                                      ? fmt::format("{:.1f}", 100.0 * p.bound.time_us / p.predicted.time_us)
                                      : "-";
    md << fmt::format(" `{}` | {} | `{}` | {} | {} | {} |\n", p.runner_up.empty() ? "-" : p.runner_up, margin_text(p),
                      p.tf_pick, fmt_time(p.tf_predicted.time_us), vs_nccl, bound_pct);
  }
  md << "\nFigures are at the largest size of each range; the margin compares the best plan of another family"
        " with the pick (measured times when both were measured), and is negative where the pick is not the"
        " fastest. `*` marks a pick kept although another candidate was faster: by the 1% hysteresis on"
        " predictions (the previous size's pick stays while within 1% of the fastest) or, when measured, because"
        " the candidates differ by less than their run-to-run spread (the previous or simpler pick stays). vs NCCL"
        " is NCCL's own choice (spec `nccl`: its channels, algorithm and protocol, simulated) over the pick's"
        " predicted time.\n\n";
}

// REPORT.md's every-size table: the pick, its figures, TF's and NCCL's at each tuned size.
void every_size_markdown(std::ostringstream& md, const DecisionTable& table) {
  const bool measured = !table.measured_backend.empty();
  md << "### Every size\n\n| size | plan | time (us) | algbw | busbw |";
  if (measured) md << " measured (us) | measured busbw | spread |";
  md << " kept | TF (us) | gain vs TF | basis | NCCL (us) | vs NCCL |\n|---:|---|---:|---:|---:|";
  if (measured) md << "---:|---:|---:|";
  md << "---|---:|---:|---|---:|---:|\n";
  for (const auto& r : table.ranges) {
    for (const auto& p : r.points) {
      md << fmt::format("| {} | `{}` | {} | {} | {} |", format_size(p.bytes), r.plan.label(),
                        fmt_time(p.predicted.time_us), fmt_bw(p.predicted.algbw_gbps), fmt_bw(p.predicted.busbw_gbps));
      if (measured) {
        md << fmt::format(" {} | {} | {} |", p.measured ? fmt_time(p.measured->figures.time_us) : "-",
                          p.measured ? fmt_bw(p.measured->figures.busbw_gbps) : "-",
                          p.measured ? fmt::format("{:.1f}%", p.measured->spread_pct) : "-");
      }
      const std::string kept =
          p.kept.empty() ? "" : fmt::format("{}: {:.1f}% behind `{}`", p.kept, p.behind_fastest_pct, p.fastest);
      const TfGain g = gain_vs_tf(p);
      const double tf_us = g.basis == "measured" ? p.tf_measured->figures.time_us : p.tf_predicted.time_us;
      // vs NCCL: NCCL's own choice (its channels, algorithm and protocol) over the pick's time, both predicted.
      const bool nccl = p.nccl_predicted.time_us > 0 && p.predicted.time_us > 0;
      md << fmt::format(" {} | {} | {} | {} | {} | {} |\n", kept, fmt_time(tf_us),
                        g.basis.empty() ? "-" : fmt::format("{:.2f}x", g.ratio), g.basis.empty() ? "-" : g.basis,
                        nccl ? fmt_time(p.nccl_predicted.time_us) : "-",
                        nccl ? fmt::format("{:.2f}x", p.nccl_predicted.time_us / p.predicted.time_us) : "-");
    }
  }
  md << "\nGain vs TF = TF's time / the pick's time, like with like: measured against measured where both ran"
        " (TF's choose_the_best is measured beside the top candidates), else predicted against predicted;"
        " `basis` says which. Spread = interquartile range of the timed iterations / their median.\n";
}

// REPORT.md's crossovers, plots, best busbw per family and, when measured, the picks' prediction error.
void curves_markdown(std::ostringstream& md, const SearchResult& result, const RenderedPlots& rendered,
                     const FamilyCurves& curves, const std::vector<std::uint64_t>& sizes) {
  const DecisionTable& table = result.table;
  const bool measured = !table.measured_backend.empty();
  const std::vector<std::string>& plots = rendered.plots;
  const std::vector<std::string>& plot_notes = rendered.notes;
  md << "\n## Crossovers\n\n";
  for (const auto& n : crossover_notes(result)) md << "- " << n << "\n";
  md << "\n## Plots\n\n";
  for (const auto& p : plots) md << fmt::format("![{}]({})\n\n", p, p);
  for (const auto& n : plot_notes) md << "- " << n << "\n";
  if (!curves.families.empty()) {
    md << "\nBest predicted busbw (GB/s) per family:\n\n| size |";
    for (const auto& f : curves.families) md << " " << f << " |";
    md << "\n|---:|";
    for (std::size_t f = 0; f < curves.families.size(); ++f) md << "---:|";
    md << "\n";
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      md << "| " << format_size(sizes[s]) << " |";
      for (std::size_t f = 0; f < curves.families.size(); ++f) {
        md << " " << (std::isnan(curves.busbw[f][s]) ? std::string("-") : fmt_bw(curves.busbw[f][s])) << " |";
      }
      md << "\n";
    }
  }
  if (measured) {
    double sum = 0;
    int n = 0;
    for (const auto& r : table.ranges) {
      for (const auto& p : r.points) {
        if (!p.measured || !(p.measured->figures.time_us > 0)) continue;
        sum += std::abs(p.predicted.time_us - p.measured->figures.time_us) / p.measured->figures.time_us;
        ++n;
      }
    }
    if (n > 0) {
      md << fmt::format("\nPrediction error of the picks against measurement: MAPE {:.1f}% over {} sizes.\n",
                        100.0 * sum / n, n);
    }
  }
}

// REPORT.md's tensor fusion section, one table of pack sizes per gradient list.
void fusion_markdown(std::ostringstream& md, const std::vector<FusionReport>& fusion) {
  if (!fusion.empty()) {
    md << "\n## Tensor fusion\n\n";
    md << "Packs follow TF's `group_by_size`; each pack is all-reduced with the table's pick (simulated at its exact"
          " size), and packs holding more than one tensor pay a concat and a split copy. The step overlaps"
          " backward compute with communication: backward runs from the last layer to the first, a pack is"
          " all-reduced once all its gradients exist and the previous pack's all-reduce is done, and the step ends"
          " when both backward and the last all-reduce have (`step`). Layer backward times come from the list's"
          " `backward_us`, else from a bandwidth lower bound (3 x the layer's bytes at the GPU memory rate)."
          " `no overlap` is the sum of all-reduce and packing times, as if communication started after backward.\n\n";
    for (const auto& f : fusion) {
      const auto& best = f.result.options.at(f.result.best);
      const auto& flat = f.result.options.at(f.result.best_no_overlap);
      md << fmt::format("### {} ({} tensors, {} bytes, {})\n\n", f.list.model.empty() ? f.list.source : f.list.model,
                        f.result.tensors, f.result.total_bytes, to_string(f.list.type));
      md << fmt::format(
          "Best pack size with overlap: {} ({} packs), step {:.0f} us = backward {:.0f} us + {:.0f} us"
          " exposed; without overlap: {} ({} packs), {:.0f} us of all-reduce.\n\n",
          pack_size_text(best.bytes_per_pack), best.pack_bytes.size(), best.step_us, best.backward_us, best.exposed_us,
          pack_size_text(flat.bytes_per_pack), flat.pack_bytes.size(), flat.total_us);
      if (!f.result.separate.empty()) {
        // Tensors picked sparse (issue 17) are no pack's: each is its own sparse all-reduce.
        std::string names;
        for (const SeparateTensor& t : f.result.separate) {
          names +=
              fmt::format("{}{} ({:.0f} us)", names.empty() ? "" : ", ",
                          t.tensor < f.list.names.size() ? f.list.names[t.tensor] : std::to_string(t.tensor), t.us);
        }
        md << fmt::format(
            "Outside the packs, each as its own sparse all-reduce (all-gather of its indices and rows): {}; the"
            " packs hold the other {} bytes, and `no overlap` and `step` include the sparse all-reduces.\n\n",
            names, f.result.packed_bytes);
      }
      md << "| bytes_per_pack | packs | all-reduce (us) | packing (us) | no overlap (us) | backward (us) | step (us) |"
            " exposed (us) |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n";
      for (const auto& o : f.result.options) {
        md << fmt::format("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} |\n",
                          pack_size_text(o.bytes_per_pack), o.pack_bytes.size(), o.allreduce_us, o.packing_us,
                          o.total_us, o.backward_us, o.step_us, o.exposed_us);
      }
      md << "\n";
    }
  }
}

}  // namespace

void write_report(const std::string& dir, const Topology& topo, const SearchResult& result, const ReportInput& input) {
  make_output_folder(dir, parameter("report_dir"));
  const std::filesystem::path root(dir);
  std::vector<std::uint64_t> sizes;
  for (const auto& s : result.sizes) sizes.push_back(s.bytes);
  const FamilyCurves curves = family_curves(result);
  const RenderedPlots rendered = render_plots(root, topo, result.table, sizes, curves);
  write_text(root / "results.json", results_json(topo, result, curves, sizes, input).dump(1) + "\n");
  std::ostringstream md;
  summary_markdown(md, topo, result, input);
  every_size_markdown(md, result.table);
  curves_markdown(md, result, rendered, curves, sizes);
  fusion_markdown(md, input.fusion);
  if (!input.calibration.is_null() && input.calibration.contains("summary")) {
    md << "\n## Calibration\n\n```\n" << input.calibration["summary"].get<std::string>() << "```\n";
  }
  write_text(root / "REPORT.md", md.str());
}

}  // namespace artune
