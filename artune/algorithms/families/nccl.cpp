// Library collectives: a single group all-reduce (TF build_nccl_all_reduce)
// and the NCCL hybrid of _build_nccl_hybrid.
//
// The plan only says "the library all-reduces this region on these devices";
// the simulator models the library as it runs (simulator/nccl_model.hpp); a spec such as nccl.ring.ll
// records the forced NCCL algorithm and protocol on the group op.

#include <fmt/format.h>

#include "artune/algorithms/families/families.hpp"
#include "artune/core/error.hpp"

namespace artune::detail {

namespace {

// A group op acts on one (buffer, offset) shared by every member.
void check_uniform(const std::vector<Slot>& slots, const char* what) {
  for (const Slot& s : slots) {
    if (s.buffer != slots.front().buffer || s.offset != slots.front().offset) {
      throw InvalidInput(
          fmt::format("{}: a library collective needs the same buffer and offset on every device", what));
    }
  }
}

std::vector<int> devices_of(const std::vector<Slot>& slots) {
  std::vector<int> out;
  for (const Slot& s : slots) out.push_back(s.device);
  return out;
}

}  // namespace

void emit_nccl(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by,
               const std::string& variant) {
  if (slots.empty()) return;
  check_uniform(slots, "nccl");
  // The group carries the sum; an average is that sum scaled on every rank (ncclAvg does the same).
  if (slots.size() > 1) {
    const int id =
        e.group(Collective::kAllReduce, devices_of(slots), slots.front().buffer, slots.front().offset, count);
    if (id >= 0) e.plan().ops[static_cast<std::size_t>(id)].algo = variant;
  }
  if (scale_by != kNoScale) {
    for (const Slot& s : slots) e.scale(at(s, 0, count), scale_by);
  }
}

void emit_nccl_hybrid(Emitter& e, const std::vector<std::vector<Slot>>& machines, std::int64_t count,
                      const UpperLevel& upper, int scale_by, const std::string& variant) {
  std::vector<Slot> reps;
  for (const auto& slots : machines) {
    if (slots.empty()) throw InvalidInput("nccl hybrid: a machine without participants");
    check_uniform(slots, "nccl hybrid");
    // TF all-sums inside the worker and forwards the first device's copy upwards.
    if (slots.size() > 1) {
      const int id =
          e.group(Collective::kAllReduce, devices_of(slots), slots.front().buffer, slots.front().offset, count);
      if (id >= 0) e.plan().ops[static_cast<std::size_t>(id)].algo = variant;
    }
    reps.push_back(slots.front());
  }
  upper(e, reps, count, scale_by);
  for (std::size_t m = 0; m < machines.size(); ++m) {
    const auto& slots = machines[m];
    if (slots.size() > 1) {
      e.group(Collective::kBroadcast, devices_of(slots), slots.front().buffer, slots.front().offset, count,
              reps[m].device);
    }
  }
}

// ---------------------------------------------------------------------------
// The library (NCCL) family's record.

namespace {

void emit_nccl_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_nccl(e, user_slots(ranks(s)), s.options.count, s.scale_by, token.variant);
}

// TF's _build_nccl_hybrid: a group all-reduce in each machine, `upper` across, a group broadcast back.
void nccl_lower(Emitter& e, const Setup& s, const SpecRange& range, const UpperLevel& upper) {
  std::vector<std::vector<Slot>> machines;
  for (const auto& w : s.workers) machines.push_back(machine_slots(w));
  emit_nccl_hybrid(e, machines, s.options.count, upper, s.scale_by, range.intra.variant);
}

// Run as one ring (host profiles): launch, then 2(p−1) steps of an n/p chunk on every ring edge at
// once: exact on one machine. Run as NCCL's model (GPU profiles): the least latency NCCL charges here,
// then every rank must take in at least (p−1)/p·n bytes over the links into it, a lower bound.
ClosedForm nccl_closed_form(const ClosedFormInput& in) {
  if (in.ranks < 2) return {0.0, Exactness::kExact};
  const int p = in.ranks;
  if (in.library_as_ring && in.token.variant.empty()) {
    const double chunk = in.bytes / p;
    const double t = in.group_launch_us + 2.0 * (p - 1) * (in.group_step_us + chunk * in.link.beta_us_per_byte);
    return {t, in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
  }
  return {in.library_latency_us + static_cast<double>(p - 1) / p * in.bytes * in.ingress_us_per_byte,
          Exactness::kLowerBound};
}

// The library's own choice, then each algorithm NCCL has here, forced (a forced one can beat NCCL's pick
// where its cost table misjudges the machine).
void nccl_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (!ctx.include_library) return;
  out.push_back({"nccl", {}, {}, CandidateSeed::Segments::kOne});
  for (const std::string& algo : ctx.library_algorithms) {
    out.push_back({fmt::format("nccl.{}", algo), {}, {}, CandidateSeed::Segments::kOne});
  }
}

}  // namespace

}  // namespace artune::detail

namespace artune::family {
const Family nccl{
    .name = "nccl",
    .readable = "nccl",
    .specs = {{"nccl",
               nullptr,
               ArgKind::kNone,
               "one NCCL all-reduce over all participants, NCCL's own algorithm x protocol per size; "
               "nccl.ALGO[.PROTO] forces one as NCCL_ALGO/NCCL_PROTO do (ALGO: ring, tree, nvls, nvlstree, pat; "
               "PROTO: ll, ll128, simple; e.g. nccl.ring, nccl.tree.ll, nccl.nvls)",
               {"xring", "rechd", "pscpu", "shuffle"}}},
    .emit = detail::emit_nccl_family,
    .lower = detail::nccl_lower,
    .closed_form = detail::nccl_closed_form,
    .candidates = detail::nccl_candidates,
    .tuner_position = 80,
};
}  // namespace artune::family
