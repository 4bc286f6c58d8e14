#include "artune/algorithms/verifier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "artune/core/error.hpp"

namespace artune {

// How the verifier works.
//
// Symbolic execution: the state of every (device, buffer) is a partition of
// its elements into intervals. An interval carries an abstract value (which
// participants' inputs it holds and how often, whether it was scaled, or
// "undefined" for scratch that was never written) and a shift: element p of
// the interval holds input element p + shift. Values are interned, so a copy
// moves ids around and a reduce is a memoised table lookup; intervals split
// only where an op's region boundary falls.
//
// Race check: per (device, buffer) an interval map records the last writer
// and the readers since that write. A new access must be ordered after the
// last writer (and a write also after those readers); by transitivity that
// orders it after every earlier conflicting access. "Ordered" is reachability
// in the dependency DAG: direct deps first, then a short bounded search, and
// what remains is answered exactly afterwards with blocked reachability
// bitsets (see resolve_deferred).

namespace {

constexpr std::size_t kMaxProblems = 64;

// An interval map over [0, size): pieces keyed by their first element.
template <class T>
class IntervalMap {
 public:
  struct Piece {
    std::int64_t hi;
    T value;
  };
  using Map = std::map<std::int64_t, Piece>;
  using iterator = typename Map::iterator;

  void init(std::int64_t size, T value) {
    map_.clear();
    size_ = size;
    if (size > 0) map_.emplace(0, Piece{size, std::move(value)});
  }

  // Makes a piece start at pos (0 ≤ pos ≤ size) and returns it (end() at size).
  iterator split(std::int64_t pos) {
    if (pos >= size_) return map_.end();
    auto it = map_.upper_bound(pos);
    --it;
    if (it->first == pos) return it;
    Piece tail{it->second.hi, it->second.value};
    it->second.hi = pos;
    return map_.emplace_hint(std::next(it), pos, std::move(tail));
  }

  // The pieces covering [lo, hi), split at both ends.
  std::pair<iterator, iterator> range(std::int64_t lo, std::int64_t hi) {
    auto last = split(hi);
    auto first = split(lo);
    return {first, last};
  }

  Map& map() { return map_; }

 private:
  Map map_;
  std::int64_t size_ = 0;
};

// ----- abstract values ------------------------------------------------------

struct Value {
  std::vector<std::uint8_t> counts;  // per participant: how many times its input is in here (saturating)
  std::uint8_t scaled = 0;
  bool undefined = false;
};

class Values {
 public:
  explicit Values(int ranks) {
    Value undef;
    undef.undefined = true;
    undef.counts.assign(static_cast<std::size_t>(ranks), 0);
    intern(std::move(undef));
    for (int r = 0; r < ranks; ++r) {
      Value v;
      v.counts.assign(static_cast<std::size_t>(ranks), 0);
      v.counts[static_cast<std::size_t>(r)] = 1;
      intern(std::move(v));
    }
  }
  static constexpr int kUndefined = 0;
  int input(int rank) const { return rank + 1; }
  const Value& get(int id) const { return values_[static_cast<std::size_t>(id)]; }

  // a ⊎ b; both must be defined (the caller checks).
  int sum(int a, int b) {
    if (a > b) std::swap(a, b);
    const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
    auto it = sums_.find(key);
    if (it != sums_.end()) return it->second;
    Value v = get(a);
    const Value& w = get(b);
    for (std::size_t r = 0; r < v.counts.size(); ++r) {
      v.counts[r] = static_cast<std::uint8_t>(std::min(255, v.counts[r] + w.counts[r]));
    }
    v.scaled = std::max(v.scaled, w.scaled);
    const int id = intern(std::move(v));
    sums_.emplace(key, id);
    return id;
  }

  int scaled(int a) {
    Value v = get(a);
    v.scaled = static_cast<std::uint8_t>(std::min(255, v.scaled + 1));
    return intern(std::move(v));
  }

  bool complete(int id) const {
    const Value& v = get(id);
    return !v.undefined && std::all_of(v.counts.begin(), v.counts.end(), [](std::uint8_t c) { return c == 1; });
  }

  // Ranks whose input a and b both hold (the ones a reduce would double).
  std::vector<int> common(int a, int b) const {
    std::vector<int> out;
    const Value& v = get(a);
    const Value& w = get(b);
    for (std::size_t r = 0; r < v.counts.size(); ++r) {
      if (v.counts[r] > 0 && w.counts[r] > 0) out.push_back(static_cast<int>(r));
    }
    return out;
  }

