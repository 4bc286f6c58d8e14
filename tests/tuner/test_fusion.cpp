// Tensor fusion: TF group_by_size semantics, pack-size choice with a known
// optimum, the shipped gradient lists, and sparse tensor marks with their dense/sparse choice.

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/simulator/cost_model.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/fusion.hpp"

using namespace artune;
using Packs = std::vector<std::vector<std::size_t>>;

TEST_CASE("fusion.group_by_size_tf_semantics") {
  const std::vector<std::uint64_t> four = {4, 4, 4, 4};
  // A pack closes only once it holds MORE than bytes_per_pack.
  CHECK(group_by_size(four, 6) == Packs{{0, 1}, {2, 3}});
  CHECK(group_by_size(four, 8) == Packs{{0, 1, 2}, {3}});
  CHECK(group_by_size(four, 7) == Packs{{0, 1}, {2, 3}});
  CHECK(group_by_size(four, 3) == Packs{{0}, {1}, {2}, {3}});
  CHECK(group_by_size(four, 100) == Packs{{0, 1, 2, 3}});
  // Zero: everything in one pack.
  CHECK(group_by_size(four, 0) == Packs{{0, 1, 2, 3}});
  // Order is preserved; a big tensor closes its pack right away.
  CHECK(group_by_size({1, 100, 1, 1, 1}, 50) == Packs{{0, 1}, {2, 3, 4}});
  CHECK(group_by_size({}, 10).empty());
}

TEST_CASE("fusion.known_optimum") {
  // All-reduce: 100 us + 1 GB/s; packing copies at 10 GB/s (two copies of a multi-tensor pack).
  const AllReduceTimeFn time = [](std::uint64_t bytes) { return 100.0 + static_cast<double>(bytes) / 1e3; };
  const std::vector<std::uint64_t> sizes = {1000, 1000, 1000, 1000, 4000000};
  const auto r = tune_fusion(sizes, {1, 2048, 3000, 0}, time, 10.0);
  REQUIRE(r.options.size() == 4);
  // One tensor per pack: 5 × 100 + 4.004 ms, nothing to pack.
  CHECK(r.options[0].pack_bytes.size() == 5);
  CHECK(r.options[0].total_us == doctest::Approx(4504.0));
  // 2048: {0,1,2} (3000 B) and {3,4} (4001000 B), both packed.
  CHECK(r.options[1].pack_bytes == std::vector<std::uint64_t>{3000, 4001000});
  CHECK(r.options[1].total_us == doctest::Approx(103.0 + 0.6 + 4101.0 + 800.2));
  // 3000: the four small ones fused, the big one alone: the optimum.
  CHECK(r.options[2].pack_bytes == std::vector<std::uint64_t>{4000, 4000000});
  CHECK(r.options[2].total_us == doctest::Approx(104.0 + 0.8 + 4100.0));
  // One pack: 100 + 4004 + 2 copies of 4.004 MB at 10 GB/s.
  CHECK(r.options[3].total_us == doctest::Approx(4104.0 + 800.8));
  CHECK(r.best == 2);
  CHECK(r.total_bytes == 4004000);
  CHECK(r.tensors == 5);
  CHECK_THROWS_AS(tune_fusion({}, {0}, time, 10), InvalidInput);
}

TEST_CASE("fusion.default_pack_sizes") {
  const auto p = default_pack_sizes(100000);
  CHECK(p.front() == 1);
  CHECK(p.back() == 0);
  CHECK(p[1] == 4096);
  CHECK(p[p.size() - 2] == 65536);
}

TEST_CASE("fusion.gradient_list_parsing") {
  const nlohmann::json doc = {{"model", "toy"},
                              {"type", "float16"},
                              {"unit", "bytes"},
                              {"tensors", {8, {{"name", "w"}, {"shape", {2, 3}}}, {{"bytes", 4}}, {{"elements", 5}}}}};
  const GradientList l = gradient_list_from_json(doc, "toy.json");
  CHECK(l.model == "toy");
  CHECK(l.type == DataType::kFloat16);
  CHECK(l.elements == std::vector<std::uint64_t>{4, 6, 2, 5});
  CHECK(l.bytes() == std::vector<std::uint64_t>{8, 12, 4, 10});
  CHECK(l.names[1] == "w");
  CHECK_THROWS_WITH_AS(gradient_list_from_json({{"unit", "bytes"}, {"type", "float32"}, {"tensors", {6}}}, "x.json"),
                       doctest::Contains("x.json: tensors[0]"), InvalidInput);
  CHECK_THROWS_WITH_AS(gradient_list_from_json({{"tensors", nlohmann::json::array()}}, "x.json"),
                       doctest::Contains("at least one tensor"), InvalidInput);
  CHECK_THROWS_WITH_AS(gradient_list_from_json({{"tensors", {{{"shape", {2, 0}}}}}}, "x.json"),
                       doctest::Contains("x.json: tensors[0].shape[1]"), InvalidInput);
}

