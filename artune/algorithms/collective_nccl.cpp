// The library's all-gather and reduce-scatter (issue 17): one group op (ncclAllGather,
// ncclReduceScatter) over every rank, then the avg scale of each owner's block for reduce-scatter.
// nccl.ALGO[.PROTO][.cN] forces NCCL's choice (the simulator prices it with the NCCL model); their
// registry records are at the bottom.

#include "artune/algorithms/collective_families.hpp"
#include "artune/core/error.hpp"

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
    .specs = {{"nccl", nullptr, ArgKind::kNone, "one library all-gather (ncclAllGather) over all participants; nccl.ALGO[.PROTO][.cN] forces NCCL's "
               "choice (ALGO: ring, nvls, pat)"}},
    .emit = detail::emit_allgather_nccl_family,
    .closed_form = detail::nccl_ring_closed_form,
    .candidates = detail::nccl_candidates,
    .tuner_position = 80,
};
const Family reducescatter_nccl{
    .collective = Collective::kReduceScatter,
    .name = "nccl",
    .readable = "nccl",
    .specs = {{"nccl", nullptr, ArgKind::kNone,
               "one library reduce-scatter (ncclReduceScatter) over all participants; nccl.ALGO[.PROTO][.cN] forces "
               "NCCL's choice (ALGO: ring, nvls, pat)"}},
    .emit = detail::emit_reducescatter_nccl_family,
    .closed_form = detail::nccl_ring_closed_form,
    .candidates = detail::nccl_candidates,
    .tuner_position = 80,
};
}  // namespace artune::family
