// All-gather and reduce-scatter plans (issue 17): every family proved by the verifier at p = 2…9,
// their exact structure, the verifier's postconditions for each kind, spec parsing and JSON.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <string>

#include "artune/algorithms/collectives.hpp"
#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

namespace {

BuildOptions kind_opts(Collective c, std::int64_t count, ReduceOp op = ReduceOp::kSum) {
  BuildOptions o = opts(count, op);
  o.collective = c;
  return o;
}

Plan build_kind(int ranks, Collective c, const std::string& spec, std::int64_t count, ReduceOp op = ReduceOp::kSum) {
  const std::string name = fmt::format("uniform:{}", ranks);
  BuildOptions o = kind_opts(c, count, op);
  o.verify = false;
  const Plan plan = build_collective_plan(topo(name), spec, o);
  const VerifyResult r = verify(plan);
  INFO(name, " ", collective_flag_name(c), " ", spec, " count=", count, " op=", to_string(op), "\n", problems(r));
  CHECK(r.ok);
  CHECK(plan.collective == c);
  return plan;
}

// Longest chain of ops in the dependency DAG (the number of dependent steps).
int depth(const Plan& plan) {
  std::vector<int> d(plan.ops.size(), 0);
  int most = 0;
  for (const Op& op : plan.ops) {
    int x = 0;
    for (int dep : op.deps) x = std::max(x, d[static_cast<std::size_t>(dep)]);
    d[static_cast<std::size_t>(op.id)] = x + 1;
    most = std::max(most, x + 1);
  }
  return most;
}

// Elements each rank receives by transfers (copy or reduce from another device).
std::vector<std::int64_t> received(const Plan& plan) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(plan.ranks()), 0);
  for (const Op& op : plan.ops) {
    if (is_transfer(op)) out[static_cast<std::size_t>(op.dst.device)] += op.dst.count;
  }
  return out;
}

int ceil_lg(int n) { return n <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1))); }

bool mentions(const VerifyResult& r, const std::string& fragment) {
  return std::any_of(r.problems.begin(), r.problems.end(),
                     [&](const std::string& line) { return line.find(fragment) != std::string::npos; });
}

const std::vector<std::string> kAllGather = {"ring", "bruck", "rd", "nccl", "2d"};
const std::vector<std::string> kReduceScatter = {"ring", "halving", "nccl", "2d"};

}  // namespace

TEST_CASE("collectives.every_family_verifies_p2_to_p9") {
  for (int p = 2; p <= 9; ++p) {
    for (std::int64_t count : {1, 7, 13, 64, 1001}) {
      for (const std::string& spec : kAllGather) build_kind(p, Collective::kAllGather, spec, count);
      for (const std::string& spec : kReduceScatter) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          build_kind(p, Collective::kReduceScatter, spec, count, op);
        }
      }
    }
  }
}

TEST_CASE("collectives.pipelined_plans_verify") {
  for (int p : {3, 4, 6}) {
    for (const std::string& spec : kAllGather) {
      BuildOptions o = kind_opts(Collective::kAllGather, 1000);
      o.segments = 4;
      CHECK(verify(build_collective_plan(topo(fmt::format("uniform:{}", p)), spec, o)).ok);
    }
    for (const std::string& spec : kReduceScatter) {
      BuildOptions o = kind_opts(Collective::kReduceScatter, 1000, ReduceOp::kAvg);
      o.segments = 3;
      CHECK(verify(build_collective_plan(topo(fmt::format("uniform:{}", p)), spec, o)).ok);
    }
  }
}

TEST_CASE("collectives.ring_allgather_exact_ops") {
  const Plan plan = build_kind(3, Collective::kAllGather, "ring", 6);
  REQUIRE(plan.ops.size() == 6);
  // Step 0: rank r sends block r to r+1; step 1: block r−1 (blocks of 2 elements).
  const int src[6] = {0, 1, 2, 0, 1, 2};
  const int block[6] = {0, 1, 2, 2, 0, 1};
  for (int i = 0; i < 6; ++i) {
    const Op& op = plan.ops[static_cast<std::size_t>(i)];
    CAPTURE(i);
    CHECK(op.kind == OpKind::kCopy);
    CHECK(op.src == Location{src[i], 0, 2 * block[i], 2});
    CHECK(op.dst == Location{(src[i] + 1) % 3, 0, 2 * block[i], 2});
  }
  // Step 1 forwards what step 0 delivered: rank 0 sends block 2, which rank 2 gave it in op 2.
  CHECK(plan.ops[3].deps == std::vector<int>{2});
  CHECK(plan.ops[4].deps == std::vector<int>{0});
  CHECK(plan.ops[5].deps == std::vector<int>{1});
}

