// The library's all-gather and reduce-scatter (issue 17): one group op (ncclAllGather,
// ncclReduceScatter) over every rank, then the avg scale of each owner's block for reduce-scatter.
// nccl.ALGO[.PROTO][.cN] forces NCCL's choice (the simulator prices it with the NCCL model).
//
// The hybrids `nccl/ring`, `nccl/bruck`, `nccl/rd` (all-gather) and `nccl/ring`, `nccl/halving`
// (reduce-scatter): W machines of g GPUs each, machine m holding ranks m·g … m·g+g−1, so that the
// blocks of machine m form one contiguous chunk m of the buffer and GPU l's block of chunk m is piece
// l of it (even_piece of the chunk equals the plan's balanced blocks there: larger pieces first).
//   all-gather:     (a) per local GPU l, the point-to-point family across machines over column l
//                   (GPU l of every machine, blocks m·g + l), so that GPU l holds block m·g+l of every
//                   chunk; (b) in every machine, per chunk m, one library all-gather of chunk m in which
//                   GPU l contributes its piece l = block m·g + l.
//   reduce-scatter: (a) in every machine, per chunk m, one library reduce-scatter of chunk m (GPU l
//                   keeps piece l = block m·g + l reduced over its machine); (b) per column l, the
//                   point-to-point reduce-scatter across machines over those blocks; then avg's scale
//                   once on each owner.
// Across machines every GPU moves (W−1) blocks, the (W−1)/W of the buffer per machine that any
// all-gather must bring in; inside, the library moves (g−1)/g of every chunk. Their registry records
// are at the bottom.

#include <fmt/format.h>

#include "artune/algorithms/families/collective_families.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune::detail {

void emit_collective_group(Emitter& e, Collective c, const std::vector<Slot>& slots, int scale_by,
                           const std::string& variant) {
  const int n = static_cast<int>(slots.size());
  std::vector<int> devices;
  for (const Slot& s : slots) devices.push_back(s.device);
  // NCCL's all-gather and reduce-scatter cut the buffer evenly: no all-gather-v.
  if (!e.plan().blocks.empty())
    throw InvalidInput("nccl: the library's collectives need even blocks (all-gather-v: a point-to-point family)");
  if (n > 1) {
    const int id = e.group(c, devices, slots.front().buffer, slots.front().offset, e.plan().count);
    if (id >= 0) e.plan().ops[static_cast<std::size_t>(id)].algo = variant;
  }
  if (c == Collective::kReduceScatter) scale_owned_blocks(e, slots, scale_by);
}

namespace {

// The machines of a hybrid, checked: the same g GPUs on each, machine m holding ranks m·g … m·g+g−1.
void check_hybrid_grid(const Setup& s, const SpecRange& range) {
  const std::string spec = fmt::format("{} {}", parameter("spec"), to_string(range));
  const std::string kind(collective_flag_name(s.options.collective));
  const auto& workers = s.workers;
  for (const auto& w : workers) {
    if (w.size() != workers.front().size()) {
      throw InvalidInput(
          fmt::format("{}: a hybrid {} needs the same number of participants on every machine ({} and {})", spec, kind,
                      workers.front().size(), w.size()));
    }
  }
  const int g = static_cast<int>(workers.front().size());
  for (std::size_t m = 0; m < workers.size(); ++m) {
    for (int l = 0; l < g; ++l) {
      if (workers[m][static_cast<std::size_t>(l)] != static_cast<int>(m) * g + l) {
        throw InvalidInput(
            fmt::format("{}: a hybrid {} needs each machine's participants to be consecutive ranks, machine by "
                        "machine (rank {} is on machine {})",
                        spec, kind, workers[m][static_cast<std::size_t>(l)], m));
      }
    }
  }
  if (!s.options.blocks.empty())
    throw InvalidInput(
        fmt::format("{}: the library's collectives need even blocks (all-gather-v: a point-to-point "
                    "family)",
                    spec));
}

// GPU l of every machine, owning blocks m·g + l.
Members column(const Setup& s, std::size_t l) {
  Members out;
  for (const auto& w : s.workers) {
    out.slots.push_back(Slot{w[l], 0, 0});
    out.blocks.push_back(w[l]);
  }
  return out;
}

// Per machine, per chunk m (the blocks of machine m): one library group op of `c` over the machine's GPUs.
void chunk_groups(Emitter& e, const Setup& s, Collective c, const std::string& variant) {
  const int g = static_cast<int>(s.workers.front().size());
  if (g < 2) return;
  for (const auto& machine : s.workers) {
    for (std::size_t m = 0; m < s.workers.size(); ++m) {
      const int first = s.workers[m].front();
      const std::int64_t lo = collective_block(e.plan(), first).first;
      const auto [off, cnt] = collective_block(e.plan(), first + g - 1);
      const int id = e.group(c, machine, 0, lo, off + cnt - lo);
      if (id >= 0) e.plan().ops[static_cast<std::size_t>(id)].algo = variant;
    }
  }
}

void allgather_inside(Emitter& e, const Setup& s, const SpecRange& range,
                      void (*across)(Emitter& e, const Members& members)) {
  check_hybrid_grid(s, range);
  for (std::size_t l = 0; l < s.workers.front().size(); ++l) across(e, column(s, l));
  chunk_groups(e, s, Collective::kAllGather, range.intra.variant);
}

void reducescatter_inside(Emitter& e, const Setup& s, const SpecRange& range,
                          void (*across)(Emitter& e, const Members& members)) {
  check_hybrid_grid(s, range);
  chunk_groups(e, s, Collective::kReduceScatter, range.intra.variant);
  for (std::size_t l = 0; l < s.workers.front().size(); ++l) across(e, column(s, l));
  scale_owned_blocks(e, user_slots(ranks(s)), s.scale_by);
}

void emit_allgather_nccl_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_collective_group(e, Collective::kAllGather, user_slots(ranks(s)), s.scale_by, token.variant);
}

