#pragma once
// The static verifier's machinery behind verify() (verifier.hpp): the Verifier class and the abstract
// state it executes plans on. Its members live by concern in state.cpp (abstract values, the
// symbolic buffer state), ops.cpp (structure checks and executing each op), races.cpp
// (the race check) and verifier.cpp (the run, the postconditions and the public entry points).
// Internal to the algorithms module; not installed.
//
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

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "artune/algorithms/plan.hpp"
#include "artune/algorithms/verifier/verifier.hpp"

namespace artune::verifier_detail {

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

// Interned abstract values: id 0 is undefined data, ids 1..ranks are the participants' inputs.
class Values {
 public:
  explicit Values(int ranks);
  static constexpr int kUndefined = 0;
  int input(int rank) const { return rank + 1; }
  const Value& get(int id) const { return values_[static_cast<std::size_t>(id)]; }

  // a ⊎ b; both must be defined (the caller checks).
  int sum(int a, int b);
  int scaled(int a);
  // Holds every input exactly once.
  bool complete(int id) const;
  // Ranks whose input a and b both hold (the ones a reduce would double).
  std::vector<int> common(int a, int b) const;
  std::string describe(int id) const;

 private:
  int intern(Value v);

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

std::string range_text(std::int64_t lo, std::int64_t hi);

class Verifier {
 public:
  explicit Verifier(const Plan& plan) : plan_(plan), values_(std::max(plan.ranks(), 0)) {}

  // Structure first; on a plan safe to execute, the races and the symbolic execution op by op, then the
  // postconditions (verifier.cpp).
  VerifyResult run();

 private:
  // A snapshot of the cells over [lo, hi): (relative start, relative end, cell).
  struct Span {
    std::int64_t lo;
    std::int64_t hi;
    Cell cell;
  };
  // A region for messages.
  struct Where {
    int device;
    int buffer;
    std::int64_t lo;
    std::int64_t hi;
  };
  // What rank d's buffer 0 must end with (issue 17: per collective): regions and the rank whose
  // input each must hold exactly (-1: every rank's, reduced).
  struct Expect {
    std::int64_t lo;
    std::int64_t hi;
    int owner;
  };
  // Accesses of an op: (device, buffer, lo, hi, writes).
  struct Touch {
    int device;
    int buffer;
    std::int64_t lo;
    std::int64_t hi;
    bool writes;
  };
  // An earlier access this op must follow, and where the two conflict.
  struct Need {
    int before;
    int after;
    int device;
    int buffer;
    std::int64_t lo;
    std::int64_t hi;
  };

  template <class... Args>
  void problem(fmt::format_string<Args...> f, Args&&... args) {
    if (problems_.size() >= kMaxProblems) {
      ++dropped_;
      return;
    }
    problems_.push_back(fmt::format(f, std::forward<Args>(args)...));
  }
  int ndev() const { return static_cast<int>(plan_.devices.size()); }
  std::string where(int device, int buffer, std::int64_t lo, std::int64_t hi) const;

  // ----- structure and op execution (ops.cpp) -----
  bool location_ok(const Op& op, const Location& l, const char* what);
  void structure();
  Cell combine(const Op& op, const Cell& dst, const Cell& src, const Where& to, const Where& from, bool& reported);
  void execute(const Op& op);
  std::vector<Span> reduce_members(const Op& op, const std::vector<std::vector<Span>>& member_spans, std::int64_t base);
  void group(const Op& op);

  // ----- symbolic state (state.cpp) -----
  void init_state();
  IntervalMap<Cell>& state(int device, int buffer) {
    return state_[static_cast<std::size_t>(device)][static_cast<std::size_t>(buffer)];
  }
  std::vector<Span> read(int device, int buffer, std::int64_t lo, std::int64_t hi);
  // The same into `out` (cleared first): execute() reads into its member buffers, allocating nothing per op.
  void read(int device, int buffer, std::int64_t lo, std::int64_t hi, std::vector<Span>& out);
  void write(int device, int buffer, std::int64_t lo, std::int64_t hi, const std::vector<Span>& spans);
  static std::vector<std::pair<Span, Span>> zip(const std::vector<Span>& a, const std::vector<Span>& b);
  static void zip(const std::vector<Span>& a, const std::vector<Span>& b, std::vector<std::pair<Span, Span>>& out);
  static void relocate(std::vector<Span>& spans, std::int64_t from_offset, std::int64_t to_offset);

  // ----- races (races.cpp) -----
  // The op's accesses into `out` (cleared first; a member buffer, so that no op allocates its own).
  static void touches(const Op& op, std::vector<Touch>& out);
  static constexpr int kQuickVisits = 64;
  void quick_search(const Op& op, int floor, int targets);
  void races(const Op& op);
  void resolve_deferred();

  // ----- postconditions (verifier.cpp) -----
  std::vector<Expect> expected_result(int d) const;
  void final_check();

  const Plan& plan_;
  Values values_;
  std::vector<std::string> problems_;
  std::size_t dropped_ = 0;
  bool unsafe_ = false;
  // Each op's devices, sorted: op i's are device_list_[device_start_[i] .. device_start_[i + 1]) (empty for an op
  // that failed the structure check). One array for the plan instead of one per op.
  std::vector<int> device_list_;
  std::vector<std::size_t> device_start_;
  std::span<const int> devices_of(std::size_t op) const {
    return {device_list_.data() + device_start_[op], device_list_.data() + device_start_[op + 1]};
  }
  std::vector<std::vector<IntervalMap<Cell>>> state_;
  std::vector<std::vector<IntervalMap<Access>>> access_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> target_;
  std::uint32_t target_epoch_ = 0;
  std::vector<Touch> touches_;
  // execute()'s buffers for copies, reduces and scales (each op's spans, reused from op to op).
  std::vector<Span> spans_a_;
  std::vector<Span> spans_b_;
  std::vector<Span> spans_out_;
  std::vector<std::pair<Span, Span>> zipped_;
  std::vector<Need> needs_;
  std::vector<Need> deferred_;
  std::vector<int> stack_;
};

}  // namespace artune::verifier_detail