TEST_CASE("fusion.shipped_models") {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  const GradientList resnet = load_gradient_list(std::string(root) + "/configs/fusion/resnet50.json");
  CHECK(resnet.elements.size() == 161);
  CHECK(resnet.total_elements() == 25557032);
  CHECK(resnet.elements.front() == 7 * 7 * 3 * 64);
  CHECK(resnet.elements.back() == 1000);
  const GradientList bert = load_gradient_list(std::string(root) + "/configs/fusion/bert_base.json");
  CHECK(bert.elements.size() == 199);
  CHECK(bert.total_elements() == 109482240);
  CHECK(bert.elements.front() == 30522ull * 768);
}

TEST_CASE("fusion.overlap_closed_form") {
  // Four 1000-byte tensors, 10 us of backward each (tensor 3 ready at 10 us, 2 at 20, 1 at 30, 0 at 40);
  // all-reduce 5 us + 100 B/us; packing copies at 1 GB/s (2 us per 1000 bytes, two copies).
  const AllReduceTimeFn time = [](std::uint64_t bytes) { return 5.0 + static_cast<double>(bytes) / 100.0; };
  const std::vector<std::uint64_t> sizes = {1000, 1000, 1000, 1000};
  const std::vector<double> backward = {10, 10, 10, 10};
  const auto r = tune_fusion(sizes, {1, 1500, 0}, time, 1.0, backward);
  REQUIRE(r.options.size() == 3);
  CHECK(r.overlap);
  // Per tensor: each 15 us; starts at 10, 25, 40, 55 → ends at 70. No overlap: 4 × 15 = 60.
  CHECK(r.options[0].total_us == doctest::Approx(60.0));
  CHECK(r.options[0].backward_us == doctest::Approx(40.0));
  CHECK(r.options[0].step_us == doctest::Approx(70.0));
  CHECK(r.options[0].exposed_us == doctest::Approx(30.0));
  // 1500: packs {0,1} and {2,3}, 2000 B each: 25 + 4 = 29 us; {2,3} ready at 20 → 49; {0,1} ready at 40 → 78.
  CHECK(r.options[1].pack_bytes == std::vector<std::uint64_t>{2000, 2000});
  CHECK(r.options[1].total_us == doctest::Approx(58.0));
  CHECK(r.options[1].step_us == doctest::Approx(78.0));
  // One pack: 45 + 8 = 53 us after backward ends at 40 → 93.
  CHECK(r.options[2].total_us == doctest::Approx(53.0));
  CHECK(r.options[2].step_us == doctest::Approx(93.0));
  // With overlap the small packs win; without it one pack does, and both figures are kept.
  CHECK(r.best == 0);
  CHECK(r.best_no_overlap == 2);
  // Without backward times there is no overlap: step = the no-overlap total.
  const auto flat = tune_fusion(sizes, {1, 1500, 0}, time, 1.0);
  CHECK_FALSE(flat.overlap);
  CHECK(flat.options[2].step_us == doctest::Approx(53.0));
  CHECK(flat.best == 2);
  CHECK_THROWS_AS(tune_fusion(sizes, {0}, time, 1.0, {1.0, 2.0}), InvalidInput);
}

