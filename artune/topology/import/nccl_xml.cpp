// Importer of NCCL topology XML (the NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format).
//
// No XML parser is among the allowed dependencies, so a small strict reader
// handles the subset NCCL writes: an optional declaration, comments,
// elements, quoted attributes (with the five predefined entities and
// character references), self-closing tags and nesting. Anything else
// (text content, CDATA, DOCTYPE, mismatched tags) is an error with a line
// number.
//
// Mapping, as NCCL's own topology loader reads the file:
//   <cpu numaid>            → a CPU socket; every pair of sockets is joined by
//                             an SMP link at NCCL's rate for the CPU model
//   <pci class=0x0604xx>    → a PCIe switch (nesting gives switch trees)
//   <pci> holding <gpu>     → a GPU (local index by `dev`)
//   <pci> holding <nic>     → one NIC per <net> (port name in `arch`)
//   <nvlink tclass=0x068000>→ a link to the one merged NVSwitch node (NCCL
//                             merges all NVSwitches into one)
//   <nvlink> to a GPU       → a direct NVLink, `count` bonded lanes
// PCIe links take the bandwidth of the child's link_speed/link_width.

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/topology/import/util.hpp"
#include "artune/topology/import/importers.hpp"

namespace artune {
namespace {

using detail::parse_hex;
using detail::parse_long;

// ----------------------------------------------------------------------------
// The XML reader.

struct XmlElement {
  std::string name;
  int line = 0;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<XmlElement> children;

  const std::string* attr(std::string_view key) const {
    for (const auto& [k, v] : attrs)
      if (k == key) return &v;
    return nullptr;
  }
};

class XmlReader {
 public:
  XmlReader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  XmlElement read_document() {
    skip_blanks();
    if (starts_with("<?xml")) {
      std::size_t end = text_.find("?>", pos_);
      if (end == std::string_view::npos) fail(line_, "unterminated XML declaration");
      advance_to(end + 2);
    }
    skip_misc();
    if (at_end()) fail(line_, "no root element");
    if (peek() != '<') fail(line_, "text outside the root element");
    XmlElement root = read_element(0);
    skip_misc();
    if (!at_end()) fail(line_, "content after the root element");
    return root;
  }

  [[noreturn]] void fail(int line, const std::string& reason) const {
    throw InvalidInput(fmt::format("{}: line {}: {}", source_, line, reason));
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  void advance() {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }
  void advance_to(std::size_t end) {
    while (pos_ < end) advance();
  }
  static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
  void skip_blanks() {
    while (!at_end() && blank(peek())) advance();
  }
  // Blanks and comments between markup.
  void skip_misc() {
    for (;;) {
      skip_blanks();
      if (starts_with("<!--")) {
        const int start = line_;
        std::size_t end = text_.find("-->", pos_ + 4);
        if (end == std::string_view::npos) fail(start, "unterminated comment");
        advance_to(end + 3);
        continue;
      }
      if (starts_with("<?")) fail(line_, "processing instructions are not supported (only the leading <?xml … ?>)");
      if (starts_with("<!")) fail(line_, "DOCTYPE/CDATA sections are not supported");
      return;
    }
  }
  static bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '-' || c == '.';
  }
  std::string read_name(const char* what) {
    if (!name_start(peek()))
      fail(line_, at_end() ? fmt::format("unexpected end of input, expected {}", what)
                           : fmt::format("expected {}, found '{}'", what, detail::printable(text_.substr(pos_, 1))));
    std::size_t start = pos_;
    while (!at_end() && name_char(peek())) advance();
    return std::string(text_.substr(start, pos_ - start));
  }
  std::string read_value() {
    const char quote = peek();
    if (quote != '"' && quote != '\'') fail(line_, "attribute value must be quoted");
    advance();
    std::string out;
    for (;;) {
      if (at_end()) fail(line_, "unterminated attribute value");
      char c = peek();
      if (c == quote) {
        advance();
        return out;
      }
      if (c == '<') fail(line_, "'<' inside an attribute value");
      if (c == '&') {
        std::size_t semi = text_.find(';', pos_);
        if (semi == std::string_view::npos || semi - pos_ > 12) fail(line_, "unterminated entity reference");
        std::string_view ent = text_.substr(pos_ + 1, semi - pos_ - 1);
        if (ent == "amp")
          out += '&';
        else if (ent == "lt")
          out += '<';
        else if (ent == "gt")
          out += '>';
        else if (ent == "quot")
          out += '"';
        else if (ent == "apos")
          out += '\'';
        else if (ent.size() > 1 && ent[0] == '#') {
          std::optional<long> code = ent[1] == 'x' ? parse_hex(ent.substr(2)) : parse_long(ent.substr(1));
          if (!code || *code <= 0 || *code > 0x7f)
            fail(line_, fmt::format("unsupported character reference &{};", detail::printable(ent)));
          out += static_cast<char>(*code);
        } else {
          fail(line_, fmt::format("unknown entity &{};", detail::printable(ent)));
        }
        advance_to(semi + 1);
        continue;
      }
      out += c;
      advance();
    }
  }

