// All-gather and reduce-scatter plans (issue 17): their spec names, the parser of their one-token
// specs, the library group op, and the one dispatch from (collective, spec token) to a family's
// emitter. build_plan() calls emit_collective() for any plan that is not an all-reduce, after its
// shared checks (count, participants, --gpu-perm) and before pipelining and verification.

#include "artune/algorithms/collectives.hpp"

#include <fmt/format.h>

#include <array>

#include "artune/algorithms/collective_families.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

namespace {

struct CollectiveAlg {
  Collective collective;
  const char* name;
  const char* description;
};

constexpr std::array<CollectiveAlg, 9> kCollectiveAlgs{{
    {Collective::kAllGather, "ring", "ring all-gather: n-1 steps, (n-1)/n of the buffer over each link; alias xring"},
    {Collective::kAllGather, "bruck", "Bruck all-gather: ceil(lg n) steps for any n, blocks copied to their places"},
    {Collective::kAllGather, "rd",
     "recursive-doubling all-gather: lg n exchanges; a non-power-of-two n folds its extra ranks first"},
    {Collective::kAllGather, "nccl", "one library all-gather (ncclAllGather) over all participants"},
    {Collective::kAllGather, "2d",
     "2-D all-gather: ring across machines per local GPU, then ring inside each machine over those columns"},
    {Collective::kReduceScatter, "ring", "ring reduce-scatter: n-1 steps of reduce into the next rank; alias xring"},
    {Collective::kReduceScatter, "halving",
     "recursive-halving reduce-scatter: lg n steps; a non-power-of-two n folds its extra ranks first"},
    {Collective::kReduceScatter, "nccl", "one library reduce-scatter (ncclReduceScatter) over all participants"},
    {Collective::kReduceScatter, "2d",
     "2-D reduce-scatter: ring inside each machine over columns of blocks, then ring across machines"},
}};

std::string names_of(Collective c) {
  std::string out;
  for (const CollectiveAlg& a : kCollectiveAlgs) {
    if (a.collective != c) continue;
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> collective_algorithms(Collective c) {
  if (c == Collective::kAllReduce) return spec_algorithms();
  std::vector<std::pair<std::string, std::string>> out;
  for (const CollectiveAlg& a : kCollectiveAlgs) {
    if (a.collective == c) out.emplace_back(a.name, a.description);
  }
  return out;
}

AllReduceSpec parse_collective_spec(Collective c, std::string_view text) {
  if (c == Collective::kAllReduce) return parse_spec(text);
  if (c != Collective::kAllGather && c != Collective::kReduceScatter) {
    throw InvalidInput(fmt::format("{}: {} is not a plan of its own", parameter("collective"), to_string(c)));
  }
  std::string_view name = text;
  if (name == "xring") name = "ring";
  for (const CollectiveAlg& a : kCollectiveAlgs) {
    if (a.collective == c && name == a.name) {
      AllReduceSpec spec;
      spec.ranges.push_back(SpecRange{AlgToken{a.name, -1, ""}, std::nullopt, -1});
      return spec;
    }
  }
  const std::string shown(text.substr(0, 80));
  throw InvalidInput(
      fmt::format("{} '{}': unknown {} algorithm (known: {}; a {} spec is one name, without "
                  "'#n', ranges or hybrids)",
                  parameter("spec"), shown, collective_flag_name(c), names_of(c), collective_flag_name(c)));
}

Plan build_collective_plan(const Topology& topo, std::string_view spec, const BuildOptions& options) {
  return build_plan(topo, parse_collective_spec(options.collective, spec), options);
}

namespace detail {

void emit_collective_group(Emitter& e, Collective c, const std::vector<Slot>& slots, std::int64_t count, int scale_by) {
  const int n = static_cast<int>(slots.size());
  std::vector<int> devices;
  for (const Slot& s : slots) devices.push_back(s.device);
  if (n > 1) e.group(c, devices, slots.front().buffer, slots.front().offset, count);
  if (c != Collective::kReduceScatter || scale_by == kNoScale) return;
  for (int k = 0; k < n; ++k) e.scale(blocks_at(slots[static_cast<std::size_t>(k)], count, n, k, k + 1), scale_by);
}

void emit_collective(Emitter& e, Collective c, const AlgToken& token, const std::vector<std::vector<int>>& workers,
                     const std::vector<int>& ring_order, int scale_by) {
  const std::vector<Slot> slots = user_slots(static_cast<int>(ring_order.size()));

  const std::int64_t count = e.plan().count;
  const std::string& name = token.name;
  if (c == Collective::kAllGather) {
    if (name == "ring" || name == "xring") return emit_allgather_ring(e, slots, count, ring_order);
    if (name == "bruck") return emit_allgather_bruck(e, slots, count);
    if (name == "rd") return emit_allgather_rd(e, slots, count);
    if (name == "nccl") return emit_collective_group(e, c, slots, count, scale_by);
    if (name == "2d") return emit_allgather_two_d(e, slots, count, workers);
  } else if (c == Collective::kReduceScatter) {
    if (name == "ring" || name == "xring") return emit_reducescatter_ring(e, slots, count, ring_order, scale_by);
    if (name == "halving") return emit_reducescatter_halving(e, slots, count, scale_by);
    if (name == "nccl") return emit_collective_group(e, c, slots, count, scale_by);
    if (name == "2d") return emit_reducescatter_two_d(e, slots, count, workers, scale_by);
  }
  throw InvalidInput(
      fmt::format("{}: no {} plan of this family (known: {})", name, collective_flag_name(c), names_of(c)));
}

}  // namespace detail

}  // namespace artune
