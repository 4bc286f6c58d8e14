// Fuzz target: the topology JSON loader (full, compact and cluster forms).

#include "artune/core/json_input.hpp"
#include "fuzz/fuzz_target.hpp"
#include "artune/topology/io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return artune_fuzz::run_one(data, size, [](std::string_view text) {
    // No source folder: a cluster's {"config": "file"} resolves against the current folder only.
    const artune::Topology topo = artune::topology_from_json(artune::parse_json_input(text, "fuzz"), "");
    (void)topo.fingerprint();
  });
}
