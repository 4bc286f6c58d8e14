#pragma once
// How the Communicator serves any element count with plans compiled once per size bucket.
//
// The buckets are the sizes the decision table was tuned at (or, without a table, the sizes tuned in memory):
// bucket k's plan is compiled once per (type, op) at c_k = ceil(size_k / element size) elements, the count the
// tuner chose that plan for. A call of n elements becomes pieces, each one run of a bucket plan:
//
//  * n at most `pad_limit` bytes (latency-bound): one run of the smallest bucket with c_k >= n. When c_k == n
//    it runs on the caller's buffer; otherwise the n elements are copied into a communicator-owned scratch
//    buffer of c_k elements whose tail is zero, and the result is copied back (TF-style padding). With tuned
//    sizes a factor 2 apart the plan moves at most twice the data, and at most 2 x pad_limit bytes are copied.
//  * larger n (bandwidth-bound): runs of the largest bucket with c_k <= n directly on consecutive parts of
//    the caller's buffer, repeated on the rest until at most `pad_limit` bytes are left, which go as above.
//    Large messages are therefore never copied, and a call makes at most log2(n / pad_limit) + 2 runs.
//
// All-reduce is element-wise, so running a plan on a part of the buffer (or on a zero-padded copy) gives the
// same elements as a plan of the exact count; every rank splits a call the same way.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace artune {

/// One run of a bucket plan inside a call.
struct CallPiece {
  int bucket = 0;             ///< index into the bucket sizes
  std::int64_t offset = 0;    ///< first element of the call it covers
  std::int64_t count = 0;     ///< elements of the call it covers (<= the bucket's count)
  std::int64_t compiled = 0;  ///< the bucket plan's count; > count: the piece runs padded in scratch
  friend bool operator==(const CallPiece&, const CallPiece&) = default;
};

/// The bucket plan's element count for a bucket of `bucket_bytes` and elements of `element_bytes`: at least 1.
std::int64_t bucket_count(std::uint64_t bucket_bytes, std::size_t element_bytes);

/// Splits a call of `count` elements of `element_bytes` over the buckets `bucket_bytes` (ascending, distinct,
/// not empty) as described above. Empty for count 0. InvalidInput for an empty or unsorted bucket list.
std::vector<CallPiece> split_call(std::span<const std::uint64_t> bucket_bytes, std::uint64_t pad_limit,
                                  std::int64_t count, std::size_t element_bytes);

}  // namespace artune
