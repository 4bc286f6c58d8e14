// The public entry points of the native JSON topology format: load_topology, topology_from_json and the
// built-in configs. The forms are read in full.cpp, compact.cpp and sources.cpp (generators,
// cluster form); write.cpp joins machines and writes JSON.
//
// Every rejected input ends in one InvalidInput whose message is a single
// line "SOURCE: json.path: reason" (configs/README.md documents the format).

#include "artune/topology/io/io.hpp"

#include "artune/topology/io/detail.hpp"
#include "artune/topology/io/embedded.hpp"
#include "artune/topology/subset.hpp"

namespace artune {

using namespace io_detail;

// ---- public API ------------------------------------------------------------

std::vector<std::string> builtin_topology_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : builtin_map()) names.push_back(name);
  return names;
}

const std::string& builtin_topology_text(std::string_view name) {
  const auto& configs = builtin_map();
  const auto it = configs.find(name);
  if (it == configs.end()) {
    throw InvalidInput(fmt::format("{} is not a built-in topology (built-ins: {})", quote_text(name), builtin_list()));
  }
  return it->second;
}

Topology topology_from_json(const nlohmann::json& doc, std::string_view source) {
  const std::string src(source);
  return parse_document(doc, Reader(src, fs::path(src).parent_path()), "", true).topo;
}

Topology load_topology_file(const std::string& path) { return load_file(path, true).topo; }

Topology load_topology(std::string_view spec) {
  if (spec.empty()) {
    throw InvalidInput(fmt::format(
        "topology: empty name (give a built-in: {}; a generator: uniform:G, uniform:NxG, NxNAME; or a JSON file)",
        builtin_list()));
  }
  if (builtin_map().count(spec) != 0) return load_builtin(spec, true).topo;
  std::error_code ec;
  const std::string path(spec);
  // TOPO[LIST]: a GPU subset of any source (a file whose own name ends in "]" is still that file).
  if (const SubsetSpec subset = split_subset_spec(spec); !subset.base.empty() && !fs::exists(path, ec)) {
    const Topology base = load_topology(subset.base);
    const std::string where = fmt::format("topology {}", quote_text(spec));
    const std::vector<int> gpus = parse_gpu_selection(base, subset.list, where);
    return subset_topology(base, gpus, fmt::format("{}[{}]", base.name(), gpu_list_text(base, gpus)));
  }
  if (auto generated = generate(spec)) return std::move(*generated);
  if (fs::exists(path, ec)) return load_topology_file(path);
  throw InvalidInput(
      fmt::format("topology {}: not a built-in, a generator or an existing file (built-ins: {}; generators: uniform:G, "
                  "uniform:NxG, NxNAME such as 4xdgx1-v100; a GPU subset of any of them: NAME[0,1,2,4,5])",
                  quote_text(spec), builtin_list()));
}

}  // namespace artune
