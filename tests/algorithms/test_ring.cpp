// Ring all-reduce: TF's _ring_permutations, chunk geometry and pass structure.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "artune/algorithms/families/families.hpp"
#include "builder_checks.hpp"

using namespace artune;
using namespace artune::test;

using Grid = std::vector<std::vector<int>>;

TEST_CASE("ring.tf_permutations") {
  // Values derived by hand from the Python:
  // num_gpus = 4, num_subchunks = 2 → rotation_interval = max(1, int(4/2)) = 2;
  // s = 0: offset 0 → [0,1,2,3]; s = 1: offset 2 → [2,3,0,1].
  {
    const RingPermutations p = ring_permutations(1, 2, {0, 1, 2, 3});
    CHECK(p.order_by_s == Grid{{0, 1, 2, 3}, {2, 3, 0, 1}});
    CHECK(p.rank_by_s_d == Grid{{0, 1, 2, 3}, {2, 3, 0, 1}});
    // pred = perm[(t + devices - 1) % devices]: both rings run the same direction.
    CHECK(p.pred_by_s_d == Grid{{3, 0, 1, 2}, {3, 0, 1, 2}});
  }
  // 2 workers, 1 subchunk, perm [0,3,2,1]: worker 1's devices are 4 + i, concatenated.
  {
    const RingPermutations p = ring_permutations(2, 1, {0, 3, 2, 1});
    CHECK(p.order_by_s == Grid{{0, 3, 2, 1, 4, 7, 6, 5}});
    CHECK(p.rank_by_s_d == Grid{{0, 3, 2, 1, 4, 7, 6, 5}});
    CHECK(p.pred_by_s_d == Grid{{5, 2, 3, 0, 1, 6, 7, 4}});
  }
  // 2 workers, 2 subchunks: each worker's order rotated by 2, then concatenated.
  {
    const RingPermutations p = ring_permutations(2, 2, {0, 1, 2, 3});
    CHECK(p.order_by_s == Grid{{0, 1, 2, 3, 4, 5, 6, 7}, {2, 3, 0, 1, 6, 7, 4, 5}});
    CHECK(p.pred_by_s_d[1] == std::vector<int>{3, 0, 5, 2, 7, 4, 1, 6});
    CHECK(p.rank_by_s_d[1] == std::vector<int>{2, 3, 0, 1, 6, 7, 4, 5});
  }
  // int(4/3) = 1: offsets 0, 1, 2.
  {
    const RingPermutations p = ring_permutations(1, 3, {0, 1, 2, 3});
    CHECK(p.order_by_s == Grid{{0, 1, 2, 3}, {1, 2, 3, 0}, {2, 3, 0, 1}});
  }
  // int(8/3) = 2: offsets 0, 2, 4 over the permutation itself.
  {
    const RingPermutations p = ring_permutations(1, 3, {0, 3, 2, 1, 5, 6, 7, 4});
    CHECK(p.order_by_s == Grid{{0, 3, 2, 1, 5, 6, 7, 4}, {2, 1, 5, 6, 7, 4, 0, 3}, {5, 6, 7, 4, 0, 3, 2, 1}});
  }
  // TF's upper ring of the hybrids: gpu_perm [0], one device per worker.
  {
    const RingPermutations p = ring_permutations(3, 1, {0});
    CHECK(p.order_by_s == Grid{{0, 1, 2}});
    CHECK(p.pred_by_s_d == Grid{{2, 0, 1}});
  }
  CHECK(ring_permutations(0, 1, {0, 1}).order_by_s.empty());
  CHECK(throws_mentioning([] { ring_permutations(1, 5, {0, 1, 2, 3}); }, {"5 subchunks", "4 GPUs"}));
  CHECK(throws_mentioning([] { ring_permutations(1, 1, {0, 4}); }, {"parameter gpu_perm", "4"}));
}

TEST_CASE("ring.chunk_geometry") {
  using detail::padded_piece;
  // TF's _padded_split: chunk_size = 1 + len // pieces when not divisible, the tail is short.
  CHECK(padded_piece(1000, 8, 3) == std::pair<std::int64_t, std::int64_t>{375, 125});
  CHECK(padded_piece(13, 8, 0) == std::pair<std::int64_t, std::int64_t>{0, 2});
  CHECK(padded_piece(13, 8, 6) == std::pair<std::int64_t, std::int64_t>{12, 1});
  CHECK(padded_piece(13, 8, 7) == std::pair<std::int64_t, std::int64_t>{13, 0});
  CHECK(padded_piece(3, 8, 2) == std::pair<std::int64_t, std::int64_t>{2, 1});
  CHECK(padded_piece(3, 8, 5) == std::pair<std::int64_t, std::int64_t>{3, 0});
  for (int pieces : {1, 2, 7, 8, 16}) {
    for (std::int64_t count : {1, 7, 13, 1000, 1009}) {
      std::int64_t next = 0;
      for (int i = 0; i < pieces; ++i) {
        const auto [off, len] = padded_piece(count, pieces, i);
        CHECK(off == next);
        next = off + len;
      }
      CHECK(next == count);
    }
  }
}

