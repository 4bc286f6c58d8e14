#include "artune/executor/nccl/nccl_forced_choice.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "artune/algorithms/spec.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/schedule.hpp"

namespace artune {

NcclForcedChoice parse_nccl_forced_choice(std::string_view algo, std::string_view where) {
  const NcclVariant variant = parse_nccl_variant(algo, where);  // names checked there
  NcclForcedChoice out;
  if (const auto a = nccl_algo_of(variant.algo)) out.algo = std::string(nccl_name(*a).nccl);
  if (const auto p = nccl_proto_of(variant.proto)) out.proto = std::string(nccl_name(*p).nccl);
  out.channels = variant.channels;
  return out;
}

std::vector<NcclForcedChoice> nccl_forced_choices(const Plan& plan) {
  const auto groups = distinct_groups(plan);
  const auto index = group_index_of_ops(plan);
  std::vector<NcclForcedChoice> out(groups.size());
  std::vector<int> first(groups.size(), -1);  // the op that set each group's choice
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    if (index[i] < 0) continue;
    const auto g = static_cast<std::size_t>(index[i]);
    const NcclForcedChoice c = parse_nccl_forced_choice(plan.ops[i].algo, fmt::format("plan op {}", i));
    if (first[g] < 0) {
      first[g] = static_cast<int>(i);
      out[g] = c;
    } else if (!(out[g] == c)) {
      throw InvalidInput(
          fmt::format("nccl backend: ops {} and {} run on the same ranks with different NCCL "
                      "algorithms ('{}' and '{}'); one communicator per group cannot force both",
                      first[g], i, plan.ops[static_cast<std::size_t>(first[g])].algo, plan.ops[i].algo));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> nccl_forced_environment(const NcclForcedChoice& choice) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!choice.algo.empty()) out.emplace_back("NCCL_ALGO", choice.algo);
  if (!choice.proto.empty()) out.emplace_back("NCCL_PROTO", choice.proto);
  return out;
}

void apply_nccl_forced_channels(const NcclForcedChoice& choice, int& min_ctas, int& max_ctas) {
  if (choice.channels <= 0) return;
  min_ctas = choice.channels;
  max_ctas = choice.channels;
}

ScopedNcclForcedChoice::ScopedNcclForcedChoice(const NcclForcedChoice& choice) {
  for (const auto& [name, value] : nccl_forced_environment(choice)) {
    const char* previous = std::getenv(name.c_str());
    saved_.emplace_back(name, previous != nullptr ? std::optional<std::string>(previous) : std::nullopt);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
}

ScopedNcclForcedChoice::~ScopedNcclForcedChoice() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second) {
      ::setenv(it->first.c_str(), it->second->c_str(), 1);
    } else {
      ::unsetenv(it->first.c_str());
    }
  }
}

}  // namespace artune