void emit_reducescatter_nccl_family(Emitter& e, const Setup& s, const AlgToken& token) {
  emit_collective_group(e, Collective::kReduceScatter, user_slots(ranks(s)), s.scale_by, token.variant);
}

// Run as one ring (host profiles): the launch, then p−1 steps of one block (n/p) over every edge, exact on
// one uniform machine. Run as NCCL's model (GPU profiles): the least latency NCCL charges this collective
// here, then every rank must take in (p−1)/p·n bytes over the links into it, a lower bound.
ClosedForm nccl_ring_closed_form(const ClosedFormInput& in) {
  if (in.ranks < 2) return {in.group_launch_us, Exactness::kExact};
  const int p = in.ranks;
  if (in.library_as_ring && in.token.variant.empty()) {
    const double t = in.group_launch_us + (p - 1) * (in.group_step_us + in.bytes / p * in.link.beta_us_per_byte);
    return {t, in.machines == 1 ? Exactness::kExact : Exactness::kLowerBound};
  }
  return {in.library_latency_us + static_cast<double>(p - 1) / p * in.bytes * in.ingress_us_per_byte,
          Exactness::kLowerBound};
}

void nccl_candidates(CandidateContext& ctx, std::vector<CandidateSeed>& out) {
  if (ctx.include_library) out.push_back({"nccl", {}, {}, CandidateSeed::Segments::kOne});
}

}  // namespace
}  // namespace artune::detail

namespace artune::family {
const Family allgather_nccl{
    .collective = Collective::kAllGather,
    .name = "nccl",
    .readable = "nccl",
    .specs = {{"nccl",
               nullptr,
               ArgKind::kNone,
               "one library all-gather (ncclAllGather) over all participants; nccl.ALGO[.PROTO][.cN] forces NCCL's "
               "choice (ALGO: ring, nvls, pat)",
               {"ring", "bruck", "rd"}}},
    .emit = detail::emit_allgather_nccl_family,
    .inside = detail::allgather_inside,
    .closed_form = detail::nccl_ring_closed_form,
    .candidates = detail::nccl_candidates,
    .tuner_position = 80,
};
const Family reducescatter_nccl{
    .collective = Collective::kReduceScatter,
    .name = "nccl",
    .readable = "nccl",
    .specs = {{"nccl",
               nullptr,
               ArgKind::kNone,
               "one library reduce-scatter (ncclReduceScatter) over all participants; nccl.ALGO[.PROTO][.cN] forces "
               "NCCL's choice (ALGO: ring, nvls, pat)",
               {"ring", "halving"}}},
    .emit = detail::emit_reducescatter_nccl_family,
    .inside = detail::reducescatter_inside,
    .closed_form = detail::nccl_ring_closed_form,
    .candidates = detail::nccl_candidates,
    .tuner_position = 80,
};
}  // namespace artune::family
