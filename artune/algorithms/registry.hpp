#pragma once
// The algorithm registry: one `Family` record per algorithm family, defined in
// that family's own file and registered once. The spec parser (names, `#n`
// arguments, hybrids), the plan builder (flat emitters, the two levels of a
// hybrid), the tuner's candidate generator and the closed-form costs all
// iterate this registry instead of naming families themselves.
//
// Adding a family costs one new file (named in algorithms/meson.build) and one line here:
//
//   1. a new file under algorithms/ (listed in its meson.build) defines its
//      emitter and, at the bottom, its record:
//
//        namespace artune::family {
//        const Family my_family{
//            .name = "myfam",                       // label in candidates, tables and reports
//            .readable = "my-family",
//            .specs = {{"myfam", "my-family", ArgKind::kNone, "what it does"}},
//            .emit = emit_my_family,                // parameters from the Setup, then the ops
//            .closed_form = my_family_closed_form,  // α-β-γ time on a uniform topology, exact or a bound
//            .candidates = my_family_candidates,    // optional: what the tuner tries
//            .tuner_position = 75,                  // where its candidates come in the tuner's list
//        };
//        }  // namespace artune::family
//
//   2. one line `X(my_family)` in ARTUNE_FAMILIES below.
//
// Everything else (the grammar, `artune plan --help`, build_plan, autotune,
// closed_form_time) picks it up from the record.
//
// All-gather and reduce-scatter families (issue 17) are records of the same shape with `.collective` set,
// registered in ARTUNE_COLLECTIVE_FAMILIES; families(c), find_spec_name(token, c) and family_of(token, c)
// look them up per collective (their specs are one token each, or a hybrid `nccl/ring`: no `#n` or ranges;
// a hybrid's in-machine family has `inside`, its across-machines one `across`).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/spec.hpp"
#include "artune/topology/topology.hpp"