  XmlElement read_element(int depth) {
    if (depth > kMaxDepth) fail(line_, fmt::format("elements nested deeper than {}", kMaxDepth));
    XmlElement el;
    el.line = line_;
    advance();  // '<'
    el.name = read_name("an element name");
    for (;;) {
      const bool had_blank = !at_end() && blank(peek());
      skip_blanks();
      if (at_end()) fail(el.line, fmt::format("unterminated <{}> tag", el.name));
      if (starts_with("/>")) {
        advance_to(pos_ + 2);
        return el;
      }
      if (peek() == '>') {
        advance();
        break;
      }
      if (!had_blank) fail(line_, fmt::format("expected a blank before the next attribute of <{}>", el.name));
      const int attr_line = line_;
      std::string key = read_name("an attribute name");
      skip_blanks();
      if (peek() != '=') fail(line_, fmt::format("attribute '{}' of <{}> has no value", key, el.name));
      advance();
      skip_blanks();
      std::string value = read_value();
      if (el.attr(key)) fail(attr_line, fmt::format("duplicate attribute '{}' in <{}>", key, el.name));
      el.attrs.emplace_back(std::move(key), std::move(value));
    }
    // Content: children, blanks and comments only.
    for (;;) {
      skip_misc();
      if (at_end()) fail(el.line, fmt::format("<{}> is never closed", el.name));
      if (starts_with("</")) {
        const int close_line = line_;
        advance_to(pos_ + 2);
        std::string name = read_name("a closing tag name");
        skip_blanks();
        if (peek() != '>') fail(line_, fmt::format("malformed closing tag </{}", name));
        advance();
        if (name != el.name)
          fail(close_line, fmt::format("closing tag </{}> does not match <{}> of line {}", name, el.name, el.line));
        return el;
      }
      if (peek() == '<') {
        el.children.push_back(read_element(depth + 1));
        continue;
      }
      fail(line_, fmt::format("unexpected text inside <{}>", el.name));
    }
  }

  std::string_view text_;
  std::string source_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// ----------------------------------------------------------------------------
// Mapping to the model.

constexpr long kNvSwitchClass = 0x068000;
constexpr long kCpuClass = 0x060000;

struct Parent {
  bool is_switch = false;
  int index = 0;  // cpu or switch index
};

struct XCpu {
  int numaid = 0;
  double smp_gbps = 6.0;
  std::string arch;  // the node's arch (parse_cpu_arch) from <cpu arch= vendor=>
  int line = 0;
};

struct XSwitch {
  Parent parent;
  double bw = 0;
  int line = 0;
};

struct XNvLink {
  std::string target;
  int count = 0;
  long tclass = 0;
  int line = 0;
};

struct XGpu {
  int dev = -1;
  int sm = 0;
  std::string bus_id;
  Parent parent;
  int cpu = 0;
  double bw = 0;
  int line = 0;
  std::vector<XNvLink> links;
};

struct XNic {
  std::string name;
  long speed_mbps = 0;
  std::string bus_id;
  Parent parent;
  double bw = 0;
  int line = 0;
  double latency_us = -1;  // the net plugin's reported latency (NCCL's <net latency=>), -1 = not given
};

class XmlImporter {
 public:
  XmlImporter(std::string_view text, std::string_view source) : reader_(text, source), source_(source) {}

  Topology run() {
    XmlElement root = reader_.read_document();
    if (root.name != "system") fail(root.line, fmt::format("root element is <{}>, expected <system>", root.name));
    for (const auto& child : root.children) {
      if (child.name != "cpu")
        fail(child.line, fmt::format("unexpected <{}> in <system> (expected <cpu>)", child.name));
      read_cpu(child);
    }
    if (gpus_.empty()) fail(root.line, "no GPU in the topology (no <gpu> element or NVIDIA display-class <pci>)");
    return build();
  }

