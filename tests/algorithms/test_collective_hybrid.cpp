// Hybrid all-gather and reduce-scatter plans (issue 17): the library inside each machine (one group op
// per machine's chunk of blocks), a point-to-point family across machines per local GPU. The verifier
// proves every hybrid at several machine × GPU shapes (machine counts that are not powers of two
// included), their structure is exact, and bad grids, specs and blocks are refused with one line.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artune/algorithms/collectives.hpp"
#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

const std::vector<std::string> kAllGatherHybrids = {"nccl/ring", "nccl/bruck", "nccl/rd"};
const std::vector<std::string> kReduceScatterHybrids = {"nccl/ring", "nccl/halving"};

BuildOptions kind_opts(Collective c, std::int64_t count, ReduceOp op = ReduceOp::kSum, int segments = 1) {
  BuildOptions o = opts(count, op, {}, segments);
  o.collective = c;
  o.verify = false;
  return o;
}

Plan build_checked(const std::string& name, Collective c, const std::string& spec, const BuildOptions& o) {
  const Plan plan = build_collective_plan(topo(name), spec, o);
  const VerifyResult r = verify(plan);
  INFO(name, " ", collective_flag_name(c), " ", spec, " count=", o.count, " op=", to_string(o.reduce_op),
       " segments=", o.segments, "\n", problems(r));
  CHECK(r.ok);
  CHECK(plan.collective == c);
  return plan;
}

int machine_of(const Topology& t, const Plan& plan, int device) {
  return t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(device)].node)].machine;
}

}  // namespace

TEST_CASE("collective_hybrid.every_hybrid_verifies_at_every_shape") {
  for (const char* name : {"uniform:2x2", "uniform:3x2", "uniform:2x3", "uniform:4x2", "uniform:3x3", "uniform:5x2",
                           "uniform:2x1", "uniform:6x1"}) {
    const int ranks = static_cast<int>(topo(name).gpus().size());
    for (const std::int64_t count :
         {std::int64_t{1}, std::int64_t{7}, std::int64_t{13}, std::int64_t{64} * ranks + 5, std::int64_t{1001}}) {
      for (const std::string& spec : kAllGatherHybrids) {
        build_checked(name, Collective::kAllGather, spec, kind_opts(Collective::kAllGather, count));
      }
      for (const std::string& spec : kReduceScatterHybrids) {
        for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          build_checked(name, Collective::kReduceScatter, spec, kind_opts(Collective::kReduceScatter, count, op));
        }
      }
    }
    // Pipelined: the point-to-point level is cut into segments, the group ops stay whole.
    for (const std::string& spec : kAllGatherHybrids) {
      build_checked(name, Collective::kAllGather, spec, kind_opts(Collective::kAllGather, 1001, ReduceOp::kSum, 3));
    }
    for (const std::string& spec : kReduceScatterHybrids) {
      build_checked(name, Collective::kReduceScatter, spec,
                    kind_opts(Collective::kReduceScatter, 1001, ReduceOp::kAvg, 3));
    }
  }
}

TEST_CASE("collective_hybrid.structure_groups_and_traffic") {
  for (const char* name : {"uniform:2x4", "uniform:3x2", "uniform:4x3"}) {
    const Topology& t = topo(name);
    const int ranks = static_cast<int>(t.gpus().size());
    const int machines = t.machine_count();
    const int g = ranks / machines;
    const std::int64_t block = 64;
    for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      const auto& specs = c == Collective::kAllGather ? kAllGatherHybrids : kReduceScatterHybrids;
      for (const std::string& spec : specs) {
        CAPTURE(name);
        CAPTURE(spec);
        const Plan plan = build_checked(name, c, spec, kind_opts(c, block * ranks, ReduceOp::kAvg));
        CHECK(plan.spec == spec);
        // Per machine, one library call of the collective per machine's chunk of blocks (g blocks, in rank order).
        int groups = 0, scales = 0;
        std::int64_t across = 0, inside = 0;
        for (const Op& op : plan.ops) {
          if (op.kind == OpKind::kGroup) {
            ++groups;
            CHECK(op.collective == c);
            CHECK(static_cast<int>(op.group.size()) == g);
            CHECK(op.dst.count == block * g);
            CHECK(op.dst.offset % (block * g) == 0);
            const int m = machine_of(t, plan, op.group.front());
            for (std::size_t l = 0; l < op.group.size(); ++l) {
              CHECK(op.group[l] == m * g + static_cast<int>(l));
            }
          } else if (op.kind == OpKind::kScale) {
            ++scales;
            CHECK(op.dst.count == block);
            CHECK(op.dst.offset == block * op.dst.device);
          } else if (is_transfer(op)) {
            (machine_of(t, plan, op.src.device) != machine_of(t, plan, op.dst.device) ? across : inside) +=
                op.dst.count;
          }
        }
        CHECK(groups == machines * machines);
        CHECK(inside == 0);
        // avg: each owner scales its block once (reduce-scatter); an all-gather has nothing to scale.
        CHECK(scales == (c == Collective::kReduceScatter ? ranks : 0));
        // Across machines each GPU receives its column's other W−1 blocks once (ring, Bruck and rd, whose fold
        // hands each block on once); the fold of halving reduces every block of a column first, so more.
        const bool folds = spec == "nccl/halving" && (machines & (machines - 1)) != 0;
        if (folds) {
          CHECK(across > std::int64_t{ranks} * (machines - 1) * block);
        } else {
          CHECK(across == std::int64_t{ranks} * (machines - 1) * block);
        }
      }
    }
  }
}

