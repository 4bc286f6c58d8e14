// The static verifier: the run over a plan, the postconditions on every rank's result, and the public
// entry points (verifier.hpp). The machinery is in state.hpp.

#include "artune/algorithms/verifier/verifier.hpp"

#include <fmt/format.h>

#include "artune/algorithms/verifier/state.hpp"
#include "artune/core/error.hpp"

namespace artune {
namespace verifier_detail {

VerifyResult Verifier::run() {
  structure();
  if (!unsafe_) {
    init_state();
    stamp_.assign(plan_.ops.size(), 0);
    target_.assign(plan_.ops.size(), 0);
    for (const Op& op : plan_.ops) {
      races(op);
      execute(op);
    }
    resolve_deferred();
    final_check();
  }
  VerifyResult result;
  result.ok = problems_.empty();
  result.problems = std::move(problems_);
  if (dropped_ > 0) result.problems.push_back(fmt::format("… and {} more problems", dropped_));
  return result;
}

std::vector<Verifier::Expect> Verifier::expected_result(int d) const {
  const int r = plan_.ranks();
  switch (plan_.collective) {
    case Collective::kAllGather: {
      std::vector<Expect> out;
      for (int k = 0; k < r; ++k) {
        const auto [off, cnt] = collective_block(plan_, k);
        if (cnt > 0) out.push_back({off, off + cnt, k});
      }
      return out;
    }
    case Collective::kReduceScatter: {
      const auto [off, cnt] = collective_block(plan_, d);
      if (cnt == 0) return {};
      return {{off, off + cnt, -1}};
    }
    default: return {{0, plan_.count, -1}};
  }
}

void Verifier::final_check() {
  const int r = plan_.ranks();
  // An all-gather moves inputs and reduces nothing: avg does not apply to it.
  const bool avg = plan_.reduce_op == ReduceOp::kAvg && plan_.collective != Collective::kAllGather;
  for (int d = 0; d < r; ++d) {
    // Adjacent intervals with the same defect are reported as one range.
    std::string pending;
    std::int64_t pending_lo = 0, pending_hi = 0;
    auto flush = [&] {
      if (!pending.empty()) {
        problem("result: rank {} buffer 0 {} {}", d, range_text(pending_lo, pending_hi), pending);
      }
      pending.clear();
    };
    for (const Expect& x : expected_result(d)) {
      auto [first, last] = state(d, 0).range(x.lo, x.hi);
      for (auto it = first; it != last; ++it) {
        const std::int64_t lo = it->first;
        const Cell& c = it->second.value;
        std::vector<std::string> why;
        if (c.value == Values::kUndefined) {
          why.push_back("is undefined");
        } else {
          const Value& v = values_.get(c.value);
          std::vector<int> missing, doubled, foreign;
          for (int k = 0; k < r; ++k) {
            const std::uint8_t n = v.counts[static_cast<std::size_t>(k)];
            const bool wanted = x.owner < 0 || x.owner == k;
            if (wanted && n == 0) missing.push_back(k);
            if (n > 1) doubled.push_back(k);
            if (!wanted && n > 0) foreign.push_back(k);
          }
          if (!missing.empty()) {
            why.push_back(fmt::format("misses the input of ranks {}", fmt::join(missing, ",")));
          }
          if (!doubled.empty()) {
            why.push_back(fmt::format("holds the input of ranks {} more than once", fmt::join(doubled, ",")));
          }
          if (!foreign.empty()) {
            why.push_back(fmt::format("holds the input of ranks {} (all-gather block of rank {})",
                                      fmt::join(foreign, ","), x.owner));
          }
          if (c.shift != 0) why.push_back(fmt::format("holds input elements shifted by {}", c.shift));
          if (avg && v.scaled == 0) why.push_back("is not scaled");
          if (avg && v.scaled > 1) why.push_back(fmt::format("is scaled {} times", v.scaled));
          if (!avg && v.scaled > 0) why.push_back("is scaled");
        }
        const std::string text = fmt::format("{}", fmt::join(why, "; "));
        if (text != pending || lo != pending_hi) {
          flush();
          pending = text;
          pending_lo = lo;
        }
        pending_hi = it->second.hi;
      }
    }
    flush();
  }
}

}  // namespace verifier_detail

VerifyResult verify(const Plan& plan) { return verifier_detail::Verifier(plan).run(); }

void verify_or_throw(const Plan& plan) {
  const VerifyResult r = verify(plan);
  if (r.ok) return;
  const std::size_t more = r.problems.size() - 1;
  throw InvalidInput(fmt::format("plan '{}' fails verification: {}{}", plan.spec, r.problems.front(),
                                 more > 0 ? fmt::format(" (and {} more problems)", more) : std::string()));
}

}  // namespace artune
