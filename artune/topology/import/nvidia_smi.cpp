// Importer of `nvidia-smi topo -m` text.
//
// The matrix gives, for every pair of devices, either the number of bonded
// NVLinks (NV#) or the PCIe class of the path between them. NVLinks become
// links directly. The PCIe tree is not printed, so it is rebuilt as the
// smallest tree that reproduces every PCIe class the text does print:
//   - sockets: devices joined by PIX/PXB/PHB/NODE share a socket, SYS pairs
//     never do; devices the classes leave open (e.g. NVLink pairs) join by CPU
//     affinity, then the first socket they do not contradict;
//   - PIX groups (union of PIX pairs) sit under one PCIe switch;
//   - PIX groups joined by PXB hang from one parent switch;
//   - everything else attaches to its socket directly (PHB/NODE).
// The rebuilt tree is then checked against every printed class, so
// contradictory input fails instead of importing as a wrong machine.

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "artune/core/error.hpp"
#include "artune/topology/import/util.hpp"
#include "artune/topology/import/importers.hpp"

namespace artune {
namespace {

using detail::parse_long;
using detail::split_blanks;
using detail::trim;

// A machine has at most this many GPUs (as the JSON loader's compact form); the
// matrix is columns² cells, so the caps also bound the work.
constexpr int kMaxGpus = 1024;
constexpr std::size_t kMaxColumns = 2048;

enum class Cls { kSelf, kNv, kPix, kPxb, kPhb, kNode, kSys };

struct Cell {
  Cls cls = Cls::kSelf;
  int nv = 0;
};

struct Column {
  std::string name;
  bool gpu = false;
  int number = -1;  // N of GPU<N>
};

struct Row {
  int line = 0;
  std::vector<Cell> cells;
  std::string cpu_affinity;
  std::string numa_affinity;
};

class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int x) { return parent_[x] == x ? x : parent_[x] = find(parent_[x]); }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<int> parent_;
};

std::string_view cls_name(const Cell& c) {
  switch (c.cls) {
    case Cls::kSelf: return "X";
    case Cls::kNv: return "NV";
    case Cls::kPix: return "PIX";
    case Cls::kPxb: return "PXB";
    case Cls::kPhb: return "PHB";
    case Cls::kNode: return "NODE";
    case Cls::kSys: return "SYS";
  }
  return "?";
}

std::string cell_text(const Cell& c) {
  return c.cls == Cls::kNv ? fmt::format("NV{}", c.nv) : std::string(cls_name(c));
}

std::optional<Cell> parse_cell(std::string_view t) {
  if (t == "X") return Cell{Cls::kSelf, 0};
  if (t == "PIX") return Cell{Cls::kPix, 0};
  if (t == "PXB") return Cell{Cls::kPxb, 0};
  if (t == "PHB") return Cell{Cls::kPhb, 0};
  if (t == "NODE") return Cell{Cls::kNode, 0};
  if (t == "SYS" || t == "SOC") return Cell{Cls::kSys, 0};
  if (t.size() > 2 && t.substr(0, 2) == "NV") {
    auto n = parse_long(t.substr(2));
    if (n && *n >= 1 && *n <= 64 && t[2] != '+') return Cell{Cls::kNv, static_cast<int>(*n)};
  }
  return std::nullopt;
}

bool is_device_name(std::string_view t) {
  if (t.empty() || !(std::isalpha(static_cast<unsigned char>(t[0])))) return false;
  return std::all_of(t.begin(), t.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  });
}

// Header words with the multi-word column names put back together.
std::vector<std::string> header_words(std::string_view line) {
  auto words = split_blanks(line);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    auto at = [&](std::size_t k) { return i + k < words.size() ? words[i + k] : std::string_view(); };
    if (at(0) == "CPU" && at(1) == "Affinity") {
      out.emplace_back("CPU Affinity");
      i += 1;
    } else if (at(0) == "NUMA" && at(1) == "Affinity") {
      out.emplace_back("NUMA Affinity");
      i += 1;
    } else if (at(0) == "GPU" && at(1) == "NUMA" && at(2) == "ID") {
      out.emplace_back("GPU NUMA ID");
      i += 2;
    } else {
      out.emplace_back(words[i]);
    }
  }
  return out;
}

