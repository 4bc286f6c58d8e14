// Where a topology comes from: built-in names, files, generators (uniform:8, 4xdgx1-v100), and the
// cluster form that joins machines.

#include "artune/topology/io/detail.hpp"
#include "artune/topology/io/embedded.hpp"

namespace artune::io_detail {

// ---- generators and name resolution ---------------------------------------

std::optional<long long> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Topology make_uniform_machine(int gpus) {
  Topology topo;
  topo.set_name(fmt::format("uniform:{}", gpus));
  topo.set_description(
      fmt::format("{} GPUs joined all-to-all by {} GB/s NVLink links, one CPU socket with a {} GB/s PCIe link to each "
                  "GPU and one NIC",
                  gpus, kUniformNvlinkBandwidth, kUniformPcieBandwidth));
  for (int g = 0; g < gpus; ++g) topo.add_node({fmt::format("gpu{}", g), NodeKind::kGpu, 0, g, -1, "", ""});
  const int cpu = topo.add_node({"cpu0", NodeKind::kCpu, 0, 0, -1, "", ""});
  const int nic = topo.add_node({"nic0", NodeKind::kNic, 0, 0, -1, "mlx5_0", ""});
  for (int i = 0; i < gpus; ++i) {
    for (int j = i + 1; j < gpus; ++j)
      topo.add_duplex_link(i, j, LinkKind::kNvLink, kUniformNvlinkBandwidth, kNvlinkLatencyUs, 1);
  }
  for (int g = 0; g < gpus; ++g) topo.add_duplex_link(g, cpu, LinkKind::kPcie, kUniformPcieBandwidth, kPcieLatencyUs);
  topo.add_duplex_link(nic, cpu, LinkKind::kPcie, kUniformPcieBandwidth, kPcieLatencyUs);
  topo.finalize();
  return topo;
}

const std::map<std::string, std::string, std::less<>>& builtin_map() {
  static const std::map<std::string, std::string, std::less<>> configs = [] {
    std::map<std::string, std::string, std::less<>> m;
    for (std::size_t i = 0; i < detail::kEmbeddedConfigCount; ++i) {
      m.emplace(detail::kEmbeddedConfigs[i].name, detail::kEmbeddedConfigs[i].text);
    }
    return m;
  }();
  return configs;
}

std::string builtin_source(std::string_view name) { return fmt::format("configs/{}.json", name); }

std::string builtin_list() { return join_list(builtin_topology_names()); }

// Every nlohmann exception (syntax, numbers that overflow a double such as 1e400,
// invalid UTF-8, excessive nesting) becomes one InvalidInput naming the source.
json parse_json_text(std::string_view text, const std::string& source) { return parse_json_input(text, source); }

// Missing files, directories, devices such as /dev/zero and endless pipes end in
// one InvalidInput at the size limit instead of exhausting memory.
std::string read_file_text(const std::string& path) { return read_input_file(path, "", kMaxFileBytes); }

std::string default_name_for(std::string_view source) {
  const std::string stem = fs::path(std::string(source)).stem().string();
  return stem.empty() ? "topology" : stem;
}

Loaded parse_document(const json& doc, const Reader& reader, const std::string& path, bool allow_cluster);

Loaded load_builtin(std::string_view name, bool allow_cluster) {
  const std::string& text = builtin_topology_text(name);
  const std::string source = builtin_source(name);
  return parse_document(parse_json_text(text, source), Reader(source, {}), "", allow_cluster);
}

Loaded load_file(const std::string& path, bool allow_cluster) {
  const std::string text = read_file_text(path);
  return parse_document(parse_json_text(text, path), Reader(path, fs::path(path).parent_path()), "", allow_cluster);
}

Topology make_generated_cluster(std::string_view spec, long long machines, Loaded machine) {
  if (machines < 1 || machines > kMaxMachines) {
    throw InvalidInput(
        fmt::format("topology {}: the machine count must be between 1 and {}", quote_text(spec), kMaxMachines));
  }
  if (machine.topo.machine_count() > 1 || !machine.topo.nodes_of_kind(NodeKind::kNetSwitch).empty()) {
    throw InvalidInput(fmt::format("topology {}: {} is already a cluster; NxNAME repeats a single machine",
                                   quote_text(spec), quote_text(machine.topo.name())));
  }
  const long long total = machines * static_cast<long long>(machine.topo.gpus().size());
  if (total > kMaxTotalGpus) {
    throw InvalidInput(fmt::format("topology {}: {} GPUs in all is more than the supported {}", quote_text(spec), total,
                                   kMaxTotalGpus));
  }
  const long long links = machines * static_cast<long long>(machine.topo.links().size() +
                                                            2 * machine.topo.nodes_of_kind(NodeKind::kNic).size());
  if (links > kMaxTotalLinks) {
    throw InvalidInput(fmt::format("topology {}: {} directed links in all is more than the supported {}",
                                   quote_text(spec), links, kMaxTotalLinks));
  }
  NetworkSpec network;
  if (machine.nic_bandwidth > 0) network.nic_bandwidth_gbps = machine.nic_bandwidth;
  std::vector<Topology> copies(static_cast<std::size_t>(machines), machine.topo);
  return join_machines(copies, network, std::string(spec));
}

// Generators: uniform:G, uniform:NxG, NxNAME. nullopt when `spec` is not one.
std::optional<Topology> generate(std::string_view spec) {
  constexpr std::string_view kUniform = "uniform:";
  if (spec.rfind(kUniform, 0) == 0) {
    const std::string_view rest = spec.substr(kUniform.size());
    const auto x = rest.find('x');
    const auto machines = x == std::string_view::npos ? std::optional<long long>(1) : parse_count(rest.substr(0, x));
    const auto gpus = parse_count(x == std::string_view::npos ? rest : rest.substr(x + 1));
    if (!machines || !gpus) {
      throw InvalidInput(
          fmt::format("topology {}: expected uniform:G or uniform:NxG (N machines of G GPUs)", quote_text(spec)));
    }
    if (*gpus < 1 || *gpus > kMaxUniformGpus) {
      throw InvalidInput(
          fmt::format("topology {}: G must be between 1 and {} GPUs per machine", quote_text(spec), kMaxUniformGpus));
    }
    if (x == std::string_view::npos) return make_uniform_machine(static_cast<int>(*gpus));
    Loaded machine{make_uniform_machine(static_cast<int>(*gpus)), 0};
    return make_generated_cluster(spec, *machines, std::move(machine));
  }
  const auto x = spec.find('x');
  if (x == std::string_view::npos || x == 0) return std::nullopt;
  const auto machines = parse_count(spec.substr(0, x));
  const std::string_view base = spec.substr(x + 1);
  if (!machines) return std::nullopt;
  if (builtin_map().count(base) != 0) return make_generated_cluster(spec, *machines, load_builtin(base, true));
  if (base.rfind(kUniform, 0) == 0) {
    auto machine = generate(base);
    if (machine) return make_generated_cluster(spec, *machines, Loaded{std::move(*machine), 0});
  }
  return std::nullopt;
}

// A machine named by a cluster's {"config": ...}: a built-in, uniform:G, or a
// file relative to the cluster file. Clusters are refused before their own
// machines are loaded, so files cannot recurse.
Loaded load_machine_reference(const std::string& spec, const Reader& reader, const std::string& path) {
  std::string source;
  std::string text;
  fs::path base_dir;
  if (builtin_map().count(spec) != 0) {
    source = builtin_source(spec);
    text = builtin_topology_text(spec);
  } else if (spec.rfind("uniform:", 0) == 0) {
    if (spec.find('x') != std::string::npos)
      reader.fail(path, fmt::format("{} is a cluster; list single machines", quote_text(spec)));
    try {
      return Loaded{*generate(spec), 0};
    } catch (const InvalidInput& e) {
      reader.fail(path, e.what());
    }
  } else {
    fs::path file(spec);
    if (file.is_relative() && !reader.base_dir().empty()) file = reader.base_dir() / file;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      reader.fail(path, fmt::format("{} is neither a built-in machine, uniform:G nor a file (built-ins: {})",
                                    quote_text(spec), builtin_list()));
    }
    source = file.string();
    text = read_file_text(source);
    base_dir = file.parent_path();
  }
  const json doc = parse_json_text(text, source);
  if (doc.is_object() && doc.contains("machines"))
    reader.fail(path, fmt::format("{} is a cluster; list single machines", quote_text(spec)));
  return parse_document(doc, Reader(source, base_dir), "", false);
}