 private:
  [[noreturn]] void fail(int line, const std::string& reason) const { reader_.fail(line, reason); }

  const std::string& required(const XmlElement& el, std::string_view key) const {
    const std::string* v = el.attr(key);
    if (!v) fail(el.line, fmt::format("<{}> has no '{}' attribute", el.name, key));
    return *v;
  }
  int int_attr(const XmlElement& el, std::string_view key, long min, long max) const {
    const std::string& text = required(el, key);
    auto v = parse_long(text);
    if (!v || *v < min || *v > max)
      fail(el.line, fmt::format("<{}> {}=\"{}\": expected an integer in [{}, {}]", el.name, key,
                                detail::printable(text), min, max));
    return static_cast<int>(*v);
  }
  long hex_attr(const XmlElement& el, std::string_view key) const {
    const std::string& text = required(el, key);
    auto v = parse_hex(text);
    if (!v) fail(el.line, fmt::format("<{}> {}=\"{}\": expected a hex number", el.name, key, detail::printable(text)));
    return *v;
  }
  std::string bus_attr(const XmlElement& el, std::string_view key) const {
    const std::string& text = required(el, key);
    auto v = detail::normalize_bus_id(text);
    if (!v)
      fail(el.line, fmt::format("<{}> {}=\"{}\": expected a PCI bus id such as 0000:06:00.0", el.name, key,
                                detail::printable(text)));
    return *v;
  }

  void read_cpu(const XmlElement& el) {
    XCpu cpu;
    cpu.numaid = int_attr(el, "numaid", 0, 4095);
    cpu.line = el.line;
    for (const auto& other : cpus_)
      if (other.numaid == cpu.numaid) fail(el.line, fmt::format("duplicate <cpu numaid=\"{}\">", cpu.numaid));
    auto text = [&](std::string_view key) {
      const std::string* v = el.attr(key);
      return v ? *v : std::string();
    };
    auto number = [&](std::string_view key) -> int {
      const std::string* v = el.attr(key);
      if (!v || v->empty()) return -1;
      auto n = v->rfind("0x", 0) == 0 ? parse_hex(*v) : parse_long(*v);
      if (!n) fail(el.line, fmt::format("<cpu> {}=\"{}\": expected a number", key, detail::printable(*v)));
      return static_cast<int>(*n);
    };
    cpu.smp_gbps = smp_bandwidth_gbps(text("arch"), text("vendor"), number("familyid"), number("modelid"));
    cpu.arch = cpu_arch_from_nccl(text("arch"), text("vendor"));
    const int index = static_cast<int>(cpus_.size());
    cpus_.push_back(cpu);
    const Parent parent{false, index};
    for (const auto& child : el.children) {
      if (child.name == "pci")
        read_pci(child, parent, index);
      else if (child.name == "nic")
        read_nic(child, parent, detail::kPcieGen3x16Gbps, "");
      else
        fail(child.line, fmt::format("unexpected <{}> in <cpu> (expected <pci> or <nic>)", child.name));
    }
  }

  double pci_bandwidth(const XmlElement& el) const {
    const std::string* speed = el.attr("link_speed");
    const std::string* width = el.attr("link_width");
    double gts = 8.0;
    int lanes = 16;
    auto unknown = [](const std::string& s) {
      std::string lower;
      for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return detail::trim(lower).empty() || lower.find("unknown") != std::string::npos;
    };
    if (speed && !unknown(*speed)) {
      auto v = parse_pcie_link_speed(*speed);
      if (!v)
        fail(el.line,
             fmt::format("<pci> link_speed=\"{}\": expected 2.5, 5, 8, 16, 32 or 64 GT/s", detail::printable(*speed)));
      gts = *v;
    }
    if (width && !detail::trim(*width).empty()) {
      auto v = parse_long(detail::trim(*width));
      if (!v || *v < 0 || *v > 32)
        fail(el.line, fmt::format("<pci> link_width=\"{}\": expected 1…32", detail::printable(*width)));
      if (*v > 0) lanes = static_cast<int>(*v);
    }
    return pcie_bandwidth_gbps(gts, lanes);
  }

