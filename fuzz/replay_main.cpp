// Replays a fuzz target's seed corpus through its LLVMFuzzerTestOneInput without libFuzzer, so that the
// default test suite (g++, no sanitizer runtime needed) runs every target: each seed as it is, then a fixed
// set of deterministic mutations of it (truncations, byte flips, a repeated middle), the same every run.
//
//   replay_X [--ext .json]... FILE_OR_DIR...
//
// Exit 0 when every input ran (the target returned), 1 when no seed was found; a crash or an uncaught
// exception ends the process as it would under libFuzzer.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// Seeds larger than this are replayed as they are but not mutated (keeps the suite fast).
constexpr std::size_t kMaxMutatedSeedBytes = 64 << 10;
constexpr int kMutationsPerSeed = 48;

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool wanted(const fs::path& path, const std::vector<std::string>& exts) {
  if (exts.empty()) return true;
  const std::string name = path.filename().string();
  return std::any_of(exts.begin(), exts.end(), [&](const std::string& e) {
    return name.size() >= e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0;
  });
}

/// Deterministic mutations of `seed` (a fixed linear congruential sequence, no clock).
void mutate_and_run(const std::string& seed) {
  std::uint64_t state = 0x9E3779B97F4A7C15ull ^ seed.size();
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  const char interesting[] = {'\0', '"', '\\', '{', '}', '[', ']',  ',',   ':',
                              '-',  '9', 'e',  '<', '>', '/', '\n', '\xff'};
  for (int m = 0; m < kMutationsPerSeed && !seed.empty(); ++m) {
    std::string s = seed;
    const std::size_t at = next() % s.size();
    switch (m % 4) {
      case 0: s.resize(at); break;                                                          // truncated
      case 1: s[at] = interesting[next() % sizeof interesting]; break;                      // one byte changed
      case 2: s.insert(at, s.substr(at, std::min<std::size_t>(64, s.size() - at))); break;  // a slice repeated
      default: s.erase(at, std::min<std::size_t>(1 + next() % 16, s.size() - at)); break;   // a slice removed
    }
    run(s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> exts;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ext" && i + 1 < argc) {
      exts.push_back(argv[++i]);
      continue;
    }
    if (fs::is_directory(arg)) {
      for (const auto& e : fs::recursive_directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.emplace_back(arg);
    }
  }
  std::sort(files.begin(), files.end());
  std::size_t seeds = 0;
  std::size_t inputs = 0;
  for (const auto& f : files) {
    if (!wanted(f, exts)) continue;
    const std::string seed = slurp(f);
    run(seed);
    ++seeds;
    ++inputs;
    if (seed.size() <= kMaxMutatedSeedBytes) {
      mutate_and_run(seed);
      inputs += kMutationsPerSeed;
    }
  }
  std::printf("replayed %zu seeds, %zu inputs in all\n", seeds, inputs);
  return seeds == 0 ? 1 : 0;
}
