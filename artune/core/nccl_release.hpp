#pragma once
// An NCCL release ("2.21.5"): which release's cost table the NCCL model chooses with (nccl_model.hpp). NCCL's
// choice of algorithm and protocol per call comes from the latency and bandwidth constants and formulas of its
// src/graph/tuning.cc, which changed from release to release; a user whose program runs NCCL 2.21 gets 2.21's
// choice when the model is told so (`--nccl-version`, or the version an NCCL log prints).

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace artune {

/// An NCCL release: major.minor.patch.
struct NcclRelease {
  int major = 2;
  int minor = 28;
  int patch = 9;
  auto operator<=>(const NcclRelease&) const = default;
};

/// The release whose tables the model carries by default (NVIDIA/nccl v2.28.9-1).
inline constexpr NcclRelease kModelledNcclRelease{2, 28, 9};
/// The oldest release whose choice the model reproduces (the tables and formulas of v2.19.1-1 onwards; 2.18 and
/// earlier costed NVLS and NVLSTree by other formulas).
inline constexpr NcclRelease kOldestModelledNcclRelease{2, 19, 0};

/// "2.21.5".
std::string to_string(const NcclRelease& release);
/// How output headers name the choice modelled for `release`: "NCCL 2.21.5's choice", and for a release newer than
/// kModelledNcclRelease "NCCL 2.30.1's choice (2.28.9's tables, the newest the model carries)", so that no header
/// claims tables the model does not have.
std::string describe_nccl_choice(const NcclRelease& release);
/// The release "2.21", "2.21.5", "2.21.5-1" or "2.21.5+cuda12.4" names (a missing patch is 0); nullopt for any
/// other text. Any release, modelled or not.
std::optional<NcclRelease> read_nccl_release(std::string_view text);
/// Whether the model reproduces the choice of `release` (kOldestModelledNcclRelease or later).
bool nccl_release_modelled(const NcclRelease& release) noexcept;
/// Parses "2.21", "2.21.5", "2.21.5-1" or "2.21.5+cuda12.4" (a missing patch is 0). InvalidInput naming `what`
/// for anything else, and for releases older than kOldestModelledNcclRelease. Releases newer than the model's
/// own are taken as given: their choice is the newest tables' (NCCL's tables change rarely between releases).
NcclRelease parse_nccl_release(std::string_view text, std::string_view what);

}  // namespace artune
