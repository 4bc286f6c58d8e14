#include "artune/comm/call_split.hpp"

#include <algorithm>

#include "artune/core/error.hpp"

namespace artune {

std::int64_t bucket_count(std::uint64_t bucket_bytes, std::size_t element_bytes) {
  const std::uint64_t e = std::max<std::size_t>(element_bytes, 1);
  return static_cast<std::int64_t>(std::max<std::uint64_t>(1, (bucket_bytes + e - 1) / e));
}

std::vector<CallPiece> split_call(std::span<const std::uint64_t> bucket_bytes, std::uint64_t pad_limit,
                                  std::int64_t count, std::size_t element_bytes) {
  if (bucket_bytes.empty()) throw InvalidInput("split_call: no size buckets");
  for (std::size_t k = 1; k < bucket_bytes.size(); ++k) {
    if (bucket_bytes[k] <= bucket_bytes[k - 1]) throw InvalidInput("split_call: size buckets must ascend");
  }
  const std::uint64_t e = std::max<std::size_t>(element_bytes, 1);
  std::vector<std::int64_t> counts;
  counts.reserve(bucket_bytes.size());
  for (std::uint64_t b : bucket_bytes) counts.push_back(bucket_count(b, element_bytes));
  std::vector<CallPiece> pieces;
  std::int64_t offset = 0;
  std::int64_t left = count;
  while (left > 0) {
    const bool small = static_cast<std::uint64_t>(left) * e <= pad_limit || left < counts.front();
    if (small && left <= counts.back()) {
      // The smallest bucket that holds the rest (its count may repeat for wide elements: the first one).
      const auto it = std::lower_bound(counts.begin(), counts.end(), left);
      const int k = static_cast<int>(it - counts.begin());
      pieces.push_back(CallPiece{k, offset, left, *it});
      break;
    }
    // The largest bucket that fits, as many times as it fits.
    auto it = std::upper_bound(counts.begin(), counts.end(), left) - 1;
    it = std::lower_bound(counts.begin(), it, *it);  // the first bucket of that count
    const int k = static_cast<int>(it - counts.begin());
    for (std::int64_t q = left / *it; q > 0; --q) {
      pieces.push_back(CallPiece{k, offset, *it, *it});
      offset += *it;
      left -= *it;
    }
  }
  return pieces;
}

}  // namespace artune
