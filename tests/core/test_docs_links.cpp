// Every document link in the repository resolves: relative Markdown links in
// every *.md, backticked repository paths in Markdown, and repository paths
// cited in source comments (the decision table's header once cited a
// workflow document that did not exist).
// Scans the source tree named by ARTUNE_SOURCE_ROOT (set by meson test).

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"
#include "tests/test_support.hpp"

namespace fs = std::filesystem;

namespace {

using artune_test::slurp;

/// Folders that are not part of the source tree proper (build outputs, VCS data).
bool skipped_dir(const fs::path& rel) {
  const std::string first = rel.begin()->string();
  return first.rfind("build", 0) == 0 || first == ".git" || first == ".cache" || first == "subprojects";
}

std::vector<fs::path> files_with(const fs::path& root, const std::vector<std::string>& extensions) {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), root);
    if (it->is_directory() && skipped_dir(rel)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    if (std::find(extensions.begin(), extensions.end(), it->path().extension().string()) != extensions.end()) {
      out.push_back(it->path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The repository's top-level folders: a cited path must start with one of them to count as a repository path
/// (NCCL's `src/graph/topo.h` is another repository's file).
std::set<std::string> top_level_dirs(const fs::path& root) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) {
    const fs::path rel = fs::relative(e.path(), root);
    if (e.is_directory() && !skipped_dir(rel)) out.insert(rel.string());
  }
  return out;
}

/// Repository paths cited in `text`: top-level folder, '/', then a file name with one of the document/source
/// extensions. Placeholders (`configs/x.json`, `DIR/REPORT.md`) are written with a capital or a single letter
/// and are listed in `examples` below.
std::vector<std::string> cited_paths(const std::string& text, const std::set<std::string>& tops) {
  static const std::regex path_re(
      R"(([A-Za-z0-9_.-]+)/([A-Za-z0-9_./+-]*\.(md|json|hpp|cpp|h|cu|sh|py|build|txt|xml)))");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), path_re); it != std::sregex_iterator(); ++it) {
    const std::string first = (*it)[1].str();
    if (!tops.count(first)) continue;
    const auto pos = static_cast<std::size_t>(it->position(0));
    if (pos > 0 && (text[pos - 1] == '/' || text[pos - 1] == '.')) continue;  // part of a longer or foreign path
    out.push_back(it->str());
  }
  return out;
}

/// Illustrative names in messages and docs that are not meant to exist.
bool is_example(const std::string& path) {
  static const std::set<std::string> examples = {"configs/x.json", "configs/NAME.json"};
  return examples.count(path) > 0;
}

}  // namespace

TEST_CASE("docs.markdown_links_resolve") {
  const fs::path root = artune_test::require_env("ARTUNE_SOURCE_ROOT");
  static const std::regex link_re(R"(\]\(([^)\s]+)\))");
  std::vector<std::string> broken;
  int checked = 0;
  for (const fs::path& md : files_with(root, {".md"})) {
    const std::string text = slurp(md);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link_re); it != std::sregex_iterator(); ++it) {
      std::string target = (*it)[1].str();
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0 || target[0] == '#') continue;
      target = target.substr(0, target.find('#'));
      ++checked;
      if (!fs::exists(md.parent_path() / target)) {
        broken.push_back(fs::relative(md, root).string() + ": " + target);
      }
    }
  }
  CHECK(checked > 0);
  std::string all;
  for (const auto& b : broken) all += b + "\n";
  CHECK_MESSAGE(broken.empty(), "broken links:\n" << all);
}

TEST_CASE("docs.cited_repository_files_exist") {
  const fs::path root = artune_test::require_env("ARTUNE_SOURCE_ROOT");
  const std::set<std::string> tops = top_level_dirs(root);
  std::vector<std::string> broken;
  int checked = 0;
  // Markdown anywhere, and the comments of sources, headers, build files and scripts.
  for (const fs::path& f : files_with(root, {".md", ".hpp", ".cpp", ".h", ".cu", ".build", ".sh", ".py"})) {
    if (f.filename() == "test_docs_links.cpp") continue;  // this file cites a missing path on purpose
    std::istringstream lines(slurp(f));
    std::string line;
    const bool markdown = f.extension() == ".md";
    const bool hash_comments = f.extension() == ".build" || f.extension() == ".sh" || f.extension() == ".py";
    int number = 0;
    while (std::getline(lines, line)) {
      ++number;
      std::string scanned = line;
      if (!markdown) {
        const std::size_t c = hash_comments ? line.find('#') : line.find("//");
        if (c == std::string::npos) continue;
        scanned = line.substr(c);
      }
      for (const std::string& p : cited_paths(scanned, tops)) {
        if (is_example(p)) continue;
        ++checked;
        // Repository paths are written from the root (or, for the public headers, as included: artune/communicator.hpp
        // is include/artune/communicator.hpp); a file may also cite a path beside itself (meson.build, Markdown).
        if (!fs::exists(root / p) && !fs::exists(root / "include" / p) && !fs::exists(f.parent_path() / p)) {
          broken.push_back(fs::relative(f, root).string() + ":" + std::to_string(number) + ": " + p);
        }
      }
    }
  }
  CHECK(checked > 0);
  std::string all;
  for (const auto& b : broken) all += b + "\n";
  CHECK_MESSAGE(broken.empty(), "cited files that do not exist:\n" << all);
}

TEST_CASE("docs.checker_finds_a_dangling_citation") {
  // The scanner itself: a made-up citation is found, a foreign repository's path is not.
  const std::set<std::string> tops = {"tuner", "configs"};
  const auto found = cited_paths("// schema documented in tuner/WORKFLOW.md; NCCL src/graph/topo.h", tops);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "tuner/WORKFLOW.md");
  CHECK(cited_paths("see https://github.com/NVIDIA/nccl/blob/master/src/tuner/x.md", tops).empty());
}
