// `artune run`: not built yet (see the open issue); registers nothing.
#include "cli/commands.hpp"

namespace artune::cli {
void add_run_command(CLI::App&) {}
}  // namespace artune::cli
