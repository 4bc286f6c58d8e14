// Helpers shared by the importers and discovery (see import/util.hpp).
#include "artune/topology/import/util.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "artune/core/output_file.hpp"
#include "artune/topology/import/importers.hpp"

namespace artune {
namespace detail {

namespace {
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }
}  // namespace

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> split_blanks(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_blank(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_blank(text[i])) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      if (start < text.size()) out.push_back(text.substr(start));
      break;
    }
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    start = end + 1;
  }
  return out;
}

std::string printable(std::string_view text) {
  // At most 40 characters (UTF-8 continuation bytes do not count), control characters escaped.
  std::size_t shown = 0, end = 0;
  for (; end < text.size(); ++end) {
    if ((static_cast<unsigned char>(text[end]) & 0xc0) != 0x80 && ++shown > 40) break;
  }
  return escape_control(text.substr(0, end)) + (end < text.size() ? "…" : "");
}

std::string source_stem(std::string_view source, std::string_view fallback) {
  std::string stem = std::filesystem::path(std::string(source)).stem().string();
  return stem.empty() ? std::string(fallback) : stem;
}

std::optional<long> parse_long(std::string_view text) {
  long value = 0;
  if (text.empty()) return std::nullopt;
  const char* first = text.data();
  if (*first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<long> parse_hex(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  if (text.empty()) return std::nullopt;
  long value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<std::string> normalize_bus_id(std::string_view text) {
  text = trim(text);
  // [domain:]bus:device.function, all hex.
  std::size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view head = text.substr(0, dot);
  std::string_view fn_text = text.substr(dot + 1);
  std::size_t c2 = head.rfind(':');
  if (c2 == std::string_view::npos) return std::nullopt;
  std::string_view dev_text = head.substr(c2 + 1);
  head = head.substr(0, c2);
  std::string_view bus_text = head;
  std::string_view dom_text = "0";
  if (std::size_t c1 = head.rfind(':'); c1 != std::string_view::npos) {
    bus_text = head.substr(c1 + 1);
    dom_text = head.substr(0, c1);
  }
  auto dom = parse_hex(dom_text), bus = parse_hex(bus_text), dev = parse_hex(dev_text), fn = parse_hex(fn_text);
  if (!dom || !bus || !dev || !fn || *dom > 0xffffffffL || *bus > 0xff || *dev > 0x1f || *fn > 7) return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", *dom, *bus, *dev, *fn);
}

int add_local_node(Topology& topo, NodeKind kind, std::string id, int local_index, std::string arch) {
  Node node;
  node.id = std::move(id);
  node.kind = kind;
  node.local_index = local_index;
  node.arch = std::move(arch);
  return topo.add_node(std::move(node));
}

}  // namespace detail

namespace {
// NVLink lanes per GPU and their rate: configs/HARDWARE.md (P100 4 × 20 GB/s; V100 6 × 25; A100 12 × 25;
// H100 and H200 18 × 25, NVLink 4; B200 18 × 50, NVLink 5). PCIe x16: Gen3 12, Gen4 24, Gen5 48 GB/s.
constexpr GpuGeneration kGpuGenerations[] = {
    {"p100", "sm60", 20.0, 4, 12.0},  {"v100", "sm70", 25.0, 6, 12.0},  {"a100", "sm80", 25.0, 12, 24.0},
    {"h100", "sm90", 25.0, 18, 48.0}, {"h200", "sm90", 25.0, 18, 48.0}, {"b200", "sm100", 50.0, 18, 48.0}};
}  // namespace

std::span<const GpuGeneration> gpu_generations() { return kGpuGenerations; }

const GpuGeneration* find_gpu_generation(std::string_view name) {
  for (const GpuGeneration& g : kGpuGenerations) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

int max_nvlink_lanes_per_gpu() {
  int lanes = 0;
  for (const GpuGeneration& g : kGpuGenerations) lanes = std::max(lanes, g.lanes_per_gpu);
  return lanes;
}

std::optional<double> parse_pcie_link_speed(std::string_view text) {
  auto words = detail::split_blanks(text);
  if (words.empty()) return std::nullopt;
  std::string_view number = words[0];
  // "8GT/s" written without a blank.
  if (std::size_t gt = number.find("GT/s"); gt != std::string_view::npos) number = number.substr(0, gt);
  auto value = detail::parse_double(number);
  if (!value) return std::nullopt;
  for (double known : {2.5, 5.0, 8.0, 16.0, 32.0, 64.0}) {
    if (std::fabs(*value - known) < 1e-6) return known;
  }
  return std::nullopt;
}

double pcie_bandwidth_gbps(double gts, int width) {
  // NCCL's table: usable GB/s = width · value / 80 (Gen3: 16 · 60 / 80 = 12).
  static constexpr struct {
    double gts;
    int value;
  } kTable[] = {{2.5, 15}, {5.0, 30}, {8.0, 60}, {16.0, 120}, {32.0, 240}, {64.0, 480}};
  if (width <= 0) return 0;
  for (const auto& row : kTable) {
    if (std::fabs(row.gts - gts) < 1e-6) return width * row.value / 80.0;
  }
  return 0;
}

double nvlink_lane_bandwidth_gbps(int sm) {
  return sm > 0 && sm < 70 ? detail::kNvLink1LaneGbps : detail::kNvLink2LaneGbps;
}

double smp_bandwidth_gbps(std::string_view arch, std::string_view vendor, int family, int model) {
  if (arch == "ppc64" || arch == "ppc64le") return 32.0;
  if (vendor == "AuthenticAMD") return 16.0;
  if (vendor == "GenuineIntel") return family == 6 && model >= 0x55 ? 10.0 : detail::kQpiGbps;
  return detail::kQpiGbps;
}

}  // namespace artune
