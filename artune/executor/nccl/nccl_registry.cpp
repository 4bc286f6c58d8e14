#include "artune/executor/nccl/nccl_registry.hpp"

#include <algorithm>
#include <set>

namespace artune::nccl {

std::vector<BufferUse> buffer_uses(const Program& program) {
  std::set<BufferUse> uses;
  const auto use = [&](int comm, const Ref& r) {
    // Host-memory devices never reach NCCL (the lowering stages them); staging has no device.
    if (r.buffer != Ref::kStaging && program.host_device.at(static_cast<std::size_t>(r.device))) return;
    uses.insert(BufferUse{comm, r.buffer == Ref::kStaging ? -1 : r.device, r.buffer});
  };
  for (const Step& s : program.steps) {
    switch (s.kind) {
      case StepKind::kSend: use(BufferUse::kPeers, s.src); break;
      case StepKind::kRecv: use(BufferUse::kPeers, s.dst); break;
      case StepKind::kCollective: use(s.comm, s.dst); break;
      default: break;
    }
  }
  return {uses.begin(), uses.end()};
}

bool Registry::add(void* comm, void* buffer, std::size_t bytes) {
  if (comm == nullptr || buffer == nullptr || bytes == 0) return false;
  const bool known = std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) {
    return e.comm == comm && e.buffer == buffer && e.bytes == bytes;
  });
  if (known) return false;
  entries_.push_back({comm, buffer, bytes, hooks_.register_buffer(comm, buffer, bytes)});
  return true;
}

void Registry::release_all() noexcept {
  for (auto e = entries_.rbegin(); e != entries_.rend(); ++e) {
    if (e->handle != nullptr) hooks_.deregister(e->comm, e->handle);
  }
  entries_.clear();
}

std::size_t Registry::registered() const {
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.handle != nullptr; }));
}

}  // namespace artune::nccl
