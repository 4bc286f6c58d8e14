#pragma once
// Reading user-supplied input files (topologies, decision tables, calibration
// overlays, gradient lists, nvidia-smi and XML exports) with the checks every
// loader needs: the path exists, is not a directory, and is of sane size. A
// device such as /dev/zero or a never-ending pipe ends in an error at the
// limit instead of exhausting memory.

#include <cstdint>
#include <string>
#include <string_view>

namespace artune {

/// The largest input file artune reads: 256 MiB (the biggest shipped input is a few hundred KiB).
inline constexpr std::uint64_t kMaxInputFileBytes = std::uint64_t{256} << 20;

/// The whole text of an input file. InvalidInput reads "WHAT: 'PATH': reason" (missing, a
/// directory, unreadable, larger than `max_bytes`); `what` names the flag or field that gave the path.
std::string read_input_file(const std::string& path, std::string_view what,
                            std::uint64_t max_bytes = kMaxInputFileBytes);

}  // namespace artune
