#pragma once
// The built-in configs compiled into the library (configs/*.json, embedded by
// scripts/embed_configs.py at build time). Private to topology/io*.cpp.

#include <cstddef>

namespace artune::detail {

/// One embedded config: its name (file name without .json) and JSON text.
struct EmbeddedConfig {
  const char* name;  ///< e.g. "dgx1-v100"
  const char* text;  ///< the file's JSON text
};

/// The embedded configs, sorted by name.
extern const EmbeddedConfig kEmbeddedConfigs[];
/// Number of entries in kEmbeddedConfigs.
extern const std::size_t kEmbeddedConfigCount;

}  // namespace artune::detail