bool is_affinity_column(std::string_view w) {
  return w == "CPU Affinity" || w == "NUMA Affinity" || w == "GPU NUMA ID";
}

std::optional<int> gpu_number(std::string_view name) {
  if (name.size() < 4 || name.substr(0, 3) != "GPU") return std::nullopt;
  auto n = parse_long(name.substr(3));
  if (!n || *n < 0 || *n > 4095 || name[3] == '+') return std::nullopt;
  return static_cast<int>(*n);
}

class SmiImporter {
 public:
  SmiImporter(std::string_view text, std::string_view source, const NvidiaSmiImportOptions& options)
      : text_(text), source_(source), options_(options) {}

  Topology run() {
    parse();
    assign_sockets();
    build_pcie_tree();
    check_classes();
    return build();
  }

 private:
  [[noreturn]] void fail(int line, const std::string& reason) const {
    throw InvalidInput(fmt::format("{}: line {}: {}", source_, line, reason));
  }

  void parse() {
    auto lines = detail::split_lines(text_);
    std::size_t i = 0;
    while (i < lines.size() && trim(lines[i]).empty()) ++i;
    if (i == lines.size())
      fail(static_cast<int>(lines.size()) + (lines.empty() ? 1 : 0), "empty input: no `nvidia-smi topo -m` matrix");
    header_line_ = static_cast<int>(i) + 1;
    auto words = header_words(lines[i]);
    bool in_affinity = false;
    int gpu_columns = 0;
    for (const auto& w : words) {
      if (is_affinity_column(w)) {
        if (std::find(affinity_columns_.begin(), affinity_columns_.end(), w) != affinity_columns_.end())
          fail(header_line_, fmt::format("duplicate column '{}'", w));
        affinity_columns_.push_back(w);
        in_affinity = true;
        continue;
      }
      if (in_affinity || !is_device_name(w))
        fail(header_line_, fmt::format("unknown column '{}' in the header row", detail::printable(w)));
      if (column_index_.count(w)) fail(header_line_, fmt::format("duplicate column '{}'", w));
      Column col;
      col.name = w;
      if (auto n = gpu_number(w)) {
        col.gpu = true;
        col.number = *n;
        if (++gpu_columns > kMaxGpus)
          fail(header_line_, fmt::format("more than {} GPU columns: artune supports at most {} GPUs per machine",
                                         kMaxGpus, kMaxGpus));
      } else if (w.size() >= 3 && w.substr(0, 3) == "GPU") {
        fail(header_line_, fmt::format("bad GPU column name '{}'", detail::printable(w)));
      }
      column_index_[w] = static_cast<int>(columns_.size());
      columns_.push_back(col);
      if (columns_.size() > kMaxColumns)
        fail(header_line_, fmt::format("more than {} device columns (GPUs and NICs) in the header row", kMaxColumns));
    }
    if (columns_.empty()) fail(header_line_, "header row names no devices (expected GPU0 GPU1 …)");
    const int n = static_cast<int>(columns_.size());
    rows_.assign(n, Row{});

    // Matrix rows: up to the blank line before "Legend:".
    ++i;
    int rows_seen = 0;
    for (; i < lines.size(); ++i) {
      std::string_view line = trim(lines[i]);
      if (line.empty() || line.substr(0, 6) == "Legend") break;
      const int lineno = static_cast<int>(i) + 1;
      auto words = split_blanks(line);
      std::string name(words[0]);
      auto it = column_index_.find(name);
      if (it == column_index_.end())
        fail(lineno, fmt::format("row '{}' is not a column of the header", detail::printable(name)));
      Row& row = rows_[it->second];
      if (row.line) fail(lineno, fmt::format("duplicate row '{}' (first on line {})", name, row.line));
      row.line = lineno;
      ++rows_seen;
      int cells = 0;
      while (1 + cells < static_cast<int>(words.size()) && parse_cell(words[1 + cells])) ++cells;
      if (cells < n) {
        // Too few cells when what follows can only be the affinity values; otherwise a bad cell.
        const std::size_t rest = words.size() - 1 - cells;
        const bool short_row =
            rest <= affinity_columns_.size() &&
            (rest == 0 || std::isdigit(static_cast<unsigned char>(words[1 + cells][0])) || words[1 + cells] == "N/A");
        if (short_row)
          fail(lineno, fmt::format("row {} has {} cells, expected {} (matrix not square)", name, cells, n));
        fail(lineno, fmt::format("unknown cell '{}' in row {}, column {}", detail::printable(words[1 + cells]), name,
                                 columns_[cells].name));
      }
      for (int c = 0; c < n; ++c) row.cells.push_back(*parse_cell(words[1 + c]));
      std::size_t extra = words.size() - 1 - n;
      if (extra > affinity_columns_.size()) {
        if (affinity_columns_.empty() || parse_cell(words[1 + n]))
          fail(lineno, fmt::format("row {} has {} cells, expected {} (matrix not square)", name, words.size() - 1, n));
        fail(lineno, fmt::format("row {} has {} values after the matrix, the header names {} affinity column(s)", name,
                                 extra, affinity_columns_.size()));
      }
      for (std::size_t k = 0; k < extra; ++k) {
        std::string value(words[1 + n + k]);
        if (affinity_columns_[k] == "CPU Affinity") row.cpu_affinity = value;
        if (affinity_columns_[k] == "NUMA Affinity") row.numa_affinity = value;
      }
    }
    matrix_end_line_ = static_cast<int>(i) + 1;
    if (rows_seen == 0) fail(matrix_end_line_, "no matrix rows after the header");
    for (int c = 0; c < n; ++c) {
      if (!rows_[c].line)
        fail(matrix_end_line_, fmt::format("column {} has no row ({} columns, {} rows: matrix not square)",
                                           columns_[c].name, n, rows_seen));
    }

    // Optional "NIC Legend:" block: NIC0: mlx5_0.
    for (; i < lines.size(); ++i) {
      if (trim(lines[i]) != "NIC Legend:") continue;
      for (++i; i < lines.size(); ++i) {
        std::string_view line = trim(lines[i]);
        if (line.empty()) {
          if (nic_legend_.empty()) continue;
          break;
        }
        std::size_t colon = line.find(':');
        if (colon == std::string_view::npos)
          fail(static_cast<int>(i) + 1,
               fmt::format("NIC legend line '{}' is not 'NICk: name'", detail::printable(line)));
        std::string key(trim(line.substr(0, colon)));
        std::string value(trim(line.substr(colon + 1)));
        if (!column_index_.count(key) || value.empty() || !is_device_name(value))
          fail(static_cast<int>(i) + 1,
               fmt::format("NIC legend line '{}' names no NIC column", detail::printable(line)));
        nic_legend_[key] = value;
      }
      break;
    }

    // Cells: diagonal, symmetry, NVLink only between GPUs.
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        const Cell& c = rows_[a].cells[b];
        const int line = rows_[a].line;
        if ((a == b) != (c.cls == Cls::kSelf)) {
          fail(line, a == b ? fmt::format("diagonal cell of {} is '{}', expected X", columns_[a].name, cell_text(c))
                            : fmt::format("cell {}–{} is X off the diagonal", columns_[a].name, columns_[b].name));
        }
        if (c.cls == Cls::kNv && !(columns_[a].gpu && columns_[b].gpu))
          fail(line, fmt::format("{} between {} and {}: NVLink joins GPUs only", cell_text(c), columns_[a].name,
                                 columns_[b].name));
        if (b < a) {
          const Cell& d = rows_[b].cells[a];
          if (c.cls == Cls::kNv && d.cls == Cls::kNv && c.nv != d.nv)
            fail(line, fmt::format("asymmetric NVLink counts: {}–{} is {} but {}–{} is {}", columns_[a].name,
                                   columns_[b].name, cell_text(c), columns_[b].name, columns_[a].name, cell_text(d)));
          if (c.cls != d.cls)
            fail(line, fmt::format("asymmetric cells: {}–{} is {} but {}–{} is {}", columns_[a].name, columns_[b].name,
                                   cell_text(c), columns_[b].name, columns_[a].name, cell_text(d)));
        }
      }
    }

    // GPUs must be GPU0..GPU(G-1).
    std::vector<int> numbers;
    for (const auto& col : columns_)
      if (col.gpu) numbers.push_back(col.number);
    if (numbers.empty()) fail(header_line_, "no GPU rows (expected columns GPU0 GPU1 …)");
    std::sort(numbers.begin(), numbers.end());
    for (std::size_t k = 0; k < numbers.size(); ++k) {
      if (numbers[k] != static_cast<int>(k))
        fail(header_line_,
             fmt::format("GPU columns must be GPU0…GPU{} (found GPU{} missing or repeated)", numbers.size() - 1, k));
    }
  }

  Cls pcie(int a, int b) const { return rows_[a].cells[b].cls; }

  // Sockets: union by on-socket PCIe classes, then by affinity, then first fit.
  void assign_sockets() {
    const int n = static_cast<int>(columns_.size());
    UnionFind uf(n);
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        Cls c = pcie(a, b);
        if (c == Cls::kPix || c == Cls::kPxb || c == Cls::kPhb || c == Cls::kNode) uf.unite(a, b);
      }
    auto affinity_key = [&](int d) -> std::string {
      const Row& r = rows_[d];
      if (!r.numa_affinity.empty() && r.numa_affinity != "N/A") return "numa:" + r.numa_affinity;
      if (!r.cpu_affinity.empty() && r.cpu_affinity != "N/A") return "cpu:" + r.cpu_affinity;
      return {};
    };
    // Components as member lists, in device order.
    std::map<int, std::vector<int>> comp;
    for (int d = 0; d < n; ++d) comp[uf.find(d)].push_back(d);
    std::vector<std::vector<int>> groups;
    for (auto& [root, members] : comp) groups.push_back(members);
    auto conflict = [&](const std::vector<int>& x, const std::vector<int>& y) {
      for (int a : x)
        for (int b : y)
          if (pcie(a, b) == Cls::kSys) return true;
      return false;
    };
    auto keys = [&](const std::vector<int>& g) {
      std::set<std::string> k;
      for (int d : g)
        if (auto s = affinity_key(d); !s.empty()) k.insert(s);
      return k;
    };
    auto merge_pass = [&](auto&& may_merge) {
      bool changed = true;
      while (changed) {
        changed = false;
        for (std::size_t x = 0; x < groups.size() && !changed; ++x)
          for (std::size_t y = x + 1; y < groups.size() && !changed; ++y) {
            if (!may_merge(groups[x], groups[y]) || conflict(groups[x], groups[y])) continue;
            groups[x].insert(groups[x].end(), groups[y].begin(), groups[y].end());
            std::sort(groups[x].begin(), groups[x].end());
            groups.erase(groups.begin() + static_cast<long>(y));
            changed = true;
          }
      }
    };
    merge_pass([&](const auto& x, const auto& y) {
      auto kx = keys(x), ky = keys(y);
      for (const auto& k : kx)
        if (ky.count(k)) return true;
      return false;
    });
    merge_pass([&](const auto& x, const auto& y) { return keys(x).empty() || keys(y).empty(); });
    std::sort(groups.begin(), groups.end(), [](const auto& x, const auto& y) { return x.front() < y.front(); });
    socket_of_.assign(n, -1);
    for (std::size_t s = 0; s < groups.size(); ++s)
      for (int d : groups[s]) socket_of_[d] = static_cast<int>(s);
    socket_count_ = static_cast<int>(groups.size());
  }

  // Switches: leaf per PIX group (≥ 2 devices); a parent per PXB cluster.
  void build_pcie_tree() {
    const int n = static_cast<int>(columns_.size());
    UnionFind pix(n);
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        if (pcie(a, b) == Cls::kPix) pix.unite(a, b);
    std::map<int, std::vector<int>> leaf_groups;
    for (int d = 0; d < n; ++d) leaf_groups[pix.find(d)].push_back(d);
    std::vector<std::vector<int>> leaves;
    for (auto& [root, members] : leaf_groups) leaves.push_back(members);
    const int L = static_cast<int>(leaves.size());
    UnionFind pxb(L);
    for (int x = 0; x < L; ++x)
      for (int y = x + 1; y < L; ++y) {
        bool joined = false;
        for (int a : leaves[x])
          for (int b : leaves[y])
            if (pcie(a, b) == Cls::kPxb) joined = true;
        if (joined) pxb.unite(x, y);
      }
    std::map<int, std::vector<int>> clusters;
    for (int x = 0; x < L; ++x) clusters[pxb.find(x)].push_back(x);

    parent_of_device_.assign(n, -1);
    for (auto& [root, members] : clusters) {
      const int socket = socket_of_[leaves[members.front()].front()];
      int parent = -1;
      if (members.size() > 1) {
        parent = static_cast<int>(switches_.size());
        switches_.push_back({-1, socket});
      }
      bool direct_used = false;
      for (int x : members) {
        const auto& devices = leaves[x];
        int attach = parent;
        // A lone device can hang from the parent itself, but only one: two would be PIX.
        if (devices.size() > 1 || (parent >= 0 && direct_used)) {
          attach = static_cast<int>(switches_.size());
          switches_.push_back({parent, socket});
        } else if (parent >= 0) {
          direct_used = true;
        }
        for (int d : devices) parent_of_device_[d] = attach;
      }
    }
  }

  // The class the rebuilt tree gives a pair (PHB stands for PHB and NODE).
  Cls derived(int a, int b) const {
    if (socket_of_[a] != socket_of_[b]) return Cls::kSys;
    int pa = parent_of_device_[a], pb = parent_of_device_[b];
    if (pa >= 0 && pa == pb) return Cls::kPix;
    std::set<int> up;
    for (int s = pa; s >= 0; s = switches_[s].parent) up.insert(s);
    for (int s = pb; s >= 0; s = switches_[s].parent)
      if (up.count(s)) return Cls::kPxb;
    return Cls::kPhb;
  }

  void check_classes() const {
    const int n = static_cast<int>(columns_.size());
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        Cls given = pcie(a, b);
        if (given == Cls::kNv) continue;
        Cls want = derived(a, b);
        bool ok = given == want || (want == Cls::kPhb && given == Cls::kNode);
        if (!ok)
          fail(rows_[a].line,
               fmt::format("{}–{} is {} but the other cells imply {} (inconsistent PCIe classes)", columns_[a].name,
                           columns_[b].name, cell_text(rows_[a].cells[b]), cls_name(Cell{want, 0})));
      }
  }

  Topology build() const {
    Topology topo;
    const int n = static_cast<int>(columns_.size());
    std::vector<int> node_of(n, -1);
    // GPUs in GPU-number order so that node order follows local indices.
    std::vector<int> gpu_cols;
    for (int d = 0; d < n; ++d)
      if (columns_[d].gpu) gpu_cols.push_back(d);
    std::sort(gpu_cols.begin(), gpu_cols.end(), [&](int x, int y) { return columns_[x].number < columns_[y].number; });
    const std::size_t gpu_count = gpu_cols.size();
    for (int d : gpu_cols) {
      Node gpu;
      gpu.id = fmt::format("gpu{}", columns_[d].number);
      gpu.kind = NodeKind::kGpu;
      gpu.local_index = columns_[d].number;
      gpu.arch = options_.gpu_arch;
      node_of[d] = topo.add_node(std::move(gpu));
    }
    std::vector<int> cpu_node(socket_count_);
    for (int s = 0; s < socket_count_; ++s) {
      cpu_node[s] = detail::add_local_node(topo, NodeKind::kCpu, fmt::format("cpu{}", s), s, options_.cpu_arch);
    }
    std::vector<int> switch_node(switches_.size());
    for (std::size_t k = 0; k < switches_.size(); ++k) {
      switch_node[k] =
          detail::add_local_node(topo, NodeKind::kPcieSwitch, fmt::format("pcisw{}", k), static_cast<int>(k));
    }
    int nic_count = 0;
    for (int d = 0; d < n; ++d) {
      if (columns_[d].gpu) continue;
      Node node;
      node.id = fmt::format("nic{}", nic_count);
      node.kind = NodeKind::kNic;
      node.local_index = nic_count++;
      auto legend = nic_legend_.find(columns_[d].name);
      node.arch = legend != nic_legend_.end() ? legend->second : columns_[d].name;
      node_of[d] = topo.add_node(node);
    }

    const double pcie_bw = options_.pcie_gbps;
    for (std::size_t k = 0; k < switches_.size(); ++k) {
      int up = switches_[k].parent >= 0 ? switch_node[switches_[k].parent] : cpu_node[switches_[k].socket];
      topo.add_duplex_link(switch_node[k], up, LinkKind::kPcie, pcie_bw, detail::kPcieLatencyUs);
    }
    for (int d : gpu_cols) {
      int up = parent_of_device_[d] >= 0 ? switch_node[parent_of_device_[d]] : cpu_node[socket_of_[d]];
      topo.add_duplex_link(node_of[d], up, LinkKind::kPcie, pcie_bw, detail::kPcieLatencyUs);
    }
    for (int d = 0; d < n; ++d) {
      if (columns_[d].gpu) continue;
      int up = parent_of_device_[d] >= 0 ? switch_node[parent_of_device_[d]] : cpu_node[socket_of_[d]];
      topo.add_duplex_link(node_of[d], up, LinkKind::kPcie, pcie_bw, detail::kPcieLatencyUs);
    }
    // NVLink: GPUs on an NVSwitch (switched_groups) get one switch per group and # lanes to it; the other NV#
    // cells are direct links.
    int nvlinks = 0;
    std::vector<int> group_of(n, -1);
    const auto groups = switched_groups(gpu_cols);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const int sw = detail::add_local_node(topo, NodeKind::kNvSwitch, fmt::format("nvswitch{}", g),
                                            static_cast<int>(g));
      const int lanes = rows_[groups[g][0]].cells[groups[g][1]].nv;
      for (int d : groups[g]) {
        group_of[d] = static_cast<int>(g);
        topo.add_duplex_link(node_of[d], sw, LinkKind::kNvLink, lanes * options_.nvlink_lane_gbps,
                             detail::kNvLinkLatencyUs, lanes);
        nvlinks += lanes;
      }
    }
    for (std::size_t x = 0; x < gpu_cols.size(); ++x)
      for (std::size_t y = x + 1; y < gpu_cols.size(); ++y) {
        const Cell& c = rows_[gpu_cols[x]].cells[gpu_cols[y]];
        if (c.cls != Cls::kNv) continue;
        if (group_of[gpu_cols[x]] >= 0 && group_of[gpu_cols[x]] == group_of[gpu_cols[y]]) continue;
        topo.add_duplex_link(node_of[gpu_cols[x]], node_of[gpu_cols[y]], LinkKind::kNvLink,
                             c.nv * options_.nvlink_lane_gbps, detail::kNvLinkLatencyUs, c.nv);
        nvlinks += c.nv;
      }
    for (int s = 0; s < socket_count_; ++s)
      for (int t = s + 1; t < socket_count_; ++t)
        topo.add_duplex_link(cpu_node[s], cpu_node[t], LinkKind::kSmp, options_.smp_gbps, detail::kSmpLatencyUs);

    topo.set_name(detail::source_stem(source_, "nvidia-smi"));
    topo.set_description(
        fmt::format("imported from nvidia-smi topo -m ({}): {} GPUs{}, {} NVLinks{}, {} NICs, {} sockets, {} PCIe "
                    "switches (PCIe tree rebuilt from the PCIe classes)",
                    source_, gpu_count, options_.gpu_arch.empty() ? "" : " (" + options_.gpu_arch + ")", nvlinks,
                    groups.empty() ? "" : fmt::format(" ({} on an NVSwitch, inferred)", groups.size() == 1 ? "all"
                                                                                                  : "groups"),
                    nic_count, socket_count_, switches_.size()));
    topo.finalize();
    return topo;
  }

  // Groups of GPU columns that sit on an NVSwitch: connected by NV# cells, three or more GPUs, the same # in every
  // pair, and more lanes to the others ((size − 1)·#) than one GPU has — a direct mesh cannot be wired.
  std::vector<std::vector<int>> switched_groups(const std::vector<int>& gpu_cols) const {
    const int lanes_per_gpu = options_.lanes_per_gpu > 0 ? options_.lanes_per_gpu : max_nvlink_lanes_per_gpu();
    const int n = static_cast<int>(columns_.size());
    UnionFind nv(n);
    for (int a : gpu_cols)
      for (int b : gpu_cols)
        if (a < b && rows_[a].cells[b].cls == Cls::kNv) nv.unite(a, b);
    std::map<int, std::vector<int>> comps;
    for (int d : gpu_cols) comps[nv.find(d)].push_back(d);
    std::vector<std::vector<int>> out;
    for (auto& [root, members] : comps) {
      if (members.size() < 3) continue;
      const int lanes = rows_[members[0]].cells[members[1]].nv;
      bool uniform = true;
      for (std::size_t x = 0; x < members.size() && uniform; ++x)
        for (std::size_t y = x + 1; y < members.size() && uniform; ++y) {
          const Cell& c = rows_[members[x]].cells[members[y]];
          uniform = c.cls == Cls::kNv && c.nv == lanes;
        }
      if (uniform && static_cast<int>(members.size() - 1) * lanes > lanes_per_gpu) out.push_back(members);
    }
    return out;
  }

  struct Switch {
    int parent = -1;  // switch index or -1 (socket)
    int socket = 0;
  };

  std::string_view text_;
  std::string source_;
  NvidiaSmiImportOptions options_;
  int header_line_ = 0;
  int matrix_end_line_ = 0;
  std::vector<Column> columns_;
  std::map<std::string, int> column_index_;
  std::vector<std::string> affinity_columns_;
  std::vector<Row> rows_;
  std::map<std::string, std::string> nic_legend_;
  std::vector<int> socket_of_;
  int socket_count_ = 0;
  std::vector<Switch> switches_;
  std::vector<int> parent_of_device_;
};

}  // namespace

Topology import_nvidia_smi(std::string_view text, std::string_view source, const NvidiaSmiImportOptions& options) {
  if (!(options.nvlink_lane_gbps > 0) || !(options.pcie_gbps > 0) || !(options.smp_gbps > 0))
    throw InvalidInput(fmt::format("{}: link rates must be > 0", source));
  return SmiImporter(text, source, options).run();
}

Topology import_nvidia_smi(std::string_view text, std::string_view source) {
  return import_nvidia_smi(text, source, NvidiaSmiImportOptions{});
}

}  // namespace artune
