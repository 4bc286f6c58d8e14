// Hierarchical copy, as TF's aggregate_gradients_using_hierarchical_copy
// (cross_device_utils.py), generalised from DGX-1's two NVLink quads to any
// grouping and to P packs.
//
// Per pack: every group reduces into its main device over in-group links
// (NVLink cliques), the mains reduce into group 0's main, which copies the
// total back to the other mains, and each main broadcasts inside its group.
// Rotating the main device with the pack index spreads the work over all
// devices, as TF rotates it with the gradient index.

#include <fmt/format.h>

#include <algorithm>

#include "algorithms/families.hpp"
#include "core/error.hpp"

namespace artune::detail {

void emit_hiercopy(Emitter& e, const std::vector<Slot>& slots, std::int64_t count, const HierCopyParams& p,
                   int scale_by) {
  const int n = static_cast<int>(slots.size());
  if (n == 0) return;
  if (p.packs < 1) throw InvalidInput(fmt::format("hiercopy#{}: packs must be ≥ 1", p.packs));
  // group_of[d] = (group, position in group); every slot exactly once.
  std::vector<std::pair<int, int>> group_of(static_cast<std::size_t>(n), {-1, -1});
  for (int g = 0; g < static_cast<int>(p.groups.size()); ++g) {
    const auto& members = p.groups[static_cast<std::size_t>(g)];
    if (members.empty()) throw InvalidInput("hiercopy: empty group");
    for (int q = 0; q < static_cast<int>(members.size()); ++q) {
      const int d = members[static_cast<std::size_t>(q)];
      if (d < 0 || d >= n || group_of[static_cast<std::size_t>(d)].first >= 0) {
        throw InvalidInput("hiercopy: groups must partition the participants");
      }
      group_of[static_cast<std::size_t>(d)] = {g, q};
    }
  }
  for (const auto& gq : group_of) {
    if (gq.first < 0) throw InvalidInput("hiercopy: groups must partition the participants");
  }
  const int groups = static_cast<int>(p.groups.size());
  auto slot = [&](int d) -> const Slot& { return slots[static_cast<std::size_t>(d)]; };

  for (int i = 0; i < p.packs; ++i) {
    const auto [off, len] = even_piece(count, p.packs, i);
    if (len == 0) continue;
    // TF: group_0_main_device = i % num_devices; group 1's main sits at the same position of the
    // other quad ((main + n/2) % n on DGX-1). Other groups follow group 0 cyclically.
    const int main0 = i % n;
    const auto [g0, q0] = group_of[static_cast<std::size_t>(main0)];
    std::vector<int> order;   // groups, group 0 first
    std::vector<int> mains;   // main device of each entry of `order`
    for (int k = 0; k < groups; ++k) {
      const int g = (g0 + k) % groups;
      const auto& members = p.groups[static_cast<std::size_t>(g)];
      order.push_back(g);
      mains.push_back(g == g0 ? main0 : members[static_cast<std::size_t>(q0) % members.size()]);
    }
    // Aggregate each group on its main (TF add_n on the main device).
    for (std::size_t k = 0; k < order.size(); ++k) {
      for (int d : p.groups[static_cast<std::size_t>(order[k])]) {
        if (d != mains[k]) e.reduce(at(slot(d), off, len), at(slot(mains[k]), off, len));
      }
    }
    // Aggregate between the groups on group 0's main.
    for (std::size_t k = 1; k < order.size(); ++k) {
      e.reduce(at(slot(mains[k]), off, len), at(slot(main0), off, len));
    }
    if (scale_by != kNoScale) e.scale(at(slot(main0), off, len), scale_by);
    // Back to the root of each group, then to each member from its root.
    for (std::size_t k = 1; k < order.size(); ++k) {
      e.copy(at(slot(main0), off, len), at(slot(mains[k]), off, len));
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
      for (int d : p.groups[static_cast<std::size_t>(order[k])]) {
        if (d != mains[k]) e.copy(at(slot(mains[k]), off, len), at(slot(d), off, len));
      }
    }
  }
}

}  // namespace artune::detail
