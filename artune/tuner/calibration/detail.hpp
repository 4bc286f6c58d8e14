#pragma once
// Internal to the calibration sources (calibration.cpp: the run; probes.cpp: microbenchmark plans
// and device-pair classes; fit.cpp: fits and refinement; overlay.cpp: the overlay;
// summary.cpp: text and JSON). Not installed.

#include <cstdint>
#include <vector>

#include "artune/tuner/calibration/calibration.hpp"

namespace artune::calibration_detail {

/// Microbenchmark sizes when none are given: 4 KiB … 16 MiB, ×4.
std::vector<std::uint64_t> default_sizes();
/// A plan device for a topology node.
PlanDevice device_of(const Topology& topo, int node, bool participant = true);
/// Times a plan with the runner of `artune run` (median of the timed runs, slowest process each), unchecked.
double median_time_us(HarnessBackend& backend, const Plan& plan, DataType type, int warmup, int iterations);
/// The kind of the slowest link on a route.
LinkKind bottleneck_kind(const Topology& topo, const Route& route);
/// Device-pair classes among the GPUs of machine 0 (and GPU → CPU socket): one representative pair
/// per (path type, bottleneck bandwidth, link kinds).
std::vector<ClassFit> pair_classes(const Topology& topo);

// The host memory probe: working sets kHostProbeMinBytes · 2^(k/2), k < kHostProbePoints (4 MiB … 256 MiB).
constexpr double kHostProbeMinBytes = 4.0 * (1 << 20);
constexpr int kHostProbePoints = 13;

constexpr double kMiB = 1024.0 * 1024.0;

// Refinement lets an overhead (µs) reach at least this, however small its start value.
constexpr double kMinOverheadCeilingUs = 100.0;

inline bool host_backend(BackendKind kind) { return kind == BackendKind::kCpu || kind == BackendKind::kMpi; }

/// Mean |predicted − measured| / measured over the rows of at least `min_bytes` (predicted: the calibrated
/// model, or the defaults).
double mape(const std::vector<ValidationRow>& rows, std::uint64_t min_bytes, bool defaults);

}  // namespace artune::calibration_detail