TEST_CASE("collectives.structure_steps_and_traffic") {
  for (int p = 2; p <= 9; ++p) {
    CAPTURE(p);
    const std::int64_t count = 64 * p;  // whole blocks of 64
    const bool pow2 = std::has_single_bit(static_cast<unsigned>(p));
    const Plan ring = build_kind(p, Collective::kAllGather, "ring", count);
    CHECK(ring.ops.size() == static_cast<std::size_t>(p * (p - 1)));
    CHECK(depth(ring) == p - 1);
    const Plan bruck = build_kind(p, Collective::kAllGather, "bruck", count);
    // ⌈lg p⌉ steps; with p not a power of two a last step may only carry senders' own blocks, which
    // depend on nothing, so the DAG can be shallower.
    CHECK(depth(bruck) <= ceil_lg(p));
    CHECK(depth(bruck) >= (pow2 ? ceil_lg(p) : ceil_lg(p) - 1));
    // Ring and Bruck are bandwidth optimal: every rank receives each other block exactly once.
    for (std::int64_t got : received(ring)) CHECK(got == count - 64);
    for (std::int64_t got : received(bruck)) CHECK(got == count - 64);
    const Plan rd = build_kind(p, Collective::kAllGather, "rd", count);
    if (pow2) {
      CHECK(depth(rd) == ceil_lg(p));
      for (std::int64_t got : received(rd)) CHECK(got == count - 64);
    } else {
      CHECK(depth(rd) <= ceil_lg(p) + 1);  // fold in, lg m exchanges, result back out
    }
    const Plan rs = build_kind(p, Collective::kReduceScatter, "ring", count);
    CHECK(rs.ops.size() == static_cast<std::size_t>(p * (p - 1)));
    CHECK(depth(rs) == p - 1);
    for (std::int64_t got : received(rs)) CHECK(got == count - 64);
    const Plan halving = build_kind(p, Collective::kReduceScatter, "halving", count);
    if (pow2) {
      CHECK(depth(halving) == ceil_lg(p));
      for (std::int64_t got : received(halving)) CHECK(got == count - 64);
    }
    const Plan group = build_kind(p, Collective::kAllGather, "nccl", count);
    REQUIRE(group.ops.size() == 1);
    CHECK(group.ops[0].collective == Collective::kAllGather);
  }
}

TEST_CASE("collectives.two_d_across_machines") {
  for (const char* name : {"uniform:2x4", "uniform:3x2", "uniform:4x3"}) {
    const Topology& t = topo(name);
    const int ranks = static_cast<int>(t.gpus().size());
    const int machines = t.machine_count();
    for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      for (std::int64_t count : {std::int64_t{1}, std::int64_t{13}, std::int64_t{64} * ranks}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          BuildOptions o = kind_opts(c, count, op);
          o.verify = false;
          const Plan plan = build_collective_plan(t, "2d", o);
          const VerifyResult r = verify(plan);
          INFO(name, " ", collective_flag_name(c), " count=", count, "\n", problems(r));
          CHECK(r.ok);
          if (count != 64 * ranks) continue;
          // Across machines each GPU receives its column's other W−1 blocks only.
          std::int64_t across = 0;
          const auto machine = [&](int d) {
            return t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(d)].node)].machine;
          };
          for (const Op& op : plan.ops) {
            if (is_transfer(op) && machine(op.src.device) != machine(op.dst.device)) across += op.dst.count;
          }
          CHECK(across == std::int64_t{ranks} * (machines - 1) * 64);
        }
      }
    }
  }
  // On one machine 2d is the ring.
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    const Plan two_d = build_kind(4, c, "2d", 103, ReduceOp::kAvg);
    const Plan ring = build_kind(4, c, "ring", 103, ReduceOp::kAvg);
    CHECK(two_d.ops == ring.ops);
  }
}

TEST_CASE("collectives.ring_follows_gpu_perm") {
  // DGX-1: rank order 0…7 crosses the sockets between GPUs 3 and 4; 0,3,2,1,5,6,7,4 is an NVLink ring.
  const Topology& t = topo("dgx1-v100");
  const std::vector<int> perm = {0, 3, 2, 1, 5, 6, 7, 4};
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    BuildOptions o = kind_opts(c, 800);
    o.gpu_perm = perm;
    const Plan plan = build_collective_plan(t, "ring", o);
    CHECK(verify(plan).ok);
    int transfers = 0;
    for (const Op& op : plan.ops) {
      if (!is_transfer(op)) continue;
      ++transfers;
      const auto at = std::find(perm.begin(), perm.end(), op.src.device) - perm.begin();
      CHECK(op.dst.device == perm[static_cast<std::size_t>((at + 1) % 8)]);
    }
    CHECK(transfers == 56);
  }
}

