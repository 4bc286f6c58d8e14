// `artune autotune` and `artune calibrate`: not built yet; registers nothing.
#include "cli/commands.hpp"

namespace artune::cli {
void add_tuner_commands(CLI::App&) {}
}  // namespace artune::cli
