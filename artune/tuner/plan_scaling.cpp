#include "artune/tuner/plan_scaling.hpp"

#include <utility>

#include "artune/core/error.hpp"

namespace artune {

namespace {

// Writes `base` scaled by `factor` into `out`, a plan of base's shape (a copy of it, scaled or not).
void scale_into(const Plan& base, Plan& out, std::int64_t factor) {
  out.count = base.count * factor;
  for (std::size_t d = 0; d < base.buffers.size(); ++d) {
    for (std::size_t b = 0; b < base.buffers[d].size(); ++b) out.buffers[d][b] = base.buffers[d][b] * factor;
  }
  for (std::size_t i = 0; i < base.ops.size(); ++i) {
    const Op& from = base.ops[i];
    Op& to = out.ops[i];
    to.src.offset = from.src.offset * factor;
    to.src.count = from.src.count * factor;
    to.dst.offset = from.dst.offset * factor;
    to.dst.count = from.dst.count * factor;
  }
}

Location scaled(Location l, std::int64_t factor) {
  l.offset *= factor;
  l.count *= factor;
  return l;
}

// Whether `big` == scale_plan(small, factor), without making that plan: every field of Plan and Op (the sweeps'
// tests compare the plans whole with operator==).
bool is_scaling(const Plan& big, const Plan& small, std::int64_t factor) {
  if (big.count != small.count * factor || big.spec != small.spec || big.reduce_op != small.reduce_op ||
      big.collective != small.collective || big.devices != small.devices || big.blocks != small.blocks ||
      big.buffers.size() != small.buffers.size() || big.ops.size() != small.ops.size()) {
    return false;
  }
  for (std::size_t d = 0; d < big.buffers.size(); ++d) {
    if (big.buffers[d].size() != small.buffers[d].size()) return false;
    for (std::size_t b = 0; b < big.buffers[d].size(); ++b) {
      if (big.buffers[d][b] != small.buffers[d][b] * factor) return false;
    }
  }
  for (std::size_t i = 0; i < big.ops.size(); ++i) {
    const Op& a = big.ops[i];
    const Op& b = small.ops[i];
    if (a.id != b.id || a.kind != b.kind || a.src != scaled(b.src, factor) || a.dst != scaled(b.dst, factor) ||
        a.deps != b.deps || a.collective != b.collective || a.group != b.group || a.root != b.root ||
        a.algo != b.algo || a.divisor != b.divisor) {
      return false;
    }
  }
  return true;
}

}  // namespace

Plan scale_plan(const Plan& plan, std::int64_t factor) {
  ARTUNE_CHECK(factor >= 1, "scale_plan: factor below 1");
  Plan out = plan;
  scale_into(plan, out, factor);
  return out;
}

ScaledSweep::ScaledSweep(std::vector<std::int64_t> counts, std::function<Plan(std::size_t)> make)
    : counts_(std::move(counts)), make_(std::move(make)), failed_(counts_.size()) {}

bool ScaledSweep::make_at(std::size_t i) {
  if (failed_[i]) return false;
  try {
    ++builds_;
    Plan plan = make_(i);
    built_ = std::move(plan);
    built_index_ = i;
    return true;
  } catch (const InvalidInput&) {
    failed_[i] = std::current_exception();
  } catch (const Unsupported&) {
    failed_[i] = std::current_exception();
  }
  built_index_.reset();
  return false;
}

void ScaledSweep::search_anchor(std::size_t up_to) {
  while (!searched_ && next_ <= up_to && next_ < counts_.size()) {
    const std::size_t k = next_++;
    const bool neighbour = k > 0 && built_index_ && *built_index_ + 1 == k && counts_[k] % counts_[k - 1] == 0;
    std::optional<Plan> previous;
    if (neighbour) previous = std::move(built_);
    built_index_.reset();
    if (!make_at(k) || !previous) continue;
    if (is_scaling(built_, *previous, counts_[k] / counts_[k - 1])) {
      searched_ = true;
      // The largest size, built, must be the same scaling of the anchor (a builder that changed strategy between
      // would show there); else every size is built.
      const std::size_t last = counts_.size() - 1;
      bool holds = last == k;
      if (!holds && counts_[last] % counts_[k - 1] == 0) {
        Plan at_k = std::move(built_);
        holds = make_at(last) && is_scaling(built_, *previous, counts_[last] / counts_[k - 1]);
        built_ = std::move(at_k);
        built_index_ = k;
      }
      if (holds) {
        anchor_ = k - 1;
        base_ = std::move(*previous);
        current_ = base_;
        current_factor_ = 1;
        built_ = Plan{};  // the plan at k is the anchor's scaled: one plan less held
        built_index_.reset();
      }
    }
  }
  if (next_ >= counts_.size()) searched_ = true;
}

std::optional<std::int64_t> ScaledSweep::anchor_factor(std::size_t i) {
  ARTUNE_CHECK(i < counts_.size(), "ScaledSweep: size index out of range");
  if (!searched_ && i >= next_) search_anchor(i);
  if (anchor_ && i >= *anchor_ && counts_[i] % counts_[*anchor_] == 0) return counts_[i] / counts_[*anchor_];
  return std::nullopt;
}

const Plan& ScaledSweep::at(std::size_t i) {
  if (const std::optional<std::int64_t> scaled = anchor_factor(i)) {
    const std::int64_t factor = *scaled;
    if (factor != current_factor_) {
      scale_into(base_, current_, factor);
      current_factor_ = factor;
    }
    return current_;
  }
  if (built_index_ && *built_index_ == i) return built_;
  if (!make_at(i)) std::rethrow_exception(failed_[i]);
  return built_;
}

SweepPlans::SweepPlans(const Topology& topo, const Candidate& candidate, std::vector<std::int64_t> counts, ReduceOp op,
                       const CostModel& model, std::size_t element_bytes)
    : topo_(topo),
      model_(model),
      element_bytes_(element_bytes),
      base_(counts, [&topo, &candidate, op, counts](std::size_t i) {
        Candidate whole = candidate;
        whole.segments = 1;
        return build_candidate(topo, whole, counts[i], op, /*verify=*/false);
      }) {
  if (candidate.segments > 1) {
    pipelined_.emplace(std::move(counts), [this, segments = candidate.segments](std::size_t i) {
      return pipeline(base_.at(i), segments);
    });
  }
}

std::optional<std::pair<CompiledPlan*, std::int64_t>> SweepPlans::compiled_at(std::size_t i) {
  const std::optional<std::int64_t> factor = sweep().anchor_factor(i);
  if (!factor) return std::nullopt;
  if (!compiled_) compiled_.emplace(sweep().anchor_plan(), topo_, model_, element_bytes_);
  if (*factor != 1 && !compiled_->scalable()) return std::nullopt;
  return std::make_pair(&*compiled_, *factor);
}

SimResult SweepPlans::simulate(std::size_t i) {
  if (const auto compiled = compiled_at(i)) return compiled->first->run(compiled->second);
  return artune::simulate(at(i), topo_, model_, element_bytes_);
}

double SweepPlans::lower_bound(std::size_t i) {
  if (const auto compiled = compiled_at(i)) return compiled->first->lower_bound(compiled->second);
  return simulate_lower_bound(at(i), topo_, model_, element_bytes_);
}

}  // namespace artune
