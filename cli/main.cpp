// The `artune` command: parses flags and calls the modules. Errors become a
// one-line message on stderr and the exit status of their code.

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <system_error>

#include "artune_config.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "artune/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"artune: simulate, autotune and run all-reduce plans over GPU topologies", "artune"};
  app.set_version_flag("--version", ARTUNE_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  artune::cli::add_topo_command(app);
  artune::cli::add_plan_command(app);
  artune::cli::add_simulate_command(app);
  artune::cli::add_run_command(app);
  artune::cli::add_bound_command(app);
  artune::cli::add_alloc_command(app);
  artune::cli::add_autotune_command(app);
  artune::cli::add_calibrate_command(app);
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
    artune::cli::print_error(e.what());
    return 2;
  } catch (const artune::Error& e) {
    artune::cli::print_error(e.what());
    return artune::exit_status(e.code());
  } catch (const std::bad_alloc&) {
    artune::cli::print_error("out of memory (try smaller sizes)");
    return 3;
  } catch (const std::system_error& e) {
    // The OS refused a resource (threads, files, memory maps): a runtime failure, not a bug. A thread that
    // cannot start (EAGAIN) is memory (its stack) or the process limit.
    if (e.code() == std::errc::resource_unavailable_try_again) {
      artune::cli::print_error(fmt::format("out of memory or threads: {} (try smaller sizes)", e.what()));
    } else {
      artune::cli::print_error(fmt::format("system error: {}", e.what()));
    }
    return 3;
  } catch (const std::exception& e) {
    artune::cli::print_error(fmt::format("internal error: {}", e.what()));
    return 3;
  }
  return 0;
}