  void read_pci(const XmlElement& el, Parent parent, int cpu) {
    const std::string bus_id = bus_attr(el, "busid");
    const long cls = hex_attr(el, "class");
    if (!bus_ids_.insert(bus_id).second) fail(el.line, fmt::format("duplicate <pci busid=\"{}\">", bus_id));
    const double bw = pci_bandwidth(el);
    if ((cls >> 8) == 0x0604) {
      const int index = static_cast<int>(switches_.size());
      switches_.push_back({parent, bw, el.line});
      for (const auto& child : el.children) {
        if (child.name != "pci")
          fail(child.line, fmt::format("unexpected <{}> in PCIe bridge {} (expected <pci>)", child.name, bus_id));
        read_pci(child, Parent{true, index}, cpu);
      }
      return;
    }
    bool has_gpu = false, has_nic = false;
    for (const auto& child : el.children) {
      if (child.name == "gpu") {
        if (has_gpu) fail(child.line, fmt::format("second <gpu> in <pci busid=\"{}\">", bus_id));
        has_gpu = true;
        read_gpu(child, bus_id, parent, cpu, bw);
      } else if (child.name == "nic") {
        if (has_nic) fail(child.line, fmt::format("second <nic> in <pci busid=\"{}\">", bus_id));
        has_nic = true;
        read_nic(child, parent, bw, bus_id);
      } else if (child.name == "pci") {
        fail(child.line,
             fmt::format("<pci busid=\"{}\"> of class 0x{:06x} holds a <pci>: only bridges (class 0x0604xx) nest",
                         bus_id, cls));
      } else {
        fail(child.line, fmt::format("unexpected <{}> in <pci busid=\"{}\">", child.name, bus_id));
      }
    }
    if (has_gpu || has_nic) return;
    const std::string* vendor = el.attr("vendor");
    auto vendor_id = vendor ? parse_hex(*vendor) : std::nullopt;
    if ((cls >> 16) == 0x03 && vendor_id && *vendor_id == 0x10de) {
      // A GPU the file lists without its <gpu> details (NCCL fills those in at run time).
      XGpu gpu;
      gpu.bus_id = bus_id;
      gpu.parent = parent;
      gpu.cpu = cpu;
      gpu.bw = bw;
      gpu.line = el.line;
      gpus_.push_back(gpu);
      return;
    }
    if ((cls >> 16) == 0x02) {
      nics_.push_back({"", 0, bus_id, parent, bw, el.line});
      return;
    }
    ++skipped_pci_;
  }

  void read_gpu(const XmlElement& el, const std::string& bus_id, Parent parent, int cpu, double bw) {
    XGpu gpu;
    gpu.dev = int_attr(el, "dev", 0, 4095);
    if (el.attr("sm")) gpu.sm = int_attr(el, "sm", 10, 200);
    gpu.bus_id = bus_id;
    gpu.parent = parent;
    gpu.cpu = cpu;
    gpu.bw = bw;
    gpu.line = el.line;
    for (const auto& other : gpus_)
      if (other.dev == gpu.dev)
        fail(el.line, fmt::format("duplicate <gpu dev=\"{}\"> (first on line {})", gpu.dev, other.line));
    std::set<std::string> targets;
    for (const auto& child : el.children) {
      if (child.name == "c2c") {
        ++skipped_c2c_;
        continue;
      }
      if (child.name != "nvlink")
        fail(child.line, fmt::format("unexpected <{}> in <gpu> (expected <nvlink>)", child.name));
      XNvLink link;
      link.target = bus_attr(child, "target");
      link.count = int_attr(child, "count", 1, 64);
      link.tclass = child.attr("tclass") ? hex_attr(child, "tclass") : 0x030200;
      link.line = child.line;
      if (link.target == bus_id) fail(child.line, "<nvlink> targets its own GPU");
      if (!targets.insert(link.target).second)
        fail(child.line, fmt::format("duplicate <nvlink target=\"{}\">", link.target));
      gpu.links.push_back(link);
    }
    gpus_.push_back(std::move(gpu));
  }

  void read_nic(const XmlElement& el, Parent parent, double bw, const std::string& bus_id) {
    bool any = false;
    for (const auto& child : el.children) {
      if (child.name != "net") fail(child.line, fmt::format("unexpected <{}> in <nic> (expected <net>)", child.name));
      XNic nic;
      if (const std::string* name = child.attr("name")) nic.name = *name;
      if (child.attr("speed")) nic.speed_mbps = int_attr(child, "speed", 0, 100000000);
      // NCCL writes the net plugin's reported latency (src/graph/topo.cc, <net latency=>): NCCL adds it to each
      // network step of its cost table (net_kind.hpp).
      if (const std::string* lat = child.attr("latency")) {
        char* end = nullptr;
        const double v = std::strtod(lat->c_str(), &end);
        if (lat->empty() || end != lat->c_str() + lat->size() || !(v >= 0) || v > 1e6)
          fail(child.line,
               fmt::format("<net> latency=\"{}\": expected a number of µs in [0, 1e6]", detail::printable(*lat)));
        nic.latency_us = v;
      }
      nic.bus_id = bus_id;
      nic.parent = parent;
      nic.bw = bw;
      nic.line = child.line;
      nics_.push_back(nic);
      any = true;
    }
    if (!any) nics_.push_back({"", 0, bus_id, parent, bw, el.line});
  }