TEST_CASE("fusion.backward_times_from_the_list") {
  // Per tensor.
  const nlohmann::json per = {
      {"tensors", {{{"elements", 10}, {"backward_us", 3.0}}, {{"elements", 30}, {"backward_us", 1.0}}}}};
  CHECK(gradient_list_from_json(per, "p.json").backward_times(100.0) == std::vector<double>{3.0, 1.0});
  // A total split in proportion to the elements.
  const nlohmann::json total = {{"backward_us", 80.0}, {"tensors", {10, 30}}};
  CHECK(gradient_list_from_json(total, "t.json").backward_times(100.0) == std::vector<double>{20.0, 60.0});
  // Neither: the bandwidth bound, 3 · bytes at the memory rate (float: 40 and 120 bytes at 1 GB/s = 1 B/ns).
  const nlohmann::json none = {{"tensors", {10, 30}}};
  const auto bound = gradient_list_from_json(none, "n.json").backward_times(1.0);
  REQUIRE(bound.size() == 2);
  CHECK(bound[0] == doctest::Approx(0.12));
  CHECK(bound[1] == doctest::Approx(0.36));
  // Some tensors only, or both forms: refused naming the field.
  const nlohmann::json partial = {{"tensors", {{{"elements", 10}, {"backward_us", 3.0}}, {{"elements", 30}}}}};
  CHECK_THROWS_WITH_AS(gradient_list_from_json(partial, "x.json"), doctest::Contains("x.json: tensors[1]"),
                       InvalidInput);
  const nlohmann::json both = {{"backward_us", 5.0}, {"tensors", {{{"elements", 10}, {"backward_us", 3.0}}}}};
  CHECK_THROWS_WITH_AS(gradient_list_from_json(both, "x.json"), doctest::Contains("backward_us"), InvalidInput);
  const nlohmann::json negative = {{"backward_us", -1.0}, {"tensors", {10}}};
  CHECK_THROWS_WITH_AS(gradient_list_from_json(negative, "x.json"), doctest::Contains("x.json: backward_us"),
                       InvalidInput);
}

TEST_CASE("fusion.sparse_marks_and_their_choice") {
  const nlohmann::json doc = nlohmann::json::parse(R"({"type": "float32", "tensors": [
      {"name": "emb", "shape": [100000, 64], "sparse": {"rows": 100000, "width": 64, "density": 0.001}},
      {"name": "fc", "elements": 4096},
      {"name": "small_emb", "elements": 64000, "sparse": {"rows": 1000, "width": 64, "nnz": 900}}]})");
  const GradientList list = gradient_list_from_json(doc, "g.json");
  REQUIRE(list.sparse.size() == 2);
  CHECK(list.sparse[0].tensor == 0);
  CHECK(list.sparse[0].rows == 100000);
  CHECK(list.sparse[0].width == 64);
  CHECK(list.sparse[0].density == 0.001);
  CHECK(list.sparse[1].tensor == 2);
  CHECK(list.sparse[1].density == 0.9);
  // One decision per mark, each the --sparse decision of its table; a table touched at 0.1 % of its rows
  // goes sparse, one touched at 90 % stays dense.
  const Topology topo = load_topology("uniform:8");
  const CostModel model = CostModel::defaults();
  const std::vector<SparseDecision> picks = decide_sparse_tensors(list, topo, model);
  REQUIRE(picks.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const SparseMark& m = list.sparse[i];
    const SparseDecision want = decide_sparse(topo, model, m.rows, m.width, m.density, DataType::kFloat32);
    CHECK(picks[i].nnz == want.nnz);
    CHECK(picks[i].dense_us == want.dense_us);
    CHECK(picks[i].sparse_us == want.sparse_us);
    CHECK(picks[i].sparse == want.sparse);
  }
  CHECK(picks[0].nnz == 100);
  CHECK(picks[0].sparse);
  CHECK(picks[1].nnz == 900);
  CHECK_FALSE(picks[1].sparse);
  const nlohmann::json j = sparse_decision_to_json(picks[0], DataType::kFloat32);
  CHECK(j.at("bytes") == 100000 * 64 * 4);
  CHECK(j.at("pick") == "sparse");
}