namespace {

// The Python of _build_ring_gather / _build_ring_scatter, one (tick, device, subchunk) at a time:
// expected (src device, dst device, chunk index) in emission order, for a ring over `n` devices.
struct Step {
  int src;
  int dst;
  int chunk;
};
std::vector<Step> tf_steps(const RingPermutations& p, int n, bool gather_pass) {
  const int subchunks = static_cast<int>(p.order_by_s.size());
  std::vector<Step> out;
  for (int tick = 0; tick < n - 1; ++tick) {
    for (int d = 0; d < n; ++d) {
      for (int s = 0; s < subchunks; ++s) {
        const int rank = p.rank_by_s_d[s][d];
        const int seg = (rank + n - ((gather_pass ? 2 : 1) + tick)) % n;
        out.push_back({p.pred_by_s_d[s][d], d, seg * subchunks + s});
      }
    }
  }
  return out;
}

void check_passes(const std::string& topology, int workers, int subchunks, const std::vector<int>& perm,
                  std::int64_t count) {
  const int n = workers * static_cast<int>(perm.size());
  const Plan plan = build_verified(topology, fmt::format("xring#{}", subchunks), opts(count, ReduceOp::kSum, perm));
  const RingPermutations p = ring_permutations(workers, subchunks, perm);
  const detail::RingChunks chunks{count, n, subchunks};
  std::size_t i = 0;
  for (bool gather : {true, false}) {
    for (const Step& st : tf_steps(p, n, gather)) {
      const auto [off, len] = chunks.chunk(st.chunk);
      if (len == 0) continue;  // zero-length chunks emit nothing
      REQUIRE(i < plan.ops.size());
      const Op& op = plan.ops[i++];
      CAPTURE(op.id);
      CHECK(op.kind == (gather ? OpKind::kReduce : OpKind::kCopy));
      CHECK(op.src == Location{st.src, 0, off, len});
      CHECK(op.dst == Location{st.dst, 0, off, len});
    }
  }
  CHECK(i == plan.ops.size());
}

}  // namespace

TEST_CASE("ring.pass_structure") {
  // n−1 ticks of reduces then n−1 ticks of copies, each moving one whole chunk from the predecessor.
  check_passes("dgx1-v100", 1, 1, {0, 1, 2, 3, 4, 5, 6, 7}, 8000);
  check_passes("dgx1-v100", 1, 2, {0, 3, 2, 1, 5, 6, 7, 4}, 1000);
  check_passes("dgx1-v100", 1, 4, {0, 1, 2, 3, 4, 5, 6, 7}, 13);
  check_passes("uniform:2x4", 2, 1, {0, 3, 2, 1}, 64);
  check_passes("uniform:2x4", 2, 2, {0, 1, 2, 3}, 1001);
  check_passes("uniform:4x8", 4, 3, {0, 1, 2, 3, 4, 5, 6, 7}, 97);

  // Literal values for dgx1-v100, 8000 elements: 1000 per chunk; tick 0 device 0 reduces chunk 6
  // from device 7, device 3 chunk 1 from device 2; the first copy of device 0 takes chunk 7.
  const Plan plan = build_verified("dgx1-v100", "xring", opts(8000));
  REQUIRE(plan.ops.size() == 2 * 7 * 8);
  CHECK(plan.ops[0].src == Location{7, 0, 6000, 1000});
  CHECK(plan.ops[0].dst == Location{0, 0, 6000, 1000});
  CHECK(plan.ops[3].src == Location{2, 0, 1000, 1000});
  CHECK(plan.ops[3].dst == Location{3, 0, 1000, 1000});
  CHECK(plan.ops[56].kind == OpKind::kCopy);
  CHECK(plan.ops[56].src == Location{7, 0, 7000, 1000});
  for (int i = 0; i < 56; ++i) CHECK(plan.ops[static_cast<std::size_t>(i)].kind == OpKind::kReduce);
}

TEST_CASE("ring.every_reduce_moves_one_chunk") {
  for (const std::string t : {"dgx1-v100", "uniform:2x8", "dgx2"}) {
    for (int s : {1, 2, 3}) {
      for (std::int64_t count : {1, 13, 1000, 4099}) {
        const Plan plan = build_verified(t, fmt::format("xring#{}", s), opts(count));
        const int n = plan.ranks();
        const detail::RingChunks chunks{count, n, s};
        for (const Op& op : ops_of(plan, OpKind::kReduce)) {
          bool whole = false;
          for (int c = 0; c < n * s; ++c) whole = whole || chunks.chunk(c) == std::pair{op.dst.offset, op.dst.count};
          CHECK(whole);
        }
        // Each chunk is reduced n−1 times (every element exactly once per non-owner).
        std::int64_t reduced = 0;
        for (const Op& op : ops_of(plan, OpKind::kReduce)) reduced += op.dst.count;
        CHECK(reduced == count * (n - 1));
      }
    }
  }
}

