#include "artune/algorithms/registry.hpp"

#include <fmt/format.h>

#include <cmath>

#include "artune/core/error.hpp"

namespace artune {

namespace {

constexpr double kBytesPerUsPerGbps = 1e3;

void check(int p, double n) {
  if (p < 1) throw InvalidInput(fmt::format("closed form: p = {} must be ≥ 1", p));
  if (!(n >= 0)) throw InvalidInput("closed form: message size must be ≥ 0");
}

int floor_log2(int p) {
  int lg = 0;
  while ((2 << lg) <= p) ++lg;
  return lg;
}

// The fold that brings p ranks down to a power of two p' and back.
double fold_us(int p, double n, const AlphaBetaGamma& c) {
  const int pp = 1 << floor_log2(p);
  if (pp == p) return 0.0;
  return (c.alpha_us + n * c.beta_us_per_byte + n * c.gamma_us_per_byte) + (c.alpha_us + n * c.beta_us_per_byte);
}

}  // namespace

double ring_allreduce_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  if (p == 1) return 0.0;
  const double frac = static_cast<double>(p - 1) / p;
  return 2.0 * (p - 1) * c.alpha_us + 2.0 * frac * n * c.beta_us_per_byte + frac * n * c.gamma_us_per_byte;
}

double recursive_doubling_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  const int lg = floor_log2(p);
  return lg * (c.alpha_us + n * c.beta_us_per_byte + n * c.gamma_us_per_byte) + fold_us(p, n, c);
}

double halving_doubling_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  const int lg = floor_log2(p);
  const int pp = 1 << lg;
  const double frac = static_cast<double>(pp - 1) / pp;
  return 2.0 * lg * c.alpha_us + 2.0 * frac * n * c.beta_us_per_byte + frac * n * c.gamma_us_per_byte +
         fold_us(p, n, c);
}

double shuffle_us(int p, int gathers, double n, const AlphaBetaGamma& c, bool gather_on_ranks) {
  check(p, n);
  if (gathers < 1) throw InvalidInput(fmt::format("closed form: gathers = {} must be ≥ 1", gathers));
  const double shard = n / gathers;
  const double steps = gather_on_ranks ? p : p + 1;  // transfers on a shard's critical chain
  return steps * (c.alpha_us + shard * c.beta_us_per_byte) + (p - 1) * shard * c.gamma_us_per_byte;
}

double ring_allgather_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  return (p - 1) * c.alpha_us + static_cast<double>(p - 1) / p * n * c.beta_us_per_byte;
}

double ring_reducescatter_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  return (p - 1) * c.alpha_us + static_cast<double>(p - 1) / p * n * (c.beta_us_per_byte + c.gamma_us_per_byte);
}

double bruck_allgather_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  const int rounds = p == 1 ? 0 : floor_log2(p - 1) + 1;
  return rounds * c.alpha_us + static_cast<double>(p - 1) / p * n * c.beta_us_per_byte;
}

double halving_reducescatter_us(int p, double n, const AlphaBetaGamma& c) {
  check(p, n);
  if ((p & (p - 1)) != 0) throw InvalidInput(fmt::format("halving_reducescatter_us: p = {} is not a power of two", p));
  return floor_log2(p) * c.alpha_us + static_cast<double>(p - 1) / p * n * (c.beta_us_per_byte + c.gamma_us_per_byte);
}

double allreduce_lower_bound_us(int p, double n, double bandwidth_gbps) {
  check(p, n);
  if (!(bandwidth_gbps > 0)) throw InvalidInput("closed form: bandwidth must be > 0");
  return 2.0 * (p - 1) / p * n / (bandwidth_gbps * kBytesPerUsPerGbps);
}

const std::vector<const Family*>& families(Collective c) {
#define ARTUNE_FAMILY_ADDRESS(f) &family::f,
  static const std::vector<const Family*> all_reduce{ARTUNE_FAMILIES(ARTUNE_FAMILY_ADDRESS)};
  static const std::vector<const Family*> others{ARTUNE_COLLECTIVE_FAMILIES(ARTUNE_FAMILY_ADDRESS)};
#undef ARTUNE_FAMILY_ADDRESS
  if (c == Collective::kAllReduce) return all_reduce;
  const auto of = [](Collective kind) {
    std::vector<const Family*> out;
    for (const Family* f : others) {
      if (f->collective == kind) out.push_back(f);
    }
    return out;
  };
  static const std::vector<const Family*> all_gather = of(Collective::kAllGather);
  static const std::vector<const Family*> reduce_scatter = of(Collective::kReduceScatter);
  static const std::vector<const Family*> none;
  if (c == Collective::kAllGather) return all_gather;
  if (c == Collective::kReduceScatter) return reduce_scatter;
  return none;
}

const Family* family_named(std::string_view name) {
  for (const Family* f : families()) {
    if (name == f->name) return f;
  }
  return nullptr;
}

std::pair<const Family*, const SpecName*> find_spec_name(std::string_view token, Collective c) {
  for (const Family* f : families(c)) {
    for (const SpecName& s : f->specs) {
      if (token == s.token || (s.alias != nullptr && token == s.alias)) return {f, &s};
    }
  }
  return {nullptr, nullptr};
}

const Family& family_of(const AlgToken& token, Collective c) {
  const Family* f = find_spec_name(token.name, c).first;
  if (f == nullptr) {
    if (c == Collective::kAllReduce) throw InvalidInput(fmt::format("{}: unknown algorithm", token.name));
    throw InvalidInput(fmt::format("{}: no {} plan of this family", token.name, collective_flag_name(c)));
  }
  return *f;
}

}  // namespace artune
