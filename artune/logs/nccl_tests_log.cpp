#include "artune/logs/nccl_tests_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "artune/core/error.hpp"
#include "artune/core/input.hpp"
#include "artune/core/sizes.hpp"
#include "artune/logs/log_text.hpp"

namespace artune::logs {

namespace {

using text::split_blanks;
using text::starts_with;
using text::trim;

// nccl-tests' type names (src/common.cu test_typenames) and their sizes.
struct TypeSize {
  std::string_view name;
  int bytes;
};
constexpr TypeSize kTypes[] = {{"int8", 1},     {"uint8", 1},   {"int32", 4},    {"uint32", 4}, {"int64", 8},
                               {"uint64", 8},   {"half", 2},    {"float", 4},    {"double", 8}, {"bfloat16", 2},
                               {"f8e4m3", 1},   {"f8e5m2", 1},  {"fp8_e4m3", 1}, {"fp8_e5m2", 1}};

// A printed decimal number and half of its last printed digit (what rounding may have hidden).
struct Printed {
  double value = 0;
  double half_ulp = 0;
};

std::optional<Printed> parse_printed(std::string_view token) {
  if (token.empty() || token.size() > 40) return std::nullopt;
  double v = 0;
  const char* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v)) return std::nullopt;
  // The last printed digit: decimals of the mantissa, shifted by the exponent ("1.2e+05" → 1e4).
  const std::size_t e = token.find_first_of("eE");
  const std::string_view mantissa = token.substr(0, e);
  const std::size_t dot = mantissa.find('.');
  int decimals = dot == std::string_view::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  int exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view ex = token.substr(e + 1);
    if (!ex.empty() && ex.front() == '+') ex.remove_prefix(1);
    const auto [p2, ec2] = std::from_chars(ex.data(), ex.data() + ex.size(), exponent);
    if (ec2 != std::errc() || p2 != ex.data() + ex.size() || exponent < -300 || exponent > 300) return std::nullopt;
  }
  return Printed{v, 0.5 * std::pow(10.0, exponent - decimals)};
}

std::optional<std::uint64_t> parse_unsigned(std::string_view token) {
  std::uint64_t v = 0;
  if (token.empty() || token.front() == '+' || token.front() == '-') return std::nullopt;
  const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
  return v;
}

