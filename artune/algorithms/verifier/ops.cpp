// The verifier's structure checks and the symbolic execution of each op.

#include "artune/algorithms/verifier/state.hpp"

namespace artune::verifier_detail {

bool Verifier::location_ok(const Op& op, const Location& l, const char* what) {
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

void Verifier::structure() {
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

  device_list_.clear();
  device_start_.assign(plan_.ops.size() + 1, 0);
  for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
    device_start_[i] = device_list_.size();
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
    const std::size_t from = device_list_.size();
    append_op_devices(op, device_list_);
    std::sort(device_list_.begin() + static_cast<std::ptrdiff_t>(from), device_list_.end());
    for (int dep : op.deps) {
      if (dep < 0 || dep >= op.id) {
        problem("op {}: depends on op {} which does not come before it", op.id, dep);
        unsafe_ = true;
        continue;
      }
      const std::span<const int> mine(device_list_.data() + from, device_list_.size() - from);
      const std::span<const int> theirs = devices_of(static_cast<std::size_t>(dep));
      bool shared = false;
      for (int d : mine) shared = shared || std::binary_search(theirs.begin(), theirs.end(), d);
      if (!shared && !theirs.empty()) {
        problem("op {}: depends on op {} which shares no device (devices {} vs {})", op.id, dep, fmt::join(mine, ","),
                fmt::join(theirs, ","));
      }
    }
  }
  device_start_.back() = device_list_.size();
}

// dst ⊎ src for one interval; reports (once per op) and returns dst on errors.
Cell Verifier::combine(const Op& op, const Cell& dst, const Cell& src, const Where& to, const Where& from,
                       bool& reported) {
  auto report = [&](const std::string& why) {
    if (!reported) problem("op {}: {}", op.id, why);
    reported = true;
  };
  // The regions' text is made only for a message: a plan that passes formats none.
  const auto to_text = [&] { return where(to.device, to.buffer, to.lo, to.hi); };
  const auto from_text = [&] { return where(from.device, from.buffer, from.lo, from.hi); };
  if (src.value == Values::kUndefined) {
    report(fmt::format("reduces undefined data from {} into {}", from_text(), to_text()));
    return dst;
  }
  if (dst.value == Values::kUndefined) {
    report(fmt::format("reduces into undefined data at {} (from {})", to_text(), from_text()));
    return dst;
  }
  if (dst.shift != src.shift) {
    report(fmt::format("reduces misaligned data from {} into {} (input elements shifted by {} vs {})", from_text(),
                       to_text(), src.shift, dst.shift));
    return dst;
  }
  if (values_.get(dst.value).scaled > 0 || values_.get(src.value).scaled > 0) {
    report(fmt::format("reduces already scaled data from {} into {}", from_text(), to_text()));
    return dst;
  }
  const auto twice = values_.common(dst.value, src.value);
  if (!twice.empty()) {
    report(fmt::format("adds the input of rank{} {} twice at {} ({} from {} into {})", twice.size() > 1 ? "s" : "",
                       fmt::join(twice, ","), to_text(), values_.describe(src.value), from_text(),
                       values_.describe(dst.value)));
  }
  return Cell{values_.sum(dst.value, src.value), dst.shift};
}

void Verifier::execute(const Op& op) {
  switch (op.kind) {
    case OpKind::kCopy: {
      std::vector<Span>& spans = spans_a_;
      read(op.src.device, op.src.buffer, op.src.offset, op.src.offset + op.src.count, spans);
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
      std::vector<Span>& src = spans_a_;
      read(op.src.device, op.src.buffer, op.src.offset, op.src.offset + op.src.count, src);
      relocate(src, op.src.offset, op.dst.offset);
      std::vector<Span>& dst = spans_b_;
      read(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, dst);
      std::vector<Span>& out = spans_out_;
      out.clear();
      bool reported = false;
      zip(dst, src, zipped_);
      for (const auto& [d, s] : zipped_) {
        const Where to{op.dst.device, op.dst.buffer, op.dst.offset + d.lo, op.dst.offset + d.hi};
        const Where from{op.src.device, op.src.buffer, op.src.offset + d.lo, op.src.offset + d.hi};
        out.push_back({d.lo, d.hi, combine(op, d.cell, s.cell, to, from, reported)});
      }
      write(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, out);
      break;
    }
    case OpKind::kScale: {
      std::vector<Span>& spans = spans_a_;
      read(op.dst.device, op.dst.buffer, op.dst.offset, op.dst.offset + op.dst.count, spans);
      bool reported = false;
      for (Span& s : spans) {
        const auto at = [&] { return where(op.dst.device, op.dst.buffer, op.dst.offset + s.lo, op.dst.offset + s.hi); };
        if (!reported && s.cell.value == Values::kUndefined) {
          problem("op {}: scales undefined data at {}", op.id, at());
          reported = true;
        } else if (!reported && values_.get(s.cell.value).scaled > 0) {
          problem("op {}: scales {} a second time", op.id, at());
          reported = true;
        } else if (!reported && !values_.complete(s.cell.value)) {
          problem("op {}: scales a partial result at {} ({})", op.id, at(), values_.describe(s.cell.value));
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
std::vector<Verifier::Span> Verifier::reduce_members(const Op& op, const std::vector<std::vector<Span>>& member_spans,
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

void Verifier::group(const Op& op) {
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

}  // namespace artune::verifier_detail
