// The verifier's race check: every conflicting access ordered by a dependency path.

#include "artune/algorithms/verifier/state.hpp"

namespace artune::verifier_detail {

void Verifier::touches(const Op& op, std::vector<Touch>& out) {
  out.clear();
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
}

// A short depth-first search from `op` towards the marked targets (target_ ==
// target_epoch_), visiting at most kQuickVisits ancestors with ids ≥ floor.
// Marks what it reached with stamp_ == epoch_. Most orderings a plan relies on
// are a few hops long; the rest are settled by resolve_deferred().
void Verifier::quick_search(const Op& op, int floor, int targets) {
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

void Verifier::races(const Op& op) {
  std::vector<Touch>& list = touches_;
  touches(op, list);
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
      // One piece [lo, hi) written by this op: the first piece's node kept (range() made it start at lo), the rest
      // erased.
      first->second = IntervalMap<Access>::Piece{t.hi, Access{op.id, {}}};
      m.map().erase(std::next(first), last);
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
void Verifier::resolve_deferred() {
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
  std::sort(races.begin(), races.end(),
            [](const Need& a, const Need& b) { return a.after != b.after ? a.after < b.after : a.before < b.before; });
  for (const Need& q : races) {
    problem("op {}: races with op {} on {} (no dependency path orders them)", q.after, q.before,
            where(q.device, q.buffer, q.lo, q.hi));
  }
}

}  // namespace artune::verifier_detail