  std::string describe(int id) const {
    const Value& v = get(id);
    if (v.undefined) return "undefined data";
    std::string out = "inputs {";
    bool first = true;
    for (std::size_t r = 0; r < v.counts.size(); ++r) {
      for (int c = 0; c < v.counts[r]; ++c) {
        out += first ? "" : ",";
        out += std::to_string(r);
        first = false;
      }
    }
    out += "}";
    if (v.scaled > 0) out += v.scaled == 1 ? " scaled" : fmt::format(" scaled {}x", v.scaled);
    return out;
  }

 private:
  int intern(Value v) {
    std::string key(v.counts.begin(), v.counts.end());
    key.push_back(static_cast<char>(v.scaled));
    key.push_back(v.undefined ? 1 : 0);
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    const int id = static_cast<int>(values_.size());
    values_.push_back(std::move(v));
    ids_.emplace(std::move(key), id);
    return id;
  }

  std::vector<Value> values_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<std::uint64_t, int> sums_;
};

// What an element interval holds: a value and where its elements came from.
struct Cell {
  int value = Values::kUndefined;
  std::int64_t shift = 0;  // element p holds input element p + shift
  bool operator==(const Cell&) const = default;
};

// Race bookkeeping of an element interval.
struct Access {
  int writer = -1;
  std::vector<int> readers;  // since the last write
};

std::string range_text(std::int64_t lo, std::int64_t hi) { return fmt::format("[{}, {})", lo, hi); }

class Verifier {
 public:
  explicit Verifier(const Plan& plan) : plan_(plan), values_(std::max(plan.ranks(), 0)) {}

  VerifyResult run() {
    structure();
    if (!unsafe_) {
      init_state();
      stamp_.assign(plan_.ops.size(), 0);
      target_.assign(plan_.ops.size(), 0);
      for (const Op& op : plan_.ops) {
        races(op);
        execute(op);
      }
      resolve_deferred();
      final_check();
    }
    VerifyResult result;
    result.ok = problems_.empty();
    result.problems = std::move(problems_);
    if (dropped_ > 0) result.problems.push_back(fmt::format("… and {} more problems", dropped_));
    return result;
  }

