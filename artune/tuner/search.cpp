#include "artune/tuner/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

#include "artune/algorithms/verifier/verifier.hpp"
#include "artune_config.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parallel.hpp"
#include "artune/core/sizes.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/executor/harness/runner.hpp"
#include "artune/simulator/bound.hpp"
#include "artune/simulator/simulator.hpp"
#include "artune/tuner/plan_scaling.hpp"
#include "artune/tuner/size_sampling.hpp"

namespace artune {

namespace {

Figures figures_of(const SimResult& r) { return Figures{r.time_us, r.algbw_gbps, r.busbw_gbps}; }

std::int64_t count_for(std::uint64_t bytes, std::size_t esize) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes / esize));
}

// 1 GB/s = 1e3 bytes/µs.
constexpr double kBytesPerUsPerGbps = 1e3;

// Progress of the simulation phase, safe to call from every worker: the caller's ProgressFn is called under a
// lock, at most every 100 ms, with the rate and the time left ("simulating 12/62 candidates, 2.1 candidates/s,
// 24 s left").
class SimulationProgress {
 public:
  SimulationProgress(const ProgressFn& fn, std::size_t total)
      : fn_(fn), total_(total), start_(std::chrono::steady_clock::now()) {
    if (fn_) fn_(0, total_, fmt::format("simulating {} candidates", total_));
  }

  void item_done() {
    if (!fn_) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    const auto now = std::chrono::steady_clock::now();
    if (done_ < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
    const double left = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
    fn_(done_, total_,
        fmt::format("simulating {}/{} candidates, {:.1f} candidates/s, {:.0f} s left", done_, total_, rate, left));
  }

  void finish() {
    if (fn_) fn_(total_, total_, "simulated every candidate");
  }

 private:
  const ProgressFn& fn_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
  std::mutex mutex_;
};

/// The candidate that is NCCL's own choice (spec `nccl`), the baseline of the table: only with the NCCL cost profile,
/// where `nccl` is NCCL (on the cpu and mpi profiles it stands for artune's group op or MPI's own all-reduce).
std::optional<std::size_t> nccl_baseline(const CandidateSet& set, const SearchOptions& options) {
  if (options.model.profile != BackendProfile::kNccl) return std::nullopt;
  for (std::size_t c = 0; c < set.candidates.size(); ++c) {
    if (set.candidates[c].label() == "nccl") return c;
  }
  return std::nullopt;
}

/// SearchOptions::min_gain at one size (its default: the validated error of the size's regime).
double min_gain_at(const SearchOptions& options, const Topology& topo, std::uint64_t bytes) {
  return options.min_gain >= 0 ? options.min_gain : default_min_gain(topo.machine_count(), bytes);
}

}  // namespace

double default_min_gain(int machines, std::uint64_t bytes) {
  const ModelError& e = kValidatedModelError;
  if (bytes <= kSmallMessageBytes) return e.small_pct / 100.0;
  if (bytes < kLargeMessageBytes) return e.medium_pct / 100.0;
  return (machines > 1 ? e.large_multi_pct : e.large_single_pct) / 100.0;
}

namespace {

// One search, stage by stage (search() runs them in order). Its grid holds, per (size si, candidate c) slot
// si * n + c, the candidate's figures at that size, whether they were simulated (else interpolated, see
// size_sampling.hpp), the class of the simulated bottleneck link and whether the plan passed the verifier. Each
// stage fills only slots of its own on options.jobs threads, and everything after reads them in order: the table
// is the same whatever the number of threads.
class Search {
 public:
  Search(const Topology& topo, const SearchOptions& options) : topo_(topo), options_(options) {}