  Topology build() {
    Topology topo;
    // GPUs: local index in `dev` order; GPUs listed without <gpu> follow in file order.
    std::vector<int> order(gpus_.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      auto key = [&](int g) { return gpus_[g].dev < 0 ? 1 << 30 : gpus_[g].dev; };
      return key(a) < key(b);
    });
    std::vector<int> gpu_node(gpus_.size());
    std::map<std::string, int> gpu_by_bus;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const XGpu& g = gpus_[order[k]];
      Node node;
      node.id = fmt::format("gpu{}", k);
      node.kind = NodeKind::kGpu;
      node.local_index = static_cast<int>(k);
      node.bus_id = g.bus_id;
      if (g.sm > 0) node.arch = fmt::format("sm{}", g.sm);
      gpu_node[order[k]] = topo.add_node(node);
      gpu_by_bus[g.bus_id] = order[k];
    }
    std::vector<int> cpu_node(cpus_.size());
    for (std::size_t k = 0; k < cpus_.size(); ++k) {
      cpu_node[k] = detail::add_local_node(topo, NodeKind::kCpu, fmt::format("cpu{}", cpus_[k].numaid),
                                           static_cast<int>(k), cpus_[k].arch);
    }
    std::vector<int> switch_node(switches_.size());
    for (std::size_t k = 0; k < switches_.size(); ++k) {
      switch_node[k] =
          detail::add_local_node(topo, NodeKind::kPcieSwitch, fmt::format("pcisw{}", k), static_cast<int>(k));
    }
    auto up = [&](Parent p) { return p.is_switch ? switch_node[p.index] : cpu_node[p.index]; };
    for (std::size_t k = 0; k < switches_.size(); ++k)
      topo.add_duplex_link(switch_node[k], up(switches_[k].parent), LinkKind::kPcie, switches_[k].bw,
                           detail::kPcieLatencyUs);
    for (std::size_t k = 0; k < gpus_.size(); ++k)
      topo.add_duplex_link(gpu_node[k], up(gpus_[k].parent), LinkKind::kPcie, gpus_[k].bw, detail::kPcieLatencyUs);

