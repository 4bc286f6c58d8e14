// `artune topo show|list|import` (and `topo discover`, attached from
// cmd_topo_discover.cpp): inspect and convert topologies.

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "artune/core/error.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/input.hpp"
#include "artune/topology/import/importers.hpp"
#include "artune/topology/io/io.hpp"

namespace artune::cli {

namespace {

// Text matrices beyond this many GPUs are unreadable; --all prints them anyway.
constexpr std::size_t kMaxMatrixGpus = 64;
// Even --all prints no matrices beyond this many GPUs (GPUs² cells each; the
// note says so), and --json, whose matrices are part of the model, refuses.
constexpr std::size_t kMaxAllMatrixGpus = 1024;
constexpr std::size_t kMaxJsonMatrixGpus = 1024;
// Device and link lists beyond this many entries are summarised by kind.
constexpr std::size_t kMaxListed = 128;

// Prints one line without trailing blanks (padded columns end in spaces).
void print_line(std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  fmt::print("{}\n", line);
}

std::string topology_flag_help() {
  std::string names;
  for (const auto& name : builtin_topology_names()) names += (names.empty() ? "" : ", ") + name;
  return fmt::format(
      "topology: a built-in ({}), a generator (uniform:G, uniform:NxG, NxNAME such as 4xdgx1-v100) "
      "or a JSON file",
      names);
}

// nvidia-smi's cell for a GPU pair: X, NV# (bonded lanes on the route), PIX, …
std::string path_cell(const Topology& topo, int a, int b) {
  const Route& route = topo.route(a, b);
  if (route.type != PathType::kNvl) return std::string(to_string(route.type));
  int lanes = 0;
  for (int l : route.links) {
    const int n = topo.links()[l].lanes;
    lanes = lanes == 0 ? n : std::min(lanes, n);
  }
  return fmt::format("NV{}", lanes);
}

void print_summary(const Topology& topo) {
  fmt::print("topology     {}\n", topo.name());
  if (!topo.description().empty()) fmt::print("description  {}\n", topo.description());
  const int per_machine = topo.gpus_per_machine();
  fmt::print("machines     {}, GPUs {}{}, devices {}, directed links {}\n", topo.machine_count(), topo.gpus().size(),
             topo.machine_count() > 1 && per_machine > 0 ? fmt::format(" ({} per machine)", per_machine) : "",
             topo.nodes().size(), topo.links().size());
  if (const auto& net = topo.network()) {
    fmt::print("network      {:g} GB/s per NIC and direction, {:g} us per hop, oversubscription {:g}:1\n",
               net->nic_bandwidth_gbps, net->latency_us, net->oversubscription);
  }
  fmt::print("fingerprint  {}\n", topo.fingerprint());
}

void print_devices_and_links(const Topology& topo, bool all) {
  const auto& nodes = topo.nodes();
  fmt::print("\nDevices:\n");
  if (nodes.size() > kMaxListed && !all) {
    std::map<std::string, int> counts;
    for (const Node& n : nodes) ++counts[std::string(to_string(n.kind))];
    std::string text;
    for (const auto& [kind, count] : counts) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", count, kind);
    fmt::print("  {} ({} devices; --all lists them)\n", text, nodes.size());
  } else {
    std::size_t width = 2;
    for (const Node& n : nodes) width = std::max(width, n.id.size());
    print_line(fmt::format("  {:<{}}  {:<11}  {:>7}  {:>5}  {:>6}  {}", "id", width, "kind", "machine", "local",
                           "global", "arch/port  bus"));
    for (const Node& n : nodes) {
      print_line(fmt::format("  {:<{}}  {:<11}  {:>7}  {:>5}  {:>6}  {:<9}{}", n.id, width, to_string(n.kind),
                             n.machine < 0 ? std::string("-") : std::to_string(n.machine), n.local_index,
                             n.global_index, n.arch, n.bus_id.empty() ? "" : "  " + n.bus_id));
    }
  }
  const nlohmann::json model = topology_model_to_json(topo);
  const auto& links = model["links"];
  fmt::print("\nLinks ({} physical, <-> full duplex, -> one direction):\n", links.size());
  if (links.size() > kMaxListed && !all) {
    std::map<std::string, int> counts;
    for (const auto& l : links) ++counts[l["kind"].get<std::string>()];
    std::string text;
    for (const auto& [kind, count] : counts) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", count, kind);
    fmt::print("  {} (--all lists them)\n", text);
    return;
  }
  std::size_t width = 2;
  for (const auto& l : links) {
    width = std::max({width, l["a"].get<std::string>().size(), l["b"].get<std::string>().size()});
  }
  for (const auto& l : links) {
    const int lanes = l.value("lanes", 1);
    print_line(fmt::format("  {:<{}} {} {:<{}} {:<8} {:>4}  {:>7g} GB/s  {:g} us", l["a"].get<std::string>(), width,
                           l.contains("directed") ? "-> " : "<->", l["b"].get<std::string>(), width,
                           l["kind"].get<std::string>(), lanes > 1 ? fmt::format("x{}", lanes) : "",
                           l["bandwidth"].get<double>(), l["latency"].get<double>()));
  }
}

void print_matrices(const Topology& topo, bool all) {
  const auto& gpus = topo.gpus();
  if (gpus.empty()) {
    fmt::print("\nNo GPUs: no DMA, path or bandwidth matrix.\n");
    return;
  }
  if (gpus.size() > kMaxMatrixGpus && !all) {
    fmt::print("\nMatrices omitted for {} GPUs (more than {}); --all prints them, --json gives them as data.\n",
               gpus.size(), kMaxMatrixGpus);
    return;
  }
  if (gpus.size() > kMaxAllMatrixGpus) {
    fmt::print("\nMatrices omitted for {} GPUs: --all prints them up to {} GPUs.\n", gpus.size(), kMaxAllMatrixGpus);
    return;
  }
  const std::size_t n = gpus.size();
  // The DMA peer matrix in the layout of TF's cross_device_utils.py comment:
  // "DMA: 0 1 2 …" over "0:   Y Y …".
  const std::size_t digits = std::to_string(n - 1).size();
  const std::size_t label = std::max<std::size_t>(5, digits + 3);
  const auto peers = peer_matrix(topo);
  fmt::print("\nDevice peer to peer matrix (Y: DMA over NVLink or PCIe switches)\n");
  std::string line = fmt::format("{:<{}}", "DMA:", label);
  for (std::size_t j = 0; j < n; ++j) line += fmt::format("{}{:>{}}", j == 0 ? "" : " ", j, digits);
  print_line(line);
  for (std::size_t i = 0; i < n; ++i) {
    line = fmt::format("{:<{}}", fmt::format("{}:", i), label);
    for (std::size_t j = 0; j < n; ++j)
      line += fmt::format("{}{:>{}}", j == 0 ? "" : " ", peers[i][j] ? "Y" : "N", digits);
    print_line(line);
  }

  // Path types as nvidia-smi topo -m prints them.
  const std::size_t cell = std::max<std::size_t>(6, fmt::format("GPU{}", n - 1).size() + 2);
  fmt::print(
      "\nPath types (X self, NV# bonded NVLinks, PIX/PXB PCIe switches, PHB host bridge, SYS across sockets, NET "
      "network)\n");
  line = fmt::format("{:<{}}", "", cell);
  for (std::size_t j = 0; j < n; ++j) line += fmt::format("{:<{}}", fmt::format("GPU{}", j), cell);
  print_line(line);
  for (std::size_t i = 0; i < n; ++i) {
    line = fmt::format("{:<{}}", fmt::format("GPU{}", i), cell);
    for (std::size_t j = 0; j < n; ++j) line += fmt::format("{:<{}}", path_cell(topo, gpus[i], gpus[j]), cell);
    print_line(line);
  }

  const auto bandwidth = bandwidth_matrix(topo);
  const std::size_t bw_cell = std::max<std::size_t>(7, fmt::format("GPU{}", n - 1).size() + 2);
  fmt::print("\nBandwidth (GB/s per direction, bottleneck of the route)\n");
  line = fmt::format("{:<{}}", "", bw_cell);
  for (std::size_t j = 0; j < n; ++j) line += fmt::format("{:>{}}", fmt::format("GPU{}", j), bw_cell);
  print_line(line);
  for (std::size_t i = 0; i < n; ++i) {
    line = fmt::format("{:<{}}", fmt::format("GPU{}", i), bw_cell);
    for (std::size_t j = 0; j < n; ++j) {
      line += fmt::format("{:>{}}", i == j ? std::string("-") : fmt::format("{:g}", bandwidth[i][j]), bw_cell);
    }
    print_line(line);
  }
}

// Reads the import input with the shared checks (missing, directory, devices such
// as /dev/zero, the size cap); standard input gets the same cap.
std::string read_input(const std::string& path) {
  if (path != "-") return read_input_file(path, "");
  std::string text;
  char buffer[1 << 16];
  while (std::cin.read(buffer, sizeof buffer) || std::cin.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(std::cin.gcount()));
    if (text.size() > kMaxInputFileBytes) {
      throw InvalidInput(
          fmt::format("<stdin>: more than the {} bytes artune reads from one input file", kMaxInputFileBytes));
    }
  }
  if (std::cin.bad()) throw InvalidInput("<stdin>: cannot read standard input");
  return text;
}

struct ShowOptions {
  std::string topology{kDefaultTopology};
  bool json = false;
  bool all = false;
};

struct ImportOptions {
  std::string from;
  std::string input;
  std::string output;
  std::string name;
  bool name_given = false;
  std::string gpu;       // --gpu: the GPU generation, for the NVLink lane and PCIe rates of nvidia-smi text
  double lane_gbps = 0;  // --nvlink-lane-gbps (0: from --gpu, else NVLink 2's 25)
  std::string cpu_arch;  // --cpu-arch: the hosts' CPU, which nvidia-smi's matrix does not name
  bool lane_given = false;
};

/// The largest NVLink lane rate accepted (GB/s per direction): far above any NVLink generation so far.
constexpr double kMaxLaneGbps = 1000.0;

/// The names --gpu takes ("p100, v100, …").
std::string gpu_generation_names() {
  std::vector<std::string_view> names;
  for (const GpuGeneration& g : gpu_generations()) names.push_back(g.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

/// The rates and facts of `nvidia-smi topo -m` text, which names link classes (NV4, PIX) but not speeds: from --gpu
/// (artune/topology/import/importers.hpp gpu_generations, sources in configs/HARDWARE.md) and --nvlink-lane-gbps.
NvidiaSmiImportOptions nvidia_smi_rates(const ImportOptions& opts) {
  NvidiaSmiImportOptions rates;
  if (!opts.gpu.empty()) {
    const GpuGeneration* found = find_gpu_generation(opts.gpu);
    if (found == nullptr) {
      throw InvalidInput(fmt::format("--gpu: '{}' is not one of {}", opts.gpu, gpu_generation_names()));
    }
    rates.nvlink_lane_gbps = found->lane_gbps;
    rates.pcie_gbps = found->pcie_gbps;
    rates.gpu_arch = std::string(found->arch);
    rates.lanes_per_gpu = found->lanes_per_gpu;
  }
  if (opts.lane_given) {
    if (!(opts.lane_gbps > 0 && opts.lane_gbps <= kMaxLaneGbps)) {
      throw InvalidInput(fmt::format("--nvlink-lane-gbps: {} must be > 0 and ≤ {:g}", opts.lane_gbps, kMaxLaneGbps));
    }
    rates.nvlink_lane_gbps = opts.lane_gbps;
  }
  if (!opts.cpu_arch.empty()) {
    if (!parse_cpu_arch(opts.cpu_arch)) {
      throw InvalidInput(fmt::format("--cpu-arch: '{}' is not one of {}", opts.cpu_arch, cpu_arch_choices()));
    }
    rates.cpu_arch = opts.cpu_arch;
  }
  return rates;
}

/// The format of a file to import when --from is not given: an NCCL topology XML starts with '<', nvidia-smi's
/// matrix with its header row of devices (GPU0 …).
std::string sniff_import_format(std::string_view text, const std::string& source) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '<') return "nccl-xml";
  const std::size_t eol = text.find('\n', first == std::string_view::npos ? 0 : first);
  const std::string_view line = first == std::string_view::npos ? std::string_view() : text.substr(first, eol - first);
  if (line.find("GPU0") != std::string_view::npos) return "nvidia-smi";
  throw InvalidInput(fmt::format("{}: neither an NCCL topology XML nor `nvidia-smi topo -m` output (its first line "
                                 "is not a header of GPU0 …); name the format with --from nvidia-smi|nccl-xml",
                                 source));
}

void run_show(const ShowOptions& opts) {
  const Topology topo = load_topology(opts.topology);
  // The matrices are GPUs² cells: 65536 GPUs would mean 4·10⁹ cells and minutes of work.
  if (opts.json && topo.gpus().size() > kMaxJsonMatrixGpus) {
    throw InvalidInput(
        fmt::format("--json: topology {} has {} GPUs; the JSON carries GPU x GPU matrices and is "
                    "limited to {} GPUs (plain `topo show` summarises larger topologies)",
                    topo.name(), topo.gpus().size(), kMaxJsonMatrixGpus));
  }
  if (opts.json) {
    print_json(topology_to_json(topo));
    return;
  }
  print_summary(topo);
  print_devices_and_links(topo, opts.all);
  print_matrices(topo, opts.all);
}

void run_list() {
  for (const auto& name : builtin_topology_names()) {
    const Topology topo = load_topology(name);
    fmt::print("{:<22} {:>3} GPUs  {}\n", name, topo.gpus().size(), topo.description());
  }
  fmt::print("{:<22} {:>3}       {}\n", "uniform:G", "G", "G GPUs all-to-all over 25 GB/s NVLink, one CPU, one NIC");
  fmt::print("{:<22} {:>3}       {}\n", "uniform:NxG", "N*G", "N uniform:G machines joined by a 12.5 GB/s network");
  fmt::print("{:<22} {:>3}       {}\n", "NxNAME", "", "N machines of a built-in (e.g. 4xdgx1-v100, 128xdgx-h100)");
}

void run_import(const ImportOptions& opts) {
  if (opts.name_given) {
    if (opts.name.empty()) throw InvalidInput("--name: must not be empty");
    for (unsigned char c : opts.name) {
      if (c < 0x20 || c == 0x7f) throw InvalidInput("--name: must not contain control characters");
    }
  }
  const NvidiaSmiImportOptions rates = nvidia_smi_rates(opts);
  const std::string source = opts.input == "-" ? "<stdin>" : opts.input;
  const std::string text = read_input(opts.input);
  const std::string from = opts.from.empty() ? sniff_import_format(text, source) : opts.from;
  if (from == "nccl-xml" && (!opts.gpu.empty() || opts.lane_given)) {
    throw InvalidInput(
        fmt::format("{}: only for --from nvidia-smi (an NCCL topology XML names each GPU's generation "
                    "in its sm attribute)",
                    opts.gpu.empty() ? "--nvlink-lane-gbps" : "--gpu"));
  }
  if (from == "nccl-xml" && !opts.cpu_arch.empty()) {
    throw InvalidInput(
        "--cpu-arch: only for --from nvidia-smi (an NCCL topology XML names each CPU's arch and vendor)");
  }
  Topology topo = from == "nvidia-smi" ? import_nvidia_smi(text, source, rates) : import_nccl_xml(text, source);
  // nvidia-smi's text names no GPU generation: say once what was assumed (after the import has succeeded, so that
  // a failure stays one line).
  auto warn_guess = [&] {
    if (from != "nvidia-smi" || !opts.gpu.empty()) return;
    const bool nvswitch = !topo.nodes_of_kind(NodeKind::kNvSwitch).empty();
    fmt::print(stderr,
               "artune: warning: {}: no --gpu: NV# cells priced at {:g} GB/s per lane{}, PCIe at Gen3, GPU "
               "architecture unknown{}; name the generation with --gpu {}\n",
               source, rates.nvlink_lane_gbps, opts.lane_given ? " (--nvlink-lane-gbps)" : " (v100)",
               nvswitch ? " (an NVSwitch inferred: more NVLink lanes per GPU than a direct mesh allows)" : "",
               gpu_generation_names());
  };
  if (opts.name_given) {
    topo.set_name(opts.name);
  } else if (topo.name().empty()) {
    const std::string stem = std::filesystem::path(opts.input).stem().string();
    topo.set_name(stem.empty() || opts.input == "-" ? "imported" : stem);
  }
  const nlohmann::json model = topology_model_to_json(topo);
  // What we write must load back: check it here rather than at the next use.
  const Topology reloaded = topology_from_json(model, opts.output.empty() ? "<output>" : opts.output);
  if (opts.output.empty() || opts.output == "-") {
    print_json(model);
    warn_guess();
    return;
  }
  write_output_file(opts.output, model.dump(2) + "\n", "--out");
  warn_guess();
  fmt::print(stderr, "artune: imported {} ({}): {} GPUs, {} devices, {} links -> {}\n", source, from,
             reloaded.gpus().size(), reloaded.nodes().size(), model["links"].size(), opts.output);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topo", "Inspect, import and discover GPU topologies");
  topo->require_subcommand(1);

  auto show_opts = std::make_shared<ShowOptions>();
  CLI::App* show = topo->add_subcommand(
      "show", "Print a topology: devices, links, the DMA peer matrix, nvidia-smi path types and route bandwidths");
  show->add_option("-t,--topology", show_opts->topology, topology_flag_help())->capture_default_str();
  show->add_flag("--json", show_opts->json,
                 fmt::format("print the whole model as JSON, with peer_matrix, nvlink_matrix, path_matrix and "
                             "bandwidth_matrix (exit 2 beyond {} GPUs)",
                             kMaxJsonMatrixGpus));
  show->add_flag("--all", show_opts->all,
                 fmt::format("list every device and link and print matrices beyond {} GPUs (up to {} GPUs; larger "
                             "topologies get a note instead)",
                             kMaxMatrixGpus, kMaxAllMatrixGpus));
  show->callback([show_opts] { run_show(*show_opts); });

  CLI::App* list = topo->add_subcommand("list", "List the built-in topologies and the generators");
  list->callback([] { run_list(); });

  auto import_opts = std::make_shared<ImportOptions>();
  CLI::App* import = topo->add_subcommand(
      "import", "Convert `nvidia-smi topo -m` output or an NCCL topology XML into artune's JSON format");
  import->add_option("--from", import_opts->from,
                     "input format: nvidia-smi or nccl-xml (default: told from the file: XML starts with '<')")
      ->check(CLI::IsMember({"nvidia-smi", "nccl-xml"}));
  import->add_option("file", import_opts->input, "input file ('-' reads standard input)")->required();
  add_out_option(import, import_opts->output,
                 fmt::format("output JSON file (default: standard output; {})", kOutputPathHelp));
  auto* name =
      import->add_option("--name", import_opts->name, "name of the imported topology (default: the input file's stem)");
  import->add_option("--gpu", import_opts->gpu,
                     "nvidia-smi: the GPUs' generation: their architecture, the rate of an NV# cell (# lanes x the "
                     "lane rate), the lanes one GPU has (more lanes between GPUs than that means an NVSwitch) and "
                     "PCIe: p100 (sm60, 4 lanes of 20 GB/s, PCIe Gen3), v100 (sm70, 6 x 25, Gen3), a100 (sm80, 12 x "
                     "25, Gen4), h100 and h200 (sm90, 18 x 25, Gen5), b200 (sm100, 18 x 50, Gen5); default: v100's "
                     "rates, architecture unknown, with a warning");
  auto* lane = import->add_option("--nvlink-lane-gbps", import_opts->lane_gbps,
                                  "nvidia-smi: GB/s per NVLink lane and direction (overrides --gpu's)");
  import->add_option("--cpu-arch", import_opts->cpu_arch,
                     fmt::format("nvidia-smi: the hosts' CPU, which the matrix does not name ({}; `lscpu` shows the "
                                 "vendor); NCCL's model reads it across machines. Default: not stated",
                                 cpu_arch_choices()));
  import->callback([import_opts, name, import, lane] {
    warn_deprecated_output(import);
  import_opts->lane_given = lane->count() > 0;
  import_opts->name_given = name->count() > 0;
  run_import(*import_opts);
});

add_topo_discover_command(topo);
}  // namespace artune::cli

}  // namespace artune::cli
