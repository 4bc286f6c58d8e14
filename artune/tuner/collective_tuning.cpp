#include "artune/tuner/collective_tuning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "artune/algorithms/collectives.hpp"
#include "artune/algorithms/sparse_allreduce.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/simulator/simulator.hpp"

namespace artune {

double simulate_sparse_us(const Topology& topo, const CostModel& model, std::string_view spec,
                          const std::vector<std::int64_t>& nnz, std::int64_t width, DataType type) {
  BuildOptions base;
  base.verify = false;  // the families are proved at p = 2…9 by the tests; the simulator only needs the DAG
  double total = simulate(sparse_header_plan(topo, spec, base), topo, model, 8).time_us;
  if (std::all_of(nnz.begin(), nnz.end(), [](std::int64_t n) { return n == 0; })) return total;
  total += simulate(sparse_payload_plan(topo, spec, nnz, 1, base), topo, model, 8).time_us;
  total += simulate(sparse_payload_plan(topo, spec, nnz, width, base), topo, model, element_size(type)).time_us;
  return total;
}

const std::vector<std::string>& sparse_dense_specs() {
  static const std::vector<std::string> specs = {"xring", "rechd", "tree", "nccl"};
  return specs;
}

const std::vector<std::string>& sparse_gather_specs() {
  static const std::vector<std::string> specs = {"ring", "bruck", "rd", "nccl"};
  return specs;
}

namespace {

// The fastest spec of a list and its time; specs that do not build on the topology are skipped.
template <class F>
std::pair<std::string, double> fastest(const std::vector<std::string>& specs, F&& time_of) {
  std::pair<std::string, double> best{"", std::numeric_limits<double>::infinity()};
  for (const std::string& spec : specs) {
    try {
      const double t = time_of(spec);
      if (t < best.second) best = {spec, t};
    } catch (const InvalidInput&) {}
  }
  return best;
}

}  // namespace

SparseDecision decide_sparse(const Topology& topo, const CostModel& model, std::int64_t rows, std::int64_t width,
                             double density, DataType type, const std::vector<std::string>& dense_specs,
                             const std::vector<std::string>& gather_specs) {
  const auto& dense_list = dense_specs.empty() ? sparse_dense_specs() : dense_specs;
  const auto& gather_list = gather_specs.empty() ? sparse_gather_specs() : gather_specs;
  if (rows < 1 || width < 1)
    if (rows < 1) throw InvalidInput(fmt::format("{} {} is not ≥ 1", parameter("rows"), rows));
  if (width < 1) throw InvalidInput(fmt::format("{} {} is not ≥ 1", parameter("width"), width));
  if (!(density > 0) || density > 1)
    throw InvalidInput(fmt::format("{} {} is not in (0, 1]", parameter("density"), density));
  SparseDecision d;
  d.rows = rows;
  d.width = width;
  d.density = density;
  d.nnz = std::clamp<std::int64_t>(std::llround(density * static_cast<double>(rows)), 1, rows);
  const int ranks = static_cast<int>(topo.gpus().size());
  const auto dense = fastest(dense_list, [&](const std::string& spec) {
    BuildOptions o;
    o.count = rows * width;
    o.verify = false;
    return simulate(build_plan(topo, spec, o), topo, model, element_size(type)).time_us;
  });
  if (dense.first.empty())
    throw InvalidInput(fmt::format("{}: no dense all-reduce builds on {}", parameter("topology"), topo.name()));
  d.dense_spec = dense.first;
  d.dense_us = dense.second;
  auto sparse_at = [&](std::int64_t nnz) {
    const std::vector<std::int64_t> per_rank(static_cast<std::size_t>(ranks), nnz);
    return fastest(gather_list, [&](const std::string& spec) {
      return simulate_sparse_us(topo, model, spec, per_rank, width, type);
    });
  };
  const auto here = sparse_at(d.nnz);
  d.sparse_spec = here.first;
  d.sparse_us = here.second;
  d.sparse = d.sparse_us <= d.dense_us;
  // The sparse time grows with nnz: the largest nnz still no slower than dense, by bisection.
  if (sparse_at(rows).second <= d.dense_us) {
    d.crossover = 1.0;
  } else if (sparse_at(1).second > d.dense_us) {
    d.crossover = 0.0;
  } else {
    std::int64_t lo = 1, hi = rows;  // sparse wins at lo, loses at hi
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (sparse_at(mid).second <= d.dense_us ? lo : hi) = mid;
    }
    d.crossover = static_cast<double>(lo) / static_cast<double>(rows);
  }
  return d;
}

std::vector<SparseDecision> decide_sparse_tensors(const GradientList& list, const Topology& topo,
                                                  const CostModel& model) {
  std::vector<SparseDecision> out;
  for (const SparseMark& m : list.sparse)
    out.push_back(decide_sparse(topo, model, m.rows, m.width, m.density, list.type));
  return out;
}

nlohmann::json sparse_decision_to_json(const SparseDecision& d, DataType type) {
  return nlohmann::json{{"rows", d.rows},
                        {"width", d.width},
                        {"bytes", static_cast<std::uint64_t>(d.rows * d.width) * element_size(type)},
                        {"density", d.density},
                        {"nnz_per_rank", d.nnz},
                        {"dense_spec", d.dense_spec},
                        {"dense_us", d.dense_us},
                        {"sparse_spec", d.sparse_spec},
                        {"sparse_us", d.sparse_us},
                        {"pick", d.sparse ? "sparse" : "dense"},
                        {"crossover_density", d.crossover}};
}

std::string sparse_choice_line(std::string_view name, const SparseDecision& d) {
  return fmt::format(
      "# sparse tensor {} ({} rows x {}, density {:g}): {} (dense all-reduce {} {:.2f} us, sparse all-gather {} "
      "{:.2f} us; sparse wins up to density {:.4g})",
      name, d.rows, d.width, d.density, d.sparse ? "sparse" : "dense", d.dense_spec, d.dense_us, d.sparse_spec,
      d.sparse_us, d.crossover);
}

}  // namespace artune
