// Hostile input to `artune autotune`, `artune calibrate` and the tuner's files (decision tables,
// calibration overlays, gradient lists): every case ends with exit status 2 and exactly one
// stderr line "artune: …" naming the flag, file or field at fault, before any measurement
// starts (so no progress line comes first).

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;

struct Case {
  std::vector<std::string> args;
  std::vector<std::string> names;  ///< substrings the error line must contain
};

class Folder {
 public:
  Folder() {
    char pattern[] = "/tmp/artune_bad_tuner_XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    fs::create_directory(dir_ / "adir");
    write("big.json", R"({"a": 1e400})");
    write("huge_tensor.json", R"({"tensors": [10, {"elements": 1000000000000000000}]})");
    write("huge_shape.json", R"({"tensors": [{"shape": [4294967296, 4294967296, 4294967296]}]})");
    write("huge_total.json", R"({"type": "uint8", "tensors": [1125899906842624, 1125899906842624, 1125899906842624]})");
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string operator()(const std::string& name) const { return (dir_ / name).string(); }

 private:
  void write(const std::string& name, const std::string& text) {
    std::ofstream out(dir_ / name, std::ios::binary);
    out << text;
  }
  fs::path dir_;
};

void check_cases(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    CAPTURE(line);
    const auto r = artune_test::run_artune(c.args);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.rfind("artune: ", 0) == 0);
    CHECK(artune_test::count_of(r.err, "\n") == 1);
    for (const auto& name : c.names) CHECK(r.err.find(name) != std::string::npos);
  }
}

// A command line: `base` followed by `extra`.
std::vector<std::string> joined(const std::vector<std::string>& base, const std::vector<std::string>& extra) {
  std::vector<std::string> args = base;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
const std::vector<std::string> kAutotune = {"autotune", "-t", "uniform:4", "-b", "1K", "-e", "1K", "-q"};
const std::vector<std::string> kCalibrate = {"calibrate", "-t", "uniform:2", "-b", "4K", "-e", "16K"};

}  // namespace

TEST_CASE("cli_bad_input_tuner.files") {
  const Folder f;
  const auto with = [](std::vector<std::string> extra) { return joined(kAutotune, extra); };
  check_cases({
      {{"run", "-t", "uniform:4", "--table", "/dev/zero"}, {"/dev/zero"}},
      {{"run", "-t", "uniform:4", "--table", f("big.json")}, {"big.json", "1e400"}},
      {{"run", "-t", "uniform:4", "--table", f("adir")}, {"adir", "directory"}},
      {with({"--calibration", f("big.json")}), {"--calibration", "big.json", "1e400"}},
      {with({"--calibration", f("adir")}), {"--calibration", "adir", "directory"}},
      {with({"--calibration", "/dev/zero"}), {"--calibration", "/dev/zero"}},
      {with({"--fusion", f("big.json")}), {"big.json", "1e400"}},
      {with({"--fusion", f("adir")}), {"--fusion", "adir", "directory"}},
      {with({"--fusion", f("absent.json")}), {"--fusion", "absent.json"}},
      {with({"--fusion", f("huge_tensor.json")}), {"huge_tensor.json: tensors[1]", "1 PiB"}},
      {with({"--fusion", f("huge_shape.json")}), {"huge_shape.json: tensors[0]", "1 PiB"}},
      {with({"--fusion", f("huge_total.json")}), {"huge_total.json: tensors[1]", "1 PiB"}},
  });
}

TEST_CASE("cli_bad_input_tuner.autotune_flags") {
  const Folder f;
  const auto with = [](std::vector<std::string> extra) { return joined(kAutotune, extra); };
  check_cases({
      {with({"--max-subchunks", "0"}), {"--max-subchunks"}},
      {with({"--max-subchunks", "-5"}), {"--max-subchunks"}},
      {with({"--max-subchunks", "5"}), {"--max-subchunks", "1..4"}},
      {with({"--max-subchunks", "1000000"}), {"--max-subchunks"}},
      {with({"--measure", ""}), {"--measure"}},
      {with({"--out", ""}), {"--out"}},
      {with({"--report", ""}), {"--report"}},
      {with({"--out", f("adir")}), {"--out", "adir"}},
      {with({"--out", f("nodir/t.json")}), {"--out", "nodir"}},
      {with({"--report", f("big.json")}), {"--report", "big.json"}},
      {with({"--warmup", "-1"}), {"--warmup"}},
      {with({"--iters", "0"}), {"--iters"}},
      {with({"--top", "0"}), {"--top"}},
      {with({"-j", "-1"}), {"-j/--jobs", "0..1024"}},
      {with({"--jobs", "1025"}), {"-j/--jobs"}},
      {with({"-j", "two"}), {"-j"}},
      {with({"--timeout", "0"}), {"--timeout"}},
      {with({"--timeout", "inf"}), {"--timeout"}},
      {with({"--timeout", "1e7"}), {"--timeout"}},
      {{"autotune", "-t", "128xdgx-h100", "-b", "1K", "-e", "1K", "-q", "--measure", "cpu"}, {"-t", "cpu"}},
  });
}

TEST_CASE("cli_bad_input_tuner.calibrate_flags_before_measuring") {
  const Folder f;
  const auto with = [](std::vector<std::string> extra) { return joined(kCalibrate, extra); };
  // Without -q: a progress line before the error would make the line count 2 and fail the case.
  check_cases({
      {with({"--warmup", "-1"}), {"--warmup"}},
      {with({"--iters", "0"}), {"--iters"}},
      {with({"--timeout", "-3"}), {"--timeout"}},
      {with({"--timeout", "nan"}), {"--timeout"}},
      {with({"--out", ""}), {"--out"}},
      {with({"--out", f("adir")}), {"--out", "adir"}},
      {with({"--out", f("nodir/o.json")}), {"--out", "nodir"}},
      {with({"--report", ""}), {"--report"}},
      {with({"--report", f("big.json")}), {"--report", "big.json"}},
      {{"calibrate", "-t", "uniform:2", "-b", "6", "-e", "96"}, {"-b/-e/-f", "element size"}},
      {{"calibrate", "-t", "128xdgx-h100"}, {"-t", "128xdgx-h100", "256"}},
  });
}
