#include "artune/tuner/size_sampling.hpp"

#include <cmath>

namespace artune {

namespace {

class Sampler {
 public:
  Sampler(const std::vector<std::uint64_t>& bytes,
          const std::function<std::optional<SizeSample>(std::size_t)>& simulate)
      : bytes_(bytes), simulate_(simulate), samples_(bytes.size()), done_(bytes.size(), false), out_(bytes.size()) {}

  std::vector<std::optional<SampledTime>> run() {
    const std::size_t n = bytes_.size();
    if (n == 0) return {};
    at(0);
    if (n > 1) {
      at(n - 1);
      refine(0, n - 1);
    }
    return std::move(out_);
  }

 private:
  const std::optional<SizeSample>& at(std::size_t i) {
    if (!done_[i]) {
      samples_[i] = simulate_(i);
      done_[i] = true;
      if (samples_[i]) out_[i] = SampledTime{samples_[i]->time_us, true};
    }
    return samples_[i];
  }

  double line(std::size_t i, std::size_t j, std::size_t k) const {
    const double x0 = static_cast<double>(bytes_[i]);
    const double x1 = static_cast<double>(bytes_[j]);
    const double t0 = samples_[i]->time_us;
    const double t1 = samples_[j]->time_us;
    if (x1 == x0) return t0;
    return t0 + (t1 - t0) * (static_cast<double>(bytes_[k]) - x0) / (x1 - x0);
  }

  // Sizes i and j are simulated; decides every size strictly between them.
  void refine(std::size_t i, std::size_t j) {
    if (j - i < 2) return;
    const std::size_t m = i + (j - i) / 2;
    const auto& mid = at(m);
    const auto& lo = samples_[i];
    const auto& hi = samples_[j];
    if (lo && hi && mid && lo->bottleneck == mid->bottleneck && mid->bottleneck == hi->bottleneck &&
        std::abs(mid->time_us - line(i, j, m)) <= kInterpolationTolerance * mid->time_us) {
      for (std::size_t k = i + 1; k < j; ++k) {
        if (k == m) continue;
        out_[k] = SampledTime{k < m ? line(i, m, k) : line(m, j, k), false};
      }
      return;
    }
    refine(i, m);
    refine(m, j);
  }

  const std::vector<std::uint64_t>& bytes_;
  const std::function<std::optional<SizeSample>(std::size_t)>& simulate_;
  std::vector<std::optional<SizeSample>> samples_;
  std::vector<bool> done_;
  std::vector<std::optional<SampledTime>> out_;
};

}  // namespace

std::vector<std::optional<SampledTime>> sample_sizes(
    const std::vector<std::uint64_t>& bytes, const std::function<std::optional<SizeSample>(std::size_t)>& simulate) {
  return Sampler(bytes, simulate).run();
}

}  // namespace artune
