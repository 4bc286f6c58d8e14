#include "artune/logs/log_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace artune::logs::text {

namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }

bool name_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

std::optional<int> small_number(std::string_view s) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0 || v > 999) return std::nullopt;
  return v;
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_blanks(std::string_view s, std::size_t max_tokens) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size() && out.size() < max_tokens) {
    while (i < s.size() && blank(s[i])) ++i;
    if (i >= s.size()) break;
    const std::size_t start = i;
    while (i < s.size() && !blank(s[i])) ++i;
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string_view launcher_tag(std::string_view l) {
  // "[0] " or "[12] " (a launcher that prefixes each write with the rank)
  if (l.size() < 3 || l.front() != '[') return {};
  std::size_t i = 1;
  while (i < l.size() && i < 9 && l[i] >= '0' && l[i] <= '9') ++i;
  if (i == 1 || i >= l.size() || l[i] != ']') return {};
  return l.substr(0, i + 1);
}

std::string_view strip_tag(std::string_view l) {
  if (const std::string_view tag = launcher_tag(l); !tag.empty()) return l.substr(tag.size());
  // "[1,0]<stdout>:" or "[1,12]<stderr>: "
  if (l.size() < 12 || l.front() != '[') return l;
  const std::size_t close = l.find("]<std");
  if (close == std::string_view::npos || close > 24) return l;
  const std::size_t end = l.find(">:", close);
  if (end == std::string_view::npos || end > close + 12) return l;
  return l.substr(end + 2);
}

std::optional<std::pair<std::string, int>> nccl_version(std::string_view l) {
  const std::size_t at = l.find("NCCL version ");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = trim(l.substr(at + 13));
  std::size_t end = 0;
  while (end < rest.size() && !blank(rest[end])) ++end;
  const std::string_view token = rest.substr(0, end);
  // major.minor.patch[+suffix]
  const std::size_t plus = token.find('+');
  const std::string_view number = token.substr(0, plus);
  const std::size_t d1 = number.find('.');
  const std::size_t d2 = d1 == std::string_view::npos ? d1 : number.find('.', d1 + 1);
  if (d1 == std::string_view::npos || d2 == std::string_view::npos) return std::nullopt;
  const auto major = small_number(number.substr(0, d1));
  const auto minor = small_number(number.substr(d1 + 1, d2 - d1 - 1));
  const auto patch = small_number(number.substr(d2 + 1));
  if (!major || !minor || !patch || *minor > 99 || *patch > 99) return std::nullopt;
  const bool old = *major < 2 || (*major == 2 && *minor < 9);
  const int code = old ? *major * 1000 + *minor * 100 + *patch : *major * 10000 + *minor * 100 + *patch;
  return std::make_pair(std::string(token), code);
}

std::string version_from_code(int code) {
  if (code <= 0) return "";
  if (code < 10000) return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
}

void environment_settings(std::string_view l, std::map<std::string, std::string>& env) {
  std::size_t at = 0;
  while ((at = l.find("NCCL_", at)) != std::string_view::npos) {
    // A name starts the token (not FOO_NCCL_X).
    if (at > 0 && (name_char(l[at - 1]) || std::isalpha(static_cast<unsigned char>(l[at - 1])))) {
      at += 5;
      continue;
    }
    std::size_t end = at + 5;
    while (end < l.size() && name_char(l[end])) ++end;
    const std::string name(l.substr(at, end - at));
    std::string_view rest = l.substr(end);
    std::string value;
    if (!rest.empty() && rest.front() == '=') {
      rest.remove_prefix(1);
      std::size_t v = 0;
      while (v < rest.size() && !blank(rest[v])) ++v;
      value = std::string(rest.substr(0, v));
    } else if (trim(rest).substr(0, 22) == "set by environment to ") {
      std::string_view v = trim(trim(rest).substr(22));
      std::size_t n = 0;
      while (n < v.size() && !blank(v[n])) ++n;
      value = std::string(v.substr(0, n));
      if (!value.empty() && value.back() == '.') value.pop_back();
    }
    while (!value.empty() && (value.front() == '"' || value.front() == '\'')) value.erase(value.begin());
    while (!value.empty() && (value.back() == '"' || value.back() == '\'' || value.back() == ',' || value.back() == ';'))
      value.pop_back();
    if (name.size() > 5 && !value.empty() && value.size() <= 256) env[name] = value;
    at = end;
  }
}

std::string perf_program(std::string_view l) {
  for (const std::string_view tok : split_blanks(l, 256)) {
    if (tok.size() < 6 || tok.substr(tok.size() - 5) != "_perf") continue;
    const std::size_t slash = tok.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? tok : tok.substr(slash + 1);
    if (base.size() > 5 && std::all_of(base.begin(), base.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; })) {
      return std::string(base);
    }
  }
  return "";
}

}  // namespace artune::logs::text
