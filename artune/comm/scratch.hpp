#pragma once
// The scratch of a communicator group's local ranks (internal): where an all-reduce piece is padded to its
// bucket's count and where a reduce-scatter's input is staged. Host memory on host backends, memory of the
// caller's GPU on cuda/nccl (allocated on the device of the caller's buffer, used on the caller's stream).

#include <cstddef>
#include <vector>

namespace artune {

class Scratch {
 public:
  // Scratch of `ranks` local ranks, in device memory when `device` (cuda/nccl).
  Scratch(std::size_t ranks, bool device);
  // Local rank i's scratch, at least `bytes` long, with zeros from `keep` bytes on, ready on `stream` (after its
  // previous use); allocated next to `user` (GPU) when it grows.
  void* acquire(std::size_t i, std::size_t bytes, std::size_t keep, const void* user, void* stream);
  // After a run on local rank i's scratch on `stream`: only its first `keep` bytes can be non-zero.
  void release(std::size_t i, std::size_t keep, void* stream);
  // Copies `bytes` from `src` to `dst` (host memory, or device memory on `stream`).
  void copy(void* dst, const void* src, std::size_t bytes, void* stream) const;

 private:
  struct Pad {
    void* data = nullptr;
    std::size_t bytes = 0;
    std::size_t dirty = 0;  // bytes from the start that may be non-zero
    int device = -1;
    void* event = nullptr;  // cudaEvent_t recorded after the last use
    bool used = false;
    Pad() = default;
    Pad(const Pad&) = delete;
    Pad& operator=(const Pad&) = delete;
    ~Pad() { free(); }
    void free();
  };
  std::vector<Pad> pads_;  // per local rank
  bool device_ = false;
};

}  // namespace artune
