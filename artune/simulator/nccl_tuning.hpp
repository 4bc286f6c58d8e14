#pragma once
// A calibration written into NCCL's own latency tables, the same way by the model of NCCL's choice
// (nccl_model.hpp, choose() with LatencyTables) and by the NCCL tuner plugin (nccl_tuner/plugin.cpp, which
// edits the ncclTunerConstants_v5_t NCCL hands to init, NCCL 2.28+). Header-only, no dependencies: the plugin
// compiles it in without the artune library.
//
// A calibration overlay (artune calibrate) holds per link kind the per-step latency α and the efficiency of
// the nccl cost profile. Read against that profile's defaults, per NCCL link class (tuning.cc's NVLINK, PCI,
// NET rows of hwLatencies):
//  - shift_us[k] = α_k − the profile's α_k: added to every per-step latency of class k NCCL uses (its
//    nonzero entries; never below 0), as the simulator shifts NCCL's per-step latencies (HopAdjust);
//  - efficiency[k] = efficiency_k / the profile's efficiency_k: the share of NCCL's bandwidth estimate the
//    calibrated machine reaches on class k.
// NCCL's constants hold no bandwidth for Ring/Simple (its per-channel speed comes from the graph search, not
// from a constant), so a bandwidth share s is written as latencies × s: NCCL then computes
// s·L + B/bw = s·(L + B/(s·bw)), s times the calibrated time, and picks the same algorithm × protocol at
// every size. The one term NCCL adds that is not in the tables, its 1–3 µs network post overhead per ring step
// across machines (tuning.cc getNetOverhead), stays unscaled; the model of NCCL's choice evaluates the written
// tables through the same formula, so both pick alike.

#include <algorithm>
#include <cstddef>

namespace artune::nccl_tuning {

/// NCCL's link classes, the first index of hwLatencies (tuning.cc NCCL_HW_NVLINK, NCCL_HW_PCI, NCCL_HW_NET).
enum Hw { kNvlink = 0, kPci = 1, kNet = 2, kHwClasses = 3 };

/// The nccl cost profile's per-step α per class (simulator/cost_model.cpp: NVLink 0; PCIe 5.7 − 3.4 µs;
/// network 14 − 5.7 µs), against which an overlay's α is read.
inline constexpr double kProfileAlphaUs[kHwClasses] = {0.0, 5.7 - 3.4, 14.0 - 5.7};
/// The nccl cost profile's efficiency per class (NVLink 0.8: NCCL's usable 20 of 25 GB/s; PCIe 1; network 0.9).
inline constexpr double kProfileEfficiency[kHwClasses] = {0.8, 1.0, 0.9};
/// Bounds on what a calibration may write (a corrupt overlay is refused, not written into NCCL).
inline constexpr double kMaxAlphaUs = 10000.0;
inline constexpr double kMinEfficiency = 1e-3;

/// A calibration in NCCL's terms.
struct Calibration {
  double shift_us[kHwClasses] = {0, 0, 0};    ///< per-step latency added per class
  double efficiency[kHwClasses] = {1, 1, 1};  ///< share of NCCL's bandwidth reached per class
  int intra = kNvlink;                        ///< the class NCCL's rings use inside a machine (NVLink or PCI)
};

/// The calibration of an overlay's α and efficiency per class (NVLink, PCIe, network) and intra class.
inline Calibration from_overlay(const double (&alpha_us)[kHwClasses], const double (&efficiency)[kHwClasses],
                                int intra) {
  Calibration c;
  for (int k = 0; k < kHwClasses; ++k) {
    c.shift_us[k] = alpha_us[k] - kProfileAlphaUs[k];
    c.efficiency[k] = efficiency[k] / kProfileEfficiency[k];
  }
  c.intra = intra == kPci ? kPci : kNvlink;
  return c;
}

/// The bandwidth share that scales NCCL's estimates for a communicator spanning `nodes` machines: the
/// network's across machines (NCCL's bandwidth there is the network's), the intra class's on one.
inline double bandwidth_share(const Calibration& c, int nodes) {
  return nodes > 1 ? c.efficiency[kNet] : c.efficiency[c.intra];
}

/// Writes `c` into NCCL-layout latency tables in place for a communicator spanning `nodes` machines: every
/// nonzero per-step latency of class k becomes max(0, entry + shift_us[k]), then every latency (base and
/// per-step) is multiplied by bandwidth_share(c, nodes). A and P are the tables' algorithm and protocol counts
/// (NCCL: 7 × 3; the model: its own 5 × 3). Zero entries (pairs NCCL does not run) stay zero.
template <std::size_t A, std::size_t P>
void apply(double (&base)[A][P], double (&hw)[kHwClasses][A][P], const Calibration& c, int nodes) {
  const double s = bandwidth_share(c, nodes);
  for (std::size_t a = 0; a < A; ++a) {
    for (std::size_t p = 0; p < P; ++p) {
      base[a][p] *= s;
      for (int k = 0; k < kHwClasses; ++k) {
        double& e = hw[k][a][p];
        if (e > 0) e = std::max(0.0, e + c.shift_us[k]) * s;
      }
    }
  }
}

}  // namespace artune::nccl_tuning
