#include "artune/comm/plan_cache.hpp"

#include <set>
#include <vector>

#include "artune/executor/backend_factory.hpp"

namespace artune {

PlanCache::PlanCache(BackendKind kind, const BackendOptions& options) : kind_(kind), options_(options) {}

PlanCache::~PlanCache() {
  // Every slot gets its plan back before the shared backend (and its workers) go.
  if (shares_ && current_ != nullptr) probe_->swap_slot(*current_->slot);
  current_ = nullptr;
  index_.clear();
  lru_.clear();
  probe_.reset();
}

void PlanCache::open() {
  if (probe_ || (!lru_.empty() && !shares_)) return;
  probe_ = make_backend(kind_, options_);
  shares_ = probe_->holds_slots();
}

PlanCache::Entry* PlanCache::find(const CacheKey& key) {
  if (!lru_.empty() && lru_.front().key == key) return &lru_.front();
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &lru_.front();
}

PlanCache::Entry& PlanCache::insert(const CacheKey& key, const PlanInfo& info, const Plan& plan,
                                    std::size_t capacity) {
  while (lru_.size() >= std::max<std::size_t>(capacity, 1)) {
    Entry& victim = lru_.back();
    if (current_ == &victim) {
      probe_->swap_slot(*victim.slot);
      current_ = nullptr;
    }
    index_.erase(victim.key);
    lru_.pop_back();
  }
  lru_.emplace_front();
  Entry& e = lru_.front();
  e.key = key;
  e.info = info;
  try {
    prepare(e, plan);
  } catch (...) {
    if (current_ == &e) current_ = nullptr;
    lru_.pop_front();
    throw;
  }
  index_[key] = lru_.begin();
  return e;
}

Backend& PlanCache::backend_of(Entry& e) {
  open();
  if (!shares_) {
    if (!e.backend) e.backend = probe_ ? std::move(probe_) : make_backend(kind_, options_);
    return *e.backend;
  }
  if (current_ != &e) {
    if (!e.slot) e.slot = probe_->new_slot();
    if (current_ != nullptr) probe_->swap_slot(*current_->slot);
    probe_->swap_slot(*e.slot);
    current_ = &e;
  }
  return *probe_;
}

void PlanCache::prepare(Entry& e, const Plan& plan) {
  backend_of(e).prepare_for_user_buffers(plan, e.key.type, e.key.op);
  e.target = plan.count;
  e.info.count = plan.count;
  e.info.devices = static_cast<int>(plan.devices.size());
  ++compiles_;
}

bool PlanCache::retargets() {
  open();
  return (probe_ ? *probe_ : *lru_.front().backend).retargets();
}

bool PlanCache::retarget(Entry& e, const Plan& plan) {
  Backend& b = backend_of(e);
  if (!b.retargets() || !b.retarget(plan)) return false;
  e.target = plan.count;
  e.info.count = plan.count;
  ++retargets_;
  return true;
}

void PlanCache::run(Entry& e, std::span<void* const> at, std::span<void* const> streams) {
  Backend& b = backend_of(e);
  if (runs_on_streams(kind_)) {
    b.run_on_streams(at, streams);
  } else {
    b.run_on(at);
  }
  ++e.info.calls;
}

std::string PlanCache::runs_as(const Plan& plan) {
  std::set<Collective> kinds;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kGroup) kinds.insert(op.collective);
  }
  open();
  const Backend& b = probe_ ? *probe_ : *lru_.front().backend;
  // The backend's name of each collective, once each ("cpu group op"; "MPI_Iallreduce+MPI_Ibcast").
  std::vector<std::string_view> names;
  for (Collective c : kinds) {
    const std::string_view name = b.group_op_name(c);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string text;
  for (std::string_view name : names) {
    if (!text.empty()) text += '+';
    text += name;
  }
  return text;
}

std::size_t PlanCache::worker_threads() const noexcept { return shares_ && probe_ ? probe_->worker_count() : 0; }

}  // namespace artune
