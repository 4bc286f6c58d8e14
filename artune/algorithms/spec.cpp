#include "artune/algorithms/spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <utility>

#include "artune/algorithms/registry.hpp"
#include "artune/core/error.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

namespace {

// `#n` beyond this is certainly a typo and would only overflow sizes downstream.
constexpr int kMaxArg = 1 << 16;
// Specs longer than this are not typed by anyone (a hundred ranges fit); errors quote at most
// kQuoteChars of them so that the reason stays on a readable line.
constexpr std::size_t kMaxSpecChars = 1024;
constexpr std::size_t kQuoteChars = 80;

// `text` for an error message, cut after kQuoteChars characters.
std::string quoted(std::string_view text) {
  if (text.size() <= kQuoteChars) return std::string(text);
  std::size_t cut = kQuoteChars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
  return fmt::format("{}… ({} characters)", text.substr(0, cut), text.size());
}

// Every token, each followed by its readable alias.
std::string known_names() {
  std::string out;
  for (const Family* f : families()) {
    for (const SpecName& n : f->specs) {
      out += fmt::format("{}{}", out.empty() ? "" : ", ", n.token);
      if (n.alias != nullptr) out += fmt::format(", {}", n.alias);
    }
  }
  return out;
}

// intra/inter pairs the builders implement (TF's hybrids plus two more), in --help order.
std::vector<std::pair<std::string, std::string>> hybrids() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Family* f : families()) {
    for (const SpecName& n : f->specs) {
      for (const char* upper : n.hybrid_uppers) out.emplace_back(n.token, upper);
    }
  }
  return out;
}

std::string known_hybrids() {
  std::string out;
  for (const auto& [intra, inter] : hybrids()) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}/{}", intra, inter);
  }
  return out;
}

// "ring, tree, …": the spec names of a core/nccl_names.hpp table, for error messages.
template <std::size_t N>
std::string spec_names(const NcclName (&names)[N]) {
  std::string out;
  for (const NcclName& n : names) out += (out.empty() ? "" : ", ") + std::string(n.spec);
  return out;
}

// `.cN`'s N: 1..kNcclMaxChannels (core/nccl_names.hpp reads it); 0 when `part` is not a channel count at all.
int channel_count(std::string_view part, std::string_view what) {
  const int n = nccl_channel_count(part);
  if (n == 0) {
    throw InvalidInput(fmt::format("{}: NCCL channel count '{}' is not c1..c{} (e.g. nccl.ring.simple.c8)", what,
                                   part, kNcclMaxChannels));
  }
  return std::max(n, 0);
}

}  // namespace

