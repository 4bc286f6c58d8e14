// The CUDA reduction and scale kernels' own bodies (reduce_lane / scale_lane in
// reduce_kernels.cu, compiled by nvcc), run lane by lane on the host over the
// grid launch_geometry picks, against the host reference loops bit for bit:
// every type × combine, aligned and misaligned pointers (head + vector body +
// tail, or scalar only), grids that cover the work once and capped grids that loop
// grid-stride, and guard elements around the range that must stay untouched.
// Built wherever CUDA is found; needs no GPU, so it runs in CI.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "artune/core/types.hpp"
#include "artune/executor/cuda/kernel_dispatch.hpp"
#include "artune/executor/cuda/reduce_kernels.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune/executor/harness/verification.hpp"

using namespace artune;
using namespace artune::cuda;

namespace {

constexpr std::int64_t kGuard = 8;  // elements before and after the range

// Values that exercise each type: signed fractions for the floats (products may overflow the
// 16-bit formats to inf, as on the GPU), any bit pattern for the integers (sums and products wrap).
void fill_random(std::vector<unsigned char>& buffer, DataType type, std::mt19937_64& rng) {
  const std::int64_t n = static_cast<std::int64_t>(buffer.size() / element_size(type));
  std::uniform_real_distribution<double> real(-40.0, 40.0);
  for (std::int64_t i = 0; i < n; ++i) {
    switch (type) {
      case DataType::kFloat32:
      case DataType::kFloat64:
      case DataType::kFloat16:
      case DataType::kBFloat16: store_from_double(buffer.data(), type, i, real(rng)); break;
      default: {
        const std::uint64_t bits = rng();
        std::memcpy(buffer.data() + static_cast<std::size_t>(i) * element_size(type), &bits, element_size(type));
      }
    }
  }
}

ReduceOp reduce_op_of(KernelOp op) {
  switch (op) {
    case KernelOp::kSum: return ReduceOp::kSum;
    case KernelOp::kProd: return ReduceOp::kProd;
    case KernelOp::kMin: return ReduceOp::kMin;
    case KernelOp::kMax: return ReduceOp::kMax;
  }
  return ReduceOp::kSum;
}

// Element offsets into 16-byte aligned storage: equal offsets vectorise (after a head when non-zero),
// different ones run scalar.
struct Shape {
  std::int64_t count;
  std::int64_t dst_shift;
  std::int64_t src_shift;
  int sm_count;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (std::int64_t count : {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 257, 1000, 4099, 70001}) {
    for (std::int64_t dst_shift : {0, 1, 3}) {
      for (std::int64_t src_shift : {0, 1, 3}) {
        // One SM caps the grid at kBlocksPerSm blocks, so large counts loop grid-stride; 132 (H100) does not.
        for (int sms : {1, 132}) out.push_back({count, dst_shift, src_shift, sms});
      }
    }
  }
  return out;
}

// A buffer of `count` elements at element offset `shift` from a 16-byte boundary, with guards.
struct Region {
  std::vector<unsigned char> storage;
  std::size_t offset = 0;  // bytes to the first element of the range
  unsigned char* at() { return storage.data() + offset; }
};

Region make_region(DataType type, std::int64_t count, std::int64_t shift, std::mt19937_64& rng) {
  const std::size_t es = element_size(type);
  Region r;
  r.storage.resize(static_cast<std::size_t>(count + 2 * kGuard + 2) * es + 2 * kVectorBytes);
  fill_random(r.storage, type, rng);
  const auto base = reinterpret_cast<std::uintptr_t>(r.storage.data());
  const std::size_t aligned = (kVectorBytes - base % kVectorBytes) % kVectorBytes;
  // kGuard·es is a multiple of 16 for every type (8 elements of ≥ 2 bytes) except uint8: pad it to 16.
  r.offset = aligned + 16 * ((kGuard * es + 15) / 16) + static_cast<std::size_t>(shift) * es;
  return r;
}

}  // namespace

