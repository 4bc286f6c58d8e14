#include "artune/core/nccl_release.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "artune/core/error.hpp"

namespace artune {

std::string to_string(const NcclRelease& release) {
  return fmt::format("{}.{}.{}", release.major, release.minor, release.patch);
}

std::string describe_nccl_choice(const NcclRelease& release) {
  if (release <= kModelledNcclRelease) return fmt::format("NCCL {}'s choice", to_string(release));
  return fmt::format("NCCL {}'s choice ({}'s tables, the newest the model carries)", to_string(release),
                     to_string(kModelledNcclRelease));
}

std::optional<NcclRelease> read_nccl_release(std::string_view text) {
  // The release proper ends where a package suffix starts ("-1" of a git tag, "+cuda12.4" of NCCL's banner).
  const std::string_view core = text.substr(0, text.find_first_of("-+"));
  int parts[3] = {0, 0, 0};
  int count = 0;
  std::size_t at = 0;
  while (at <= core.size()) {
    const std::size_t dot = std::min(core.find('.', at), core.size());
    const std::string_view part = core.substr(at, dot - at);
    int value = -1;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (count == 3 || part.empty() || ec != std::errc() || end != part.data() + part.size() || value >= 1000) {
      return std::nullopt;
    }
    parts[count++] = value;
    at = dot + 1;
  }
  if (count < 2) return std::nullopt;
  return NcclRelease{parts[0], parts[1], parts[2]};
}

bool nccl_release_modelled(const NcclRelease& release) noexcept { return !(release < kOldestModelledNcclRelease); }

NcclRelease parse_nccl_release(std::string_view text, std::string_view what) {
  const std::optional<NcclRelease> release = read_nccl_release(text);
  if (!release) {
    throw InvalidInput(
        fmt::format("{}: '{}' is not an NCCL release (MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 2.21.5)", what, text));
  }
  if (!nccl_release_modelled(*release)) {
    throw InvalidInput(fmt::format(
        "{}: NCCL {} is older than the oldest release whose choice the model reproduces ({}.{}); leave it out to "
        "model NCCL {}",
        what, to_string(*release), kOldestModelledNcclRelease.major, kOldestModelledNcclRelease.minor,
        to_string(kModelledNcclRelease)));
  }
  return *release;
}

}  // namespace artune