 private:
  template <class... Args>
  void problem(fmt::format_string<Args...> f, Args&&... args) {
    if (problems_.size() >= kMaxProblems) {
      ++dropped_;
      return;
    }
    problems_.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  int ndev() const { return static_cast<int>(plan_.devices.size()); }

  std::string where(int device, int buffer, std::int64_t lo, std::int64_t hi) const {
    return fmt::format("device {} buffer {} {}", device, buffer, range_text(lo, hi));
  }

  // ----- structure ----------------------------------------------------------

  bool location_ok(const Op& op, const Location& l, const char* what) {
    if (l.device < 0 || l.device >= ndev()) {
      problem("op {}: {} device {} out of range (plan has {} devices)", op.id, what, l.device, ndev());
      return false;
    }
    const auto& list = plan_.buffers[static_cast<std::size_t>(l.device)];
    if (l.buffer < 0 || l.buffer >= static_cast<int>(list.size())) {
      problem("op {}: {} buffer {} out of range (device {} has {} buffers)", op.id, what, l.buffer, l.device,
              list.size());
      return false;
    }
    const std::int64_t size = list[static_cast<std::size_t>(l.buffer)];
    if (l.offset < 0 || l.count < 0 || l.offset > size || l.count > size - l.offset) {
      problem("op {}: {} {} lies outside the buffer of {} elements", op.id, what,
              where(l.device, l.buffer, l.offset, l.offset + l.count), size);
      return false;
    }
    return true;
  }

  void structure() {
    const int r = plan_.ranks();
    if (r < 1) {
      problem("plan has no participants");
      unsafe_ = true;
      return;
    }
    for (int d = 0; d < ndev(); ++d) {
      if (!plan_.devices[static_cast<std::size_t>(d)].participant && d < r) {
        problem("device {} is a helper but ranks must come first (plan has {} ranks)", d, r);
        unsafe_ = true;
      }
    }
    if (plan_.count < 0) {
      problem("count {} is negative", plan_.count);
      unsafe_ = true;
    }
    if (plan_.buffers.size() != plan_.devices.size()) {
      problem("plan lists buffers for {} devices but has {} devices", plan_.buffers.size(), plan_.devices.size());
      unsafe_ = true;
      return;
    }
    for (int d = 0; d < ndev(); ++d) {
      const auto& list = plan_.buffers[static_cast<std::size_t>(d)];
      for (std::size_t b = 0; b < list.size(); ++b) {
        if (list[b] < 0) {
          problem("device {} buffer {} has negative size {}", d, b, list[b]);
          unsafe_ = true;
        }
      }
      if (d < r && (list.empty() || list[0] != plan_.count)) {
        problem("rank {} buffer 0 must hold count = {} elements", d, plan_.count);
        unsafe_ = true;
      }
    }
    if (plan_.reduce_op != ReduceOp::kAvg) {
      for (const Op& op : plan_.ops) {
        if (op.kind == OpKind::kScale) {
          problem("op {}: scale in a '{}' plan (only avg scales)", op.id, to_string(plan_.reduce_op));
        }
      }
    }

    devices_.resize(plan_.ops.size());
    for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
      const Op& op = plan_.ops[i];
      if (op.id != static_cast<int>(i)) {
        problem("op at position {} has id {} (ids must be positions)", i, op.id);
        unsafe_ = true;
        continue;
      }
      bool ok = true;
      switch (op.kind) {
        case OpKind::kCopy:
        case OpKind::kReduce: {
          const bool s = location_ok(op, op.src, "src");
          const bool d = location_ok(op, op.dst, "dst");
          ok = s && d;
          if (ok && op.src.count != op.dst.count) {
            problem("op {}: src has {} elements but dst {}", op.id, op.src.count, op.dst.count);
            ok = false;
          }
          if (ok && op.src.device == op.dst.device && op.src.buffer == op.dst.buffer &&
              op.src.offset < op.dst.offset + op.dst.count && op.dst.offset < op.src.offset + op.src.count &&
              op.src.count > 0) {
            problem("op {}: src {} and dst {} overlap", op.id,
                    where(op.src.device, op.src.buffer, op.src.offset, op.src.offset + op.src.count),
                    range_text(op.dst.offset, op.dst.offset + op.dst.count));
            ok = false;
          }
          break;
        }
        case OpKind::kScale:
          ok = location_ok(op, op.dst, "dst");
          if (op.divisor != r) {
            problem("op {}: scale divides by {} but the plan has {} ranks", op.id, op.divisor, r);
          }
          break;
        case OpKind::kGroup: {
          if (op.group.empty()) {
            problem("op {}: group op without devices", op.id);
            ok = false;
            break;
          }
          std::vector<int> seen;
          for (int d : op.group) {
            if (d < 0 || d >= ndev()) {
              problem("op {}: group device {} out of range (plan has {} devices)", op.id, d, ndev());
              ok = false;
              continue;
            }
            if (std::find(seen.begin(), seen.end(), d) != seen.end()) {
              problem("op {}: group lists device {} twice", op.id, d);
              ok = false;
            }
            seen.push_back(d);
            Location region = op.dst;
            region.device = d;
            ok = location_ok(op, region, "group region") && ok;
          }
          const bool rooted = op.collective == Collective::kBroadcast || op.collective == Collective::kReduce;
          if (rooted && std::find(op.group.begin(), op.group.end(), op.root) == op.group.end()) {
            problem("op {}: {} root {} is not in the group", op.id, to_string(op.collective), op.root);
            ok = false;
          }
          break;
        }
      }
      if (!ok) {
        unsafe_ = true;
        continue;
      }
      devices_[i] = op_devices(op);
      std::sort(devices_[i].begin(), devices_[i].end());
      for (int dep : op.deps) {
        if (dep < 0 || dep >= op.id) {
          problem("op {}: depends on op {} which does not come before it", op.id, dep);
          unsafe_ = true;
          continue;
        }
        const auto& mine = devices_[i];
        const auto& theirs = devices_[static_cast<std::size_t>(dep)];
        bool shared = false;
        for (int d : mine) shared = shared || std::binary_search(theirs.begin(), theirs.end(), d);
        if (!shared && !theirs.empty()) {
          problem("op {}: depends on op {} which shares no device (devices {} vs {})", op.id, dep, fmt::join(mine, ","),
                  fmt::join(theirs, ","));
        }
      }
    }
  }

  // ----- symbolic execution ---------------------------------------------------

  void init_state() {
    const int r = plan_.ranks();
    state_.resize(plan_.devices.size());
    access_.resize(plan_.devices.size());
    for (int d = 0; d < ndev(); ++d) {
      const auto& list = plan_.buffers[static_cast<std::size_t>(d)];
      state_[static_cast<std::size_t>(d)].resize(list.size());
      access_[static_cast<std::size_t>(d)].resize(list.size());
      for (std::size_t b = 0; b < list.size(); ++b) {
        const bool input = d < r && b == 0;
        state_[static_cast<std::size_t>(d)][b].init(list[b], Cell{input ? values_.input(d) : Values::kUndefined, 0});
        access_[static_cast<std::size_t>(d)][b].init(list[b], Access{});
      }
      if (d < r && plan_.collective == Collective::kAllGather && !list.empty()) {
        // All-gather: rank d brings only its own block; the rest of its buffer is output space.
        const auto [off, cnt] = collective_block(plan_, d);
        state(d, 0).init(list[0], Cell{});
        write(d, 0, off, off + cnt, {{0, cnt, Cell{values_.input(d), 0}}});
      }
    }
  }

