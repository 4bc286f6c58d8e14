#pragma once
// Shared shape of artune's fuzz targets: each feeds one parser the bytes it is given. An artune::Error
// (bad input, refused size) is the expected answer to garbage; anything else escaping — another exception,
// a crash, a sanitizer report — is a finding. The same entry point runs under libFuzzer (-Dfuzz=true, clang)
// and in replay_main.cpp, which replays the seed corpus in the default test suite.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "artune/core/error.hpp"

namespace artune_fuzz {

/// Runs `parse` on the input viewed as text; artune::Error is swallowed, everything else propagates.
template <typename F>
int run_one(const std::uint8_t* data, std::size_t size, F&& parse) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    parse(text);
  } catch (const artune::Error&) {}
  return 0;
}

}  // namespace artune_fuzz
