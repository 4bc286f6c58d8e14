// Fuzz target: the calibration overlay a cost model applies (--calibration FILE).

#include "artune/core/json_input.hpp"
#include "fuzz/fuzz_target.hpp"
#include "artune/simulator/cost_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return artune_fuzz::run_one(data, size, [](std::string_view text) {
    artune::CostModel model = artune::CostModel::defaults(artune::BackendProfile::kNccl);
    model.apply_overlay(artune::parse_json_input(text, "fuzz"), "fuzz");
    (void)model.to_json();
  });
}
