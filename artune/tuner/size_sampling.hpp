#pragma once
// Which sizes of a sweep a candidate must be simulated at.
//
// Over a size regime where a plan keeps the same critical path and the same
// bottleneck link, the simulator's time is close to affine in the message size
// (every flow's bytes scale with it, every latency stays; pipelines fill and
// drain a little differently, within a fraction of a percent on the built-in
// machines). So a candidate is simulated at the two ends of the sweep and at
// the size halfway between (by index); when the middle one agrees with the
// straight line through the ends to within kInterpolationTolerance and all
// three have the same bottleneck, the sizes in between are interpolated;
// otherwise each half is refined the same way. A kink (a protocol or
// algorithm switch, a new bottleneck) inside a range shows at its middle
// unless it is smaller than the tolerance. Interpolated figures only rank
// candidates: the search simulates every candidate that could be a size's
// pick under that tolerance, and the figures a table reports are simulated.
// `autotune --exhaustive` simulates every size instead.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace artune {

/// Relative disagreement between a simulated middle size and the line through its range's ends that still lets
/// the range be interpolated.
inline constexpr double kInterpolationTolerance = 0.01;

/// What one simulation of a size says: its time and its bottleneck (-1: none; any id the caller compares by:
/// autotune passes the bottleneck link's class, kind and bandwidth, as symmetric links trade places).
struct SizeSample {
  double time_us = 0;
  int bottleneck = -1;
};

/// One size's value for a candidate: simulated or interpolated, or none (the candidate does not build there).
struct SampledTime {
  double time_us = 0;
  bool simulated = false;
};

/// Times of one candidate at every size of `bytes` (ascending): `simulate(i)` is called for the sizes that need a
/// simulation (in a fixed order, each at most once) and returns nullopt where the candidate does not build; the
/// sizes between verified points are interpolated linearly in bytes. Sizes next to one that does not build are
/// simulated.
std::vector<std::optional<SampledTime>> sample_sizes(
    const std::vector<std::uint64_t>& bytes, const std::function<std::optional<SizeSample>(std::size_t)>& simulate);

}  // namespace artune