TEST_CASE("collective_hybrid.forced_nccl_choice_and_one_machine") {
  // nccl.ALGO/… forces NCCL's choice on every in-machine group op.
  const Plan forced = build_checked("uniform:2x4", Collective::kAllGather, "nccl.ring.ll/bruck",
                                    kind_opts(Collective::kAllGather, 800));
  CHECK(forced.spec == "nccl.ring.ll/bruck");
  int groups = 0;
  for (const Op& op : forced.ops) {
    if (op.kind != OpKind::kGroup) continue;
    ++groups;
    CHECK(op.algo == "ring.ll");
  }
  CHECK(groups == 4);
  // One machine: the hybrid is its in-machine level alone, as the all-reduce hybrids are.
  for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    const Plan hybrid = build_checked("uniform:4", c, "nccl/ring", kind_opts(c, 103, ReduceOp::kAvg));
    const Plan flat = build_checked("uniform:4", c, "nccl", kind_opts(c, 103, ReduceOp::kAvg));
    CHECK(hybrid.ops == flat.ops);
  }
  // One GPU per machine: no group ops, the across-machines family alone.
  const Plan columns =
      build_checked("uniform:3x1", Collective::kAllGather, "nccl/bruck", kind_opts(Collective::kAllGather, 30));
  const Plan bruck = build_checked("uniform:3", Collective::kAllGather, "bruck", kind_opts(Collective::kAllGather, 30));
  CHECK(columns.ops.size() == bruck.ops.size());
  for (const Op& op : columns.ops) CHECK(op.kind == OpKind::kCopy);
}

TEST_CASE("collective_hybrid.specs") {
  CHECK(parse_collective_spec(Collective::kAllGather, "nccl/xring") ==
        parse_collective_spec(Collective::kAllGather, "nccl/ring"));
  CHECK(parse_collective_spec(Collective::kAllGather, "nccl/recursive-doubling") ==
        parse_collective_spec(Collective::kAllGather, "nccl/rd"));
  CHECK(parse_collective_spec(Collective::kReduceScatter, "nccl/recursive-halving") ==
        parse_collective_spec(Collective::kReduceScatter, "nccl/halving"));
  const SpecRange r = parse_collective_spec(Collective::kReduceScatter, "nccl.pat/halving").ranges.front();
  CHECK(r.intra == AlgToken{"nccl", -1, "pat"});
  REQUIRE(r.inter.has_value());
  CHECK(*r.inter == AlgToken{"halving", -1, ""});
  CHECK(to_string(r) == "nccl.pat/halving");
  CHECK_THROWS_WITH_AS(parse_collective_spec(Collective::kAllGather, "nccl/halving"),
                       "parameter spec 'nccl/halving': unknown allgather algorithm 'halving' (known: ring, bruck, rd, "
                       "nccl, 2d, trees; hybrids: nccl/ring, nccl/bruck, nccl/rd; an allgather spec has no '#n' or ranges)",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(parse_collective_spec(Collective::kReduceScatter, "ring/ring"),
                       "parameter spec 'ring/ring': ring/ring is not a supported reducescatter hierarchy (supported: "
                       "nccl/ring, nccl/halving)",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(parse_collective_spec(Collective::kAllGather, "nccl/2d"),
                       "parameter spec 'nccl/2d': nccl/2d is not a supported allgather hierarchy (supported: "
                       "nccl/ring, nccl/bruck, nccl/rd)",
                       InvalidInput);
  CHECK_THROWS_AS(parse_collective_spec(Collective::kAllGather, "nccl/ring/ring"), InvalidInput);
  CHECK_THROWS_AS(parse_collective_spec(Collective::kAllGather, "nccl/"), InvalidInput);
  CHECK_THROWS_AS(parse_collective_spec(Collective::kAllGather, "nccl.bogus/ring"), InvalidInput);
  // --help lists the hybrids after the families.
  const auto ag = collective_algorithms(Collective::kAllGather);
  REQUIRE(ag.size() == 9);
  CHECK(ag[6].first == "nccl/ring");
  CHECK(ag[8].first == "nccl/rd");
  CHECK(collective_algorithms(Collective::kReduceScatter).size() == 7);
}

TEST_CASE("collective_hybrid.bad_grids_and_blocks") {
  const Topology& t = topo("uniform:2x2");
  const std::vector<int> gpus = t.gpus();
  // Machines of different sizes: no one chunk per machine for every machine's GPUs.
  BuildOptions o = kind_opts(Collective::kAllGather, 12);
  o.participants = {gpus[0], gpus[1], gpus[2]};
  CHECK_THROWS_WITH_AS(build_collective_plan(t, "nccl/ring", o),
                       "parameter spec nccl/ring: a hybrid allgather needs the same number of participants on every "
                       "machine (2 and 1)",
                       InvalidInput);
  // Ranks not machine by machine: machine 0's blocks would not be one chunk.
  o.participants = {gpus[0], gpus[2], gpus[1], gpus[3]};
  o.collective = Collective::kReduceScatter;
  CHECK_THROWS_WITH_AS(build_collective_plan(t, "nccl/halving", o),
                       "parameter spec nccl/halving: a hybrid reducescatter needs each machine's participants to be "
                       "consecutive ranks, machine by machine (rank 2 is on machine 0)",
                       InvalidInput);
  // All-gather-v: the library's calls need even blocks.
  BuildOptions v = kind_opts(Collective::kAllGather, 10);
  v.blocks = {1, 2, 3, 4};
  CHECK_THROWS_WITH_AS(build_collective_plan(t, "nccl/bruck", v),
                       "parameter spec nccl/bruck: the library's collectives need even blocks (all-gather-v: a "
                       "point-to-point family)",
                       InvalidInput);
}