  IntervalMap<Cell>& state(int device, int buffer) {
    return state_[static_cast<std::size_t>(device)][static_cast<std::size_t>(buffer)];
  }

  // A snapshot of the cells over [lo, hi): (relative start, relative end, cell).
  struct Span {
    std::int64_t lo;
    std::int64_t hi;
    Cell cell;
  };
  std::vector<Span> read(int device, int buffer, std::int64_t lo, std::int64_t hi) {
    std::vector<Span> out;
    if (lo >= hi) return out;
    auto& m = state(device, buffer);
    auto [first, last] = m.range(lo, hi);
    for (auto it = first; it != last; ++it) out.push_back({it->first - lo, it->second.hi - lo, it->second.value});
    return out;
  }

  // Replaces [lo, hi) by the given spans (relative, covering [0, hi - lo)), merging equal neighbours.
  void write(int device, int buffer, std::int64_t lo, std::int64_t hi, const std::vector<Span>& spans) {
    if (lo >= hi) return;
    auto& m = state(device, buffer);
    auto [first, last] = m.range(lo, hi);
    m.map().erase(first, last);
    for (const Span& s : spans) {
      m.map().emplace(lo + s.lo, typename IntervalMap<Cell>::Piece{lo + s.hi, s.cell});
    }
    // Merging keeps maps small when successive ops rewrite adjacent regions alike.
    auto merge_at = [&](std::int64_t pos) {
      auto it = m.map().find(pos);
      if (it == m.map().end() || it == m.map().begin()) return;
      auto prev = std::prev(it);
      if (prev->second.value == it->second.value) {
        prev->second.hi = it->second.hi;
        m.map().erase(it);
      }
    };
    merge_at(hi);
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) merge_at(lo + it->lo);
  }

  // Splits two span lists (same relative extent) at their joint boundaries.
  static std::vector<std::pair<Span, Span>> zip(const std::vector<Span>& a, const std::vector<Span>& b) {
    std::vector<std::pair<Span, Span>> out;
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      const std::int64_t lo = std::max(a[i].lo, b[j].lo);
      const std::int64_t hi = std::min(a[i].hi, b[j].hi);
      out.push_back({{lo, hi, a[i].cell}, {lo, hi, b[j].cell}});
      if (a[i].hi == hi) ++i;
      if (b[j].hi == hi) ++j;
    }
    return out;
  }

  // Moves spans read at `from_offset` so they describe data placed at `to_offset`.
  static void relocate(std::vector<Span>& spans, std::int64_t from_offset, std::int64_t to_offset) {
    for (Span& s : spans) {
      if (s.cell.value != Values::kUndefined) s.cell.shift += from_offset - to_offset;
    }
  }

  // A region for messages.
  struct Where {
    int device;
    int buffer;
    std::int64_t lo;
    std::int64_t hi;
  };

  // dst ⊎ src for one interval; reports (once per op) and returns dst on errors.
  Cell combine(const Op& op, const Cell& dst, const Cell& src, const Where& to, const Where& from, bool& reported) {
    auto report = [&](const std::string& why) {
      if (!reported) problem("op {}: {}", op.id, why);
      reported = true;
    };
    const std::string to_text = where(to.device, to.buffer, to.lo, to.hi);
    const std::string from_text = where(from.device, from.buffer, from.lo, from.hi);
    if (src.value == Values::kUndefined) {
      report(fmt::format("reduces undefined data from {} into {}", from_text, to_text));
      return dst;
    }
    if (dst.value == Values::kUndefined) {
      report(fmt::format("reduces into undefined data at {} (from {})", to_text, from_text));
      return dst;
    }
    if (dst.shift != src.shift) {
      report(fmt::format("reduces misaligned data from {} into {} (input elements shifted by {} vs {})", from_text,
                         to_text, src.shift, dst.shift));
      return dst;
    }
    if (values_.get(dst.value).scaled > 0 || values_.get(src.value).scaled > 0) {
      report(fmt::format("reduces already scaled data from {} into {}", from_text, to_text));
      return dst;
    }
    const auto twice = values_.common(dst.value, src.value);
    if (!twice.empty()) {
      report(fmt::format("adds the input of rank{} {} twice at {} ({} from {} into {})", twice.size() > 1 ? "s" : "",
                         fmt::join(twice, ","), to_text, values_.describe(src.value), from_text,
                         values_.describe(dst.value)));
    }
    return Cell{values_.sum(dst.value, src.value), dst.shift};
  }

