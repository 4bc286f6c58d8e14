// Library messages name parameters ("parameter max_bytes"), the CLI prints its flags in their place
// (cli/flag_names.hpp): every parameter has a flag, the replacement is exact, library calls raise the
// parameter form, and no string in the library names a CLI flag itself.

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"
#include "artune/core/sizes.hpp"
#include "artune/topology/io/io.hpp"
#include "cli/flag_names.hpp"
#include "tests/test_support.hpp"

using artune::cli::flag_of_parameter;
using artune::cli::with_flag_names;
using artune_test::error_of;

namespace {

// The string literals of a C++ source, comments skipped (adjacent literals stay separate).
std::vector<std::string> string_literals(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i + 2);
      if (i == std::string::npos) break;
      i += 2;
    } else if (text[i] == '\'' && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      for (++i; i < text.size() && text[i] != '\''; ++i) i += text[i] == '\\' ? 1 : 0;
      ++i;
    } else if (text[i] == '"') {
      std::string literal;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') literal += text[i++];
        literal += text[i];
      }
      ++i;
      out.push_back(literal);
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("flag_names.every_parameter_has_one_flag") {
  std::set<std::string_view> flags;
  for (std::string_view name : artune::kParameterNames) {
    INFO(name);
    const std::string_view flag = flag_of_parameter(name);
    CHECK(flag.substr(0, 1) == "-");
    CHECK(flags.insert(flag).second);
  }
  CHECK(flag_of_parameter("no_such_parameter").empty());
}

TEST_CASE("flag_names.replaces_the_phrase_only") {
  CHECK(with_flag_names("parameter max_bytes: 4 is below parameter min_bytes 8") ==
        "-e/--maxbytes: 4 is below -b/--minbytes 8");
  CHECK(with_flag_names("parameter spec 'ring#0': bad") == "--spec 'ring#0': bad");
  CHECK(with_flag_names("mpi backend: machine 1 (parameter machine_index / ARTUNE_MACHINE_INDEX)") ==
        "mpi backend: machine 1 (--machine-index / ARTUNE_MACHINE_INDEX)");
  CHECK(with_flag_names("parameter gpus: must be ≥ 1; parameter gpu_perm 1,0") ==
        "--gpus: must be ≥ 1; --gpu-perm 1,0");
  CHECK(with_flag_names("parameter density 2 is not in (0, 1]") == "--sparse: DENSITY 2 is not in (0, 1]");
  // Unknown names, a phrase inside a word, and no name at all stay as they are.
  CHECK(with_flag_names("parameter counts: x") == "parameter counts: x");
  CHECK(with_flag_names("the_parameter count") == "the_parameter count");
  CHECK(with_flag_names("a parameter ") == "a parameter ");
  CHECK(with_flag_names("no parameters here") == "no parameters here");
  CHECK(with_flag_names("") == "");
}

TEST_CASE("flag_names.library_errors_name_the_parameter") {
  const std::string sweep = error_of([] { (void)artune::size_sweep(8, 4, 2.0); });
  CHECK(sweep == "parameter max_bytes: 4 is below parameter min_bytes 8");
  CHECK(with_flag_names(sweep) == "-e/--maxbytes: 4 is below -b/--minbytes 8");

  const artune::Topology topo = artune::load_topology("uniform:4");
  artune::BuildOptions options;
  options.count = 0;
  const std::string count = error_of([&] { (void)artune::build_plan(topo, "ring", options); });
  CHECK(count == "parameter count: must be ≥ 1 (got 0)");
  CHECK(with_flag_names(count) == "--count: must be ≥ 1 (got 0)");

  options.count = 16;
  options.segments = 0;
  CHECK(with_flag_names(error_of([&] { (void)artune::build_plan(topo, "ring", options); })) ==
        "--segments: must be between 1 and 4096 (got 0)");

  // A misspelt name is artune's own bug.
  CHECK_THROWS_AS((void)artune::parameter("max_byte"), artune::InternalError);
}

// Every message of the library names parameters, never the CLI's flags: no string literal under artune/
// holds a flag ("--count", "-e/"), except the two that quote other programs' or the run header's own.
TEST_CASE("flag_names.no_cli_flag_in_library_strings") {
  const char* root = std::getenv("ARTUNE_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  const std::regex flag(R"((^|[^\w-])(--[a-z][a-z0-9_-]*|-[a-zA-Z](?=[\s/,):]|$)))");
  const std::set<std::string> allowed = {
      // `artune run`'s header mirrors the run's settings as nccl-tests prints them.
      "# artune run: topology {}, {}spec {}, backend {}, {} {}, -n {} -w {} -c {}{}\\n",
      // nvidia-smi's own flag, and gnuplot's.
      "imported from nvidia-smi topo -m ({}): {} GPUs{}, {} NVLinks{}, {} NICs, {} sockets, {} PCIe ",
      "-e",
  };
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(root) / "artune")) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu") continue;
    ++files;
    for (const std::string& literal : string_literals(artune_test::slurp(entry.path()))) {
      if (!std::regex_search(literal, flag) || allowed.count(literal) > 0) continue;
      INFO(entry.path().string());
      CHECK(literal == "");
    }
  }
  CHECK(files > 100);
}