std::optional<long long> parse_integer(std::string_view token) {
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
  return v;
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An interval that every row of a table must share (a ratio known up to the printed digits).
struct Interval {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool any = false;
  bool meet(double a, double b) {
    const double slack = 1e-9 * std::max(std::fabs(a), std::fabs(b));
    a -= slack;
    b += slack;
    if (any && (b < lo || a > hi)) return false;
    lo = any ? std::max(lo, a) : a;
    hi = any ? std::min(hi, b) : b;
    any = true;
    return true;
  }
  double mid() const { return any ? 0.5 * (lo + hi) : 0.0; }
  /// The midpoint once the rows pin it to within 5 %, else 0 (too few printed digits to tell).
  double pinned() const { return any && hi - lo <= 0.05 * std::fabs(mid()) ? mid() : 0.0; }
};

// What the lines before a table say about the run; copied into every table that follows it.
struct Context {
  std::string program, tests_version, nccl_version;
  int nccl_version_code = 0;
  int threads = 0, gpus_per_thread = 0;
  std::uint64_t min_bytes = 0, max_bytes = 0;
  int warmup_iters = -1, iters = -1, agg_iters = -1, validation = -1, graph = -1;
  std::vector<TestDevice> devices;
  std::map<std::string, std::string> env;
};

// The columns of a table, by position.
struct Columns {
  int size = -1, count = -1, type = -1, redop = -1, root = -1;
  // Per half (out-of-place, in-place): time, algbw, busbw, check (#wrong/error; -1 when absent).
  int time[2] = {-1, -1}, algbw[2] = {-1, -1}, busbw[2] = {-1, -1}, check[2] = {-1, -1};
  int halves = 0;
  int fields = 0;         // tokens of a full row (timestamp columns excluded)
  int half_fields = 0;    // tokens of one half (from its time to the next half's)
  bool timestamp = false;  // a trailing timestamp column (-T): any tokens after the fields
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  std::vector<TestRun> run() {
    text::for_each_line(text_, [this](const text::Line& raw) {
      line_ = raw.number;
      const std::string_view tag = text::launcher_tag(raw.text);
      const std::string_view l = text::strip_tag(raw.text);
      if (!tag.empty() && table_open_ && l.find(tag) != std::string_view::npos) {
        // A launcher that tags each write also tags the pieces of one row ("… sum  -1[0]  1626.5 …").
        std::string joined;
        std::size_t start = 0, at = 0;
        while ((at = l.find(tag, start)) != std::string_view::npos) {
          joined.append(l.substr(start, at - start));
          joined += ' ';
          start = at + tag.size();
        }
        joined.append(l.substr(start));
        handle(joined);
      } else {
        handle(l);
      }
    });
    close_table();
    return std::move(runs_);
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    throw InvalidInput(fmt::format("{}:{}: {}", source_, line_, reason));
  }

  // Context lines after a finished table start the next run's context.
  void fresh_context() {
    if (table_open_) close_table();
    if (context_used_) {
      ctx_ = Context{};
      context_used_ = false;
    }
  }

  void handle(std::string_view l) {
    std::string_view body = trim(l);
    const bool hash = !body.empty() && body.front() == '#';
    if (hash) body = trim(body.substr(1));
    if (table_open_ && !hash && is_row(body)) {
      // Another process's NCCL log written into the middle of a row: the row is lost, not damaged.
      if (body.find("NCCL INFO") != std::string_view::npos || body.find("NCCL WARN") != std::string_view::npos) {
        ++runs_.back().interrupted_rows;
        return;
      }
      row(body);
      return;
    }
    // Older releases print the header and footer lines without '#'.
    if (starts_with(body, "Out of bounds values") || starts_with(body, "Avg bus bandwidth")) {
      footer(body);
      return;
    }
    if (is_column_header(body)) {
      header(body);
      return;
    }
    if (starts_with(body, "nccl-tests version")) {
      fresh_context();
      tests_version(body);
      return;
    }
    if (const std::size_t at = body.find("Collective test starting:"); at != std::string_view::npos) {
      fresh_context();
      ctx_.program = std::string(trim(body.substr(at + std::string_view("Collective test starting:").size())));
      return;
    }
    if (body.find("Collective test concluded:") != std::string_view::npos) {
      close_table();
      return;
    }
    if (starts_with(body, "nThread ")) {
      fresh_context();
      parameters(body);
      return;
    }
    if (starts_with(body, "Rank ") && body.find(" device ") != std::string_view::npos) {
      if (table_open_ || (context_used_ && ctx_.devices.empty())) fresh_context();
      device(body);
      return;
    }
    // Anything else: NCCL's version, environment settings and the program name of command lines.
    other(l);
  }

  static bool is_row(std::string_view body) {
    const auto tokens = split_blanks(body, 2);
    return !tokens.empty() && is_digits(tokens.front());
  }

  static bool is_column_header(std::string_view body) {
    const auto t = split_blanks(body, 64);
    auto has = [&](std::string_view name) { return std::find(t.begin(), t.end(), name) != t.end(); };
    return !t.empty() && t.front() == "size" && has("count") && has("type") && (has("time") || has("cputime")) &&
           has("algbw") && has("busbw");
  }

  void tests_version(std::string_view body) {
    // "nccl-tests version 2.17.9 nccl-headers=22602 nccl-library=22602"
    const auto t = split_blanks(body, 16);
    if (t.size() >= 3) ctx_.tests_version = std::string(t[2]);
    for (const auto& tok : t) {
      if (starts_with(tok, "nccl-library=")) {
        if (const auto v = parse_integer(tok.substr(13)); v && *v > 0 && *v < 1000000) {
          ctx_.nccl_version_code = static_cast<int>(*v);
          if (ctx_.nccl_version.empty()) ctx_.nccl_version = text::version_from_code(ctx_.nccl_version_code);
        }
      }
    }
  }

  void parameters(std::string_view body) {
    // "nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
    //  validation: 1 graph: 0" (older releases stop after validation, or add single_test/test_buffer_kind).
    const auto t = split_blanks(body, 64);
    auto value_after = [&](std::size_t i) -> std::optional<long long> {
      if (i + 1 >= t.size()) return std::nullopt;
      return parse_integer(t[i + 1]);
    };
    auto need = [&](std::size_t i, std::string_view what, long long lo, long long hi) {
      const auto v = value_after(i);
      if (!v || *v < lo || *v > hi) fail(fmt::format("'{}' is not followed by a number in [{}, {}]", what, lo, hi));
      return *v;
    };
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::string_view k = t[i];
      const std::string_view prev = i > 0 ? t[i - 1] : std::string_view();
      if (k == "nThread") ctx_.threads = static_cast<int>(need(i, k, 1, 1 << 20));
      if (k == "nGpus") ctx_.gpus_per_thread = static_cast<int>(need(i, k, 1, 1 << 20));
      if (k == "minBytes") ctx_.min_bytes = static_cast<std::uint64_t>(need(i, k, 0, static_cast<long long>(kMaxMessageBytes)));
      if (k == "maxBytes") ctx_.max_bytes = static_cast<std::uint64_t>(need(i, k, 0, static_cast<long long>(kMaxMessageBytes)));
      if (k == "iters:") {
        const int v = static_cast<int>(need(i, k, 0, 1 << 30));
        if (prev == "warmup") {
          ctx_.warmup_iters = v;
        } else if (prev == "agg") {
          ctx_.agg_iters = v;
        } else {
          ctx_.iters = v;
        }
      }
      if (k == "validation:") ctx_.validation = static_cast<int>(need(i, k, 0, 1 << 20));
      if (k == "graph:") ctx_.graph = static_cast<int>(need(i, k, 0, 1 << 20));
    }
  }

  void device(std::string_view body) {
    // "Rank  0 Group  0 Pid 1583223 on gpu-dp-2jvzl-pqq7p device  0 [0000:29:00] NVIDIA H100 80GB HBM3"
    // (older: no Group).
    TestDevice d;
    d.line = line_;
    const std::size_t on = body.find(" on ");
    const std::size_t dev = body.find(" device ", on == std::string_view::npos ? 0 : on);
    if (on == std::string_view::npos || dev == std::string_view::npos) fail("a 'Rank … on HOST device N' line without its host");
    const auto head = split_blanks(body.substr(0, on), 16);
    for (std::size_t i = 0; i + 1 < head.size(); ++i) {
      if (head[i] == "Rank" || head[i] == "Group") {
        const auto v = parse_integer(head[i + 1]);
        if (!v || *v < 0 || *v > (1 << 24)) fail(fmt::format("'{} {}' is not a rank number", head[i], head[i + 1]));
        (head[i] == "Rank" ? d.rank : d.group) = static_cast<int>(*v);
      }
    }
    d.host = std::string(trim(body.substr(on + 4, dev - on - 4)));
    std::string_view rest = trim(body.substr(dev + 8));
    const auto tail = split_blanks(rest, 2);
    const auto index = tail.empty() ? std::nullopt : parse_integer(tail.front());
    if (!index || *index < 0 || *index > 4096) fail("a 'Rank' line whose device is not a number");
    d.device = static_cast<int>(*index);
    rest = trim(rest.substr(tail.front().size()));
    if (!rest.empty() && rest.front() == '[') {
      const std::size_t close = rest.find(']');
      if (close == std::string_view::npos) fail("a 'Rank' line whose PCI id has no ']'");
      d.bus_id = std::string(rest.substr(1, close - 1));
      rest = trim(rest.substr(close + 1));
    }
    d.name = std::string(rest);
    if (d.host.empty()) fail("a 'Rank' line with an empty host name");
    ctx_.devices.push_back(std::move(d));
  }

  void other(std::string_view l) {
    if (const auto v = text::nccl_version(l)) {
      if (table_open_ && !runs_.empty()) {
        if (runs_.back().nccl_version.empty()) runs_.back().nccl_version = v->first;
      } else {
        ctx_.nccl_version = v->first;
        if (ctx_.nccl_version_code == 0) ctx_.nccl_version_code = v->second;
      }
    }
    std::map<std::string, std::string> env;
    text::environment_settings(l, env);
    std::string program = text::perf_program(l);
    if (env.empty() && program.empty()) return;
    if (table_open_ && !runs_.empty()) {
      // Settings NCCL prints once the run is under way belong to it; a command line starts the next run.
      if (program.empty()) {
        for (auto& [k, v] : env) runs_.back().env.emplace(k, v);
        return;
      }
    }
    if (!table_open_ && context_used_) fresh_context();
    if (table_open_) fresh_context();
    for (auto& [k, v] : env) ctx_.env[k] = v;
    if (!program.empty() && ctx_.program.empty()) ctx_.program = std::move(program);
  }

  void header(std::string_view body) {
    close_table();
    const auto t = split_blanks(body, 64);
    Columns c;
    int half = -1;
    const auto leading = [&](int& column, int i, std::string_view name) {
      // nccl-tests prints each of these once, before the first time column.
      if (column >= 0 || half >= 0) fail(fmt::format("a table header with '{}' twice or after a time column", name));
      column = i;
    };
    for (int i = 0; i < static_cast<int>(t.size()); ++i) {
      const std::string_view n = t[static_cast<std::size_t>(i)];
      if (n == "size") leading(c.size, i, n);
      else if (n == "count") leading(c.count, i, n);
      else if (n == "type") leading(c.type, i, n);
      else if (n == "redop" || n == "op") leading(c.redop, i, n);
      else if (n == "root") leading(c.root, i, n);
      else if (n == "time" || n == "cputime") {
        if (++half > 1) fail("a table header with more than two time columns");
        c.time[half] = i;
      } else if (n == "algbw" && half >= 0) c.algbw[half] = i;
      else if (n == "busbw" && half >= 0) c.busbw[half] = i;
      else if ((n == "#wrong" || n == "error" || n == "wrong") && half >= 0) c.check[half] = i;
      else if (n == "timestamp") {
        c.timestamp = true;
        break;
      }
    }
    c.halves = half + 1;
    for (int h = 0; h < c.halves; ++h) {
      if (c.algbw[h] < 0 || c.busbw[h] < 0) fail("a table header without algbw and busbw after its time column");
    }
    if (c.size != 0 || c.count < 0 || c.type < 0 || c.halves < 1) fail("a table header without size, count, type, time");
    c.fields = static_cast<int>(t.size()) - (c.timestamp ? 1 : 0);
    c.half_fields = c.halves == 2 ? c.time[1] - c.time[0] : 0;
    // Each half: its time, algbw, busbw (and #wrong) in that order; two halves laid out alike, the second ending
    // the row (a replay's row of the in-place half alone is read at the first half's places).
    for (int h = 0; h < c.halves; ++h) {
      if (!(c.time[h] < c.algbw[h] && c.algbw[h] < c.busbw[h] && (c.check[h] < 0 || c.busbw[h] < c.check[h]))) {
        fail("a table header whose time, algbw, busbw and #wrong columns are out of order");
      }
    }
    const auto offset = [&](int column, int h) { return column < 0 ? -1 : column - c.time[h]; };
    if (c.halves == 2 &&
        (offset(c.algbw[0], 0) != offset(c.algbw[1], 1) || offset(c.busbw[0], 0) != offset(c.busbw[1], 1) ||
         offset(c.check[0], 0) != offset(c.check[1], 1) || c.fields - c.time[1] != c.half_fields)) {
      fail("a table header whose out-of-place and in-place halves differ");
    }
    columns_ = c;
    TestRun r;
    r.source = std::string(source_);
    r.header_line = r.end_line = line_;
    r.program = ctx_.program;
    r.tests_version = ctx_.tests_version;
    r.nccl_version_code = ctx_.nccl_version_code;
    r.nccl_version = ctx_.nccl_version;
    r.threads = ctx_.threads;
    r.gpus_per_thread = ctx_.gpus_per_thread;
    r.min_bytes = ctx_.min_bytes;
    r.max_bytes = ctx_.max_bytes;
    r.warmup_iters = ctx_.warmup_iters;
    r.iters = ctx_.iters;
    r.agg_iters = ctx_.agg_iters;
    r.validation = ctx_.validation;
    r.graph = ctx_.graph;
    r.devices = ctx_.devices;
    r.env = ctx_.env;
    for (const auto& n : t) r.columns.emplace_back(n);
    if (c.timestamp) r.columns.resize(static_cast<std::size_t>(c.fields) + 1);
    runs_.push_back(std::move(r));
    table_open_ = true;
    context_used_ = true;
    ratio_ = Interval{};
    factor_ = Interval{};
    per_count_ = 0;
  }

  TestResult half(const std::vector<std::string_view>& t, int h, int shift, std::uint64_t bytes) {
    TestResult r;
    auto num = [&](int col, std::string_view what) {
      const std::string_view tok = t[static_cast<std::size_t>(col - shift)];
      const auto p = parse_printed(tok);
      if (!p || p->value < 0) fail(fmt::format("{} '{}' is not a number ≥ 0", what, tok));
      return *p;
    };
    const Printed time = num(columns_.time[h], "time");
    const Printed algbw = num(columns_.algbw[h], "algbw");
    const Printed busbw = num(columns_.busbw[h], "busbw");
    r.time_us = time.value;
    r.algbw_gbps = algbw.value;
    r.busbw_gbps = busbw.value;
    if (columns_.check[h] >= 0) {
      const std::string_view tok = t[static_cast<std::size_t>(columns_.check[h] - shift)];
      if (tok != "N/A") {
        const auto p = parse_printed(tok);
        if (!p || p->value < 0) fail(fmt::format("#wrong '{}' is not a number ≥ 0 or N/A", tok));
        r.check = p->value;
      }
    }
    // algbw = size / time, as nccl-tests computes it: every row of a table shares one ratio (1 in current
    // releases), known up to the printed digits. A digit changed anywhere breaks it.
    const double a_lo = algbw.value - algbw.half_ulp, a_hi = algbw.value + algbw.half_ulp;
    const double t_lo = time.value - time.half_ulp, t_hi = time.value + time.half_ulp;
    if (bytes > 0 && a_lo > 0 && t_lo > 0) {
      const double b = static_cast<double>(bytes);
      if (!ratio_.meet(a_lo * t_lo * 1e3 / b, a_hi * t_hi * 1e3 / b)) {
        fail(fmt::format("algbw {} GB/s and time {} us do not give the size {} B as the table's other rows do "
                         "(a damaged row?)",
                         algbw.value, time.value, bytes));
      }
    }
    // busbw = algbw × the collective's factor, the same on every row.
    const double b_lo = busbw.value - busbw.half_ulp, b_hi = busbw.value + busbw.half_ulp;
    if (a_lo > 0 && b_lo > 0 && !factor_.meet(b_lo / a_hi, b_hi / a_lo)) {
      fail(fmt::format("busbw {} GB/s over algbw {} GB/s is not the factor of the table's other rows (a damaged row?)",
                       busbw.value, algbw.value));
    }
    return r;
  }

  void row(std::string_view body) {
    const auto t = split_blanks(body, 64);
    const int n = static_cast<int>(t.size());
    // A trace replay prints the in-place half only (the out-of-place half is blank).
    int shift = 0;
    bool out_of_place = columns_.halves == 2;
    if (n < columns_.fields && columns_.halves == 2 && n == columns_.fields - columns_.half_fields) {
      shift = columns_.half_fields;
      out_of_place = false;
    } else if (n < columns_.fields || (!columns_.timestamp && n > columns_.fields)) {
      fail(fmt::format("a row of {} fields in a table of {} columns (header at line {})", n, columns_.fields,
                       runs_.back().header_line));
    }
    TestRow r;
    r.line = line_;
    const auto bytes = parse_unsigned(t[static_cast<std::size_t>(columns_.size)]);
    if (!bytes || *bytes > kMaxMessageBytes) fail(fmt::format("size '{}' is not a byte count", t[0]));
    const auto count = parse_unsigned(t[static_cast<std::size_t>(columns_.count)]);
    if (!count || *count > kMaxMessageBytes) fail(fmt::format("count '{}' is not an element count", t[1]));
    r.bytes = *bytes;
    r.count = *count;
    r.type = std::string(t[static_cast<std::size_t>(columns_.type)]);
    const int tb = type_bytes(r.type);
    if (tb == 0) fail(fmt::format("type '{}' is not one of nccl-tests' types", r.type));
    if (columns_.redop >= 0) {
      r.redop = std::string(t[static_cast<std::size_t>(columns_.redop)]);
      if (r.redop.empty() || !std::all_of(r.redop.begin(), r.redop.end(), [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)); })) {
        fail(fmt::format("redop '{}' is not an operation name", r.redop));
      }
    }
    if (columns_.root >= 0) {
      const auto root = parse_integer(t[static_cast<std::size_t>(columns_.root)]);
      if (!root || *root < -1 || *root > (1 << 24)) fail(fmt::format("root '{}' is not a rank", t[static_cast<std::size_t>(columns_.root)]));
      r.root = static_cast<int>(*root);
    }
    // size = count × type bytes × (1, or the ranks for all-gather/reduce-scatter), the same factor on every row.
    if (r.count > 0) {
      const std::uint64_t unit = r.count * static_cast<std::uint64_t>(tb);
      if (r.bytes % unit != 0 || r.bytes / unit == 0 || (per_count_ != 0 && r.bytes / unit != per_count_)) {
        fail(fmt::format("size {} B is not count {} × {} B ({}) as on the table's other rows", r.bytes, r.count, tb,
                         r.type));
      }
      per_count_ = r.bytes / unit;
    }
    if (out_of_place) r.out_of_place = half(t, 0, 0, r.bytes);
    r.in_place = half(t, columns_.halves == 2 ? 1 : 0, shift, r.bytes);
    TestRun& run = runs_.back();
    run.rows.push_back(std::move(r));
    run.end_line = line_;
    run.bus_factor = factor_.pinned();
    run.bus_factor_low = run.bus_factor > 0 ? factor_.lo : 0;
    run.bus_factor_high = run.bus_factor > 0 ? factor_.hi : 0;
    run.size_per_count = per_count_;
  }

  void footer(std::string_view body) {
    if (!table_open_ || runs_.empty()) return;  // a footer without a table (nccl-tests printed nothing else)
    TestRun& run = runs_.back();
    run.footer = true;
    run.end_line = line_;
    if (starts_with(body, "Avg bus bandwidth")) {
      const std::size_t colon = body.find(':');
      const auto t = split_blanks(colon == std::string_view::npos ? std::string_view() : body.substr(colon + 1), 2);
      const auto v = t.empty() ? std::nullopt : parse_printed(t.front());
      if (!v || v->value < 0) fail("'Avg bus bandwidth' without a number");
      run.avg_busbw_gbps = v->value;
      close_table();
    }
  }

  void close_table() {
    if (!table_open_) return;
    table_open_ = false;
    if (!runs_.empty() && runs_.back().rows.empty()) {
      // A header without rows (a run that stopped before its first size) is no table.
      runs_.pop_back();
    }
  }

  std::string_view text_;
  std::string_view source_;
  int line_ = 0;
  Context ctx_;
  bool context_used_ = false;
  bool table_open_ = false;
  Columns columns_;
  Interval ratio_, factor_;
  std::uint64_t per_count_ = 0;
  std::vector<TestRun> runs_;
};

}  // namespace

