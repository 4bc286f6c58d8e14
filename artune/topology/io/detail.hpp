#pragma once
// Internal to the topology JSON reader (topology/io/*.cpp): the limits and defaults, the field Reader
// and the parsers of each form, shared by the files that read the full form, the compact form, the
// cluster form and the generators. Not installed.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "artune/core/error.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/json_reader.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

namespace artune::io_detail {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Per-hop latencies (µs) used when a config gives none: NCCL's hop latencies
// for the LL protocol (src/graph/tuning.cc, hwLat: NVLink 0.6, PCIe 1.0,
// network 2.7). An SMP hop is a host-bridge hop like PCIe's.
constexpr double kNvlinkLatencyUs = 0.6;
constexpr double kPcieLatencyUs = 1.0;
constexpr double kSmpLatencyUs = 1.0;
constexpr double kNetworkLatencyUs = 2.7;

// Compact-form defaults (GB/s per direction): PCIe Gen3 x16 as NCCL counts it,
// Skylake UPI as NCCL counts it for P2P (SKL_QPI_BW), an EDR InfiniBand port.
constexpr double kDefaultPcieBandwidth = 12.0;
constexpr double kDefaultSmpBandwidth = 10.0;
constexpr double kDefaultNicBandwidth = 12.5;

// The uniform:G generator: NVLink 2-4 lane rate and PCIe Gen3.
constexpr double kUniformNvlinkBandwidth = 25.0;
constexpr double kUniformPcieBandwidth = 12.0;

// Bounds that turn a typo ("uniform:80000") into a message instead of an
// allocation failure. uniform:G is all-to-all: G·(G−1) directed links.
constexpr int kMaxGpusPerMachine = 1024;
constexpr int kMaxUniformGpus = 256;
constexpr int kMaxMachines = 4096;
constexpr long long kMaxTotalGpus = 65536;
constexpr long long kMaxTotalLinks = 4'000'000;
constexpr int kMaxLanes = 1024;
constexpr double kMaxFigure = 1e9;
// Bandwidths below 1 KB/s (1e-6 GB/s) are typos too, and near-zero values such as 1e-300
// would turn transfer times into infinities in the simulator.
constexpr double kMinBandwidth = 1e-6;
constexpr std::uintmax_t kMaxFileBytes = 64u << 20;

// Output keys that topology_to_json derives from the model; readers ignore
// them so that `topo show --json` output loads back.
constexpr std::string_view kDerivedKeys[] = {"machine_count",    "gpus_per_machine", "gpus",
                                             "peer_matrix",      "nvlink_matrix",    "path_matrix",
                                             "bandwidth_matrix", "fingerprint"};

/// Per-hop latency of a link kind when a config gives none.
double default_latency(LinkKind kind);
/// Quotes a user-supplied string for a one-line message (control characters escaped, 80 characters).
std::string quote_text(std::string_view text);
/// `text` with newlines and tabs as spaces.
std::string one_line(std::string text);
/// "a, b, c".
std::string join_list(const std::vector<std::string>& items);
/// JSON paths: `path.key`, `path[index]`; keys that readers skip ("comment", "_…").
std::string field(const std::string& path, std::string_view key);
std::string item(const std::string& path, std::size_t index);
bool is_ignored_key(std::string_view key);

// Reads typed fields and reports errors as "SOURCE: path: reason".
class Reader {
 public:
  Reader(std::string source, fs::path base_dir) : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  const std::string& source() const { return source_; }
  const fs::path& base_dir() const { return base_dir_; }

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw InvalidInput(one_line(json_reader::message(source_, path, reason)));
  }

  void expect_object(const json& value, const std::string& path) const {
    if (!value.is_object()) fail(path, json_reader::type_error("an object", value));
  }

  void expect_array(const json& value, const std::string& path) const {
    if (!value.is_array()) fail(path, json_reader::type_error("an array", value));
  }

  // Rejects keys outside `allowed` (typos such as "bandwith" would otherwise
  // be silently ignored); "comment" and keys starting with '_' are free.
  void allow_keys(const json& object, const std::string& path, std::initializer_list<std::string_view> allowed,
                  bool allow_derived = false) const {
    for (const auto& [key, value] : object.items()) {
      if (is_ignored_key(key)) continue;
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      if (allow_derived && std::find(std::begin(kDerivedKeys), std::end(kDerivedKeys), key) != std::end(kDerivedKeys)) {
        continue;
      }
      std::vector<std::string> names(allowed.begin(), allowed.end());
      fail(field(path, key), fmt::format("unknown field (expected {})", join_list(names)));
    }
  }

  static const json* find(const json& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }

  const json& required(const json& object, const std::string& path, std::string_view key) const {
    const json* value = find(object, key);
    if (value == nullptr) fail(field(path, key), "missing");
    return *value;
  }

  std::string string(const json& value, const std::string& path) const {
    if (!value.is_string()) fail(path, json_reader::type_error("a string", value));
    return value.get<std::string>();
  }

  std::string name(const json& value, const std::string& path) const {
    std::string text = string(value, path);
    if (text.empty()) fail(path, "must not be empty");
    for (unsigned char c : text) {
      if (c < 0x20 || c == 0x7f) fail(path, fmt::format("{} contains a control character", quote_text(text)));
    }
    return text;
  }

  double number(const json& value, const std::string& path) const {
    if (!value.is_number()) fail(path, json_reader::type_error("a number", value));
    const double x = value.get<double>();
    if (!std::isfinite(x)) fail(path, "must be a finite number");
    return x;
  }

  // Bandwidths (GB/s) and latencies (µs) beyond kMaxFigure are typos; the cap
  // also keeps lanes × lane bandwidth finite.
  double positive(const json& value, const std::string& path) const {
    const double x = number(value, path);
    if (!(x > 0)) fail(path, fmt::format("must be > 0 (got {:g})", x));
    if (x < kMinBandwidth) fail(path, fmt::format("must be at least {:g} (got {:g})", kMinBandwidth, x));
    if (x > kMaxFigure) fail(path, fmt::format("must be at most {:g} (got {:g})", kMaxFigure, x));
    return x;
  }

  double non_negative(const json& value, const std::string& path) const {
    const double x = number(value, path);
    if (x < 0) fail(path, fmt::format("must be >= 0 (got {:g})", x));
    if (x > kMaxFigure) fail(path, fmt::format("must be at most {:g} (got {:g})", kMaxFigure, x));
    return x;
  }

  long long integer(const json& value, const std::string& path, long long lo, long long hi) const {
    if (!value.is_number_integer()) fail(path, json_reader::type_error("an integer", value));
    long long x = 0;
    if (value.is_number_unsigned()) {
      const auto u = value.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(hi)) fail(path, fmt::format("must be between {} and {} (got {})", lo, hi, u));
      x = static_cast<long long>(u);
    } else {
      x = value.get<long long>();
    }
    if (x < lo || x > hi) fail(path, fmt::format("must be between {} and {} (got {})", lo, hi, x));
    return x;
  }

  bool boolean(const json& value, const std::string& path) const {
    if (!value.is_boolean()) fail(path, json_reader::type_error("true or false", value));
    return value.get<bool>();
  }

  static std::string describe(const json& value) { return json_reader::describe(value); }

 private:
  std::string source_;
  fs::path base_dir_;
};

// A single machine (or a flat cluster from the full form) plus the NIC port
// speed the document states for joining it into clusters (0 when absent).
struct Loaded {
  Topology topo;
  double nic_bandwidth = 0;
};

/// Runs Topology's own checks (finalize) and names the source on failure.
void finalize_checked(Topology& topo, const Reader& reader, const std::string& path);
NetworkSpec parse_network(const json& value, const Reader& reader, const std::string& path, double default_nic);
/// A NIC's fabric: "ib" (a kind alone) or {"kind", "reported_latency_us", "extra_step_us", "efficiency",
/// "protocols"} (net_kind.hpp); fails naming the field.
NicNet parse_fabric(const json& value, const Reader& reader, const std::string& path);
/// The JSON of a stated fabric (the object form; parse_fabric reads it back).
json fabric_to_json(const NicNet& net);
/// Which link kinds may join which node kinds.
bool endpoint_allowed(LinkKind link, NodeKind node);
/// Fails when some device cannot be reached from the first one.
void check_connected(const Topology& topo, const std::vector<std::pair<int, int>>& edges, const Reader& reader,
                     const std::string& path);

/// The three forms (full.cpp, compact.cpp, sources.cpp) and the document that holds one of them.
Loaded parse_full(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name);
Loaded parse_compact(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name);
Loaded parse_cluster(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name);
Loaded parse_document(const json& doc, const Reader& reader, const std::string& path, bool allow_cluster);

/// Name resolution and generators (sources.cpp).
const std::map<std::string, std::string, std::less<>>& builtin_map();
std::string default_name_for(std::string_view source);
Loaded load_builtin(std::string_view name, bool allow_cluster);
Loaded load_file(const std::string& path, bool allow_cluster);
std::optional<Topology> generate(std::string_view spec);
/// The built-in names, comma-separated (for messages).
std::string builtin_list();
Loaded load_machine_reference(const std::string& spec, const Reader& reader, const std::string& path);

}  // namespace artune::io_detail
