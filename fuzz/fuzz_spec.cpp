// Fuzz target: the all-reduce spec grammar, then building (and verifying) the plan it names on a small
// machine and a small cluster, so that what the grammar accepts is also what the builders survive.

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/spec.hpp"
#include "fuzz/fuzz_target.hpp"
#include "artune/topology/io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const artune::Topology machine = artune::load_topology("uniform:4");
  static const artune::Topology cluster = artune::load_topology("uniform:2x2");
  if (size > 4096) return 0;  // specs are short; longer inputs only slow the search down
  return artune_fuzz::run_one(data, size, [](std::string_view text) {
    const artune::AllReduceSpec spec = artune::parse_spec(text);
    (void)artune::to_string(spec);
    for (const artune::Topology* topo : {&machine, &cluster}) {
      artune::BuildOptions options;
      options.count = 37;  // odd: uneven chunks
      try {
        (void)artune::build_plan(*topo, text, options);  // verified by the builder
      } catch (const artune::Error&) {}
    }
  });
}