int type_bytes(std::string_view type) {
  for (const auto& t : kTypes) {
    if (t.name == type) return t.bytes;
  }
  return 0;
}

int TestRun::ranks() const {
  if (!devices.empty()) {
    std::set<int> distinct;
    for (const auto& d : devices) distinct.insert(d.rank);
    return static_cast<int>(distinct.size());
  }
  // all-gather and reduce-scatter print the per-rank count: size = count × type × ranks (a program-less excerpt too).
  const bool gather = program.find("all_gather") != std::string::npos ||
                      program.find("reduce_scatter") != std::string::npos || (program.empty() && size_per_count > 1);
  if (gather && size_per_count > 1) return static_cast<int>(std::min<std::uint64_t>(size_per_count, 1 << 24));
  if (bus_factor > 0) {
    // all-reduce: f = 2(n−1)/n; all-gather, reduce-scatter: f = (n−1)/n. Both ends of what the printed digits
    // allow must name the same n.
    const bool reduce_all = program.empty() || program.find("all_reduce") != std::string::npos;
    auto ranks_of = [&](double f) {
      const double n = reduce_all ? 2.0 / (2.0 - f) : gather ? 1.0 / (1.0 - f) : 0.0;
      return std::isfinite(n) && n >= 1.5 && n < (1 << 24) ? std::lround(n) : 0L;
    };
    const long a = ranks_of(bus_factor_low), b = ranks_of(bus_factor_high);
    if (a > 0 && a == b) return static_cast<int>(a);
  }
  return 0;
}

int TestRun::copies() const {
  std::map<int, int> seen;
  int most = 1;
  for (const auto& d : devices) most = std::max(most, ++seen[d.rank]);
  return most;
}

std::vector<std::string> TestRun::hosts() const {
  std::vector<std::string> out;
  std::set<int> ranks_seen;
  for (const auto& d : devices) {
    if (!ranks_seen.insert(d.rank).second) continue;
    if (std::find(out.begin(), out.end(), d.host) == out.end()) out.push_back(d.host);
  }
  return out;
}

std::vector<TestRun> parse_nccl_tests(std::string_view text, std::string_view source) {
  return Parser(text, source).run();
}

std::vector<TestRun> read_nccl_tests(const std::string& path) {
  return parse_nccl_tests(read_input_file(path, "nccl-tests log"), path);
}

}  // namespace artune::logs
