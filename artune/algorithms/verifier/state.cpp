// The verifier's abstract values and the symbolic state of every (device, buffer).

#include "artune/algorithms/verifier/state.hpp"

namespace artune::verifier_detail {

Values::Values(int ranks) {
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

int Values::sum(int a, int b) {
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

int Values::scaled(int a) {
  Value v = get(a);
  v.scaled = static_cast<std::uint8_t>(std::min(255, v.scaled + 1));
  return intern(std::move(v));
}

bool Values::complete(int id) const {
  const Value& v = get(id);
  return !v.undefined && std::all_of(v.counts.begin(), v.counts.end(), [](std::uint8_t c) { return c == 1; });
}

std::vector<int> Values::common(int a, int b) const {
  std::vector<int> out;
  const Value& v = get(a);
  const Value& w = get(b);
  for (std::size_t r = 0; r < v.counts.size(); ++r) {
    if (v.counts[r] > 0 && w.counts[r] > 0) out.push_back(static_cast<int>(r));
  }
  return out;
}

std::string Values::describe(int id) const {
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

int Values::intern(Value v) {
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

std::string range_text(std::int64_t lo, std::int64_t hi) { return fmt::format("[{}, {})", lo, hi); }

std::string Verifier::where(int device, int buffer, std::int64_t lo, std::int64_t hi) const {
  return fmt::format("device {} buffer {} {}", device, buffer, range_text(lo, hi));
}

void Verifier::init_state() {
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

std::vector<Verifier::Span> Verifier::read(int device, int buffer, std::int64_t lo, std::int64_t hi) {
  std::vector<Span> out;
  read(device, buffer, lo, hi, out);
  return out;
}

void Verifier::read(int device, int buffer, std::int64_t lo, std::int64_t hi, std::vector<Span>& out) {
  out.clear();
  if (lo >= hi) return;
  auto& m = state(device, buffer);
  auto [first, last] = m.range(lo, hi);
  for (auto it = first; it != last; ++it) out.push_back({it->first - lo, it->second.hi - lo, it->second.value});
}

// Replaces [lo, hi) by the given spans (relative, covering [0, hi - lo)), merging equal neighbours.
void Verifier::write(int device, int buffer, std::int64_t lo, std::int64_t hi, const std::vector<Span>& spans) {
  if (lo >= hi) return;
  auto& m = state(device, buffer);
  auto [first, last] = m.range(lo, hi);
  m.map().erase(first, last);
  // The spans go in in order, each just before `last`: the hint makes each insertion constant time.
  for (const Span& s : spans)
    m.map().emplace_hint(last, lo + s.lo, typename IntervalMap<Cell>::Piece{lo + s.hi, s.cell});
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
std::vector<std::pair<Verifier::Span, Verifier::Span>> Verifier::zip(const std::vector<Span>& a,
                                                                     const std::vector<Span>& b) {
  std::vector<std::pair<Span, Span>> out;
  zip(a, b, out);
  return out;
}

void Verifier::zip(const std::vector<Span>& a, const std::vector<Span>& b, std::vector<std::pair<Span, Span>>& out) {
  out.clear();
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::int64_t lo = std::max(a[i].lo, b[j].lo);
    const std::int64_t hi = std::min(a[i].hi, b[j].hi);
    out.push_back({{lo, hi, a[i].cell}, {lo, hi, b[j].cell}});
    if (a[i].hi == hi) ++i;
    if (b[j].hi == hi) ++j;
  }
}

// Moves spans read at `from_offset` so they describe data placed at `to_offset`.
void Verifier::relocate(std::vector<Span>& spans, std::int64_t from_offset, std::int64_t to_offset) {
  for (Span& s : spans) {
    if (s.cell.value != Values::kUndefined) s.cell.shift += from_offset - to_offset;
  }
}

}  // namespace artune::verifier_detail