  void execute(const Op& op) {
    switch (op.kind) {
      case OpKind::kCopy: {
        auto spans = read(op.src.device, op.src.buffer, op.src.offset, op.src.offset + op.src.count);
        for (const Span& s : spans) {
          if (s.cell.value == Values::kUndefined) {
            problem("op {}: copies undefined data from {}", op.id,
                    where(op.src.device, op.src.buffer, op.src.offset + s.lo, op.src.offset + s.hi));
            break;
          }
        }
        relocate(spans, op.src.offset, op.dst.offset);
        write(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, spans);
        break;
      }
      case OpKind::kReduce: {
        auto src = read(op.src.device, op.src.buffer, op.src.offset, op.src.offset + op.src.count);
        relocate(src, op.src.offset, op.dst.offset);
        const auto dst = read(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count);
        std::vector<Span> out;
        bool reported = false;
        for (const auto& [d, s] : zip(dst, src)) {
          const Where to{op.dst.device, op.dst.buffer, op.dst.offset + d.lo, op.dst.offset + d.hi};
          const Where from{op.src.device, op.src.buffer, op.src.offset + d.lo, op.src.offset + d.hi};
          out.push_back({d.lo, d.hi, combine(op, d.cell, s.cell, to, from, reported)});
        }
        write(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, out);
        break;
      }
      case OpKind::kScale: {
        auto spans = read(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count);
        bool reported = false;
        for (Span& s : spans) {
          const std::string at = where(op.dst.device, op.dst.buffer, op.dst.offset + s.lo, op.dst.offset + s.hi);
          if (!reported && s.cell.value == Values::kUndefined) {
            problem("op {}: scales undefined data at {}", op.id, at);
            reported = true;
          } else if (!reported && values_.get(s.cell.value).scaled > 0) {
            problem("op {}: scales {} a second time", op.id, at);
            reported = true;
          } else if (!reported && !values_.complete(s.cell.value)) {
            problem("op {}: scales a partial result at {} ({})", op.id, at, values_.describe(s.cell.value));
            reported = true;
          }
          if (s.cell.value != Values::kUndefined) s.cell.value = values_.scaled(s.cell.value);
        }
        write(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, spans);
        break;
      }
      case OpKind::kGroup: group(op); break;
    }
  }

  // Reduces the members' spans over one region; returns the reduced spans.
  std::vector<Span> reduce_members(const Op& op, const std::vector<std::vector<Span>>& member_spans,
                                   std::int64_t base) {
    std::vector<Span> acc = member_spans[0];
    bool reported = false;
    for (std::size_t m = 1; m < member_spans.size(); ++m) {
      std::vector<Span> next;
      for (const auto& [a, b] : zip(acc, member_spans[m])) {
        const Where to{op.group[0], op.dst.buffer, base + a.lo, base + a.hi};
        const Where from{op.group[m], op.dst.buffer, base + a.lo, base + a.hi};
        next.push_back({a.lo, a.hi, combine(op, a.cell, b.cell, to, from, reported)});
      }
      acc = std::move(next);
    }
    return acc;
  }