  SearchResult run() {
    if (options_.sizes.empty()) throw InvalidInput("autotune: no sizes to tune");
    result_.topology_name = topo_.name();
    generate();
    seed_pruning();
    SimulationProgress tracker(options_.progress, n_);
    sample_grid(tracker);
    simulate_contenders();
    verify_fastest();
    pick_sizes();
    tracker.finish();
    result_.simulations = simulations_.load();
    result_.pruned = pruned_.load();
    result_.verified =
        static_cast<std::size_t>(std::count_if(verified_.begin(), verified_.end(), [](char v) { return v != 0; }));
    rebuild_table(result_, topo_, options_);
    return std::move(result_);
  }

 private:
  // Stage 1: the candidates, built and verified (CandidateOptions), and the grid they fill.
  void generate() {
    if (options_.progress) options_.progress(0, 1, "generating and verifying candidates");
    CandidateOptions candidate_options = options_.candidates;
    candidate_options.jobs = options_.jobs;
    candidate_options.nccl_release = options_.model.nccl_release;
    result_.set =
        options_.generate ? options_.generate(topo_, candidate_options) : generate_candidates(topo_, candidate_options);
    if (result_.set.candidates.empty()) {
      throw Unsupported(fmt::format("autotune: no candidate plan builds on '{}'{}", topo_.name(),
                                    result_.set.rejected.empty() ? "" : " (" + result_.set.rejected.front() + ")"));
    }
    esize_ = element_size(options_.type);
    n_ = result_.set.candidates.size();
    n_sizes_ = options_.sizes.size();
    predicted_.assign(n_ * n_sizes_, std::nullopt);
    simulated_.assign(n_ * n_sizes_, 0);
    bottleneck_.assign(n_ * n_sizes_, -1);
    verified_.assign(n_ * n_sizes_, 0);
    // The sampler compares bottlenecks by class (link kind and bandwidth), not by index: on symmetric machines
    // which of several equally loaded links saturates longest flips with rounding from size to size, while the
    // time keeps the same slope (bytes over the same capacity); the middle size still has to sit on the line.
    link_class_.assign(topo_.links().size() + 1, -1);
    std::map<std::pair<int, double>, int> classes;
    for (std::size_t l = 0; l < topo_.links().size(); ++l) {
      const Link& link = topo_.links()[l];
      const auto key = std::make_pair(static_cast<int>(link.kind), link.bandwidth_gbps);
      link_class_[l + 1] = classes.emplace(key, static_cast<int>(classes.size())).first->second;
    }
    // The costliest candidates first (most plan ops), so that no large one is left to run alone at the end; the
    // slots each fills do not depend on the order.
    order_.resize(n_);
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    if (result_.set.plan_ops.size() == n_) {
      std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
        return result_.set.plan_ops[a] > result_.set.plan_ops[b];
      });
    }
    for (const std::uint64_t bytes : options_.sizes) counts_.push_back(count_for(bytes, esize_));
    for (std::size_t c = 0; c < n_; ++c) by_label_.emplace(result_.set.candidates[c].label(), c);
    // NCCL's own choice, where it is a candidate: the baseline a pick must beat by the minimum gain.
    nccl_ = nccl_baseline(result_.set, options_);
  }

  // Stage 2 (pruning): a few seeds are simulated at every size first: NCCL's plan, TF's pick (the table reports
  // both anyway) and the cheapest candidate (fewest plan ops) of every family. The second fastest family there
  // bounds the sizes: a candidate whose lower bound is above it is slower than seeds of two families, so it can be
  // neither the pick (slower than either) nor the runner-up (one of them is of another family than the pick, and
  // faster). The bound is fixed before the candidates run: the same pairs are pruned whatever the threads.
  void seed_pruning() {
    prune_ = options_.prune && !options_.exhaustive;
    prune_above_.assign(n_sizes_, std::numeric_limits<double>::infinity());
    seed_.assign(n_, 0);
    if (!prune_) return;
    if (const auto nccl = by_label_.find("nccl"); nccl != by_label_.end()) seed_[nccl->second] = 1;
    for (const std::uint64_t bytes : options_.sizes) {
      if (const auto tf = by_label_.find(tf_choose_the_best(topo_, bytes).label()); tf != by_label_.end()) {
        seed_[tf->second] = 1;
      }
    }
    std::map<std::string, std::size_t> cheapest;  // family → candidate
    for (std::size_t c = 0; c < n_ && result_.set.plan_ops.size() == n_; ++c) {
      const auto [it, added] = cheapest.emplace(result_.set.candidates[c].family, c);
      if (!added && result_.set.plan_ops[c] < result_.set.plan_ops[it->second]) it->second = c;
    }
    for (const auto& [family, c] : cheapest) seed_[c] = 1;
    // One seed candidate per item, its sizes in order (its plans scale from one size to the next).
    std::vector<std::size_t> seed_order;
    for (const std::size_t c : order_) {
      if (seed_[c]) seed_order.push_back(c);
    }
    parallel_for(seed_order.size(), options_.jobs, [&](std::size_t i) {
      SweepPlans plans = sweep_plans(seed_order[i]);
      for (std::size_t si = 0; si < n_sizes_; ++si) (void)simulate_at(si, seed_order[i], &plans);
    });
    for (std::size_t si = 0; si < n_sizes_; ++si) {
      std::map<std::string, double> fastest;  // family → its fastest seed here
      for (std::size_t c = 0; c < n_; ++c) {
        const auto& f = predicted_[si * n_ + c];
        if (!seed_[c] || !f) continue;
        const auto [it, added] = fastest.emplace(result_.set.candidates[c].family, f->time_us);
        if (!added) it->second = std::min(it->second, f->time_us);
      }
      std::vector<double> times;
      for (const auto& [family, t] : fastest) times.push_back(t);
      std::sort(times.begin(), times.end());
      if (times.size() >= 2) prune_above_[si] = times[1];
    }
  }

  // Stage 3: every candidate over the sizes, on options.jobs threads: all simulated (exhaustive), or the sizes
  // at either end where its lower bound prunes it skipped and the ones between sampled (simulated where the
  // curve bends, interpolated where it is affine).
  void sample_grid(SimulationProgress& tracker) {
    parallel_for(n_, options_.jobs, [&](std::size_t k) {
      const std::size_t c = order_[k];
      SweepPlans plans = sweep_plans(c);
      if (options_.exhaustive) {
        for (std::size_t si = 0; si < n_sizes_; ++si) (void)simulate_at(si, c);
      } else {
        sample_candidate(c, plans);
      }
      tracker.item_done();
    });
  }

  void sample_candidate(std::size_t c, SweepPlans& plans) {
    const std::size_t n = n_;
    std::size_t lo = 0, hi = n_sizes_;
    if (prune_ && !seed_[c]) {
      while (lo < hi && prunable(lo, plans)) ++lo;
      while (hi > lo && prunable(hi - 1, plans)) --hi;
      pruned_.fetch_add(n_sizes_ - (hi - lo), std::memory_order_relaxed);
    }
    if (lo == hi) return;
    const std::vector<std::uint64_t> range(options_.sizes.begin() + static_cast<std::ptrdiff_t>(lo),
                                           options_.sizes.begin() + static_cast<std::ptrdiff_t>(hi));
    auto times = sample_sizes(range, [&](std::size_t i) -> std::optional<SizeSample> {
      // Seeds were simulated at some sizes already: their figures are in their slots.
      const std::size_t slot = (lo + i) * n + c;
      if (!simulated_[slot]) (void)simulate_at(lo + i, c, &plans);
      if (!predicted_[slot]) return std::nullopt;
      return SizeSample{predicted_[slot]->time_us, bottleneck_[slot]};
    });
    times.insert(times.begin(), lo, std::nullopt);
    times.resize(n_sizes_);
    // busbw / algbw is the same at every size of a plan (2(n−1)/n): take it from a simulated size.
    double bus_per_alg = 0;
    for (std::size_t si = 0; si < n_sizes_ && bus_per_alg == 0; ++si) {
      const auto& f = predicted_[si * n + c];
      if (simulated_[si * n + c] && f && f->algbw_gbps > 0) bus_per_alg = f->busbw_gbps / f->algbw_gbps;
    }
    for (std::size_t si = 0; si < n_sizes_; ++si) {
      // Slots simulated before (seeds) keep their simulated figures.
      if (!times[si] || times[si]->simulated || simulated_[si * n + c]) continue;
      const double t = times[si]->time_us;
      const double algbw = t > 0 ? static_cast<double>(options_.sizes[si]) / (t * kBytesPerUsPerGbps) : 0;
      predicted_[si * n + c] = Figures{t, algbw, algbw * bus_per_alg};
    }
  }

  // Stage 4: the figures a table reports are simulated, never interpolated: every candidate that can be the
  // fastest when interpolated figures are off by up to the tolerance either way (or within keep_within of it), the
  // runner-up of another family, NCCL's own choice and TF's, simulated for every size at once on options.jobs
  // threads (each size fills its own row). The previous pick depends on the sizes before: pick_sizes() does it.
  void simulate_contenders() {
    const std::size_t n = n_;
    parallel_for(n_sizes_, options_.jobs, [&](std::size_t si) {
      double fastest = std::numeric_limits<double>::infinity();
      for (std::size_t c = 0; c < n; ++c) {
        if (const auto& f = predicted_[si * n + c]) fastest = std::min(fastest, f->time_us);
      }
      const double window =
          (1.0 + options_.keep_within) * (1.0 + kInterpolationTolerance) / (1.0 - kInterpolationTolerance);
      for (std::size_t c = 0; c < n; ++c) {
        const auto& f = predicted_[si * n + c];
        if (f && f->time_us <= fastest * window) exact(si, c);
      }
      for (const std::string& label : {std::string("nccl"), tf_choose_the_best(topo_, options_.sizes[si]).label()}) {
        if (const auto it = by_label_.find(label); it != by_label_.end()) exact(si, it->second);
      }
      simulate_runner_up(si);
    });
  }

  // Stage 5: the pick must pass the verifier at its size. It is each size's fastest where that beats NCCL's own
  // choice by the minimum gain (else NCCL's choice is kept, or is the fastest), unless the previous pick is within
  // keep_within of it: those are verified ahead on options.jobs threads, the rare others when they come up. A
  // fastest that NCCL's choice keeps out is never proved: on dgx1-v100 those are `prings` at 256 MiB - 1 GiB, the
  // largest plans the tuner builds there.
  void verify_fastest() {
    std::vector<std::pair<std::size_t, std::size_t>> ahead;  // (size, candidate)
    for (std::size_t si = 0; si < n_sizes_; ++si) {
      const std::vector<std::size_t> ranking = ranking_at(si);
      const std::optional<Figures>* row = &predicted_[si * n_];
      if (!ranking.empty() && beats_nccl(si, row, row[ranking.front()]->time_us))
        ahead.emplace_back(si, ranking.front());
    }
    parallel_for(ahead.size(), options_.jobs, [&](std::size_t k) { (void)verify_at(ahead[k].first, ahead[k].second); });
  }

  // Stage 6: the pick of every size in order (result.pick, result.sizes): the fastest verified candidate, the
  // previous size's pick where it is within keep_within, NCCL's own choice unless the fastest beats it by the
  // minimum gain (and no pick that does not beat it by that gain where the fastest does).
  void pick_sizes() {
    const std::size_t n = n_;
    for (std::size_t si = 0; si < n_sizes_; ++si) {
      const std::uint64_t bytes = options_.sizes[si];
      if (!result_.pick.empty() && !simulated_[si * n + result_.pick.back()]) {
        exact(si, result_.pick.back());
        simulate_runner_up(si);
      }
      SizeScores scores;
      scores.bytes = bytes;
      scores.count = count_for(bytes, esize_);
      scores.predicted.assign(predicted_.begin() + static_cast<std::ptrdiff_t>(si * n),
                              predicted_.begin() + static_cast<std::ptrdiff_t>((si + 1) * n));
      scores.ranking = ranking_at(si);
      // A candidate that fails the verifier leaves the ranking (as a plan that does not build here would have) and
      // the next one is tried.
      std::size_t pick = 0;
      for (;;) {
        if (scores.ranking.empty()) {
          throw Unsupported(fmt::format("autotune: no candidate builds at {} bytes on '{}'", bytes, topo_.name()));
        }
        const std::size_t fastest = scores.ranking.front();
        pick = fastest;
        const auto beats_nccl = [&](std::size_t c) {
          return this->beats_nccl(si, scores.predicted.data(), scores.predicted[c]->time_us);
        };
        if (!result_.pick.empty()) {
          // Hysteresis: the previous size's pick within keep_within of the fastest, unless that would keep a plan
          // (NCCL's own choice among them) that NCCL's does not trail by the minimum gain where the fastest's does.
          const std::size_t previous = result_.pick.back();
          if (scores.predicted[previous] &&
              scores.predicted[previous]->time_us <= scores.predicted[pick]->time_us * (1.0 + options_.keep_within) &&
              (beats_nccl(previous) || !beats_nccl(fastest))) {
            pick = previous;
          }
        }
        // NCCL's own choice stays unless the fastest beats it by more than the minimum gain. It stays as the first
        // candidate of the ranking with its time: an explicit pair equal to it (--target nccl, which the plugin can
        // steer to) where one is listed before plain `nccl`, as a tie is broken anyway.
        if (nccl_ && scores.predicted[*nccl_] && scores.predicted[pick]->time_us < scores.predicted[*nccl_]->time_us &&
            !beats_nccl(fastest)) {
          const double nccl_us = scores.predicted[*nccl_]->time_us;
          pick = *nccl_;
          for (const std::size_t c : scores.ranking) {
            if (scores.predicted[c]->time_us == nccl_us) {
              pick = c;
              break;
            }
          }
        }
        if (verify_at(si, pick)) break;
        scores.predicted[pick].reset();
        scores.ranking.erase(std::find(scores.ranking.begin(), scores.ranking.end(), pick));
      }
      result_.pick.push_back(pick);
      result_.sizes.push_back(std::move(scores));
    }
  }

  // ----- the grid's slots -----

  // Simulates candidate c at size si into its slot (unverified: the verifier costs about as much as the
  // simulation on large machines, and only the plans a size keeps need its proof, in pick_sizes).
  // Without `plans` the plan is built; with them (the candidate's SweepPlans, plan_scaling.hpp) it is built or
  // scaled from a smaller size's.
  std::optional<SimResult> simulate_at(std::size_t si, std::size_t c, SweepPlans* plans = nullptr) {
    const std::size_t n = n_;
    const std::size_t slot = si * n + c;
    simulated_[slot] = 1;
    simulations_.fetch_add(1, std::memory_order_relaxed);
    try {
      SimResult r = plans != nullptr ? plans->simulate(si)
                                     : simulate(build_candidate(topo_, result_.set.candidates[c],
                                                                count_for(options_.sizes[si], esize_), options_.op,
                                                                false),
                                                topo_, options_.model, esize_);
      predicted_[slot] = figures_of(r);
      bottleneck_[slot] = link_class_[static_cast<std::size_t>(r.bottleneck_link + 1)];
      return r;
    } catch (const InvalidInput&) {
      // Some plans do not apply at every size (e.g. fewer elements than pieces): skip that size.
    } catch (const Unsupported&) {}
    predicted_[slot].reset();
    return std::nullopt;
  }

  SweepPlans sweep_plans(std::size_t c) {
    return SweepPlans(topo_, result_.set.candidates[c], counts_, options_.op, options_.model, esize_);
  }

  // Whether candidate c can be skipped at size si: its lower bound is above prune_above (a plan that does not
  // build there is skipped too: it has no figures either way).
  bool prunable(std::size_t si, SweepPlans& plans) {
    if (!std::isfinite(prune_above_[si])) return false;
    try {
      return plans.lower_bound(si) > prune_above_[si];
    } catch (const InvalidInput&) {
    } catch (const Unsupported&) {}
    return false;
  }

  void exact(std::size_t si, std::size_t c) {
    if (!simulated_[si * n_ + c]) (void)simulate_at(si, c);
  }

  // Candidates with figures at size si, fastest first (ties keep generation order: simpler plans first).
  std::vector<std::size_t> ranking_at(std::size_t si) const {
    const std::size_t n = n_;
    std::vector<std::size_t> ranking;
    for (std::size_t c = 0; c < n; ++c) {
      if (predicted_[si * n + c]) ranking.push_back(c);
    }
    std::stable_sort(ranking.begin(), ranking.end(), [&](std::size_t a, std::size_t b) {
      return predicted_[si * n + a]->time_us < predicted_[si * n + b]->time_us;
    });
    return ranking;
  }

  // The runner-up (the fastest of another family than the fastest) simulated too; simulating it may reorder.
  void simulate_runner_up(std::size_t si) {
    for (bool changed = true; changed;) {
      changed = false;
      const std::vector<std::size_t> ranking = ranking_at(si);
      if (ranking.empty()) return;
      const std::string& family = result_.set.candidates[ranking.front()].family;
      for (const std::size_t c : ranking) {
        if (result_.set.candidates[c].family == family) continue;
        if (!simulated_[si * n_ + c]) {
          exact(si, c);
          changed = true;
        }
        break;
      }
    }
  }

  // Whether a plan of time_us at size si beats NCCL's own choice, whose figures there are `row`[nccl_], by more than
  // the minimum gain (true without NCCL or its figures).
  bool beats_nccl(std::size_t si, const std::optional<Figures>* row, double time_us) const {
    if (!nccl_ || !row[*nccl_]) return true;
    return row[*nccl_]->time_us > time_us * (1.0 + min_gain_at(options_, topo_, options_.sizes[si]));
  }

  // Whether candidate c passes the verifier at size si (verified_: 1 passed, 2 failed, 0 not yet).
  bool verify_at(std::size_t si, std::size_t c) {
    char& v = verified_[si * n_ + c];
    if (v == 0) {
      v = 2;
      try {
        (void)build_candidate(topo_, result_.set.candidates[c], count_for(options_.sizes[si], esize_), options_.op,
                              /*verify=*/true);
        v = 1;
      } catch (const InvalidInput&) {
      } catch (const Unsupported&) {}
    }
    return v == 1;
  }

  const Topology& topo_;
  const SearchOptions& options_;
  SearchResult result_;
  std::size_t esize_ = 4;
  std::size_t n_ = 0;        // candidates
  std::size_t n_sizes_ = 0;  // sizes
  std::vector<std::optional<Figures>> predicted_;  // [si * n + c]
  std::vector<char> simulated_;                    // its figures were simulated (else interpolated)
  std::vector<int> bottleneck_;                    // simulated slots: their bottleneck link's class
  std::vector<char> verified_;                     // 1 passed the verifier, 2 failed, 0 not yet
  std::vector<int> link_class_;                    // [link + 1] (0: none)
  std::vector<std::size_t> order_;                 // candidates, costliest first
  std::vector<std::int64_t> counts_;               // elements at each size
  std::map<std::string, std::size_t> by_label_;
  std::optional<std::size_t> nccl_;  // NCCL's own choice, the baseline
  bool prune_ = false;
  std::vector<double> prune_above_;  // per size
  std::vector<char> seed_;           // per candidate
  std::atomic<std::size_t> simulations_{0};
  std::atomic<std::size_t> pruned_{0};
};

}  // namespace

