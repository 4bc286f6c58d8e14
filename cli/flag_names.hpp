#pragma once
// The CLI's names for the library's parameters: library messages name a parameter as "parameter NAME"
// (artune/core/parameters.hpp); the CLI prints its own flag in that place, so that a message reads as the
// command line was written ("-e/--maxbytes: 4 is below -b/--minbytes 8").

#include <string>
#include <string_view>

namespace artune::cli {

/// The flag the CLI takes parameter `name` as ("max_bytes" → "-e/--maxbytes"); empty when it has none.
std::string_view flag_of_parameter(std::string_view name);

/// `message` with every "parameter NAME" whose NAME has a flag replaced by that flag; the rest unchanged.
std::string with_flag_names(std::string_view message);

}  // namespace artune::cli
