#include "artune/tuner/fit.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <cmath>
#include <set>

#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

double AlphaBetaFit::predict_us(double bytes) const { return alpha_us + (gbps > 0 ? bytes / (gbps * 1e3) : 0.0); }

namespace {

void fill_residuals(AlphaBetaFit& fit, const std::vector<TimingSample>& samples) {
  fit.samples = samples.size();
  fit.residual_us.clear();
  double sq = 0, rel_sum = 0;
  fit.max_rel_error = 0;
  for (const auto& s : samples) {
    const double r = s.time_us - fit.predict_us(s.bytes);
    fit.residual_us.push_back(r);
    sq += r * r;
    const double rel = s.time_us > 0 ? std::abs(r) / s.time_us : 0.0;
    rel_sum += rel;
    fit.max_rel_error = std::max(fit.max_rel_error, rel);
  }
  fit.rms_residual_us = std::sqrt(sq / static_cast<double>(samples.size()));
  fit.mape = rel_sum / static_cast<double>(samples.size());
}

}  // namespace

AlphaBetaFit fit_alpha_beta(const std::vector<TimingSample>& samples) {
  std::set<double> sizes;
  for (const auto& s : samples) {
    if (!(s.time_us > 0) || !(s.bytes >= 0)) {
      throw InvalidInput(fmt::format("fit: sample ({} bytes, {} us) is not positive", s.bytes, s.time_us));
    }
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2) throw InvalidInput("fit: need samples at two or more distinct sizes");
  // Weighted rows (1/t, n/t)·(α, β) ≈ 1 minimise the relative error of each sample.
  const auto n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& s = samples[static_cast<std::size_t>(i)];
    a(i, 0) = 1.0 / s.time_us;
    a(i, 1) = s.bytes / s.time_us;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(b);
  AlphaBetaFit fit;
  double alpha = x(0), beta = x(1);  // µs, µs per byte
  if (alpha < 0) {
    // A negative latency is unphysical: refit through the origin.
    const Eigen::VectorXd col = a.col(1);
    alpha = 0;
    beta = col.dot(b) / col.dot(col);
  }
  // The samples come from timing a backend: flat times are a measurement failure, not bad input.
  if (!(beta > 0)) {
    throw BackendFailure(
        fmt::format("fit: the measured time does not grow with the message size, so no bandwidth can be fitted "
                    "(timer too coarse or the backend too noisy; try larger sizes with {}/{} or more {})",
                    parameter("min_bytes"), parameter("max_bytes"), parameter("iterations")));
  }
  fit.alpha_us = alpha;
  fit.gbps = 1.0 / (beta * 1e3);
  fill_residuals(fit, samples);
  return fit;
}

std::vector<double> fit_linear(const std::vector<std::vector<double>>& features, const std::vector<double>& values) {
  if (features.size() != values.size() || values.empty())
    throw InvalidInput("fit: features and values differ in length");
  const std::size_t k = features.front().size();
  if (values.size() < k + 1) throw InvalidInput("fit: fewer samples than coefficients");
  Eigen::MatrixXd a(static_cast<Eigen::Index>(values.size()), static_cast<Eigen::Index>(k + 1));
  Eigen::VectorXd b(static_cast<Eigen::Index>(values.size()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (features[i].size() != k) throw InvalidInput("fit: rows have different feature counts");
    a(static_cast<Eigen::Index>(i), 0) = 1.0;
    for (std::size_t j = 0; j < k; ++j)
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j + 1)) = features[i][j];
    b(static_cast<Eigen::Index>(i)) = values[i];
  }
  const Eigen::VectorXd x = a.colPivHouseholderQr().solve(b);
  return std::vector<double>(x.data(), x.data() + x.size());
}

}  // namespace artune
