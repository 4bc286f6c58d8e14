// sample_sizes: which sizes of a sweep a candidate is simulated at, and the
// interpolated times of the others.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "artune/tuner/size_sampling.hpp"

using artune::sample_sizes;
using artune::SampledTime;
using artune::SizeSample;

namespace {

std::vector<std::uint64_t> sweep(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t b = lo; b <= hi; b *= 2) v.push_back(b);
  return v;
}

}  // namespace

TEST_CASE("size_sampling.affine_needs_three_simulations") {
  const auto bytes = sweep(1024, 1u << 30);  // 21 sizes
  std::vector<int> calls(bytes.size(), 0);
  const auto t = sample_sizes(bytes, [&](std::size_t i) -> std::optional<SizeSample> {
    ++calls[i];
    return SizeSample{5.0 + 1e-3 * static_cast<double>(bytes[i]), 7};
  });
  int simulated = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    REQUIRE(t[i].has_value());
    CHECK(calls[i] <= 1);
    simulated += calls[i];
    CHECK(t[i]->simulated == (calls[i] == 1));
    CHECK(t[i]->time_us == doctest::Approx(5.0 + 1e-3 * static_cast<double>(bytes[i])).epsilon(1e-12));
  }
  CHECK(simulated == 3);
  CHECK(t.front()->simulated);
  CHECK(t.back()->simulated);
}

TEST_CASE("size_sampling.kinks_and_bottlenecks_are_refined") {
  const auto bytes = sweep(1024, 1u << 30);
  // A latency floor up to 1 MiB, then bandwidth: time = max(500, bytes / 1000).
  auto time_of = [&](std::size_t i) { return std::max(500.0, static_cast<double>(bytes[i]) / 1000.0); };
  int calls = 0;
  const auto t = sample_sizes(bytes, [&](std::size_t i) -> std::optional<SizeSample> {
    ++calls;
    return SizeSample{time_of(i), bytes[i] <= 524288 ? -1 : 3};
  });
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    REQUIRE(t[i].has_value());
    CHECK(t[i]->time_us == doctest::Approx(time_of(i)).epsilon(1e-9));  // piecewise affine: exact on each piece
  }
  CHECK(calls < static_cast<int>(bytes.size()));
  CHECK(calls > 3);

  // The same times, but the bottleneck changes where the time does not show it: no range spanning the
  // change may be interpolated, so the sizes on both sides of it are simulated.
  const auto u = sample_sizes(bytes, [&](std::size_t i) -> std::optional<SizeSample> {
    return SizeSample{100.0 + static_cast<double>(bytes[i]) / 1000.0, i < 9 ? 1 : 2};
  });
  CHECK(u[8]->simulated);
  CHECK(u[9]->simulated);
}

TEST_CASE("size_sampling.sizes_that_do_not_build") {
  const auto bytes = sweep(1024, 1u << 20);  // 11 sizes; the first three do not build
  const auto t = sample_sizes(bytes, [&](std::size_t i) -> std::optional<SizeSample> {
    if (i < 3) return std::nullopt;
    return SizeSample{static_cast<double>(bytes[i]), 0};
  });
  for (std::size_t i = 0; i < 3; ++i) CHECK_FALSE(t[i].has_value());
  CHECK(t[3]->simulated);  // next to a size that does not build
  for (std::size_t i = 3; i < bytes.size(); ++i) {
    REQUIRE(t[i].has_value());
    CHECK(t[i]->time_us == doctest::Approx(static_cast<double>(bytes[i])));
  }
  CHECK(sample_sizes({}, [](std::size_t) { return std::optional<SizeSample>{}; }).empty());
  const auto one = sample_sizes({4096}, [](std::size_t) { return std::optional<SizeSample>(SizeSample{2.0, 0}); });
  REQUIRE(one.size() == 1);
  CHECK(one[0]->simulated);
}
