// The NCCL tuner plugin's getCollInfo, dlopened as NCCL does: what NCCL pays per collective call for the
// plugin's pick (a lookup in the communicator's table, then one cost entry set), with a decision table of many
// ranges and a calibration overlay loaded (ARTUNE_TUNER_TABLE, ARTUNE_TUNER_CALIBRATION), against a plugin
// with no table (pass-through). Issue 27's target: < 1 µs per call.
//
//   ARTUNE_TUNER_PLUGIN_PATH=build/nccl_tuner/libnccl-tuner-artune.so build/bench/bench_tuner_plugin
//
// (meson's `benchmark('tuner_plugin', …)` sets the path.) The table and overlay are written to temporary files
// that are removed before the program ends.

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nccl_tuner/tuner_abi.h"

namespace {

int warnings = 0;
/// NCCL's logger, counting warnings (a table the plugin refused would time the pass-through instead).
void counting_log(artuneNcclLogLevel level, unsigned long, const char*, int, const char*, ...) {
  if (level == artuneNcclLogWarn) ++warnings;
}

/// A temporary file holding `text`, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char pattern[] = "/tmp/artune_bench_tuner_XXXXXX";
    const int fd = ::mkstemp(pattern);
    if (fd < 0) std::abort();
    path_ = pattern;
    if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
    ::close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A table as `artune autotune --target nccl` writes it, with `ranges` ranges of equal width over 8 B – 8 GiB
/// for 8 ranks.
std::string table_text(int ranges) {
  nlohmann::json doc;
  doc["schema"] = "artune.decision_table";
  doc["schema_version"] = 1;
  doc["topology"] = {{"name", "bench"}, {"fingerprint", "x"}, {"gpus", 8}, {"machines", 1}};
  doc["ranges"] = nlohmann::json::array();
  const char* specs[] = {"nccl.tree.ll", "nccl.ring.ll", "nccl.ring.ll128", "nccl.ring.simple", "nccl.nvls.simple"};
  const std::uint64_t width = (std::uint64_t{8} << 30) / static_cast<std::uint64_t>(ranges);
  for (int i = 0; i < ranges; ++i) {
    const std::uint64_t lo = 8 + static_cast<std::uint64_t>(i) * width;
    doc["ranges"].push_back({{"min_bytes", lo},
                             {"max_bytes", lo + width - 1},
                             {"plan", {{"family", "nccl"}, {"spec", specs[i % 5]}}}});
  }
  return doc.dump();
}

struct Plugin {
  void* handle = nullptr;
  artuneNcclTunerV5* v5 = nullptr;
  Plugin() {
    const char* path = std::getenv("ARTUNE_TUNER_PLUGIN_PATH");
    if (path == nullptr) {
      std::fprintf(stderr, "bench_tuner_plugin: set ARTUNE_TUNER_PLUGIN_PATH to libnccl-tuner-artune.so\n");
      std::exit(2);
    }
    handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "bench_tuner_plugin: %s\n", ::dlerror());
      std::exit(2);
    }
    v5 = static_cast<artuneNcclTunerV5*>(::dlsym(handle, "ncclTunerPlugin_v5"));
  }
  ~Plugin() { ::dlclose(handle); }
};

Plugin& plugin() {
  static Plugin p;
  return p;
}

// Sizes NCCL would ask about, across the table (a pseudo-random walk, the same every run).
std::vector<std::size_t> sizes() {
  std::vector<std::size_t> s;
  std::uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 1024; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s.push_back(std::size_t{8} << (x % 30));
  }
  return s;
}

void run(benchmark::State& state, bool with_table) {
  const TempFile table(table_text(static_cast<int>(state.range(0))));
  const TempFile overlay(R"({"profile": "nccl", "links": {"nvlink": {"alpha_us": 1.0, "efficiency": 0.7}}})");
  if (with_table) {
    ::setenv("ARTUNE_TUNER_TABLE", table.path().c_str(), 1);
    ::setenv("ARTUNE_TUNER_CALIBRATION", overlay.path().c_str(), 1);
  } else {
    ::unsetenv("ARTUNE_TUNER_TABLE");
    ::unsetenv("ARTUNE_TUNER_CALIBRATION");
  }
  artuneNcclTunerConstants constants{};
  void* ctx = nullptr;
  warnings = 0;
  plugin().v5->init(&ctx, 1, 8, 1, counting_log, nullptr, &constants);
  if (with_table && warnings != 0) {
    state.SkipWithError("the plugin refused the table or the calibration");
    plugin().v5->finalize(ctx);
    return;
  }
  const std::vector<std::size_t> s = sizes();
  float costs[ARTUNE_NCCL_NUM_ALGORITHMS][ARTUNE_NCCL_NUM_PROTOCOLS];
  std::size_t i = 0;
  for (auto _ : state) {
    for (auto& row : costs) {
      for (float& c : row) c = 10.0f;
    }
    int channels = 0;
    plugin().v5->getCollInfo(ctx, artuneNcclFuncAllReduce, s[i++ & 1023], 1, reinterpret_cast<float**>(costs),
                             ARTUNE_NCCL_NUM_ALGORITHMS, ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
    benchmark::DoNotOptimize(costs);
    benchmark::DoNotOptimize(channels);
  }
  plugin().v5->finalize(ctx);
  ::unsetenv("ARTUNE_TUNER_TABLE");
  ::unsetenv("ARTUNE_TUNER_CALIBRATION");
}

// Table ranges: a sweep of 30 sizes at most gives 30 ranges; 1,000 is far beyond any tuned table.
void BM_GetCollInfo(benchmark::State& state) { run(state, true); }
BENCHMARK(BM_GetCollInfo)->Arg(4)->Arg(30)->Arg(1000);

void BM_GetCollInfoNoTable(benchmark::State& state) { run(state, false); }
BENCHMARK(BM_GetCollInfoNoTable)->Arg(4);

}  // namespace

BENCHMARK_MAIN();
