#pragma once
// Least-squares fits used by calibration: time = α + bytes / bandwidth.

#include <cstdint>
#include <vector>

namespace artune {

/// One timed microbenchmark point.
struct TimingSample {
  double bytes = 0;
  double time_us = 0;
};

/// A fitted α-β line and how well it fits.
struct AlphaBetaFit {
  double alpha_us = 0;              ///< intercept (latency), ≥ 0
  double gbps = 0;                  ///< 1 / slope, GB/s (bytes per ns)
  std::vector<double> residual_us;  ///< measured − fitted, per sample
  double rms_residual_us = 0;
  double max_rel_error = 0;  ///< max |residual| / measured
  double mape = 0;           ///< mean |residual| / measured, as a fraction
  std::size_t samples = 0;

  /// The line's time for `bytes`.
  double predict_us(double bytes) const;
};

/// Fits time = α + bytes/gbps by least squares (Eigen QR) on relative residuals, so small and large
/// sizes weigh alike; α is clamped at 0 (refit through the origin) when the data put it below.
/// InvalidInput with fewer than two distinct sizes or a non-positive slope.
AlphaBetaFit fit_alpha_beta(const std::vector<TimingSample>& samples);

/// Fits time = c0 + Σ c_k · x_k by ordinary least squares; returns the coefficients (c0 first).
std::vector<double> fit_linear(const std::vector<std::vector<double>>& features, const std::vector<double>& values);

}  // namespace artune