TEST_CASE("fusion.bad_sparse_marks_name_the_field") {
  const auto error_of = [](const std::string& sparse) {
    const auto doc = nlohmann::json::parse(R"({"tensors": [{"name": "a", "elements": 60, "sparse": )" + sparse + "}]}");
    try {
      gradient_list_from_json(doc, "g.json");
    } catch (const InvalidInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("3") ==
        "g.json: tensors[0].sparse: must be an object with \"rows\", \"width\" and \"density\" "
        "or \"nnz\", not a number");
  CHECK(error_of(R"({"rows": 0, "width": 6, "nnz": 1})") == "g.json: tensors[0].sparse.rows: must be ≥ 1");
  CHECK(error_of(R"({"rows": 10, "width": 0, "nnz": 1})") == "g.json: tensors[0].sparse.width: must be ≥ 1");
  CHECK(error_of(R"({"rows": 10, "width": 5, "nnz": 1})") ==
        "g.json: tensors[0].sparse: 10 rows of 5 values are not the tensor's 60 elements");
  CHECK(error_of(R"({"rows": 7, "width": 8, "nnz": 1})") ==
        "g.json: tensors[0].sparse: 7 rows of 8 values are not the tensor's 60 elements");
  CHECK(error_of(R"({"rows": 10, "width": 6})") == "g.json: tensors[0].sparse: give one of \"density\" and \"nnz\"");
  CHECK(error_of(R"({"rows": 10, "width": 6, "nnz": 1, "density": 0.1})") ==
        "g.json: tensors[0].sparse: give one of \"density\" and \"nnz\"");
  CHECK(error_of(R"({"rows": 10, "width": 6, "density": 0})") ==
        "g.json: tensors[0].sparse.density: must be in (0, 1]");
  CHECK(error_of(R"({"rows": 10, "width": 6, "density": 1.5})") ==
        "g.json: tensors[0].sparse.density: must be in (0, 1]");
  CHECK(error_of(R"({"rows": 10, "width": 6, "nnz": 11})") ==
        "g.json: tensors[0].sparse.nnz: must be between 1 and rows (10)");
  CHECK(error_of(R"({"width": 6, "nnz": 1})").find("tensors[0].sparse") != std::string::npos);
  CHECK(error_of(R"({"rows": 10, "width": 6, "nnz": 10})") == "no error");
}

TEST_CASE("fusion.sparse_tensors_leave_the_packs") {
  // Tensor 1 is picked sparse: the packs hold 0, 2 and 3 only, and tensor 1 communicates alone in its own time.
  const std::vector<std::uint64_t> bytes = {1000, 2000, 3000, 4000};
  const AllReduceTimeFn time = [](std::uint64_t b) { return 10.0 + static_cast<double>(b) / 1000.0; };
  const std::vector<SeparateTensor> separate = {{1, 50.0}};
  // copy at 1 GB/s: packing a pack of B bytes costs 2B/1000 us.
  const FusionResult r = tune_fusion(bytes, {0, 1}, time, 1.0, {}, separate);
  CHECK(r.tensors == 4);
  CHECK(r.total_bytes == 10000);
  CHECK(r.packed_bytes == 8000);
  REQUIRE(r.separate.size() == 1);
  CHECK(r.separate[0].tensor == 1);
  const FusionOption& one = r.options[0];
  CHECK(one.packs == Packs{{0, 2, 3}});
  CHECK(one.pack_bytes == std::vector<std::uint64_t>{8000});
  CHECK(one.allreduce_us == doctest::Approx(18.0));
  CHECK(one.packing_us == doctest::Approx(16.0));
  CHECK(one.separate_us == doctest::Approx(50.0));
  CHECK(one.total_us == doctest::Approx(18.0 + 16.0 + 50.0));
  const FusionOption& each = r.options[1];
  CHECK(each.packs == Packs{{0}, {2}, {3}});
  CHECK(each.allreduce_us == doctest::Approx(11.0 + 13.0 + 14.0));
  CHECK(each.packing_us == 0.0);
  CHECK(each.total_us == doctest::Approx(38.0 + 50.0));
  CHECK(r.best == 0);
  // With backward times 1, 2, 3, 4 us the gradients are ready at 10, 9, 7, 4 us; everything queues in that order.
  const FusionResult o = tune_fusion(bytes, {0, 1}, time, 1.0, {1, 2, 3, 4}, separate);
  // One pack (ready at 10 with tensor 0, 34 us) after the sparse tensor (ready at 9, 50 us): 9 + 50 + 34.
  CHECK(o.options[0].step_us == doctest::Approx(93.0));
  // Per tensor: 3 at 4 → 18, 2 → 31, sparse 1 → 81, 0 → 92.
  CHECK(o.options[1].step_us == doctest::Approx(92.0));
  CHECK(o.options[1].exposed_us == doctest::Approx(92.0 - 10.0));
  CHECK(o.best == 1);
  // Without separate tensors nothing changes: every tensor is packed.
  const FusionResult all = tune_fusion(bytes, {0}, time, 1.0);
  CHECK(all.packed_bytes == 10000);
  CHECK(all.options[0].total_us == doctest::Approx(20.0 + 20.0));
  // Every tensor sparse: no packs at all.
  const FusionResult none = tune_fusion({100, 200}, {0, 1}, time, 1.0, {}, {{0, 3.0}, {1, 4.0}});
  CHECK(none.options[0].packs.empty());
  CHECK(none.options[0].total_us == doctest::Approx(7.0));
  // Bad separate lists.
  CHECK_THROWS_WITH_AS(tune_fusion(bytes, {0}, time, 1.0, {}, {{4, 1.0}}), "fusion: separate tensor 4 of 4 tensors",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(tune_fusion(bytes, {0}, time, 1.0, {}, {{1, 1.0}, {1, 2.0}}),
                       "fusion: tensor 1 is separate twice", InvalidInput);
}
