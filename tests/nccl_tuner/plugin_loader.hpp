// Loads libnccl-tuner-artune.so the way NCCL does (dlopen with RTLD_NOW | RTLD_LOCAL, then the
// ncclTunerPlugin_v* symbols looked up by name, NVIDIA/nccl src/plugin/plugin_open.cc and tuner.cc),
// and records what the plugin logs through the logger NCCL hands to init.
#pragma once

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "nccl_tuner/tuner_abi.h"

namespace artune_test {

/// One line the plugin logged.
struct LogLine {
  artuneNcclLogLevel level;
  unsigned long flags;
  std::string text;
};

/// Every line logged since the last clear (tests run one at a time).
inline std::vector<LogLine>& plugin_log() {
  static std::vector<LogLine> lines;
  return lines;
}

/// A logger with NCCL's signature that records lines.
inline void record_log(artuneNcclLogLevel level, unsigned long flags, const char* /*file*/, int /*line*/,
                       const char* fmt, ...) {
  char buf[4096];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  plugin_log().push_back({level, flags, buf});
}

/// Lines of one level.
inline int count_level(artuneNcclLogLevel level) {
  int n = 0;
  for (const auto& l : plugin_log()) n += l.level == level ? 1 : 0;
  return n;
}

/// The plugin, opened from the path in $ARTUNE_TUNER_PLUGIN_PATH (set by meson test).
class PluginLib {
 public:
  PluginLib() {
    const char* path = std::getenv("ARTUNE_TUNER_PLUGIN_PATH");
    if (path == nullptr) throw std::runtime_error("ARTUNE_TUNER_PLUGIN_PATH is not set");
    handle_ = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
  }
  ~PluginLib() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  PluginLib(const PluginLib&) = delete;
  PluginLib& operator=(const PluginLib&) = delete;

  /// The symbol `name` as a T*, nullptr when absent.
  template <typename T>
  T* symbol(const char* name) const {
    return static_cast<T*>(::dlsym(handle_, name));
  }

 private:
  void* handle_ = nullptr;
};

/// NCCL's pick from a cost table: the cheapest entry that is not negative (src/graph/tuning.cc
/// topoGetAlgoInfo: entries < 0 are ignored, the minimum time wins, first one on ties).
inline std::pair<int, int> nccl_choice(const float (&costs)[ARTUNE_NCCL_NUM_ALGORITHMS][ARTUNE_NCCL_NUM_PROTOCOLS]) {
  std::pair<int, int> best{-1, -1};
  float min = 0;
  for (int a = 0; a < ARTUNE_NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < ARTUNE_NCCL_NUM_PROTOCOLS; ++p) {
      if (costs[a][p] >= 0 && (best.first < 0 || costs[a][p] < min)) {
        best = {a, p};
        min = costs[a][p];
      }
    }
  }
  return best;
}

}  // namespace artune_test
