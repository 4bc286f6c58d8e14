// `artune simulate`: not built yet (see the open issue); registers nothing.
#include "cli/commands.hpp"

namespace artune::cli {
void add_simulate_command(CLI::App&) {}
}  // namespace artune::cli