TEST_CASE("ring.chunk_sizes_ragged") {
  // 13 elements over 8 devices: chunks 2,2,2,2,2,2,1,0 → per tick 7 reduces (six of 2, one of 1).
  const Plan plan = build_verified("uniform:8", "xring", opts(13));
  const auto reduces = ops_of(plan, OpKind::kReduce);
  CHECK(reduces.size() == 7 * 7);
  CHECK(std::count_if(reduces.begin(), reduces.end(), [](const Op& op) { return op.dst.count == 1; }) == 7);
  CHECK(std::count_if(reduces.begin(), reduces.end(), [](const Op& op) { return op.dst.count == 2; }) == 42);
  // Fewer elements than devices: only element chunks move.
  const Plan tiny = build_verified("uniform:8", "xring", opts(3));
  for (const Op& op : tiny.ops) CHECK(op.dst.count == 1);
  CHECK(count_of(tiny, OpKind::kReduce) == 3 * 7);
}

TEST_CASE("ring.avg_scales_each_chunk_once_between_passes") {
  const Plan plan = build_verified("dgx1-v100", "xring#2", opts(1600, ReduceOp::kAvg));
  const auto scales = ops_of(plan, OpKind::kScale);
  REQUIRE(scales.size() == 16);
  int last_reduce = -1;
  int first_copy = static_cast<int>(plan.ops.size());
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kReduce) last_reduce = std::max(last_reduce, op.id);
    if (op.kind == OpKind::kCopy) first_copy = std::min(first_copy, op.id);
  }
  std::int64_t scaled = 0;
  for (const Op& op : scales) {
    CHECK(op.divisor == 8);
    CHECK(op.dst.count == 100);
    CHECK(op.id > last_reduce);
    CHECK(op.id < first_copy);
    scaled += op.dst.count;
  }
  CHECK(scaled == 1600);
}

TEST_CASE("ring.workers_and_device_ids") {
  // uniform:2x8: workers are machines, plan device i = global GPU i.
  const Plan plan = build_verified("uniform:2x8", "xring", opts(1600));
  const Topology& t = topo("uniform:2x8");
  REQUIRE(plan.ranks() == 16);
  for (int i = 0; i < 16; ++i) {
    CHECK(plan.devices[static_cast<std::size_t>(i)].node == t.gpus()[static_cast<std::size_t>(i)]);
    CHECK(t.nodes()[static_cast<std::size_t>(plan.devices[static_cast<std::size_t>(i)].node)].global_index == i);
  }
  // Concatenated worker orders: device 8's predecessor is device 7, device 0's is 15.
  CHECK(plan.ops[0].src.device == 15);
  CHECK(plan.ops[8].src.device == 7);
}

TEST_CASE("ring.rejections") {
  CHECK(throws_mentioning([] { build_plan(topo("dgx1-v100"), "xring#9", opts(100)); }, {"xring#9", "8"}));
  CHECK(throws_mentioning([] { build_plan(topo("dgx1-v100"), "ring#9", opts(100)); }, {"xring#9"}));
  CHECK(throws_mentioning(
      [] {
        build_plan(topo("dgx1-v100"), "xring", opts(100, ReduceOp::kSum, {0, 1, 2}));
      },
      {"parameter gpu_perm", "0..7"}));
  CHECK(throws_mentioning(
      [] {
        build_plan(topo("dgx1-v100"), "xring", opts(100, ReduceOp::kSum, {0, 1, 2, 3, 4, 5, 6, 6}));
      },
      {"parameter gpu_perm"}));
  CHECK(throws_mentioning([] { build_plan(topo("dgx1-v100"), "xring", opts(0)); }, {"parameter count"}));
}

TEST_CASE("ring.ops_record_reduce_op") {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    const Plan plan = build_verified("uniform:4", "xring#2", opts(77, op));
    CHECK(plan.reduce_op == op);
    CHECK((count_of(plan, OpKind::kScale) > 0) == (op == ReduceOp::kAvg));
  }
}

TEST_CASE("ring.pipelined") {
  for (int segments : {2, 4}) {
    const Plan plan = build_verified("dgx1-v100", "xring#2", opts(1000, ReduceOp::kAvg, {}, segments));
    CHECK(plan.ops.size() > build_verified("dgx1-v100", "xring#2", opts(1000, ReduceOp::kAvg)).ops.size());
  }
}