namespace artune {

namespace detail {
class Emitter;
struct Slot;
struct Setup;
struct Members;
using UpperLevel = std::function<void(Emitter& e, const std::vector<Slot>& reps, std::int64_t count, int scale_by)>;
}  // namespace detail

/// What `#n` means in a spec token; kNone: the token takes no argument.
enum class ArgKind { kNone, kSubchunks, kShards, kPacks, kRings, kCopies, kSlices };

/// One spec token of a family (the shuffle family has three: pscpu, psgpu, shuffle).
struct SpecName {
  const char* token;        ///< canonical name, printed by to_string (TF's token where TF has one)
  const char* alias;        ///< readable name accepted on input (nullptr: none)
  ArgKind arg;              ///< what `#n` means
  const char* description;  ///< one line for --help
  /// When this token is the in-machine level of a hybrid: the tokens allowed across machines, in the
  /// order --help lists the hybrids (empty: it cannot be the in-machine level).
  std::vector<const char*> hybrid_uppers = {};
};

/// The classic α-β-γ constants (Thakur, Rabenseifner and Gropp, IJHPCA 2005).
struct AlphaBetaGamma {
  double alpha_us = 0;           ///< per message (latency + overheads)
  double beta_us_per_byte = 0;   ///< 1 / link bandwidth
  double gamma_us_per_byte = 0;  ///< 1 / reduce bandwidth
};

/// Ring: 2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ (reduce-scatter then all-gather over n/p chunks).
double ring_allreduce_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Recursive doubling: lg p·α + n·lg p·β + n·lg p·γ for p a power of two; otherwise the
/// p − p' extra ranks (p' = 2^⌊lg p⌋) first fold their vector into a partner (α + nβ + nγ)
/// and get the result back at the end (α + nβ).
double recursive_doubling_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Rabenseifner (recursive halving reduce-scatter, recursive doubling all-gather):
/// 2 lg p·α + 2(p−1)/p·nβ + (p−1)/p·nγ for p a power of two; otherwise the same fold
/// as recursive_doubling_us around the power-of-two core of p' ranks.
double halving_doubling_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Shuffle (parameter server) as TF builds it with pairwise reductions, `gathers` shards of n/g
/// bytes, each shard device with its own links to every rank: a shard on a rank (in place) takes
/// the p−1 other pieces one after another (p−1)(α + n/g·β + n/g·γ) and sends the result back to
/// all at once (α + n/g·β): pα + p·n/g·β + (p−1)·n/g·γ. A shard on a helper (a CPU) first copies
/// one piece, so it costs one more α + n/g·β.
double shuffle_us(int p, int gathers, double n_bytes, const AlphaBetaGamma& c, bool gather_on_ranks = true);
/// Ring all-gather of n bytes in all (n/p per rank; issue 17): (p−1)α + (p−1)/p·nβ.
double ring_allgather_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Ring reduce-scatter of n bytes per rank: (p−1)α + (p−1)/p·n(β + γ).
double ring_reducescatter_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Bruck all-gather: ⌈lg p⌉α + (p−1)/p·nβ (every rank receives each other block once, lg p rounds).
double bruck_allgather_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Recursive-halving reduce-scatter, p a power of two: lg p·α + (p−1)/p·n(β + γ).
double halving_reducescatter_us(int p, double n_bytes, const AlphaBetaGamma& c);
/// Patarasuk–Yuan lower bound on the bandwidth term of any all-reduce: 2(p−1)/p · n / B (B in GB/s).
double allreduce_lower_bound_us(int p, double n_bytes, double bandwidth_gbps);

/// What a closed form is given (simulator/closed_form.hpp fills it from a topology and a cost model).
struct ClosedFormInput {
  const Topology& topo;            ///< where (families read their structure from it: rings, cliques, trees)
  const AlgToken& token;           ///< the spec token (its `#n`)
  int ranks = 0;                   ///< participants p (all GPUs)
  int machines = 1;                ///< machines holding them (same count on each)
  double bytes = 0;                ///< message size n
  AlphaBetaGamma link = {};        ///< one uncontended transfer between two GPUs of a machine (the best pair)
  AlphaBetaGamma network = {};     ///< between GPUs of two machines (equal to `link` on one machine)
  AlphaBetaGamma host = {};        ///< from a GPU to a CPU socket of its machine (shards gathered on CPUs)
  double ingress_us_per_byte = 0;  ///< 1 / Σ achievable bandwidth of the links into one GPU
  double group_launch_us = 0;      ///< library collective: launch latency (once)
  double group_step_us = 0;        ///< library collective: per ring step latency (hop + route + link-kind α)
  double library_latency_us = 0;   ///< NCCL's model: the least latency it charges here (0 under the ring)
  /// The simulator runs a library all-reduce as one ring (host profiles); false: as NCCL's model (GPU
  /// profiles), for which only a lower bound is known in closed form.
  bool library_as_ring = true;
};

/// How a closed form relates to the simulator.
enum class Exactness {
  kExact,       ///< equals the simulated time on a uniform topology (every GPU pair its own identical link)
  kLowerBound,  ///< never above the simulated time on a uniform topology (contention, serialisation left out)
};

/// A closed-form time.
struct ClosedForm {
  double time_us = 0;
  Exactness exactness = Exactness::kExact;
};

/// What the tuner tries of a family (a candidate before the pipeline depths are applied).
struct CandidateSeed {
  /// Which pipeline depths the tuner tries: every configured one, only 1 (when configured), or 1 always.
  enum class Segments { kAll, kNone, kOne };
  std::string spec;                 ///< one range
  std::vector<int> gpu_perm;        ///< empty = identity
  std::vector<std::string> gather;  ///< gather devices by node id; empty = builder default
  Segments segments = Segments::kAll;
  /// kAll: these pipeline depths instead of the tuner's (families whose pieces cross deep trees); empty = the tuner's.
  std::vector<int> depths = {};
};

/// What the tuner knows when it asks families for candidates (machine 0 stands for every machine).
struct CandidateContext {
  const Topology& topo;
  int machines = 1;
  int gpus = 0;                                     ///< GPUs of machine 0
  bool large = false;                               ///< beyond the exhaustive searches' size
  std::vector<std::vector<int>> orders = {};        ///< ring orders of machine 0, best first (identity included)
  std::size_t expanded_orders = 0;                  ///< orders[0..expanded) (and identity) get every variant
  std::vector<int> subchunks = {};                  ///< ring subchunk counts to try
  std::vector<std::vector<int>> best_cycles = {};   ///< NVLink Hamiltonian cycles of machine 0, best first
  std::vector<std::vector<double>> bandwidth = {};  ///< route GB/s between the local GPUs of machine 0
  int exhaustive_gpus = 16;                         ///< GPUs per machine up to which searches are exhaustive
  bool include_library = true;                      ///< library collectives (nccl) wanted
  /// NCCL algorithms the library model offers on this topology ("ring", "tree", …), filled by the tuner.
  std::vector<std::string> library_algorithms = {};
  // Filled by the families for the tuner's summary.
  int* disjoint_rings = nullptr;                     ///< link-disjoint rings found on machine 0
  std::vector<std::vector<int>>* cliques = nullptr;  ///< NVLink cliques of machine 0
};

/// One algorithm family.
struct Family {
  Collective collective = Collective::kAllReduce;  ///< what its plans compute
  const char* name = "";        ///< short label in candidates, decision tables and reports (pinned by tables)
  const char* readable = "";    ///< readable name for code, docs and --help
  std::vector<SpecName> specs;  ///< its spec tokens, in --help order
  /// Builds its parameters from the setup and emits the whole collective (one level).
  void (*emit)(detail::Emitter& e, const detail::Setup& s, const AlgToken& token) = nullptr;
  /// Across machines in a hybrid: the upper level over one representative per machine (nullptr: cannot).
  detail::UpperLevel (*upper)(detail::Emitter& e, const detail::Setup& s, const SpecRange& range) = nullptr;
  /// Inside machines in a hybrid, around `upper` (nullptr: cannot).
  void (*lower)(detail::Emitter& e, const detail::Setup& s, const SpecRange& range,
                const detail::UpperLevel& upper) = nullptr;
  /// Across machines in an all-gather or reduce-scatter hybrid: the collective over one GPU per machine (a
  /// column of the grid; member i owns the plan's block members.blocks[i]), without avg's scale (nullptr:
  /// cannot).
  void (*across)(detail::Emitter& e, const detail::Members& members) = nullptr;
  /// Inside machines in an all-gather or reduce-scatter hybrid, around `across` run once per local GPU
  /// (nullptr: cannot).
  void (*inside)(detail::Emitter& e, const detail::Setup& s, const SpecRange& range,
                 void (*across)(detail::Emitter& e, const detail::Members& members)) = nullptr;
  /// α-β-γ time of the flat collective.
  ClosedForm (*closed_form)(const ClosedFormInput& in) = nullptr;
  /// An upper bound on the ops `emit` writes, in closed form from the setup (nullptr: none; the families
  /// whose plans can outgrow kMaxPlanOps have one, so that build_plan refuses before emitting).
  std::uint64_t (*max_ops)(const detail::Setup& s, const AlgToken& token) = nullptr;
  /// The candidates the tuner tries (nullptr: none).
  void (*candidates)(CandidateContext& ctx, std::vector<CandidateSeed>& out) = nullptr;
  /// Where its candidates come in the tuner's list (ties keep generation order, so the positions of the
  /// shipped families are fixed; a new family takes a free number).
  int tuner_position = 0;
};

/// Every registered family of collective `c` (all-reduce, all-gather or reduce-scatter), in --help order.
const std::vector<const Family*>& families(Collective c = Collective::kAllReduce);
/// The all-reduce family with this short name (Family::name), or nullptr.
const Family* family_named(std::string_view name);
/// The family of `c` and spec name of a token or alias, or {nullptr, nullptr}.
std::pair<const Family*, const SpecName*> find_spec_name(std::string_view token, Collective c = Collective::kAllReduce);
/// The family of `c` of a parsed token (InvalidInput if none: a token not made by the spec parsers).
const Family& family_of(const AlgToken& token, Collective c = Collective::kAllReduce);

// The registration list: one line per family (its record is defined in its own file).
#define ARTUNE_FAMILIES(X) \
  X(ring)                  \
  X(halving_doubling)      \
  X(shuffle)               \
  X(hierarchical_copy)     \
  X(nccl)                  \
  X(multi_ring)            \
  X(double_binary_tree)    \
  X(two_d)                 \
  X(trees)

// All-gather and reduce-scatter families (issue 17), same shape.
#define ARTUNE_COLLECTIVE_FAMILIES(X) \
  X(allgather_ring)                   \
  X(allgather_bruck)                  \
  X(allgather_rd)                     \
  X(allgather_nccl)                   \
  X(allgather_two_d)                  \
  X(reducescatter_ring)               \
  X(reducescatter_halving)            \
  X(reducescatter_nccl)               \
  X(reducescatter_two_d)              \
  X(allgather_trees)                  \
  X(reducescatter_trees)

namespace family {
#define ARTUNE_DECLARE_FAMILY(f) extern const Family f;
ARTUNE_FAMILIES(ARTUNE_DECLARE_FAMILY)
ARTUNE_COLLECTIVE_FAMILIES(ARTUNE_DECLARE_FAMILY)
#undef ARTUNE_DECLARE_FAMILY
}  // namespace family

}  // namespace artune
