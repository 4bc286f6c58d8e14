#pragma once
// Private helpers shared by the importers and live discovery: bus id
// normalisation, NCCL's link rates and the per-hop latencies the built-in
// configs use, so imported and hand-written machines price links alike.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "artune/topology/topology.hpp"

namespace artune::detail {

/// Per-hop latencies (µs) of imported links; the values of the shipped configs.
inline constexpr double kNvLinkLatencyUs = 0.6;
/// PCIe hop latency (µs).
inline constexpr double kPcieLatencyUs = 1.0;
/// Socket-to-socket (QPI/UPI) hop latency (µs).
inline constexpr double kSmpLatencyUs = 1.0;
/// PCIe Gen3 x16 as NCCL counts it (GB/s); the default where the rate is unknown.
inline constexpr double kPcieGen3x16Gbps = 12.0;
/// NVLink 2/3/4 per-lane rate (GB/s per direction), configs/HARDWARE.md.
inline constexpr double kNvLink2LaneGbps = 25.0;
/// NVLink 1 (P100) per-lane rate.
inline constexpr double kNvLink1LaneGbps = 20.0;
/// QPI between Broadwell-class sockets (NCCL's P2P figure).
inline constexpr double kQpiGbps = 6.0;

/// Text without leading/trailing blanks (space, tab, CR, LF).
std::string_view trim(std::string_view text);
/// Splits on runs of blanks.
std::vector<std::string_view> split_blanks(std::string_view text);
/// Lines of a text (LF or CRLF), without terminators.
std::vector<std::string_view> split_lines(std::string_view text);
/// "0000:06:00.0" from any of "6:0.0", "00000000:06:00.0", "0000:06:00.0" (lower case); nullopt if malformed.
std::optional<std::string> normalize_bus_id(std::string_view text);
/// Text safe to quote in a one-line message: control bytes escaped (\n, \t, \xNN), cut after 40 characters.
std::string printable(std::string_view text);
/// The file stem of a source name ("data/box.txt" → "box"), or `fallback` when there is none.
std::string source_stem(std::string_view source, std::string_view fallback);
/// Parses a whole decimal int; nullopt unless the text is exactly one.
std::optional<long> parse_long(std::string_view text);
/// Parses a whole number in hex (with or without 0x); nullopt unless exact.
std::optional<long> parse_hex(std::string_view text);
/// Parses a whole decimal floating-point number; nullopt unless exact.
std::optional<double> parse_double(std::string_view text);

/// Adds a machine-0 node of `kind` named `id` with the given local index and `arch` (empty: not stated); returns
/// its index.
int add_local_node(Topology& topo, NodeKind kind, std::string id, int local_index, std::string arch = {});

}  // namespace artune::detail