SearchResult search(const Topology& topo, const SearchOptions& options) { return Search(topo, options).run(); }

void rebuild_table(SearchResult& result, const Topology& topo, const SearchOptions& options) {
  const std::size_t esize = element_size(options.type);
  // The min-cut bound of the collective over every GPU at the model's rates, for each size's % of it.
  const Collective collective =
      result.set.candidates.empty() ? Collective::kAllReduce : result.set.candidates.front().collective;
  std::optional<CollectiveBound> bound;
  if (topo.gpus().size() >= 2) bound = effective_bound(topo, {}, collective, options.model);
  std::vector<SizeChoice> choices;
  std::map<std::string, std::size_t> by_label;
  for (std::size_t c = 0; c < result.set.candidates.size(); ++c) by_label[result.set.candidates[c].label()] = c;
  const std::optional<std::size_t> nccl = nccl_baseline(result.set, options);
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
    if (bound && bound->us_per_byte > 0) {
      p.bound = Figures{bound->time_us(static_cast<double>(scores.bytes)), bound->algbw_gbps, bound->busbw_gbps};
    }
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
    // Is the pick the fastest? When not, say why (hysteresis on predictions, or measured within the spread) and
    // by how much, on the basis the pick was chosen on: measured when it was measured, else predicted.
    {
      std::optional<std::size_t> fastest;
      double fastest_time = 0;
      double pick_time = p.predicted.time_us;
      if (p.measured) {
        pick_time = p.measured->figures.time_us;
        for (const auto& [idx, m] : scores.measured) {
          if (m.wrong != 0) continue;
          if (!fastest || m.figures.time_us < fastest_time) {
            fastest = idx;
            fastest_time = m.figures.time_us;
          }
        }
      } else if (!scores.ranking.empty()) {
        fastest = scores.ranking.front();
        fastest_time = scores.predicted[*fastest]->time_us;
      }
      if (fastest && *fastest != pick && fastest_time > 0 && pick_time > fastest_time) {
        // NCCL's own choice kept because the fastest does not beat it by the minimum gain (search) takes precedence
        // over hysteresis: it would be kept even without a previous size.
        const bool min_gain = !p.measured && nccl && scores.predicted[*nccl] &&
                              p.predicted.time_us == scores.predicted[*nccl]->time_us &&
                              pick_time <= fastest_time * (1.0 + min_gain_at(options, topo, scores.bytes));
        p.kept = p.measured ? "spread" : min_gain ? "min-gain" : "hysteresis";
        p.fastest = result.set.candidates[*fastest].label();
        p.behind_fastest_pct = 100.0 * (pick_time / fastest_time - 1.0);
      }
    }
    // NCCL's own choice (the plain `nccl` candidate), the baseline every user compares with first.
    if (nccl && scores.predicted[*nccl]) p.nccl_predicted = *scores.predicted[*nccl];
    // TF's choice, simulated (it may be one of the candidates already).
    Candidate tf = tf_choose_the_best(topo, scores.bytes);
    // A table of another collective (issue 17): TF's pick applied to it (nccl: the library's own; others do not build).
    if (!result.set.candidates.empty()) tf.collective = result.set.candidates.front().collective;
    p.tf_pick = tf.label();
    if (auto it = by_label.find(p.tf_pick); it != by_label.end()) p.tf_measured = measured_of(it->second);
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

Measurement measure_plan(HarnessBackend& backend, const Plan& plan, DataType type, ReduceOp op, int warmup, int iterations) {
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
  m.spread_pct = row.spread_pct;
  return m;
}

std::optional<std::size_t> measured_choice(const std::vector<std::pair<std::size_t, Measurement>>& measured,
                                           std::optional<std::size_t> previous) {
  const std::pair<std::size_t, Measurement>* best = nullptr;
  for (const auto& entry : measured) {
    if (entry.second.wrong != 0) continue;
    if (best == nullptr || entry.second.figures.time_us < best->second.figures.time_us) best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  // Candidates closer to the fastest than the run-to-run spread of either are a tie: prefer the previous size's
  // pick (fewer ranges), else the simplest (candidates are generated simplest first, so the lowest index).
  const auto within_noise = [&](const Measurement& m) {
    const double fastest = best->second.figures.time_us;
    if (!(fastest > 0)) return false;
    const double gap_pct = 100.0 * (m.figures.time_us / fastest - 1.0);
    return gap_pct <= std::max(m.spread_pct, best->second.spread_pct);
  };
  const std::pair<std::size_t, Measurement>* simplest = best;
  for (const auto& entry : measured) {
    if (entry.second.wrong != 0 || !within_noise(entry.second)) continue;
    if (previous && entry.first == *previous) return entry.first;
    if (entry.first < simplest->first) simplest = &entry;
  }
  return simplest->first;
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
  std::unique_ptr<HarnessBackend> backend = make_backend(options.backend, bo);
  const int k = std::max(1, options.top_k);
  std::map<std::string, std::size_t> by_label;
  for (std::size_t c = 0; c < result.set.candidates.size(); ++c) by_label[result.set.candidates[c].label()] = c;
  // The candidates run at one size: the top K predicted, plus TF's choose_the_best when it is a candidate, so that
  // the report's "gain vs TF" compares measured with measured.
  const auto to_measure = [&](const SizeScores& s) {
    std::vector<std::size_t> out(
        s.ranking.begin(), s.ranking.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(k, s.ranking.size())));
    const auto tf = by_label.find(tf_choose_the_best(topo, s.bytes).label());
    if (tf != by_label.end() && s.predicted[tf->second] && std::find(out.begin(), out.end(), tf->second) == out.end()) {
      out.push_back(tf->second);
    }
    return out;
  };
  std::size_t total = 0;
  for (const auto& s : result.sizes) {
    if (options.max_bytes == 0 || s.bytes <= options.max_bytes) total += to_measure(s).size();
  }
  std::size_t done = 0;
  const std::uint64_t budget = options.backend != BackendKind::kCpu ? 0
                               : options.memory_budget_bytes != 0   ? options.memory_budget_bytes
                                                                    : host_memory_budget();
  result.unmeasured_for_memory.clear();
  for (std::size_t si = 0; si < result.sizes.size(); ++si) {
    SizeScores& s = result.sizes[si];
    if (options.max_bytes != 0 && s.bytes > options.max_bytes) continue;
    s.measured.clear();
    const std::vector<std::size_t> chosen = to_measure(s);
    // The cpu backend holds every device's buffers in this process: a size whose plans cannot fit is
    // skipped (and reported) instead of driving the machine into swap or the OOM killer. All of a size or
    // none, so that the measured pick compares like with like.
    bool fits = true;
    for (std::size_t r = 0; r < chosen.size() && budget != 0 && fits; ++r) {
      const Plan probe = build_candidate(topo, result.set.candidates[chosen[r]], s.count, search_options.op);
      fits = host_bytes_for_run(probe, element_size(search_options.type)) <= budget;
    }
    if (!fits) {
      done += chosen.size();
      result.unmeasured_for_memory.push_back(s.bytes);
      continue;
    }
    for (const std::size_t c : chosen) {
      const Candidate& cand = result.set.candidates[c];
      if (options.progress) {
        options.progress(
            done, total,
            fmt::format("measuring {} at {} on {}", cand.label(), format_size(s.bytes), to_string(options.backend)));
      }
      ++done;
      const Plan plan = build_candidate(topo, cand, s.count, search_options.op);
      verify_or_throw(plan);
      s.measured.emplace_back(
          c, measure_plan(*backend, plan, search_options.type, search_options.op, options.warmup, options.iterations));
    }
    // Keep the measured best among correct runs; without one, the predicted pick stays.
    std::optional<std::size_t> best =
        measured_choice(s.measured, si > 0 ? std::optional<std::size_t>(result.pick[si - 1]) : std::nullopt);
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
