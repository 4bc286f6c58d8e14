#pragma once
// NCCL's algorithms and protocols, named once for the whole project: the spec grammar's spelling
// (`nccl.ring.ll128.c8`, algorithms/spec.hpp), NCCL's own (the NCCL_ALGO / NCCL_PROTO values the nccl backend
// sets, executor/nccl/nccl_forced_choice.hpp) and NCCL's cost-table index (the plugin's getCollInfo,
// nccl_tuner/). The simulator's NCCL model (simulator/nccl_model.hpp) uses these enums as its own.
// Header-only and dependency-free, so that the NCCL tuner plugin, which links no artune library, reads the
// same table.
//
// Sources (NVIDIA/nccl 2.28): src/include/nccl_common.h (NCCL_ALGO_TREE 0, _RING 1, _COLLNET_DIRECT 2,
// _COLLNET_CHAIN 3, _NVLS 4, _NVLS_TREE 5, _PAT 6; NCCL_PROTO_LL 0, _LL128 1, _SIMPLE 2), src/enqueue.cc
// (ncclAlgoStr, ncclProtoStr: the names NCCL_ALGO and NCCL_PROTO accept), src/include/device.h (MAXCHANNELS).
// CollNet is left out: it needs SHARP switches, which no artune topology models.

#include <optional>
#include <string_view>

namespace artune {

/// NCCL's algorithms artune models, in the order its tables index them.
enum class NcclAlgo { kTree, kRing, kNvls, kNvlsTree, kPat };
/// NCCL's protocols.
enum class NcclProto { kLL, kLL128, kSimple };
inline constexpr int kNcclAlgos = 5;
inline constexpr int kNcclProtos = 3;
/// The most channels NCCL runs (MAXCHANNELS), the largest `.cN` of a spec.
inline constexpr int kNcclMaxChannels = 64;

/// One algorithm's or protocol's names.
struct NcclName {
  std::string_view spec;  ///< artune's spelling ("nvlstree", "ll128")
  std::string_view nccl;  ///< NCCL's (NCCL_ALGO=NVLSTree, NCCL_PROTO=LL128)
  int index;              ///< NCCL's NCCL_ALGO_* / NCCL_PROTO_* value (the tuner's cost-table index)
};

/// Indexed by NcclAlgo.
inline constexpr NcclName kNcclAlgoNames[kNcclAlgos] = {
    {"tree", "Tree", 0}, {"ring", "Ring", 1}, {"nvls", "NVLS", 4}, {"nvlstree", "NVLSTree", 5}, {"pat", "PAT", 6}};
/// Indexed by NcclProto.
inline constexpr NcclName kNcclProtoNames[kNcclProtos] = {{"ll", "LL", 0}, {"ll128", "LL128", 1}, {"simple", "Simple", 2}};

constexpr const NcclName& nccl_name(NcclAlgo algo) noexcept { return kNcclAlgoNames[static_cast<int>(algo)]; }
constexpr const NcclName& nccl_name(NcclProto proto) noexcept { return kNcclProtoNames[static_cast<int>(proto)]; }

/// A spec's `.cN` part (`nccl.ring.simple.c8`): N in 1..kNcclMaxChannels; 0 when `part` starts like one (c and a
/// digit) but is not (c0, c65, c8x, c123); -1 when it is not a channel count at all (a protocol name).
constexpr int nccl_channel_count(std::string_view part) noexcept {
  if (part.size() < 2 || part[0] != 'c' || part[1] < '0' || part[1] > '9') return -1;
  if (part.size() > 3) return 0;
  int n = 0;
  for (const char c : part.substr(1)) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n >= 1 && n <= kNcclMaxChannels ? n : 0;
}

/// A NetProtocol-style bit of a protocol (bit i for NcclProto i).
constexpr unsigned nccl_proto_bit(NcclProto proto) noexcept { return 1u << static_cast<int>(proto); }

/// The algorithm artune spells `spec` ("ring"), if any.
constexpr std::optional<NcclAlgo> nccl_algo_of(std::string_view spec) noexcept {
  for (int i = 0; i < kNcclAlgos; ++i) {
    if (kNcclAlgoNames[i].spec == spec) return static_cast<NcclAlgo>(i);
  }
  return std::nullopt;
}
/// The protocol artune spells `spec` ("ll128"), if any.
constexpr std::optional<NcclProto> nccl_proto_of(std::string_view spec) noexcept {
  for (int i = 0; i < kNcclProtos; ++i) {
    if (kNcclProtoNames[i].spec == spec) return static_cast<NcclProto>(i);
  }
  return std::nullopt;
}

}  // namespace artune
