// The `artune` command: parses flags and calls the modules. Errors become a
// one-line message on stderr and the exit status of their code.

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <new>

#include "artune_config.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"artune: simulate, autotune and run all-reduce plans over GPU topologies", "artune"};
  app.set_version_flag("--version", ARTUNE_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  artune::cli::add_topo_command(app);
  artune::cli::add_plan_command(app);
  artune::cli::add_simulate_command(app);
  artune::cli::add_run_command(app);
  artune::cli::add_tuner_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 runs callbacks inside parse(); only genuine parse errors land here.
    fmt::print(stderr, "artune: {}\n", e.what());
    return 2;
  } catch (const artune::Error& e) {
    fmt::print(stderr, "artune: {}\n", e.what());
    return artune::exit_status(e.code());
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "artune: out of memory (try smaller sizes)\n");
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "artune: internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
