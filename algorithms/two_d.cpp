// 2-D hierarchical all-reduce: a ring reduce-scatter inside each machine, a
// ring all-reduce of each shard across machines by the GPUs holding it (one
// ring per local position, all in parallel), a ring all-gather inside each
// machine. Inter-machine traffic per GPU drops to 2(W−1)/W·m/G.

#include <fmt/format.h>

#include <numeric>

#include "algorithms/families.hpp"
#include "core/error.hpp"

namespace artune::detail {

void emit_two_d(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const TwoDParams& p, int scale_by) {
  const int machines = static_cast<int>(p.grid.size());
  if (machines == 0) return;
  const int gpus = static_cast<int>(p.local_order.size());
  for (const auto& row : p.grid) {
    if (static_cast<int>(row.size()) != gpus) {
      throw InvalidInput(fmt::format("2d: machines must hold the same number of participants ({} and {})",
                                     row.size(), gpus));
    }
  }
  const RingParams local{{p.local_order}};
  std::vector<std::vector<Slot>> machine_slots;
  for (const auto& row : p.grid) {
    std::vector<Slot> ms;
    for (int d : row) ms.push_back(slots[static_cast<std::size_t>(d)]);
    machine_slots.push_back(std::move(ms));
  }
  for (const auto& ms : machine_slots) emit_ring_reduce_scatter(e, ms, count, local);
  // After the local reduce-scatter the GPU at ring rank r holds chunk r of its machine's sum; the
  // same local GPU holds the same chunk on every machine.
  std::vector<int> across(static_cast<std::size_t>(machines));
  std::iota(across.begin(), across.end(), 0);
  std::vector<int> rank_of(static_cast<std::size_t>(gpus), -1);
  for (int r = 0; r < gpus; ++r) {
    const int l = p.local_order[static_cast<std::size_t>(r)];
    if (l < 0 || l >= gpus || rank_of[static_cast<std::size_t>(l)] >= 0) {
      throw InvalidInput(fmt::format("2d: local order is not a permutation of 0..{}", gpus - 1));
    }
    rank_of[static_cast<std::size_t>(l)] = r;
  }
  // Local GPUs in index order, as a ring scales its owned chunks (so one machine gives the ring plan).
  for (int l = 0; l < gpus; ++l) {
    const auto [off, len] = padded_piece(count, gpus, rank_of[static_cast<std::size_t>(l)]);
    if (len == 0) continue;
    std::vector<Slot> column;
    for (const auto& ms : machine_slots) {
      Slot s = ms[static_cast<std::size_t>(l)];
      s.offset += off;
      column.push_back(s);
    }
    emit_ring(e, column, len, RingParams{{across}}, scale_by);
  }
  for (const auto& ms : machine_slots) emit_ring_all_gather(e, ms, count, local);
}

}  // namespace artune::detail
