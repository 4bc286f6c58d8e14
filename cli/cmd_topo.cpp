// `artune topo`: not built yet; registers nothing.
#include "cli/commands.hpp"

namespace artune::cli {
void add_topo_command(CLI::App&) {}
}  // namespace artune::cli