NcclVariant parse_nccl_variant(std::string_view variant, std::string_view what) {
  NcclVariant out;
  if (variant.empty()) return out;
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t dot = variant.find('.', start);
    parts.push_back(variant.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (!nccl_algo_of(parts[0])) {
    throw InvalidInput(
        fmt::format("{}: unknown NCCL algorithm '{}' ({})", what, parts[0], spec_names(kNcclAlgoNames)));
  }
  out.algo = std::string(parts[0]);
  std::size_t next = 1;
  if (next < parts.size() && channel_count(parts[next], what) == 0) {
    if (!nccl_proto_of(parts[next])) {
      throw InvalidInput(
          fmt::format("{}: unknown NCCL protocol '{}' ({})", what, parts[next], spec_names(kNcclProtoNames)));
    }
    out.proto = std::string(parts[next++]);
  }
  if (next < parts.size()) out.channels = channel_count(parts[next++], what);
  if (next < parts.size()) {
    throw InvalidInput(fmt::format("{}: '{}' after the NCCL choice (expected ALGO[.PROTO][.cN], e.g. ring.ll128.c8)",
                                   what, variant));
  }
  return out;
}

std::string to_string(const NcclVariant& variant) {
  std::string out = variant.algo;
  if (!variant.proto.empty()) out += "." + variant.proto;
  if (variant.channels > 0) out += fmt::format(".c{}", variant.channels);
  return out;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  [[noreturn]] void fail(const std::string& reason) const {
    throw InvalidInput(fmt::format("{} '{}': {}", parameter("spec"), quoted(text_), reason));
  }

  AlgToken token(std::string_view tok) const {
    if (tok.empty()) fail("empty algorithm name");
    const std::size_t hash = tok.find('#');
    std::string_view name = tok.substr(0, hash);
    if (name.empty()) fail(fmt::format("'{}': missing algorithm name before '#'", quoted(tok)));
    // nccl.ALGO[.PROTO]: NCCL with its algorithm (and protocol) forced, as NCCL_ALGO / NCCL_PROTO do.
    std::string variant;
    if (name.substr(0, 5) == "nccl.") {
      variant = std::string(name.substr(5));
      name = "nccl";
      try {
        variant = to_string(parse_nccl_variant(variant, fmt::format("'{}'", quoted(tok))));
      } catch (const InvalidInput& e) {
        fail(e.what());
      }
    }
    const SpecName* info = find_spec_name(name).second;
    if (info == nullptr) {
      fail(fmt::format("unknown algorithm '{}' (known: {})", quoted(tok.substr(0, hash)), known_names()));
    }
    AlgToken out;
    out.name = info->token;
    out.variant = std::move(variant);
    if (hash == std::string_view::npos) return out;
    const std::string_view arg = tok.substr(hash + 1);
    if (info->arg == ArgKind::kNone) fail(fmt::format("'{}': {} takes no #n argument", quoted(tok), info->token));
    if (arg.empty() || arg.size() > 9 ||
        !std::all_of(arg.begin(), arg.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      fail(fmt::format("'{}': #n must be a positive whole number", quoted(tok)));
    }
    const long n = std::stol(std::string(arg));
    if (n < 1) fail(fmt::format("'{}': #n must be ≥ 1", quoted(tok)));
    if (n > kMaxArg) fail(fmt::format("'{}': #n must be ≤ {}", quoted(tok), kMaxArg));
    out.arg = static_cast<int>(n);
    return out;
  }

  SpecRange range(std::string_view part) const {
    if (part.empty()) fail("empty range (expected alg[#n] or alg[#n]/alg[#n])");
    SpecRange r;
    const std::size_t slash = part.find('/');
    if (slash == std::string_view::npos) {
      r.intra = token(part);
      return r;
    }
    if (part.find('/', slash + 1) != std::string_view::npos) {
      fail(fmt::format("'{}': at most two levels (intra/inter machine)", quoted(part)));
    }
    const std::string_view lo = part.substr(0, slash);
    const std::string_view hi = part.substr(slash + 1);
    if (lo.empty() || hi.empty()) fail(fmt::format("'{}': empty level around '/'", quoted(part)));
    r.intra = token(lo);
    r.inter = token(hi);
    const auto pairs = hybrids();
    const bool valid = std::any_of(pairs.begin(), pairs.end(),
                                   [&](const auto& h) { return r.intra.name == h.first && r.inter->name == h.second; });
    if (!valid) {
      fail(fmt::format("'{}': {}/{} is not a supported hierarchy (supported: {})", quoted(part), r.intra.name,
                       r.inter->name, known_hybrids()));
    }
    return r;
  }

  // Limits are element counts as tf_cnn_benchmarks' parse_general_int reads
  // them: digits with an optional K/k, M, G or T suffix, powers of 1024 (the
  // same convention as artune's size arguments).
  std::int64_t limit(std::string_view part) const {
    if (part.empty()) fail("empty limit between ':' (expected alg:limit:alg, e.g. xring:64K:nccl)");
    std::string_view digits = part;
    std::int64_t scale = 1;
    switch (part.back()) {
      case 'K':
      case 'k': scale = std::int64_t{1} << 10; break;
      case 'M': scale = std::int64_t{1} << 20; break;
      case 'G': scale = std::int64_t{1} << 30; break;
      case 'T': scale = std::int64_t{1} << 40; break;
      default: break;
    }
    if (scale != 1) digits.remove_suffix(1);
    if (digits.empty() || digits.size() > 15 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      fail(fmt::format("limit '{}' is not a whole number of elements with optional K/M/G/T suffix", quoted(part)));
    }
    const std::int64_t n = std::stoll(std::string(digits));
    if (n < 1) fail(fmt::format("limit '{}' must be ≥ 1", quoted(part)));
    if (n > std::numeric_limits<std::int64_t>::max() / scale) {
      fail(fmt::format("limit '{}' is too large", quoted(part)));
    }
    return n * scale;
  }

  AllReduceSpec parse() const {
    if (text_.empty()) fail("empty spec (e.g. xring, nccl, nccl/xring, pscpu:64K:xring)");
    if (text_.size() > kMaxSpecChars) fail(fmt::format("longer than the {} characters a spec may have", kMaxSpecChars));
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
      const std::size_t colon = text_.find(':', start);
      parts.push_back(text_.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
      if (colon == std::string_view::npos) break;
      start = colon + 1;
    }
    AllReduceSpec spec;
    for (std::size_t i = 0; i < parts.size(); i += 2) {
      SpecRange r = range(parts[i]);
      if (i + 1 < parts.size()) {
        r.limit = limit(parts[i + 1]);
        if (!spec.ranges.empty() && r.limit <= spec.ranges.back().limit) {
          fail(fmt::format("limit '{}' ({} elements) must exceed the previous limit ({} elements)", parts[i + 1],
                           r.limit, spec.ranges.back().limit));
        }
        if (i + 2 >= parts.size()) {
          fail(fmt::format("limit '{}' has no range after it (the last range must be unlimited)", parts[i + 1]));
        }
      }
      spec.ranges.push_back(std::move(r));
    }
    return spec;
  }

 private:
  std::string_view text_;
};

std::string token_text(const AlgToken& t) {
  const std::string name = t.variant.empty() ? t.name : fmt::format("{}.{}", t.name, t.variant);
  return t.arg >= 0 ? fmt::format("{}#{}", name, t.arg) : name;
}

std::string limit_text(std::int64_t n) {
  static constexpr std::pair<char, int> kSuffixes[] = {{'T', 40}, {'G', 30}, {'M', 20}, {'K', 10}};
  for (const auto& [suffix, shift] : kSuffixes) {
    const std::int64_t unit = std::int64_t{1} << shift;
    if (n >= unit && n % unit == 0) return fmt::format("{}{}", n / unit, suffix);
  }
  return std::to_string(n);
}

}  // namespace

const SpecRange& AllReduceSpec::pick(std::int64_t count) const {
  if (ranges.empty()) throw InvalidInput(parameter("spec") + ": empty spec");
  for (const SpecRange& r : ranges) {
    if (r.limit < 0 || count <= r.limit) return r;
  }
  return ranges.back();
}

AllReduceSpec parse_spec(std::string_view text) { return Parser(text).parse(); }

std::string to_string(const SpecRange& range) {
  std::string out = token_text(range.intra);
  if (range.inter) {
    out += '/';  // appended piecewise: g++ 12 warns falsely (-Wrestrict, GCC bug 105329) on "/" + temporary
    out += token_text(*range.inter);
  }
  return out;
}

std::string to_string(const AllReduceSpec& spec) {
  std::string out;
  for (std::size_t i = 0; i < spec.ranges.size(); ++i) {
    out += to_string(spec.ranges[i]);
    if (i + 1 < spec.ranges.size()) {
      out += ':';  // piecewise, as above
      out += limit_text(spec.ranges[i].limit);
      out += ':';
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> spec_algorithms() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Family* f : families()) {
    for (const SpecName& n : f->specs) {
      out.emplace_back(n.token, n.alias == nullptr ? std::string(n.description)
                                                   : fmt::format("{} (alias {})", n.description, n.alias));
    }
  }
  for (const auto& [intra, inter] : hybrids()) {
    out.emplace_back(fmt::format("{}/{}", intra, inter),
                     fmt::format("{} inside each machine, {} across machines over one device each, then "
                                 "broadcast back (TF hybrid)",
                                 intra, inter));
  }
  return out;
}

}  // namespace artune
