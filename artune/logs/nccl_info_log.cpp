#include "artune/logs/nccl_info_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
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

// NCCL's algorithm and protocol numbers in its TUNING lines before 2.25 (src/include/nccl_common.h since
// 2.12: Tree, Ring, CollNetDirect, CollNetChain, NVLS 2.17+, NVLSTree 2.18+, PAT 2.23+; LL, LL128, Simple).
constexpr std::string_view kAlgoNames[] = {"tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"};
constexpr std::string_view kProtoNames[] = {"ll", "ll128", "simple"};
// Limits on what one log may hold (a 256 MiB log of repeated lines stays a bounded structure).
constexpr std::size_t kMaxRecords = 1 << 20;
constexpr int kMaxRank = 1 << 24;

std::optional<long long> integer(std::string_view s) {
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> decimal(std::string_view s) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The integer right after `key` in `s` ("nRanks 16" → 16).
std::optional<long long> after(std::string_view s, std::string_view key) {
  const std::size_t at = s.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const auto t = split_blanks(s.substr(at + key.size()), 1);
  if (t.empty()) return std::nullopt;
  std::string_view v = t.front();
  while (!v.empty() && (v.back() == ',' || v.back() == '.')) v.remove_suffix(1);
  return integer(v);
}

class InfoParser {
 public:
  InfoParser(std::string_view text, std::string_view source) : text_(text) { log_.source = std::string(source); }

  InfoLog run() {
    text::for_each_line(text_, [this](const text::Line& l) {
      line_ = l.number;
      handle(text::strip_tag(l.text));
    });
    return std::move(log_);
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    throw InvalidInput(fmt::format("{}:{}: {}", log_.source, line_, reason));
  }

  void check_room(std::size_t size) const {
    if (size >= kMaxRecords) fail(fmt::format("more than {} NCCL records in one log", kMaxRecords));
  }

  int rank_of(std::string_view s, std::string_view what) const {
    const auto v = integer(s);
    if (!v || *v < -1 || *v > kMaxRank) fail(fmt::format("{} '{}' is not a rank", what, s));
    return static_cast<int>(*v);
  }

  // "host:pid:tid [dev]" before the marker: the host is the token before "[dev]", up to its first ':'.
  std::string host_before(std::string_view prefix) const {
    const auto t = split_blanks(prefix, 4096);
    if (t.size() < 2 || t.back().empty() || t.back().front() != '[') return "";
    const std::string_view tok = t[t.size() - 2];
    const std::size_t colon = tok.find(':');
    if (colon == std::string_view::npos || colon == 0) return "";
    return std::string(tok.substr(0, colon));
  }

  void handle(std::string_view l) {
    if (const auto v = text::nccl_version(l); v && log_.nccl_version.empty()) {
      log_.nccl_version = v->first;
      log_.nccl_version_code = v->second;
    }
    const std::size_t warn = l.find("NCCL WARN ");
    if (warn != std::string_view::npos) {
      check_room(log_.warnings.size());
      log_.warnings.emplace_back(trim(l.substr(warn + 10)));
      return;
    }
    const std::size_t at = l.find("NCCL INFO ");
    if (at == std::string_view::npos) return;
    ++log_.info_lines;
    host_ = host_before(l.substr(0, at));
    if (!host_.empty() && std::find(log_.hosts.begin(), log_.hosts.end(), host_) == log_.hosts.end()) {
      check_room(log_.hosts.size());
      log_.hosts.push_back(host_);
    }
    const std::string_view body = trim(l.substr(at + 10));
    text::environment_settings(body, log_.env);
    if (starts_with(body, "Channel ")) {
      channel(body);
    } else if (starts_with(body, "Trees")) {
      trees(body.substr(5));
    } else if (starts_with(body, "NET/") && body.find(" : Using") != std::string_view::npos) {
      net_devices(body);
    } else if (starts_with(body, "NET/") && body.find(" : Made virtual device [") != std::string_view::npos) {
      virtual_device(body);
    } else if (starts_with(body, "Pattern ") && body.find("crossNic") != std::string_view::npos) {
      graph(body);
    } else if (body.find("Could not find a path for pattern") != std::string_view::npos) {
      ++log_.search_fallbacks;
    } else if (body.find("coll channels") != std::string_view::npos) {
      channels_line(body);
    } else if (body.find("Bytes -> Algo ") != std::string_view::npos) {
      pick(body);
    } else if (body.find('|') != std::string_view::npos) {
      cost_table_line(body);
    } else if (body.find("comm ") != std::string_view::npos &&
               (body.find(" nranks ") != std::string_view::npos || body.find(" nRanks ") != std::string_view::npos)) {
      init_line(body);
    }
  }

  void channel(std::string_view body) {
    // "Channel 00/08 :    0   1   2" (a ring), or a connection "Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0".
    const std::size_t colon = body.find(':');
    if (colon == std::string_view::npos) return;
    const std::string_view head = trim(body.substr(8, colon - 8));
    const std::string_view rest = trim(body.substr(colon + 1));
    const std::size_t slash = head.find('/');
    const auto ch = integer(head.substr(0, slash));
    if (!ch || *ch < 0 || *ch > 4096) return;  // "Channel" in other text
    if (rest.find("->") != std::string_view::npos) {
      if (rest.find(" via NET/") != std::string_view::npos) connection(static_cast<int>(*ch), rest);
      return;
    }
    if (slash == std::string_view::npos) return;
    const auto total = integer(head.substr(slash + 1));
    if (!total || *total < 1 || *total > 4096) fail(fmt::format("ring channel count '{}' is not a number", head));
    InfoRing ring;
    ring.channel = static_cast<int>(*ch);
    ring.channels = static_cast<int>(*total);
    ring.line = line_;
    std::set<int> seen;
    for (const auto tok : split_blanks(rest, static_cast<std::size_t>(kMaxRank))) {
      const int r = rank_of(tok, "ring member");
      if (r < 0 || !seen.insert(r).second) fail(fmt::format("ring of channel {} lists rank '{}' twice or below 0", *ch, tok));
      ring.ranks.push_back(r);
    }
    if (ring.ranks.empty()) fail(fmt::format("ring of channel {} lists no rank", *ch));
    for (const auto& r : log_.rings) {
      if (r.channel == ring.channel) return;  // every rank prints the rings; keep the first
    }
    check_room(log_.rings.size());
    log_.rings.push_back(std::move(ring));
  }

  void connection(int ch, std::string_view rest) {
    // "7[7] -> 8[0] [send] via NET/IB/0(1)/GDRDMA"
    const auto t = split_blanks(rest, 16);
    if (t.size() < 5 || t[1] != "->") fail("a network connection line without 'FROM -> TO'");
    auto rank_token = [&](std::string_view tok) { return rank_of(tok.substr(0, tok.find('[')), "connection rank"); };
    InfoNetConnection c;
    c.host = host_;
    c.channel = ch;
    c.from_rank = rank_token(t[0]);
    c.to_rank = rank_token(t[2]);
    c.send = rest.find("[send]") != std::string_view::npos;
    const std::size_t via = rest.find(" via NET/");
    std::string_view net = rest.substr(via + 9);
    const std::size_t s2 = net.find('/');
    if (s2 == std::string_view::npos) fail("a network connection line without its device ('via NET/NAME/N')");
    c.transport = std::string(net.substr(0, s2));
    std::string_view dev = net.substr(s2 + 1);
    std::size_t n = 0;
    while (n < dev.size() && std::isdigit(static_cast<unsigned char>(dev[n]))) ++n;
    const auto d = integer(dev.substr(0, n));
    if (!d || *d > 4096) fail(fmt::format("network device '{}' is not a number", dev.substr(0, std::max<std::size_t>(n, 1))));
    c.device = static_cast<int>(*d);
    c.line = line_;
    check_room(log_.net_connections.size());
    log_.net_connections.push_back(std::move(c));
  }

  void trees(std::string_view rest) {
    // " [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1"
    const auto t = split_blanks(rest, 1 << 16);
    for (std::size_t i = 0; i + 1 < t.size(); i += 2) {
      const std::string_view c = t[i];
      if (c.size() < 3 || c.front() != '[' || c.back() != ']') fail(fmt::format("tree channel '{}' is not '[N]'", c));
      const auto ch = integer(c.substr(1, c.size() - 2));
      if (!ch || *ch < 0 || *ch > 4096) fail(fmt::format("tree channel '{}' is not a number", c));
      // Releases before 2.7 print both trees of a channel, separated by '|': the first is kept.
      const std::string_view e = t[i + 1].substr(0, t[i + 1].find('|'));
      const std::size_t a1 = e.find("->");
      const std::size_t a2 = a1 == std::string_view::npos ? a1 : e.find("->", a1 + 2);
      if (a2 == std::string_view::npos) fail(fmt::format("tree entry '{}' is not 'DOWN->RANK->UP'", e));
      InfoTreeNode node;
      node.channel = static_cast<int>(*ch);
      node.rank = rank_of(e.substr(a1 + 2, a2 - a1 - 2), "tree rank");
      node.up = rank_of(e.substr(a2 + 2), "tree parent");
      std::string_view down = e.substr(0, a1);
      while (!down.empty()) {
        const std::size_t s = down.find('/');
        const int d = rank_of(down.substr(0, s), "tree child");
        if (d >= 0) node.down.push_back(d);
        if (s == std::string_view::npos) break;
        down.remove_prefix(s + 1);
      }
      check_room(log_.trees.size());
      log_.trees.push_back(std::move(node));
    }
    if (t.size() % 2 != 0) fail("a Trees line whose last channel has no entry");
  }

  void net_devices(std::string_view body) {
    // "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>", "NET/Socket : Using [0]eth0:…<0>"
    const std::size_t sep = body.find(" : Using");
    const std::string transport(trim(body.substr(4, sep - 4)));
    std::string_view list = body.substr(sep + 8);
    list = list.substr(0, list.find(';'));
    for (const auto tok : split_blanks(list, 4096)) {
      if (tok.size() < 4 || tok.front() != '[' || !std::isdigit(static_cast<unsigned char>(tok[1]))) continue;
      const std::size_t close = tok.find(']');
      if (close == std::string_view::npos) fail(fmt::format("network device '{}' is not '[N]NAME…'", tok));
      const auto index = integer(tok.substr(1, close - 1));
      if (!index || *index > 4096) fail(fmt::format("network device '{}' has no index", tok));
      InfoNetDevice d;
      d.host = host_;
      d.transport = transport;
      d.index = static_cast<int>(*index);
      d.line = line_;
      const std::string_view rest = tok.substr(close + 1);
      const std::size_t colon = rest.find(':');
      d.name = std::string(rest.substr(0, colon));
      if (d.name.empty()) fail(fmt::format("network device '{}' has no name", tok));
      if (colon != std::string_view::npos) {
        const std::string_view after_colon = rest.substr(colon + 1);
        const std::size_t s = after_colon.find('/');
        if (s != std::string_view::npos) {
          // IB: PORT/LINK
          const auto port = integer(after_colon.substr(0, s));
          if (!port || *port < 0 || *port > 255) fail(fmt::format("network device '{}' has no port number", tok));
          d.port = static_cast<int>(*port);
          d.link = std::string(after_colon.substr(s + 1));
        } else {
          d.link = std::string(after_colon);  // a socket's address
        }
      }
      bool known = false;
      for (const auto& o : log_.net_devices) known = known || (o.host == d.host && o.index == d.index && o.transport == d.transport);
      if (!known) {
        check_room(log_.net_devices.size());
        log_.net_devices.push_back(std::move(d));
      }
    }
  }

  void virtual_device(std::string_view body) {
    // "NET/IB : Made virtual device [16] name=mlx5_0+mlx5_1 speed=400000 ndevs=2" (net_ib.cc, NCCL 2.24 on)
    const std::size_t sep = body.find(" : Made virtual device [");
    InfoVirtualDevice d;
    d.host = host_;
    d.transport = std::string(trim(body.substr(4, sep - 4)));
    d.line = line_;
    const std::string_view rest = body.substr(sep + 24);
    const std::size_t close = rest.find(']');
    const long long index = close == std::string_view::npos ? -1 : integer(rest.substr(0, close)).value_or(-1);
    const long long ports = after(body, "ndevs=").value_or(0);
    const std::size_t name = body.find(" name=");
    if (index < 0 || index > 4096 || ports < 1 || ports > 64 || name == std::string_view::npos) {
      fail(fmt::format("a 'Made virtual device' line without [INDEX], name= and ndevs=: '{}'", body));
    }
    d.index = static_cast<int>(index);
    d.ports = static_cast<int>(ports);
    const std::string_view n = body.substr(name + 6);
    d.name = std::string(n.substr(0, n.find(' ')));
    for (const auto& o : log_.virtual_devices) {
      if (o.host == d.host && o.index == d.index && o.transport == d.transport) return;
    }
    check_room(log_.virtual_devices.size());
    log_.virtual_devices.push_back(std::move(d));
  }

  void graph(std::string_view body) {
    // "Pattern 4, crossNic 0, nChannels 8, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1" ("speed" in
    // older releases).
    InfoGraph g;
    g.line = line_;
    const auto pattern = after(body, "Pattern ");
    const auto cross = after(body, "crossNic ");
    const auto nch = after(body, "nChannels ");
    if (!pattern || !cross || !nch || *nch < 0 || *nch > 4096) fail("a 'Pattern' line without pattern, crossNic and nChannels");
    g.pattern = static_cast<int>(*pattern);
    g.cross_nic = static_cast<int>(*cross);
    g.channels = static_cast<int>(*nch);
    std::size_t bw = body.find(" bw ");
    if (bw == std::string_view::npos) bw = body.find(" speed ");
    if (bw != std::string_view::npos) {
      const auto t = split_blanks(body.substr(body.find(' ', bw + 1)), 1);
      std::string_view v = t.empty() ? std::string_view() : t.front();
      if (!v.empty() && v.back() == ',') v.remove_suffix(1);
      const std::size_t s = v.find('/');
      const auto a = decimal(v.substr(0, s));
      const auto b = s == std::string_view::npos ? a : decimal(v.substr(s + 1));
      if (!a || !b || *a < 0 || *b < 0) fail(fmt::format("graph bandwidth '{}' is not INTRA/INTER", v));
      g.bw_intra = *a;
      g.bw_inter = *b;
    }
    if (const std::size_t ty = body.find(" type "); ty != std::string_view::npos) {
      const auto t = split_blanks(body.substr(ty + 6), 1);
      std::string_view v = t.empty() ? std::string_view() : t.front();
      if (!v.empty() && v.back() == ',') v.remove_suffix(1);
      const std::size_t s = v.find('/');
      g.type_intra = std::string(v.substr(0, s));
      if (s != std::string_view::npos) g.type_inter = std::string(v.substr(s + 1));
    }
    check_room(log_.graphs.size());
    log_.graphs.push_back(std::move(g));
  }

  void channels_line(std::string_view body) {
    // "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"
    const auto t = split_blanks(body, 64);
    for (std::size_t i = 0; i + 2 < t.size(); ++i) {
      if ((t[i + 1] == "coll" || t[i + 1] == "nvls") && starts_with(t[i + 2], "channels")) {
        const auto v = integer(t[i]);
        if (!v || *v < 0 || *v > 4096) fail(fmt::format("channel count '{}' is not a number", t[i]));
        (t[i + 1] == "coll" ? log_.coll_channels : log_.nvls_channels) = static_cast<int>(*v);
      }
    }
  }

  void pick(std::string_view body) {
    // 2.25+: "AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}"
    // 2.23:  "AllReduce: 4194304 Bytes -> Algo 1 proto 2 time 38.123"; 2.21: "4194304 Bytes -> Algo 1 proto 2 time …"
    InfoPick p;
    p.line = line_;
    const std::size_t arrow = body.find(" Bytes -> Algo ");
    std::string_view head = trim(body.substr(0, arrow));
    if (const std::size_t colon = head.find(':'); colon != std::string_view::npos) {
      p.function = std::string(trim(head.substr(0, colon)));
      head = trim(head.substr(colon + 1));
    }
    const auto bytes = integer(head);
    if (!bytes || *bytes < 0 || static_cast<std::uint64_t>(*bytes) > kMaxMessageBytes) {
      fail(fmt::format("TUNING line size '{}' is not a byte count", head));
    }
    p.bytes = static_cast<std::uint64_t>(*bytes);
    const auto t = split_blanks(body.substr(arrow + 15), 8);
    if (t.size() < 3 || t[1] != "proto") fail("TUNING line without 'Algo A proto P'");
    auto name = [&](std::string_view tok, const auto& names, std::string_view what) {
      if (const auto v = integer(tok)) {
        if (*v < 0 || *v >= static_cast<long long>(std::size(names))) fail(fmt::format("{} {} is not one of NCCL's", what, tok));
        return std::string(names[static_cast<std::size_t>(*v)]);
      }
      const std::string n = lower(tok);
      if (std::find(std::begin(names), std::end(names), n) == std::end(names)) fail(fmt::format("{} '{}' is not one of NCCL's", what, tok));
      return n;
    };
    p.algo = name(t[0], kAlgoNames, "algorithm");
    p.proto = name(t[2], kProtoNames, "protocol");
    if (t.size() >= 5 && t[3] == "time") {
      const auto v = decimal(t[4]);
      if (!v) fail(fmt::format("TUNING time '{}' is not a number", t[4]));
      p.time_us = *v;
    } else if (t.size() >= 4 && starts_with(t[3], "channel{Lo..Hi}={")) {
      std::string_view r = t[3].substr(17);
      const std::size_t dots = r.find("..");
      const std::size_t close = r.find('}');
      const auto lo = dots == std::string_view::npos ? std::nullopt : integer(r.substr(0, dots));
      const auto hi = (dots == std::string_view::npos || close == std::string_view::npos || close < dots)
                          ? std::nullopt
                          : integer(r.substr(dots + 2, close - dots - 2));
      if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > 4096) fail(fmt::format("TUNING channels '{}' are not {{LO..HI}}", t[3]));
      p.channel_lo = static_cast<int>(*lo);
      p.channel_hi = static_cast<int>(*hi);
    }
    check_room(log_.picks.size());
    log_.picks.push_back(std::move(p));
  }

  // The cost table NCCL prints at init, in blocks of three algorithms (src/graph/tuning.cc):
  //   "  Algorithm   |   Tree   |   Ring   |   CollNetDirect   |"
  //   "  Protocol    |   LL |  LL128 |  Simple |   LL | …"
  //   "     AllReduce |  15.2/  43.6 |  31.5/ 128.8 | …"   (latency µs / bandwidth GB/s per algorithm × protocol)
  // Only the first table is kept (NCCL prints one per communicator); a cell that cannot be read is bad input.
  void cost_table_line(std::string_view body) {
    std::vector<std::string_view> fields;
    std::size_t at = 0;
    while (at <= body.size()) {
      const std::size_t bar = std::min(body.find('|', at), body.size());
      fields.push_back(trim(body.substr(at, bar - at)));
      at = bar + 1;
    }
    while (!fields.empty() && fields.back().empty()) fields.pop_back();
    if (fields.size() < 2) return;
    const std::string_view head = fields.front();
    if (head == "Algorithm") {
      table_algos_.clear();
      table_protos_.clear();
      // Names as printed, lower case (a later release's new algorithm is kept under its own name).
      for (std::size_t i = 1; i < fields.size(); ++i) table_algos_.push_back(lower(fields[i]));
      return;
    }
    if (head == "Protocol") {
      table_protos_.clear();
      for (std::size_t i = 1; i < fields.size(); ++i) table_protos_.push_back(lower(fields[i]));
      return;
    }
    if (table_algos_.empty() || table_protos_.empty() || fields[1].find('/') == std::string_view::npos) return;
    const std::string function(head);
    // Columns: three protocols per algorithm of the block (NCCL pads its last block's Protocol line).
    const std::size_t columns = std::min({fields.size() - 1, table_protos_.size(), table_algos_.size() * 3});
    for (std::size_t c = 0; c < columns; ++c) {
      const std::string_view cell = fields[c + 1];
      const std::size_t slash = cell.find('/');
      const auto lat = slash == std::string_view::npos ? std::nullopt : decimal(trim(cell.substr(0, slash)));
      const auto bw = slash == std::string_view::npos ? std::nullopt : decimal(trim(cell.substr(slash + 1)));
      if (!lat || !bw || *lat < 0 || *bw < 0) fail(fmt::format("cost table cell '{}' is not LATENCY/BANDWIDTH", cell));
      const std::string& algo = table_algos_[c / 3];
      const std::string& proto = table_protos_[c];
      const bool seen = std::any_of(log_.costs.begin(), log_.costs.end(), [&](const InfoCost& k) {
        return k.function == function && k.algo == algo && k.proto == proto;
      });
      if (seen) continue;
      check_room(log_.costs.size());
      log_.costs.push_back({function, algo, proto, *lat, *bw, line_});
    }
  }

  void init_line(std::string_view body) {
    auto ranks = after(body, " nranks ");
    if (!ranks) ranks = after(body, " nRanks ");
    if (ranks && *ranks > 0 && *ranks <= kMaxRank) log_.nranks = std::max(log_.nranks, static_cast<int>(*ranks));
    const auto nodes = after(body, " nNodes ");
    if (nodes && *nodes > 0 && *nodes <= kMaxRank) log_.nnodes = std::max(log_.nnodes, static_cast<int>(*nodes));
  }

  std::string_view text_;
  InfoLog log_;
  std::vector<std::string> table_algos_;   // the cost table block's algorithms
  std::vector<std::string> table_protos_;  // and its protocols, per column
  int line_ = 0;
  std::string host_;
};

}  // namespace

int InfoLog::ring_channels() const {
  if (!rings.empty()) return rings.front().channels;
  return coll_channels;
}

std::map<std::string, std::vector<int>> InfoLog::devices_used() const {
  std::map<std::string, std::vector<int>> out;
  for (const auto& c : net_connections) {
    auto& v = out[c.host];
    if (std::find(v.begin(), v.end(), c.device) == v.end()) v.push_back(c.device);
  }
  for (auto& [h, v] : out) std::sort(v.begin(), v.end());
  return out;
}

int InfoLog::ports_of(const std::string& host, int device) const {
  for (const auto& d : virtual_devices) {
    if (d.host == host && d.index == device) return d.ports;
  }
  return 1;
}

InfoLog parse_nccl_info(std::string_view text, std::string_view source) { return InfoParser(text, source).run(); }

InfoLog read_nccl_info(const std::string& path) {
  return parse_nccl_info(read_input_file(path, "NCCL log"), path);
}

}  // namespace artune::logs
