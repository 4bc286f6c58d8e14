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
#include "core/error.hpp"

namespace {

// Error lines longer than this are cut: a message that echoes a huge argument stays readable.
constexpr std::size_t kMaxErrorChars = 1000;

// The error as exactly one line on stderr, whatever the message holds: control characters (a newline
// inside a quoted argument, a tab) are written as escapes, and overlong text is cut.
void print_error(std::string_view message) {
  std::string line;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      line += "\\n";
    else if (c == '\r')
      line += "\\r";
    else if (c == '\t')
      line += "\\t";
    else if (u < 0x20 || u == 0x7f)
      line += fmt::format("\\x{:02x}", u);
    else
      line += c;
  }
  if (line.size() > kMaxErrorChars) {
    std::size_t cut = kMaxErrorChars;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    line = line.substr(0, cut) + "… (message cut)";
  }
  fmt::print(stderr, "artune: {}\n", line);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"artune: simulate, autotune and run all-reduce plans over GPU topologies", "artune"};
  app.set_version_flag("--version", ARTUNE_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  artune::cli::add_topo_command(app);
  artune::cli::add_plan_command(app);
  artune::cli::add_simulate_command(app);
  artune::cli::add_run_command(app);
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
    print_error(e.what());
    return 2;
  } catch (const artune::Error& e) {
    print_error(e.what());
    return artune::exit_status(e.code());
  } catch (const std::bad_alloc&) {
    print_error("out of memory (try smaller sizes)");
    return 3;
  } catch (const std::system_error& e) {
    // The OS refused a resource (threads, files, memory maps): a runtime failure, not a bug.
    print_error(fmt::format("system error: {}", e.what()));
    return 3;
  } catch (const std::exception& e) {
    print_error(fmt::format("internal error: {}", e.what()));
    return 3;
  }
  return 0;
}
