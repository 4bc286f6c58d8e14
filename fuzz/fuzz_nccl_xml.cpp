// Fuzz target: the NCCL topology XML importer.

#include "fuzz/fuzz_target.hpp"
#include "artune/topology/import/importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return artune_fuzz::run_one(data, size, [](std::string_view text) { (void)artune::import_nccl_xml(text, "fuzz"); });
}