// ---- cluster form ----------------------------------------------------------

Loaded parse_cluster(const json& doc, const Reader& reader, const std::string& path, const std::string& default_name) {
  reader.allow_keys(doc, path, {"name", "description", "machines", "network"});
  const std::string name = Reader::find(doc, "name") ? reader.name(doc["name"], field(path, "name")) : default_name;
  const std::string mp = field(path, "machines");
  const json& list = doc["machines"];
  reader.expect_array(list, mp);
  if (list.empty()) reader.fail(mp, "must list at least one machine");
  std::vector<Topology> machines;
  double first_nic_bandwidth = 0;
  long long total_gpus = 0;
  long long total_links = 0;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string p = item(mp, k);
    const json& entry = list[k];
    reader.expect_object(entry, p);
    Loaded machine;
    long long count = 1;
    if (Reader::find(entry, "config") != nullptr) {
      reader.allow_keys(entry, p, {"config", "count"});
      const std::string spec = reader.name(entry["config"], field(p, "config"));
      if (const json* c = Reader::find(entry, "count")) count = reader.integer(*c, field(p, "count"), 1, kMaxMachines);
      machine = load_machine_reference(spec, reader, field(p, "config"));
    } else {
      machine = parse_document(entry, reader, p, false);
    }
    if (machine.topo.machine_count() > 1 || !machine.topo.nodes_of_kind(NodeKind::kNetSwitch).empty()) {
      reader.fail(p, fmt::format("{} is a cluster; list single machines", quote_text(machine.topo.name())));
    }
    if (machine.topo.nodes_of_kind(NodeKind::kNic).empty()) {
      reader.fail(p, fmt::format("machine {} has no NIC to join the network", quote_text(machine.topo.name())));
    }
    if (machines.size() + static_cast<std::size_t>(count) > static_cast<std::size_t>(kMaxMachines)) {
      reader.fail(p, fmt::format("more than {} machines in all", kMaxMachines));
    }
    // The same GPU and link limits as the NxNAME generator, checked before the copies are made.
    total_gpus += count * static_cast<long long>(machine.topo.gpus().size());
    total_links += count * static_cast<long long>(machine.topo.links().size() +
                                                  2 * machine.topo.nodes_of_kind(NodeKind::kNic).size());
    if (total_gpus > kMaxTotalGpus) {
      reader.fail(p, fmt::format("{} GPUs in all is more than the supported {}", total_gpus, kMaxTotalGpus));
    }
    if (total_links > kMaxTotalLinks) {
      reader.fail(p,
                  fmt::format("{} directed links in all is more than the supported {}", total_links, kMaxTotalLinks));
    }
    if (machines.empty()) first_nic_bandwidth = machine.nic_bandwidth;
    for (long long i = 0; i < count; ++i) machines.push_back(machine.topo);
  }
  NetworkSpec network;
  network.nic_bandwidth_gbps = first_nic_bandwidth > 0 ? first_nic_bandwidth : kDefaultNicBandwidth;
  if (const json* n = Reader::find(doc, "network"))
    network = parse_network(*n, reader, field(path, "network"), first_nic_bandwidth);
  Loaded out;
  out.topo = join_machines(machines, network, name);
  if (const json* d = Reader::find(doc, "description"))
    out.topo.set_description(reader.string(*d, field(path, "description")));
  return out;
}

Loaded parse_document(const json& doc, const Reader& reader, const std::string& path, bool allow_cluster) {
  reader.expect_object(doc, path);
  const bool full = doc.contains("devices");
  const bool compact = doc.contains("compact");
  const bool cluster = doc.contains("machines");
  if (full + compact + cluster > 1) {
    reader.fail(path, "give exactly one of \"devices\" (full form), \"compact\" or \"machines\" (cluster)");
  }
  const std::string default_name = default_name_for(reader.source());
  if (full) return parse_full(doc, reader, path, default_name);
  if (compact) return parse_compact(doc, reader, path, default_name);
  if (cluster) {
    if (!allow_cluster) reader.fail(field(path, "machines"), "a cluster cannot be a machine of another cluster");
    return parse_cluster(doc, reader, path, default_name);
  }
  reader.fail(path, "missing \"devices\" (full form), \"compact\" or \"machines\" (cluster)");
}

}  // namespace artune::io_detail
