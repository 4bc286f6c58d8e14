#pragma once
// The plan cache of a communicator group (internal): compiled plans by key (collective, size bucket, type, op),
// most recently used first, bounded, each re-targeted to the count a call asks for where its backend can.
//
// A backend that holds several prepared plans on one set of workers (Backend::new_slot: the cpu backend) serves
// every entry: each keeps its plan in a slot while another is current. Any other backend is made once per entry.
// The cache asks the backend, never its kind.

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>

#include "artune/communicator.hpp"
#include "artune/executor/backend.hpp"

namespace artune {

// What a compiled plan is cached under: the collective, its size bucket (index of a tuned size), type and op.
struct CacheKey {
  Collective collective = Collective::kAllReduce;
  int bucket = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  friend bool operator<(const CacheKey& a, const CacheKey& b) {
    return std::tie(a.collective, a.bucket, a.type, a.op) < std::tie(b.collective, b.bucket, b.type, b.op);
  }
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

class PlanCache {
 public:
  struct Entry {
    CacheKey key;
    PlanInfo info;
    std::int64_t target = 0;           // the count the compiled state runs now
    std::unique_ptr<Backend> backend;  // the entry's own backend (none when the shared one holds its plan)
    std::unique_ptr<PlanSlot> slot;    // its plan while another is current in the shared backend
  };

  PlanCache(BackendKind kind, const BackendOptions& options);
  ~PlanCache();
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // Makes the backend now (Unsupported where this build has none) rather than at the first compile.
  void open();
  // The entry of `key`, made the most recent; null when not cached.
  Entry* find(const CacheKey& key);
  // A new most-recent entry for `key` compiled from `plan` (with `info`'s label and range), after evicting the
  // least recently used ones beyond `capacity` (at least 1).
  Entry& insert(const CacheKey& key, const PlanInfo& info, const Plan& plan, std::size_t capacity);
  // Compiles `plan` (built for e's key) into `e`, replacing what it held.
  void prepare(Entry& e, const Plan& plan);
  // True when a plan of the compiled one's shape at another count re-targets in place (Backend::retargets).
  bool retargets();
  // Re-targets `e` to `plan` (its key's plan at another count) in place; false when the backend cannot.
  bool retarget(Entry& e, const Plan& plan);
  // Runs `e` once, in place, on the local ranks' buffers `at` (GPU backends: on the callers' `streams`).
  void run(Entry& e, std::span<void* const> at, std::span<void* const> streams);
  // What `plan`'s group ops run as on this backend (PlanInfo::runs_as), "" when it has none.
  std::string runs_as(const Plan& plan);

  // The entries, most recently used first.
  const std::list<Entry>& entries() const noexcept { return lru_; }
  std::uint64_t compiles() const noexcept { return compiles_; }
  std::uint64_t retargeted() const noexcept { return retargets_; }
  // Worker threads of the shared backend (0 when entries have their own backends).
  std::size_t worker_threads() const noexcept;

 private:
  // The backend that runs `e` now: the shared one with e's plan made current, or e's own.
  Backend& backend_of(Entry& e);

  BackendKind kind_;
  BackendOptions options_;
  std::unique_ptr<Backend> probe_;   // made by open() before the first entry; kept as shared, or given to it
  bool shares_ = false;              // probe_ holds every entry's plan (Backend::new_slot)
  Entry* current_ = nullptr;         // the entry whose plan is inside the shared backend
  std::list<Entry> lru_;             // most recently used first
  std::map<CacheKey, std::list<Entry>::iterator> index_;
  std::uint64_t compiles_ = 0;
  std::uint64_t retargets_ = 0;
};

}  // namespace artune
