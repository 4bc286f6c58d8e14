// Fuzz target: the decision-table reader.

#include "artune/core/json_input.hpp"
#include "fuzz/fuzz_target.hpp"
#include "artune/tuner/decision_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return artune_fuzz::run_one(data, size, [](std::string_view text) {
    const artune::DecisionTable table = artune::table_from_json(artune::parse_json_input(text, "fuzz"), "fuzz");
    (void)artune::table_to_json(table);
  });
}
