#pragma once
// User buffer registration for the nccl backend (ncclCommRegister): the plan's
// device buffers and the staging buffer are registered with the communicators
// whose calls use them, so NCCL can read and write them in place (zero-copy
// peer-to-peer and NVLS paths) instead of copying through its own buffers.
//
// What is registered: buffer_uses(program), each (communicator, buffer) pair
// once: sends and receives use the all-ranks communicator, collectives their
// group's. The Registry holds one handle per (communicator, address, bytes)
// key: registering the same key again does nothing; release_all() deregisters
// every handle, newest first, before the buffers are freed (the next prepare)
// or the communicators finalised (teardown); forget_all() drops the handles of
// aborted communicators without deregistering them (the abort freed them).
// A registration NCCL refuses is kept as an unregistered key (NCCL then copies
// as it would anyway) and not retried.
//
// Host code: the NCCL calls are hooks, so tests count them.

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "artune/executor/nccl/nccl_program.hpp"

namespace artune::nccl {

/// A buffer that a rank's NCCL calls pass, and the communicator they pass it to.
struct BufferUse {
  static constexpr int kPeers = -1;  ///< the all-ranks communicator of ncclSend/ncclRecv
  int comm = kPeers;                 ///< else a distinct_groups index (Step::comm)
  int device = -1;                   ///< plan device; -1 with buffer = Ref::kStaging
  int buffer = 0;
  friend auto operator<=>(const BufferUse&, const BufferUse&) = default;
};

/// Every (communicator, buffer) pair the program's sends, receives and collectives use, sorted, each once.
std::vector<BufferUse> buffer_uses(const Program& program);

/// Registrations of buffers with communicators, one per (communicator, address, bytes).
class Registry {
 public:
  struct Hooks {
    /// ncclCommRegister: the handle, or null when NCCL refused (the buffer stays unregistered).
    std::function<void*(void* comm, void* buffer, std::size_t bytes)> register_buffer;
    /// ncclCommDeregister.
    std::function<void(void* comm, void* handle)> deregister;
  };
  explicit Registry(Hooks hooks) : hooks_(std::move(hooks)) {}
  ~Registry() { release_all(); }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// Registers `bytes` at `buffer` with `comm` unless that key is known. True when it called register now.
  bool add(void* comm, void* buffer, std::size_t bytes);
  /// Deregisters every handle, newest first, and forgets all keys.
  void release_all() noexcept;
  /// Forgets every key without deregistering (the communicators were aborted).
  void forget_all() noexcept { entries_.clear(); }
  /// Keys held (registered or refused).
  std::size_t size() const { return entries_.size(); }
  /// Keys NCCL accepted.
  std::size_t registered() const;

 private:
  struct Entry {
    void* comm;
    void* buffer;
    std::size_t bytes;
    void* handle;
  };
  Hooks hooks_;
  std::vector<Entry> entries_;
};

}  // namespace artune::nccl
