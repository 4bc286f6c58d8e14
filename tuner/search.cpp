#include "tuner/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "algorithms/verifier.hpp"
#include "artune_config.hpp"
#include "core/error.hpp"
#include "core/sizes.hpp"
#include "executor/backend.hpp"
#include "executor/runner.hpp"
#include "simulator/simulator.hpp"

namespace artune {

namespace {

Figures figures_of(const SimResult& r) { return Figures{r.time_us, r.algbw_gbps, r.busbw_gbps}; }

std::int64_t count_for(std::uint64_t bytes, std::size_t esize) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes / esize));
}

}  // namespace

SearchResult search(const Topology& topo, const SearchOptions& options) {
  if (options.sizes.empty()) throw InvalidInput("autotune: no sizes to tune");
  SearchResult result;
  result.topology_name = topo.name();
  if (options.progress) options.progress(0, 1, "generating and verifying candidates");
  result.set = generate_candidates(topo, options.candidates);
  if (result.set.candidates.empty()) {
    throw Unsupported(fmt::format("autotune: no candidate plan builds on '{}'{}", topo.name(),
                                  result.set.rejected.empty() ? "" : " (" + result.set.rejected.front() + ")"));
  }
  const std::size_t esize = element_size(options.type);
  const std::size_t n = result.set.candidates.size();
  const std::size_t total = n * options.sizes.size();
  std::size_t done = 0;
  for (const std::uint64_t bytes : options.sizes) {
    SizeScores scores;
    scores.bytes = bytes;
    scores.count = count_for(bytes, esize);
    scores.predicted.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
      const Candidate& cand = result.set.candidates[c];
      if (options.progress && (done % 8 == 0)) {
        options.progress(done, total, fmt::format("simulating {} at {}", cand.label(), format_size(bytes)));
      }
      ++done;
      try {
        const Plan plan = build_candidate(topo, cand, scores.count, options.op);
        scores.predicted[c] = figures_of(simulate(plan, topo, options.model, esize));
      } catch (const InvalidInput&) {
        // Some plans do not apply at every size (e.g. fewer elements than pieces): skip that size.
      } catch (const Unsupported&) {
      }
    }
    for (std::size_t c = 0; c < n; ++c) {
      if (scores.predicted[c]) scores.ranking.push_back(c);
    }
    // Fastest first; ties keep generation order (simpler plans come first there).
    std::stable_sort(scores.ranking.begin(), scores.ranking.end(), [&](std::size_t a, std::size_t b) {
      return scores.predicted[a]->time_us < scores.predicted[b]->time_us;
    });
    if (scores.ranking.empty()) {
      throw Unsupported(fmt::format("autotune: no candidate builds at {} bytes on '{}'", bytes, topo.name()));
    }
    std::size_t pick = scores.ranking.front();
    if (!result.pick.empty()) {
      const std::size_t previous = result.pick.back();
      if (scores.predicted[previous] &&
          scores.predicted[previous]->time_us <= scores.predicted[pick]->time_us * (1.0 + options.keep_within)) {
        pick = previous;
      }
    }
    result.pick.push_back(pick);
    result.sizes.push_back(std::move(scores));
  }
  if (options.progress) options.progress(total, total, "simulated every candidate");
  rebuild_table(result, topo, options);
  return result;
}

void rebuild_table(SearchResult& result, const Topology& topo, const SearchOptions& options) {
  const std::size_t esize = element_size(options.type);
  std::vector<SizeChoice> choices;
  std::map<std::string, std::size_t> by_label;
  for (std::size_t c = 0; c < result.set.candidates.size(); ++c) by_label[result.set.candidates[c].label()] = c;
  for (std::size_t s = 0; s < result.sizes.size(); ++s) {
    const SizeScores& scores = result.sizes[s];
    const std::size_t pick = result.pick[s];
    const Candidate& chosen = result.set.candidates[pick];
    SizeChoice choice;
    choice.plan = chosen;
    SizePoint& p = choice.point;
    p.bytes = scores.bytes;
    p.count = scores.count;
    p.predicted = scores.predicted[pick].value_or(Figures{});
    auto measured_of = [&](std::size_t c) -> std::optional<Measurement> {
      for (const auto& [idx, m] : scores.measured) {
        if (idx == c) return m;
      }
      return std::nullopt;
    };
    p.measured = measured_of(pick);
    // Runner-up: the best plan of another family (other variants of the pick are not rivals).
    std::optional<std::size_t> runner;
    if (p.measured) {
      double best = 0;
      for (const auto& [idx, m] : scores.measured) {
        if (m.wrong != 0 || result.set.candidates[idx].family == chosen.family) continue;
        if (!runner || m.figures.time_us < best) {
          runner = idx;
          best = m.figures.time_us;
        }
      }
    }
    if (!runner) {
      for (std::size_t c : scores.ranking) {
        if (result.set.candidates[c].family != chosen.family) {
          runner = c;
          break;
        }
      }
    }
    if (runner) {
      p.runner_up = result.set.candidates[*runner].label();
      p.runner_up_predicted = scores.predicted[*runner].value_or(Figures{});
      p.runner_up_measured = measured_of(*runner);
      if (p.measured && p.runner_up_measured && p.measured->figures.time_us > 0) {
        p.margin_pct = 100.0 * (p.runner_up_measured->figures.time_us / p.measured->figures.time_us - 1.0);
      } else if (p.predicted.time_us > 0) {
        p.margin_pct = 100.0 * (p.runner_up_predicted.time_us / p.predicted.time_us - 1.0);
      }
    }
    // TF's choice, simulated (it may be one of the candidates already).
    const Candidate tf = tf_choose_the_best(topo, scores.bytes);
    p.tf_pick = tf.label();
    if (auto it = by_label.find(p.tf_pick); it != by_label.end() && scores.predicted[it->second]) {
      p.tf_predicted = *scores.predicted[it->second];
    } else {
      try {
        const Plan plan = build_candidate(topo, tf, scores.count, options.op);
        p.tf_predicted = figures_of(simulate(plan, topo, options.model, esize));
      } catch (const Error&) {
        p.tf_predicted = Figures{};  // TF's pick cannot be built here (e.g. hiercopy on odd GPU counts)
      }
    }
    choices.push_back(std::move(choice));
  }
  DecisionTable& t = result.table;
  t = DecisionTable{};
  t.created_by = fmt::format("artune {}", ARTUNE_VERSION);
  t.topology_name = topo.name();
  t.fingerprint = topo.fingerprint();
  t.gpus = static_cast<int>(topo.gpus().size());
  t.machines = topo.machine_count();
  t.type = options.type;
  t.op = options.op;
  t.cost_model = options.model.to_json();
  t.calibration = options.calibration;
  for (const auto& s : result.sizes) {
    if (s.measured_pick) t.measured_backend = s.measured_pick->backend;
  }
  t.ranges = merge_ranges(choices);
}