TEST_CASE("collectives.verifier_allgather_postcondition") {
  // A ring all-gather without its last step leaves blocks undefined.
  Plan plan = build_kind(4, Collective::kAllGather, "ring", 8);
  Plan cut = plan;
  cut.ops.resize(cut.ops.size() - 4);
  VerifyResult r = verify(cut);
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, "is undefined"));
  // Block 1 copied to block 2's place: wrong owner, and block 2 of rank 3 never arrives.
  Plan shifted = build_kind(2, Collective::kAllGather, "ring", 4);
  REQUIRE(shifted.ops.size() == 2);
  shifted.ops[0].dst.offset = 2;  // rank 0's block 0 lands over rank 1's own block 1
  r = verify(shifted);
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, "holds the input of ranks 0 (all-gather block of rank 1)"));
  // Reducing instead of copying mixes inputs into a block.
  Plan reduced = build_kind(2, Collective::kAllGather, "ring", 4);
  reduced.ops[0].kind = OpKind::kReduce;
  r = verify(reduced);
  CHECK_FALSE(r.ok);
  // An all-reduce plan relabelled as all-gather reduces blocks: every block holds every input.
  Plan ar = build_verified("uniform:3", "xring", opts(9));
  ar.collective = Collective::kAllGather;
  r = verify(ar);
  CHECK_FALSE(r.ok);
}

TEST_CASE("collectives.verifier_reducescatter_postcondition") {
  // Rank k needs block k only: the all-reduce ring passes as a reduce-scatter (it does more).
  Plan ar = build_verified("uniform:4", "xring", opts(16));
  ar.collective = Collective::kReduceScatter;
  CHECK(verify(ar).ok);
  // Without the last step a block misses an input.
  Plan rs = build_kind(4, Collective::kReduceScatter, "ring", 16);
  rs.ops.resize(rs.ops.size() - 4);
  VerifyResult r = verify(rs);
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, "misses the input of ranks"));
  // avg without its scales.
  Plan avg = build_kind(3, Collective::kReduceScatter, "halving", 9, ReduceOp::kAvg);
  std::erase_if(avg.ops, [](const Op& op) { return op.kind == OpKind::kScale; });
  r = verify(avg);
  CHECK_FALSE(r.ok);
  CHECK(mentions(r, "is not scaled"));
  // The ring all-gather is not a reduce-scatter.
  Plan ag = build_kind(3, Collective::kAllGather, "ring", 9);
  ag.collective = Collective::kReduceScatter;
  CHECK_FALSE(verify(ag).ok);
}

TEST_CASE("collectives.specs_and_flags") {
  CHECK(parse_collective_kind("allgather") == Collective::kAllGather);
  CHECK(parse_collective_kind("reduce_scatter") == Collective::kReduceScatter);
  CHECK(parse_collective_kind("allreduce") == Collective::kAllReduce);
  CHECK_THROWS_WITH_AS(parse_collective_kind("broadcast"),
                       "parameter collective: unknown collective 'broadcast' (allreduce, allgather, reducescatter)",
                       InvalidInput);
  CHECK(parse_collective_spec(Collective::kAllGather, "xring").ranges.front().intra.name == "ring");
  CHECK_THROWS_WITH_AS(
      parse_collective_spec(Collective::kAllGather, "halving"),
      "parameter spec 'halving': unknown allgather algorithm (known: ring, bruck, rd, nccl, 2d, trees; hybrids: nccl/ring, "
      "nccl/bruck, nccl/rd; an allgather spec has no '#n' or ranges)",
      InvalidInput);
  CHECK_THROWS_AS(parse_collective_spec(Collective::kReduceScatter, "ring#2"), InvalidInput);
  // nccl.ALGO[.PROTO][.cN] forces NCCL's choice of the library collective, as for all-reduce.
  CHECK(parse_collective_spec(Collective::kAllGather, "nccl.ring.ll128.c4").ranges.front().intra ==
        AlgToken{"nccl", -1, "ring.ll128.c4"});
  CHECK(parse_collective_spec(Collective::kReduceScatter, "nccl.pat").ranges.front().intra ==
        AlgToken{"nccl", -1, "pat"});
  // The plan's one group op carries the forced choice (the verifier proves the collective as for plain nccl).
  for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
    const Plan forced = build_kind(4, c, "nccl.ring.ll.c2", 16);
    REQUIRE(forced.ops.size() == 1);
    CHECK(forced.ops[0].kind == OpKind::kGroup);
    CHECK(forced.ops[0].algo == "ring.ll.c2");
  }
  CHECK_THROWS_WITH_AS(parse_collective_spec(Collective::kAllGather, "nccl.ring.ll.c99"),
                       "parameter spec 'nccl.ring.ll.c99': NCCL channel count 'c99' is not c1..c64 (e.g. nccl.ring.simple.c8)",
                       InvalidInput);
  CHECK(collective_algorithms(Collective::kReduceScatter).size() == 7);  // 4 families, 2 hybrids
  CHECK(bus_factor(Collective::kAllGather, 8) == doctest::Approx(7.0 / 8));
  CHECK(bus_factor(Collective::kReduceScatter, 4) == doctest::Approx(0.75));
  CHECK(bus_factor(Collective::kAllReduce, 4) == doctest::Approx(1.5));
  CHECK(bus_factor(Collective::kAllGather, 1) == 0.0);
}

