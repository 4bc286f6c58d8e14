// All-gather and reduce-scatter plans (issue 17): their spec names and the parser of their
// one-token specs, both read from the registry's families of each collective
// (ARTUNE_COLLECTIVE_FAMILIES); build_plan() emits them through the same records.

#include "artune/algorithms/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>

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

// The hybrids of `c` (in-machine token, across-machines token), in --help order.
std::vector<std::pair<std::string, std::string>> hybrids_of(Collective c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Family* f : families(c)) {
    for (const SpecName& n : f->specs) {
      for (const char* upper : n.hybrid_uppers) out.emplace_back(n.token, upper);
    }
  }
  return out;
}

std::string hybrid_names(Collective c) {
  std::string out;
  for (const auto& [intra, inter] : hybrids_of(c)) out += fmt::format("{}{}/{}", out.empty() ? "" : ", ", intra, inter);
  return out;
}

// One token of a collective spec: a family's name or alias, or nccl.ALGO[.PROTO][.cN].
AlgToken collective_token(Collective c, std::string_view token, std::string_view text) {
  const std::string shown(text.substr(0, 80));
  if (token.substr(0, 5) == "nccl.") {
    return AlgToken{"nccl", -1,
                    to_string(parse_nccl_variant(token.substr(5), fmt::format("{} '{}'", parameter("spec"), shown)))};
  }
  if (const SpecName* name = find_spec_name(token, c).second) return AlgToken{name->token, -1, ""};
  const std::string_view name = collective_flag_name(c);
  const std::string_view article = name.find_first_of("aeiou") == 0 ? "an" : "a";
  throw InvalidInput(fmt::format(
      "{} '{}': unknown {} algorithm{} (known: {}; hybrids: {}; {} {} spec has no '#n' or ranges)", parameter("spec"),
      shown, name, token.size() == text.size() ? "" : fmt::format(" '{}'", token.substr(0, 80)), names_of(c),
      hybrid_names(c), article, name));
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
  for (const auto& [intra, inter] : hybrids_of(c)) {
    out.emplace_back(fmt::format("{}/{}", intra, inter),
                     fmt::format("{} inside each machine (one library call per machine's chunk of blocks), {} across "
                                 "machines per local GPU; one machine: {} alone",
                                 intra, inter, intra));
  }
  return out;
}

AllReduceSpec parse_collective_spec(Collective c, std::string_view text) {
  if (c == Collective::kAllReduce) return parse_spec(text);
  if (c != Collective::kAllGather && c != Collective::kReduceScatter) {
    throw InvalidInput(fmt::format("{}: {} is not a plan of its own", parameter("collective"), to_string(c)));
  }
  const std::string shown(text.substr(0, 80));
  AllReduceSpec spec;
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    spec.ranges.push_back(SpecRange{collective_token(c, text, text), std::nullopt, -1});
    return spec;
  }
  // A hybrid: in-machine/across-machines, as the all-reduce hybrids are spelled (nccl/ring, nccl.ring/bruck).
  const AlgToken intra = collective_token(c, text.substr(0, slash), text);
  const AlgToken inter = collective_token(c, text.substr(slash + 1), text);
  const auto pairs = hybrids_of(c);
  if (std::find(pairs.begin(), pairs.end(), std::pair<std::string, std::string>{intra.name, inter.name}) ==
      pairs.end()) {
    throw InvalidInput(fmt::format("{} '{}': {}/{} is not a supported {} hierarchy (supported: {})", parameter("spec"),
                                   shown, intra.name, inter.name, collective_flag_name(c), hybrid_names(c)));
  }
  spec.ranges.push_back(SpecRange{intra, inter, -1});
  return spec;
}

Plan build_collective_plan(const Topology& topo, std::string_view spec, const BuildOptions& options) {
  return build_plan(topo, parse_collective_spec(options.collective, spec), options);
}

}  // namespace artune
