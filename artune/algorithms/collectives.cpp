// All-gather and reduce-scatter plans (issue 17): their spec names and the parser of their
// one-token specs, both read from the registry's families of each collective
// (ARTUNE_COLLECTIVE_FAMILIES); build_plan() emits them through the same records.

#include "artune/algorithms/collectives.hpp"

#include <fmt/format.h>

#include "artune/algorithms/registry.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

namespace {

std::string names_of(Collective c) {
  std::string out;
  for (const Family* f : families(c)) {
    for (const SpecName& n : f->specs) out += fmt::format("{}{}", out.empty() ? "" : ", ", n.token);
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> collective_algorithms(Collective c) {
  if (c == Collective::kAllReduce) return spec_algorithms();
  std::vector<std::pair<std::string, std::string>> out;
  for (const Family* f : families(c)) {
    for (const SpecName& n : f->specs) {
      const std::string alias = n.alias != nullptr ? fmt::format("; alias {}", n.alias) : "";
      out.emplace_back(n.token, n.description + alias);
    }
  }
  return out;
}

AllReduceSpec parse_collective_spec(Collective c, std::string_view text) {
  if (c == Collective::kAllReduce) return parse_spec(text);
  if (c != Collective::kAllGather && c != Collective::kReduceScatter) {
    throw InvalidInput(fmt::format("{}: {} is not a plan of its own", parameter("collective"), to_string(c)));
  }
  const std::string shown(text.substr(0, 80));
  // nccl.ALGO[.PROTO][.cN]: the library collective with NCCL's choice forced, as for all-reduce.
  if (text.substr(0, 5) == "nccl.") {
    AllReduceSpec spec;
    spec.ranges.push_back(SpecRange{
        AlgToken{"nccl", -1, to_string(parse_nccl_variant(text.substr(5), fmt::format("{} '{}'", parameter("spec"), shown)))},
        std::nullopt, -1});
    return spec;
  }
  if (const SpecName* name = find_spec_name(text, c).second) {
    AllReduceSpec spec;
    spec.ranges.push_back(SpecRange{AlgToken{name->token, -1, ""}, std::nullopt, -1});
    return spec;
  }
  throw InvalidInput(
      fmt::format("{} '{}': unknown {} algorithm (known: {}; a {} spec is one name, without "
                  "'#n', ranges or hybrids)",
                  parameter("spec"), shown, collective_flag_name(c), names_of(c), collective_flag_name(c)));
}

Plan build_collective_plan(const Topology& topo, std::string_view spec, const BuildOptions& options) {
  return build_plan(topo, parse_collective_spec(options.collective, spec), options);
}

}  // namespace artune
