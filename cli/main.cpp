// The `artune` command: parses flags and calls the modules. Errors become a
// one-line message on stderr and the exit status of their code.

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "artune_config.hpp"
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "artune/core/error.hpp"

namespace {

/// Levenshtein distance, for suggesting a flag.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// Every long flag of `app` and its subcommands ("--maxbytes").
void long_flags(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) out.push_back("--" + name);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) long_flags(*sub, out);
}

/// "unknown flag --maxbyte (did you mean --maxbytes?)" for the first unexpected word that looks like a flag and
/// is close to a real one; "" when none is.
std::string flag_suggestion(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> flags;
  long_flags(app, flags);
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0) continue;
    word = word.substr(0, word.find('='));
    if (std::find(flags.begin(), flags.end(), word) != flags.end()) continue;
    std::string best;
    std::size_t best_d = 3;  // at most two edits
    for (const std::string& f : flags) {
      const std::size_t d = edit_distance(word, f);
      if (d < best_d) best_d = d, best = f;
    }
    return best.empty() ? std::string() : fmt::format("unknown flag {} (did you mean {}?)", word, best);
  }
  return {};
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
  artune::cli::add_bound_command(app);
  artune::cli::add_alloc_command(app);
  artune::cli::add_autotune_command(app);
  artune::cli::add_calibrate_command(app);
  artune::cli::add_check_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 runs callbacks inside parse(); only genuine parse errors land here. A misspelt flag gets a suggestion.
    const std::string hint = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ? flag_suggestion(app, argc, argv) : "";
    artune::cli::print_error(hint.empty() ? std::string(e.what()) : hint);
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
