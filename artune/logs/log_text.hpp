#pragma once
// Text helpers shared by the log readers: lines with their numbers, `mpirun --tag-output` prefixes, blanks,
// NCCL's version line and the environment settings a log shows.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace artune::logs::text {

/// One line of a text: 1-based number and content without the line break ("\r\n" or "\n").
struct Line {
  int number = 0;
  std::string_view text;
};

/// Calls fn(Line) for every line of `text` (a last line without a break included).
template <typename F>
void for_each_line(std::string_view text, F&& fn) {
  int number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(start, end - start);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    fn(Line{++number, l});
    start = end + 1;
  }
}

/// `s` without leading and trailing blanks (spaces, tabs).
std::string_view trim(std::string_view s);
/// Whether `s` starts with `prefix`.
inline bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
/// The blank-separated tokens of `s`, at most `max_tokens` (the rest is not split).
std::vector<std::string_view> split_blanks(std::string_view s, std::size_t max_tokens);
/// `l` without a launcher's prefix: `mpirun --tag-output` ("[1,0]<stdout>:") or a rank tag ("[0] ").
std::string_view strip_tag(std::string_view l);
/// The rank tag "[N]" a launcher put before `l` ("" when there is none).
std::string_view launcher_tag(std::string_view l);
/// The version an `NCCL version 2.21.5+cuda12.4` text names, and its NCCL_VERSION_CODE (22105; 2708 for
/// releases before 2.9); nullopt when `l` has none.
std::optional<std::pair<std::string, int>> nccl_version(std::string_view l);
/// "2.26.2" for the code 22602 (NCCL_VERSION_CODE: 10000·major + 100·minor + patch from 2.9, 1000·major +
/// 100·minor + patch before).
std::string version_from_code(int code);
/// Adds the NCCL settings `l` shows: `NCCL_NAME=VALUE` tokens (command lines, `-x`, `export`) and NCCL's own
/// "NCCL_NAME set by environment to VALUE".
void environment_settings(std::string_view l, std::map<std::string, std::string>& env);
/// The nccl-tests program a command line runs ("all_reduce_perf" for "./build/all_reduce_perf -b 8"); "".
std::string perf_program(std::string_view l);

}  // namespace artune::logs::text