    // NVLinks. Pairs are recorded once, checked against the peer's own list.
    std::map<std::pair<int, int>, std::pair<int, int>> pair_count;  // (lo, hi) → (count, line)
    std::vector<int> switch_lanes(gpus_.size(), 0);
    int ignored = 0;
    std::set<std::string> ignored_targets;
    auto lane_bw = [&](int a, int b) {
      int sa = gpus_[a].sm, sb = b >= 0 ? gpus_[b].sm : 0;
      double ba = nvlink_lane_bandwidth_gbps(sa), bb = nvlink_lane_bandwidth_gbps(sb);
      return std::min(ba, b >= 0 ? bb : ba);
    };
    int nvswitch = -1;
    int nvlinks = 0;
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      for (const XNvLink& l : gpus_[g].links) {
        if (l.tclass == kNvSwitchClass) {
          switch_lanes[g] += l.count;
          continue;
        }
        if (l.tclass == kCpuClass) {
          const int cpu = gpus_[g].cpu;
          topo.add_duplex_link(gpu_node[g], cpu_node[cpu], LinkKind::kNvLink,
                               l.count * lane_bw(static_cast<int>(g), -1), detail::kNvLinkLatencyUs, l.count);
          continue;
        }
        auto it = gpu_by_bus.find(l.target);
        if (it == gpu_by_bus.end()) {
          // A GPU-class NVLink to a device the file lists as a NIC is a broken file, not a GPU left out.
          for (const XNic& nic : nics_) {
            if (!nic.bus_id.empty() && nic.bus_id == l.target)
              fail(l.line, fmt::format("<nvlink target=\"{}\"> names a NIC, not a GPU", l.target));
          }
          // NCCL skips NVLinks to GPUs the file does not list; so do we, and the description says which.
          ++ignored;
          ignored_targets.insert(l.target);
          continue;
        }
        const int t = it->second;
        auto key = std::make_pair(std::min<int>(static_cast<int>(g), t), std::max<int>(static_cast<int>(g), t));
        auto found = pair_count.find(key);
        if (found == pair_count.end()) {
          pair_count[key] = {l.count, l.line};
        } else if (found->second.first != l.count) {
          fail(l.line,
               fmt::format("asymmetric NVLink counts: GPU {} lists {} link(s) to {}, but GPU {} lists {} (line {})",
                           gpus_[g].bus_id, l.count, l.target, l.target, found->second.first, found->second.second));
        }
      }
    }
    for (const auto& [key, value] : pair_count) {
      topo.add_duplex_link(gpu_node[key.first], gpu_node[key.second], LinkKind::kNvLink,
                           value.first * lane_bw(key.first, key.second), detail::kNvLinkLatencyUs, value.first);
      nvlinks += value.first;
    }
    if (std::any_of(switch_lanes.begin(), switch_lanes.end(), [](int n) { return n > 0; })) {
      Node node;
      node.id = "nvswitch0";
      node.kind = NodeKind::kNvSwitch;
      node.local_index = 0;
      nvswitch = topo.add_node(node);
      for (std::size_t g = 0; g < gpus_.size(); ++g) {
        if (!switch_lanes[g]) continue;
        topo.add_duplex_link(gpu_node[g], nvswitch, LinkKind::kNvLink,
                             switch_lanes[g] * lane_bw(static_cast<int>(g), -1), detail::kNvLinkLatencyUs,
                             switch_lanes[g]);
        nvlinks += switch_lanes[g];
      }
    }
    std::string nic_speeds;
    for (std::size_t k = 0; k < nics_.size(); ++k) {
      Node node;
      node.id = fmt::format("nic{}", k);
      node.kind = NodeKind::kNic;
      node.local_index = static_cast<int>(k);
      node.arch = nics_[k].name;
      node.bus_id = nics_[k].bus_id;
      if (nics_[k].latency_us > 0) node.net.reported_latency_us = nics_[k].latency_us;
      int n = topo.add_node(node);
      topo.add_duplex_link(n, up(nics_[k].parent), LinkKind::kPcie, nics_[k].bw, detail::kPcieLatencyUs);
      if (nics_[k].speed_mbps > 0)
        nic_speeds += fmt::format("{}{} {:g} GB/s", nic_speeds.empty() ? "; NIC rates: " : ", ",
                                  nics_[k].name.empty() ? node.id : nics_[k].name, nics_[k].speed_mbps / 8000.0);
    }
    for (std::size_t a = 0; a < cpus_.size(); ++a)
      for (std::size_t b = a + 1; b < cpus_.size(); ++b)
        topo.add_duplex_link(cpu_node[a], cpu_node[b], LinkKind::kSmp, std::min(cpus_[a].smp_gbps, cpus_[b].smp_gbps),
                             detail::kSmpLatencyUs);

    std::string extra;
    if (ignored) {
      std::string which;
      int listed = 0;
      for (const auto& t : ignored_targets) {
        if (listed++ == 4) {
          which += ", …";
          break;
        }
        which += (which.empty() ? "" : ", ") + t;
      }
      extra += fmt::format("; {} NVLink target(s) not in the file ignored ({}; NCCL skips them too)", ignored, which);
    }
    if (skipped_pci_) extra += fmt::format("; {} other PCI device(s) skipped", skipped_pci_);
    if (skipped_c2c_) extra += fmt::format("; {} C2C link(s) not modelled", skipped_c2c_);
    topo.set_name(detail::source_stem(source_, "nccl-xml"));
    topo.set_description(fmt::format(
        "imported from NCCL topology XML ({}): {} GPUs, {} NVLinks{}, {} NICs, {} CPUs, {} PCIe switches{}{}", source_,
        gpus_.size(), nvlinks, nvswitch >= 0 ? " (via one merged NVSwitch)" : "", nics_.size(), cpus_.size(),
        switches_.size(), nic_speeds, extra));
    topo.finalize();
    return topo;
  }

  XmlReader reader_;
  std::string source_;
  std::vector<XCpu> cpus_;
  std::vector<XSwitch> switches_;
  std::vector<XGpu> gpus_;
  std::vector<XNic> nics_;
  std::set<std::string> bus_ids_;
  int skipped_pci_ = 0;
  int skipped_c2c_ = 0;
};

}  // namespace

Topology import_nccl_xml(std::string_view text, std::string_view source) { return XmlImporter(text, source).run(); }

}  // namespace artune
