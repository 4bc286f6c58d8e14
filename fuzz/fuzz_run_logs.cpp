// Fuzz target: the log readers (nccl-tests output and NCCL's INFO lines) on the same text, as `artune check`
// reads a RUN.log.

#include "artune/logs/nccl_info_log.hpp"
#include "artune/logs/nccl_tests_log.hpp"
#include "fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return artune_fuzz::run_one(data, size, [](std::string_view text) {
    for (const auto& run : artune::logs::parse_nccl_tests(text, "fuzz")) {
      (void)run.ranks();
      (void)run.hosts();
      (void)run.copies();
    }
    const auto info = artune::logs::parse_nccl_info(text, "fuzz");
    (void)info.devices_used();
    (void)info.ring_channels();
  });
}