TEST_CASE("cuda_kernels_host.reduce_bodies_match_the_host_reference") {
  std::mt19937_64 rng(2026);
  int runs = 0, vectorised = 0, peeled = 0, grid_stride = 0;
  for (DataType type : all_data_types()) {
    for (KernelOp op : {KernelOp::kSum, KernelOp::kProd, KernelOp::kMin, KernelOp::kMax}) {
      for (const Shape& s : shapes()) {
        CAPTURE(to_string(type));
        const std::string combine = to_string(op);
        CAPTURE(combine);
        CAPTURE(s.count);
        CAPTURE(s.dst_shift);
        CAPTURE(s.src_shift);
        CAPTURE(s.sm_count);
        Region dst = make_region(type, s.count, s.dst_shift, rng);
        Region src = make_region(type, s.count, s.src_shift, rng);
        const std::vector<unsigned char> src_before = src.storage;
        std::vector<unsigned char> expected = dst.storage;
        reduce_into(expected.data() + dst.offset, src.at(), s.count, type, reduce_op_of(op));

        const LaunchGeometry g = launch_geometry(s.count, type, reinterpret_cast<std::uintptr_t>(dst.at()),
                                                 reinterpret_cast<std::uintptr_t>(src.at()), s.sm_count);
        REQUIRE(run_reduce_on_host(reduce_kernel_id(type, op), dst.at(), src.at(), g) == cudaSuccess);
        // Bit for bit over the whole storage: the range reduced, the guards and the source untouched.
        REQUIRE(std::memcmp(dst.storage.data(), expected.data(), expected.size()) == 0);
        REQUIRE(src.storage == src_before);
        ++runs;
        vectorised += g.vector_count > 0;
        peeled += g.vector_count > 0 && g.head > 0;
        grid_stride +=
            static_cast<std::int64_t>(g.blocks) * g.threads < g.head + g.vector_count + (g.count - g.tail_begin);
      }
    }
  }
  // The shapes reached every path: vector body with and without a head, scalar only, grids that loop.
  CHECK(runs == 7 * 4 * 15 * 18);
  CHECK(vectorised > 0);
  CHECK(peeled > 0);
  CHECK(grid_stride > 0);
}

TEST_CASE("cuda_kernels_host.scale_bodies_match_the_host_reference") {
  std::mt19937_64 rng(11);
  for (DataType type : all_data_types()) {
    for (const Shape& s : shapes()) {
      if (s.src_shift != 0) continue;  // one operand
      for (int divisor : {1, 3, 8, 256}) {
        CAPTURE(to_string(type));
        CAPTURE(s.count);
        CAPTURE(s.dst_shift);
        CAPTURE(s.sm_count);
        CAPTURE(divisor);
        Region dst = make_region(type, s.count, s.dst_shift, rng);
        std::vector<unsigned char> expected = dst.storage;
        scale_down(expected.data() + dst.offset, s.count, type, divisor);
        const auto p = reinterpret_cast<std::uintptr_t>(dst.at());
        const LaunchGeometry g = launch_geometry(s.count, type, p, p, s.sm_count);
        REQUIRE(run_scale_on_host(scale_kernel_id(type), dst.at(), divisor, g) == cudaSuccess);
        REQUIRE(std::memcmp(dst.storage.data(), expected.data(), expected.size()) == 0);
      }
    }
  }
}

TEST_CASE("cuda_kernels_host.bad_ids_are_refused") {
  std::vector<float> a(4), b(4);
  const LaunchGeometry g = launch_geometry(4, DataType::kFloat32, 0, 0, 1);
  CHECK(run_reduce_on_host(-1, a.data(), b.data(), g) == cudaErrorInvalidValue);
  CHECK(run_reduce_on_host(kReduceKernelCount, a.data(), b.data(), g) == cudaErrorInvalidValue);
  CHECK(run_scale_on_host(kKernelTypes, a.data(), 2, g) == cudaErrorInvalidValue);
  CHECK(run_scale_on_host(scale_kernel_id(DataType::kFloat32), a.data(), 0, g) == cudaErrorInvalidValue);
}