  void group(const Op& op) {
    const int buf = op.dst.buffer;
    const std::int64_t lo = op.dst.offset;
    const std::int64_t hi = lo + op.dst.count;
    const std::size_t n = op.group.size();
    auto check_defined = [&](int device, const std::vector<Span>& spans, std::int64_t base) {
      for (const Span& s : spans) {
        if (s.cell.value == Values::kUndefined) {
          problem("op {}: {} reads undefined data at {}", op.id, to_string(op.collective),
                  where(device, buf, base + s.lo, base + s.hi));
          return;
        }
      }
    };
    switch (op.collective) {
      case Collective::kAllReduce:
      case Collective::kReduce: {
        std::vector<std::vector<Span>> spans;
        for (int d : op.group) spans.push_back(read(d, buf, lo, hi));
        const auto result = reduce_members(op, spans, lo);
        if (op.collective == Collective::kAllReduce) {
          for (int d : op.group) write(d, buf, lo, hi, result);
        } else {
          write(op.root, buf, lo, hi, result);
        }
        break;
      }
      case Collective::kBroadcast: {
        const auto spans = read(op.root, buf, lo, hi);
        check_defined(op.root, spans, lo);
        for (int d : op.group) {
          if (d != op.root) write(d, buf, lo, hi, spans);
        }
        break;
      }
      case Collective::kReduceScatter: {
        std::vector<std::vector<Span>> shards(n);
        for (std::size_t k = 0; k < n; ++k) {
          const auto [off, cnt] = even_piece(op.dst.count, static_cast<int>(n), static_cast<int>(k));
          std::vector<std::vector<Span>> spans;
          for (int d : op.group) spans.push_back(read(d, buf, lo + off, lo + off + cnt));
          shards[k] = reduce_members(op, spans, lo + off);
        }
        for (std::size_t k = 0; k < n; ++k) {
          const int d = op.group[k];
          const auto [off, cnt] = even_piece(op.dst.count, static_cast<int>(n), static_cast<int>(k));
          // The rest of the member's region is unspecified afterwards.
          write(d, buf, lo, lo + off, {{0, off, Cell{}}});
          write(d, buf, lo + off, lo + off + cnt, shards[k]);
          write(d, buf, lo + off + cnt, hi, {{0, hi - lo - off - cnt, Cell{}}});
        }
        break;
      }
      case Collective::kAllGather: {
        for (std::size_t k = 0; k < n; ++k) {
          const auto [off, cnt] = even_piece(op.dst.count, static_cast<int>(n), static_cast<int>(k));
          const auto spans = read(op.group[k], buf, lo + off, lo + off + cnt);
          check_defined(op.group[k], spans, lo + off);
          for (int d : op.group) {
            if (d != op.group[k]) write(d, buf, lo + off, lo + off + cnt, spans);
          }
        }
        break;
      }
    }
  }

  // What rank d's buffer 0 must end with (issue 17: per collective): regions and the rank whose
  // input each must hold exactly (-1: every rank's, reduced).
  struct Expect {
    std::int64_t lo;
    std::int64_t hi;
    int owner;
  };
  std::vector<Expect> expected_result(int d) const {
    const int r = plan_.ranks();
    switch (plan_.collective) {
      case Collective::kAllGather: {
        std::vector<Expect> out;
        for (int k = 0; k < r; ++k) {
          const auto [off, cnt] = collective_block(plan_, k);
          if (cnt > 0) out.push_back({off, off + cnt, k});
        }
        return out;
      }
      case Collective::kReduceScatter: {
        const auto [off, cnt] = collective_block(plan_, d);
        if (cnt == 0) return {};
        return {{off, off + cnt, -1}};
      }
      default: return {{0, plan_.count, -1}};
    }
  }

  void final_check() {
    const int r = plan_.ranks();
    // An all-gather moves inputs and reduces nothing: avg does not apply to it.
    const bool avg = plan_.reduce_op == ReduceOp::kAvg && plan_.collective != Collective::kAllGather;
    for (int d = 0; d < r; ++d) {
      // Adjacent intervals with the same defect are reported as one range.
      std::string pending;
      std::int64_t pending_lo = 0, pending_hi = 0;
      auto flush = [&] {
        if (!pending.empty()) {
          problem("result: rank {} buffer 0 {} {}", d, range_text(pending_lo, pending_hi), pending);
        }
        pending.clear();
      };
      for (const Expect& x : expected_result(d)) {
        auto [first, last] = state(d, 0).range(x.lo, x.hi);
        for (auto it = first; it != last; ++it) {
          const std::int64_t lo = it->first;
          const Cell& c = it->second.value;
          std::vector<std::string> why;
          if (c.value == Values::kUndefined) {
            why.push_back("is undefined");
          } else {
            const Value& v = values_.get(c.value);
            std::vector<int> missing, doubled, foreign;
            for (int k = 0; k < r; ++k) {
              const std::uint8_t n = v.counts[static_cast<std::size_t>(k)];
              const bool wanted = x.owner < 0 || x.owner == k;
              if (wanted && n == 0) missing.push_back(k);
              if (n > 1) doubled.push_back(k);
              if (!wanted && n > 0) foreign.push_back(k);
            }
            if (!missing.empty()) {
              why.push_back(fmt::format("misses the input of ranks {}", fmt::join(missing, ",")));
            }
            if (!doubled.empty()) {
              why.push_back(fmt::format("holds the input of ranks {} more than once", fmt::join(doubled, ",")));
            }
            if (!foreign.empty()) {
              why.push_back(fmt::format("holds the input of ranks {} (all-gather block of rank {})",
                                        fmt::join(foreign, ","), x.owner));
            }
            if (c.shift != 0) why.push_back(fmt::format("holds input elements shifted by {}", c.shift));
            if (avg && v.scaled == 0) why.push_back("is not scaled");
            if (avg && v.scaled > 1) why.push_back(fmt::format("is scaled {} times", v.scaled));
            if (!avg && v.scaled > 0) why.push_back("is scaled");
          }
          const std::string text = fmt::format("{}", fmt::join(why, "; "));
          if (text != pending || lo != pending_hi) {
            flush();
            pending = text;
            pending_lo = lo;
          }
          pending_hi = it->second.hi;
        }
      }
      flush();
    }
  }

