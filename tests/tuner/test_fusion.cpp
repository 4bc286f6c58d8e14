// Tensor fusion: TF group_by_size semantics, pack-size choice with a known
// optimum, and the shipped gradient lists.

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "tuner/fusion.hpp"

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
  const nlohmann::json doc = {{"model", "toy"}, {"type", "float16"}, {"unit", "bytes"},
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
