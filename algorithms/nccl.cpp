// Library collectives: a single group all-reduce (TF build_nccl_all_reduce)
// and the NCCL hybrid of _build_nccl_hybrid.
//
// The plan only says "the library all-reduces this region on these devices";
// the simulator models the library as it runs (simulator/nccl_model.hpp); a spec such as nccl.ring.ll
// records the forced NCCL algorithm and protocol on the group op.

#include <fmt/format.h>

#include "algorithms/families.hpp"
#include "core/error.hpp"

namespace artune::detail {

namespace {

// A group op acts on one (buffer, offset) shared by every member.
void check_uniform(const std::vector<Slot>& slots, const char* what) {
  for (const Slot& s : slots) {
    if (s.buffer != slots.front().buffer || s.offset != slots.front().offset) {
      throw InvalidInput(fmt::format("{}: a library collective needs the same buffer and offset on every device",
                                     what));
    }
  }
}

std::vector<int> devices_of(const std::vector<Slot>& slots) {
  std::vector<int> out;
  for (const Slot& s : slots) out.push_back(s.device);
  return out;
}

}  // namespace

void emit_nccl(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, int scale_by, const std::string& variant) {
  if (slots.empty()) return;
  check_uniform(slots, "nccl");
  // The group carries the sum; an average is that sum scaled on every rank (ncclAvg does the same).
  if (slots.size() > 1) {
    const int id = e.group(Collective::kAllReduce, devices_of(slots), slots.front().buffer, slots.front().offset, count);
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

}  // namespace artune::detail