  // ----- races ----------------------------------------------------------------

  // Accesses of an op: (device, buffer, lo, hi, writes).
  struct Touch {
    int device;
    int buffer;
    std::int64_t lo;
    std::int64_t hi;
    bool writes;
  };

  static std::vector<Touch> touches(const Op& op) {
    std::vector<Touch> out;
    switch (op.kind) {
      case OpKind::kCopy:
      case OpKind::kReduce:
        out.push_back({op.src.device, op.src.buffer, op.src.offset, op.src.offset + op.src.count, false});
        out.push_back({op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, true});
        break;
      case OpKind::kScale:
        out.push_back({op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, true});
        break;
      case OpKind::kGroup:
        for (int d : op.group) {
          const bool reads_only = (op.collective == Collective::kBroadcast && d == op.root) ||
                                  (op.collective == Collective::kReduce && d != op.root);
          out.push_back({d, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, !reads_only});
        }
        break;
    }
    return out;
  }

  // An earlier access this op must follow, and where the two conflict.
  struct Need {
    int before;
    int after;
    int device;
    int buffer;
    std::int64_t lo;
    std::int64_t hi;
  };

  // A short depth-first search from `op` towards the marked targets (target_ ==
  // target_epoch_), visiting at most kQuickVisits ancestors with ids ≥ floor.
  // Marks what it reached with stamp_ == epoch_. Most orderings a plan relies on
  // are a few hops long; the rest are settled by resolve_deferred().
  static constexpr int kQuickVisits = 64;
  void quick_search(const Op& op, int floor, int targets) {
    ++epoch_;
    stack_.clear();
    int budget = kQuickVisits;
    auto visit = [&](int d) {
      if (d < floor || stamp_[static_cast<std::size_t>(d)] == epoch_) return false;
      stamp_[static_cast<std::size_t>(d)] = epoch_;
      if (target_[static_cast<std::size_t>(d)] == target_epoch_ && --targets == 0) return true;
      stack_.push_back(d);
      return false;
    };
    for (int d : op.deps) {
      if (visit(d)) return;
    }
    while (!stack_.empty() && budget-- > 0) {
      const int x = stack_.back();
      stack_.pop_back();
      for (int d : plan_.ops[static_cast<std::size_t>(x)].deps) {
        if (visit(d)) return;
      }
    }
  }

  void races(const Op& op) {
    const auto list = touches(op);
    // A write must follow the readers since the last write; each of those was
    // checked to follow that write, so the write itself is implied. With no
    // readers since, the last writer is checked directly.
    std::vector<Need>& needs = needs_;
    needs.clear();
    for (const Touch& t : list) {
      if (t.lo >= t.hi) continue;
      auto& m = access_[static_cast<std::size_t>(t.device)][static_cast<std::size_t>(t.buffer)];
      auto [first, last] = m.range(t.lo, t.hi);
      for (auto it = first; it != last; ++it) {
        const Access& a = it->second.value;
        bool via_readers = false;
        if (t.writes) {
          for (int rd : a.readers) {
            if (rd == op.id) continue;
            needs.push_back({rd, op.id, t.device, t.buffer, it->first, it->second.hi});
            via_readers = true;
          }
        }
        if (!via_readers && a.writer >= 0 && a.writer != op.id) {
          needs.push_back({a.writer, op.id, t.device, t.buffer, it->first, it->second.hi});
        }
      }
    }
    if (!needs.empty()) {
      int floor = op.id;
      int targets = 0;
      ++target_epoch_;
      for (const Need& n : needs) {
        if (std::find(op.deps.begin(), op.deps.end(), n.before) != op.deps.end()) continue;
        auto& t = target_[static_cast<std::size_t>(n.before)];
        if (t == target_epoch_) continue;
        t = target_epoch_;
        ++targets;
        floor = std::min(floor, n.before);
      }
      if (targets > 0) {
        quick_search(op, floor, targets);
        for (const Need& n : needs) {
          const auto b = static_cast<std::size_t>(n.before);
          if (target_[b] != target_epoch_ || stamp_[b] == epoch_) continue;
          target_[b] = 0;  // one record per earlier op
          deferred_.push_back(n);
        }
      }
    }
    // Record this op's accesses.
    for (const Touch& t : list) {
      if (t.lo >= t.hi) continue;
      auto& m = access_[static_cast<std::size_t>(t.device)][static_cast<std::size_t>(t.buffer)];
      auto [first, last] = m.range(t.lo, t.hi);
      if (t.writes) {
        m.map().erase(first, last);
        m.map().emplace(t.lo, IntervalMap<Access>::Piece{t.hi, Access{op.id, {}}});
      } else {
        for (auto it = first; it != last; ++it) {
          auto& readers = it->second.value.readers;
          if (it->second.value.writer != op.id && (readers.empty() || readers.back() != op.id)) {
            readers.push_back(op.id);
          }
        }
      }
    }
  }