TEST_CASE("collectives.json_round_trip") {
  const Plan plan = build_kind(5, Collective::kReduceScatter, "halving", 23, ReduceOp::kAvg);
  const nlohmann::json doc = plan_to_json(plan);
  CHECK(doc.at("collective") == "reduce_scatter");
  CHECK(plan_from_json(doc, "test") == plan);
  // All-reduce plans keep their JSON unchanged (no collective field).
  CHECK_FALSE(plan_to_json(build_verified("uniform:2", "xring", opts(4))).contains("collective"));
  nlohmann::json bad = doc;
  bad["collective"] = "broadcast";
  CHECK_THROWS_AS(plan_from_json(bad, "test"), InvalidInput);
}

TEST_CASE("collectives.allgather_v_blocks_of_their_own_size") {
  // All-gather-v (Plan::blocks): uneven per-rank blocks, empty ones included, proved at p = 2…9 for every
  // point-to-point family (reduce-scatter-v too), pipelined as well; ring and Bruck move every other
  // rank's real block to each rank once, so the traffic is (p−1)·Σ sizes.
  for (int p = 2; p <= 9; ++p) {
    std::vector<std::int64_t> blocks;
    for (int k = 0; k < p; ++k) blocks.push_back(k % 3 == 1 ? 0 : 5 * k + 3);  // ranks 1, 4, 7 empty
    std::int64_t total = 0;
    for (const std::int64_t b : blocks) total += b;
    for (const Collective c : {Collective::kAllGather, Collective::kReduceScatter}) {
      for (const std::string& spec : c == Collective::kAllGather ? kAllGather : kReduceScatter) {
        if (spec == "nccl") continue;
        for (const int segments : {1, 3}) {
          BuildOptions o = kind_opts(c, total, c == Collective::kAllGather ? ReduceOp::kSum : ReduceOp::kAvg);
          o.blocks = blocks;
          o.segments = segments;
          o.verify = false;
          const Plan plan = build_collective_plan(topo(fmt::format("uniform:{}", p)), spec, o);
          const VerifyResult r = verify(plan);
          INFO("p=", p, " ", collective_flag_name(c), " ", spec, " segments=", segments, "\n", problems(r));
          CHECK(r.ok);
          CHECK(plan.blocks == blocks);
          CHECK(collective_block(plan, p - 1) ==
                std::pair<std::int64_t, std::int64_t>{total - blocks.back(), blocks.back()});
          if (c == Collective::kAllGather && (spec == "ring" || spec == "bruck")) {
            for (int k = 0; k < p; ++k) {
              CHECK(received(plan)[static_cast<std::size_t>(k)] == total - blocks[static_cast<std::size_t>(k)]);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("collectives.allgather_v_bad_blocks_and_json") {
  BuildOptions o = kind_opts(Collective::kAllGather, 10);
  o.blocks = {4, 6, 0};
  const Plan plan = build_collective_plan(topo("uniform:3"), "bruck", o);
  const nlohmann::json doc = plan_to_json(plan);
  CHECK(doc.at("blocks") == nlohmann::json::array({4, 6, 0}));
  CHECK(plan_from_json(doc, "test") == plan);
  nlohmann::json bad = doc;
  bad["blocks"] = {4, 6, 1};
  CHECK_THROWS_WITH_AS(plan_from_json(bad, "p.json"), "p.json: blocks[2]: blocks must be ≥ 0 and sum to count",
                       InvalidInput);
  o.blocks = {4, 6};
  CHECK_THROWS_WITH_AS(build_collective_plan(topo("uniform:3"), "ring", o), "blocks: 2 sizes for 3 ranks",
                       InvalidInput);
  o.blocks = {4, 7, -1};
  CHECK_THROWS_WITH_AS(build_collective_plan(topo("uniform:3"), "ring", o), "blocks: size -1 is negative",
                       InvalidInput);
  o.blocks = {4, 5, 0};
  CHECK_THROWS_WITH_AS(build_collective_plan(topo("uniform:3"), "ring", o), "blocks: sum to 9, not count = 10",
                       InvalidInput);
  o.blocks = {4, 6, 0};
  CHECK_THROWS_WITH_AS(build_collective_plan(topo("uniform:3"), "nccl", o),
                       "nccl: the library's collectives need even blocks (all-gather-v: a point-to-point family)",
                       InvalidInput);
}
