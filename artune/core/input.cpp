#include "artune/core/input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "artune/core/error.hpp"
#include "artune/core/json_input.hpp"

namespace artune {

namespace {

namespace fs = std::filesystem;

// Documents deeper than this are never artune inputs; the limit keeps recursive
// walks (and the destructor of the parsed tree) far from the stack's end.
constexpr int kMaxJsonDepth = 256;

std::string prefix(const std::string& path, std::string_view what) {
  return what.empty() ? path : fmt::format("{}: '{}'", what, path);
}

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

// A marker the depth callback throws; turned into InvalidInput with the source below.
struct TooDeep {};

}  // namespace

std::string read_input_file(const std::string& path, std::string_view what, std::uint64_t max_bytes) {
  if (path.empty()) {
    throw InvalidInput(what.empty() ? std::string("empty file name") : fmt::format("{}: empty file name", what));
  }
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw InvalidInput(fmt::format("{}: cannot open ({})", prefix(path, what),
                                   ec ? ec.message() : std::string("No such file or directory")));
  }
  if (fs::is_directory(status)) throw InvalidInput(fmt::format("{}: is a directory, not a file", prefix(path, what)));
  if (fs::is_regular_file(status)) {
    const auto size = fs::file_size(path, ec);
    if (!ec && size > max_bytes) {
      throw InvalidInput(fmt::format("{}: {} bytes is more than the {} bytes artune reads from one input file",
                                     prefix(path, what), size, max_bytes));
    }
  }
  errno = 0;
  const std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw InvalidInput(fmt::format("{}: cannot open ({})", prefix(path, what), std::strerror(errno)));
  // Read in chunks with a cap, so that devices and pipes without an end stop at the limit.
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (text.size() > max_bytes) {
      throw InvalidInput(
          fmt::format("{}: more than the {} bytes artune reads from one input file", prefix(path, what), max_bytes));
    }
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get())) {
    throw InvalidInput(fmt::format("{}: cannot read ({})", prefix(path, what), std::strerror(errno)));
  }
  return text;
}

nlohmann::json parse_json_input(std::string_view text, std::string_view source) {
  const nlohmann::json::parser_callback_t depth_limit = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), depth_limit);
  } catch (const TooDeep&) {
    throw InvalidInput(fmt::format("{}: malformed JSON: nested deeper than {} levels", source, kMaxJsonDepth));
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the byte where parsing stopped.
    const std::size_t stop = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    std::size_t line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < stop; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error …" → "syntax error …".
    std::string reason = e.what();
    if (const auto bracket = reason.find("] "); bracket != std::string::npos) reason.erase(0, bracket + 2);
    if (reason.rfind("parse error", 0) == 0) {
      if (const auto colon = reason.find(": "); colon != std::string::npos) reason.erase(0, colon + 2);
    }
    throw InvalidInput(
        fmt::format("{}: line {}, column {}: malformed JSON: {}", source, line, stop - line_start + 1, reason));
  } catch (const nlohmann::json::exception& e) {
    // Numbers beyond a double (1e400) and the like carry no position.
    std::string reason = e.what();
    if (const auto bracket = reason.find("] "); bracket != std::string::npos) reason.erase(0, bracket + 2);
    throw InvalidInput(fmt::format("{}: malformed JSON: {}", source, reason));
  }
}

nlohmann::json read_json_input(const std::string& path, std::string_view what) {
  const std::string text = read_input_file(path, what);
  return parse_json_input(text, what.empty() ? path : fmt::format("{}: '{}'", what, path));
}

}  // namespace artune