  // Settles the orderings the quick search could not, exactly: for a block of
  // candidate ancestors [lo, lo + W) every later op gets a W-bit mask of the
  // block members it reaches, OR-ed from its deps' masks in id order. Only
  // blocks that hold a deferred target are processed, each up to its latest
  // querying op, so the cost is O(ops · deps · W/64) per such block.
  void resolve_deferred() {
    if (deferred_.empty()) return;
    const std::size_t n = plan_.ops.size();
    // Block width: the masks of one block stay within about 32 MB.
    std::size_t words = std::clamp<std::size_t>((std::size_t{32} << 20) / 8 / std::max<std::size_t>(n, 1), 1, 64);
    const std::size_t width = words * 64;
    std::sort(deferred_.begin(), deferred_.end(), [](const Need& a, const Need& b) {
      return a.before != b.before ? a.before < b.before : a.after < b.after;
    });
    std::vector<std::uint64_t> masks;
    std::vector<Need> races;
    for (std::size_t i = 0; i < deferred_.size();) {
      const std::size_t lo = static_cast<std::size_t>(deferred_[i].before) / width * width;
      const std::size_t hi = lo + width;
      std::size_t j = i;
      int last = 0;
      while (j < deferred_.size() && static_cast<std::size_t>(deferred_[j].before) < hi) {
        last = std::max(last, deferred_[j].after);
        ++j;
      }
      const std::size_t rows = static_cast<std::size_t>(last) + 1 - lo;
      masks.assign(rows * words, 0);
      for (std::size_t b = lo; b <= static_cast<std::size_t>(last); ++b) {
        std::uint64_t* row = &masks[(b - lo) * words];
        for (int d : plan_.ops[b].deps) {
          const auto du = static_cast<std::size_t>(d);
          if (du < lo) continue;
          const std::uint64_t* from = &masks[(du - lo) * words];
          for (std::size_t w = 0; w < words; ++w) row[w] |= from[w];
          if (du < hi) row[(du - lo) / 64] |= std::uint64_t{1} << ((du - lo) % 64);
        }
      }
      for (; i < j; ++i) {
        const Need& q = deferred_[i];
        const std::size_t bit = static_cast<std::size_t>(q.before) - lo;
        const std::uint64_t* row = &masks[(static_cast<std::size_t>(q.after) - lo) * words];
        if ((row[bit / 64] >> (bit % 64) & 1U) == 0) races.push_back(q);
      }
    }
    std::sort(races.begin(), races.end(), [](const Need& a, const Need& b) {
      return a.after != b.after ? a.after < b.after : a.before < b.before;
    });
    for (const Need& q : races) {
      problem("op {}: races with op {} on {} (no dependency path orders them)", q.after, q.before,
              where(q.device, q.buffer, q.lo, q.hi));
    }
  }

  const Plan& plan_;
  Values values_;
  std::vector<std::string> problems_;
  std::size_t dropped_ = 0;
  bool unsafe_ = false;
  std::vector<std::vector<int>> devices_;
  std::vector<std::vector<IntervalMap<Cell>>> state_;
  std::vector<std::vector<IntervalMap<Access>>> access_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> target_;
  std::uint32_t target_epoch_ = 0;
  std::vector<Need> needs_;
  std::vector<Need> deferred_;
  std::vector<int> stack_;
};

}  // namespace

VerifyResult verify(const Plan& plan) { return Verifier(plan).run(); }

void verify_or_throw(const Plan& plan) {
  const VerifyResult r = verify(plan);
  if (r.ok) return;
  const std::size_t more = r.problems.size() - 1;
  throw InvalidInput(fmt::format("plan '{}' fails verification: {}{}", plan.spec, r.problems.front(),
                                 more > 0 ? fmt::format(" (and {} more problems)", more) : std::string()));
}

}  // namespace artune