Measurement measure_plan(Backend& backend, const Plan& plan, DataType type, ReduceOp op, int warmup, int iterations) {
  if (iterations < 1) throw InvalidInput("measure: iterations must be ≥ 1");
  // The runner of `artune run`: the same figures autotune records are what a run of the table shows.
  SweepConfig config;
  config.type = type;
  config.op = op;
  config.iterations = iterations;
  config.warmup = warmup;
  config.check = 1;
  const RunRow row = run_plan(backend, plan, config);
  Measurement m;
  m.figures = Figures{row.time_us, row.algbw_gbps, row.busbw_gbps};
  m.backend = std::string(backend.name());
  m.wrong = row.wrong;
  m.iterations = iterations;
  return m;
}

std::uint64_t host_memory_budget() {
  // available_host_memory() (executor/backend.hpp) already takes MemAvailable, the cgroup limit and RLIMIT_AS
  // into account; the cpu backend itself refuses runs above 90 % of it, so measuring stays below that.
  return available_host_memory() / 5 * 4;
}

std::uint64_t host_bytes_for_run(const Plan& plan, std::size_t element_bytes) {
  std::uint64_t elements = 0;
  for (const auto& device : plan.buffers) {
    for (const std::int64_t n : device) elements += static_cast<std::uint64_t>(std::max<std::int64_t>(0, n));
  }
  elements += 2 * static_cast<std::uint64_t>(std::max<std::int64_t>(0, plan.count));
  return elements * element_bytes;
}

void measure_top(SearchResult& result, const Topology& topo, const SearchOptions& search_options,
                 const MeasureOptions& options) {
  BackendOptions bo;
  bo.timeout_s = options.timeout_s;
  bo.topology = &topo;
  std::unique_ptr<Backend> backend = make_backend(options.backend, bo);
  const int k = std::max(1, options.top_k);
  std::size_t total = 0;
  for (const auto& s : result.sizes) {
    if (options.max_bytes == 0 || s.bytes <= options.max_bytes) total += std::min<std::size_t>(k, s.ranking.size());
  }
  std::size_t done = 0;
  const std::uint64_t budget = options.backend != BackendKind::kCpu ? 0
                               : options.memory_budget_bytes != 0 ? options.memory_budget_bytes
                                                                  : host_memory_budget();
  result.unmeasured_for_memory.clear();
  for (std::size_t si = 0; si < result.sizes.size(); ++si) {
    SizeScores& s = result.sizes[si];
    if (options.max_bytes != 0 && s.bytes > options.max_bytes) continue;
    s.measured.clear();
    const std::size_t take = std::min<std::size_t>(k, s.ranking.size());
    // The cpu backend holds every device's buffers in this process: a size whose plans cannot fit is
    // skipped (and reported) instead of driving the machine into swap or the OOM killer. All of a size or
    // none, so that the measured pick compares like with like.
    bool fits = true;
    for (std::size_t r = 0; r < take && budget != 0 && fits; ++r) {
      const Plan probe = build_candidate(topo, result.set.candidates[s.ranking[r]], s.count, search_options.op);
      fits = host_bytes_for_run(probe, element_size(search_options.type)) <= budget;
    }
    if (!fits) {
      done += take;
      result.unmeasured_for_memory.push_back(s.bytes);
      continue;
    }
    for (std::size_t r = 0; r < take; ++r) {
      const std::size_t c = s.ranking[r];
      const Candidate& cand = result.set.candidates[c];
      if (options.progress) {
        options.progress(done, total, fmt::format("measuring {} at {} on {}", cand.label(), format_size(s.bytes),
                                                  to_string(options.backend)));
      }
      ++done;
      const Plan plan = build_candidate(topo, cand, s.count, search_options.op);
      verify_or_throw(plan);
      s.measured.emplace_back(c, measure_plan(*backend, plan, search_options.type, search_options.op, options.warmup,
                                              options.iterations));
    }
    // Keep the measured best among correct runs; without one, the predicted pick stays.
    std::optional<std::size_t> best;
    double best_time = 0;
    for (const auto& [c, m] : s.measured) {
      if (m.wrong != 0) continue;
      if (!best || m.figures.time_us < best_time) {
        best = c;
        best_time = m.figures.time_us;
      }
    }
    if (best) {
      result.pick[si] = *best;
      for (const auto& [c, m] : s.measured) {
        if (c == *best) s.measured_pick = m;
      }
    }
  }
  if (options.progress) options.progress(total, total, "measured the top candidates");
  rebuild_table(result, topo, search_options);
}

}  // namespace artune
