// Host-side dispatch of the CUDA reduction kernels: the (type, op) → kernel
// table, launch geometry (every element covered exactly once by the vector
// body and the tail, whatever the alignment and grid cap) and the mapping to
// NCCL's enums. Pure host code: runs on every machine.

#include <doctest/doctest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "artune_config.hpp"
#include "artune/core/error.hpp"
#include "artune/core/types.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/backend_factory.hpp"
#include "artune/executor/cuda/kernel_dispatch.hpp"
#if ARTUNE_HAVE_CUDA_BACKEND
#include "artune/executor/cuda/cuda_backend.hpp"
#include "artune/executor/cuda/cuda_check.hpp"
#endif

#if defined(ARTUNE_HAVE_NCCL)
#include <nccl.h>
#endif

using namespace artune;
using namespace artune::cuda;

TEST_CASE("cuda_dispatch.every_type_and_op_has_a_kernel") {
  std::set<int> ids;
  for (DataType t : all_data_types()) {
    for (ReduceOp op : all_reduce_ops()) {
      CAPTURE(to_string(t));
      CAPTURE(to_string(op));
      const ReduceKernel k = select_reduce_kernel(t, op);
      CHECK(k.type == t);
      CHECK(k.id >= 0);
      CHECK(k.id < kReduceKernelCount);
      CHECK(k.id == reduce_kernel_id(t, k.combine));
      CHECK(k.vector_width * static_cast<int>(element_size(t)) == kVectorBytes);
      CHECK(k.scale_after == (op == ReduceOp::kAvg));
      if (op != ReduceOp::kAvg) ids.insert(k.id);
    }
  }
  // 7 types × 4 combines, all distinct: the table is dense.
  CHECK(ids.size() == static_cast<std::size_t>(kReduceKernelCount));
  CHECK(all_data_types().size() == static_cast<std::size_t>(kKernelTypes));
}

TEST_CASE("cuda_dispatch.combines") {
  CHECK(combine_of(ReduceOp::kSum) == KernelOp::kSum);
  CHECK(combine_of(ReduceOp::kProd) == KernelOp::kProd);
  CHECK(combine_of(ReduceOp::kMin) == KernelOp::kMin);
  CHECK(combine_of(ReduceOp::kMax) == KernelOp::kMax);
  CHECK(combine_of(ReduceOp::kAvg) == KernelOp::kSum);
  CHECK(select_reduce_kernel(DataType::kFloat32, ReduceOp::kAvg).id ==
        select_reduce_kernel(DataType::kFloat32, ReduceOp::kSum).id);
  CHECK(reduce_kernel_id(DataType::kFloat32, KernelOp::kSum) == 0);
  CHECK(reduce_kernel_id(DataType::kUInt8, KernelOp::kMax) == kReduceKernelCount - 1);
  std::set<int> scale_ids;
  for (DataType t : all_data_types()) scale_ids.insert(scale_kernel_id(t));
  CHECK(scale_ids.size() == static_cast<std::size_t>(kKernelTypes));
  CHECK(*scale_ids.rbegin() == kKernelTypes - 1);
  CHECK(std::string(to_string(KernelOp::kMin)) == "min");
}

TEST_CASE("cuda_dispatch.vector_widths") {
  CHECK(vector_width(DataType::kFloat32) == 4);
  CHECK(vector_width(DataType::kFloat64) == 2);
  CHECK(vector_width(DataType::kFloat16) == 8);
  CHECK(vector_width(DataType::kBFloat16) == 8);
  CHECK(vector_width(DataType::kInt32) == 4);
  CHECK(vector_width(DataType::kInt64) == 2);
  CHECK(vector_width(DataType::kUInt8) == 16);
}

TEST_CASE("cuda_dispatch.geometry_shapes") {
  SUBCASE("empty launches nothing") {
    const LaunchGeometry g = launch_geometry(0, DataType::kFloat32, 0x1000, 0x2000, 132);
    CHECK(g.blocks == 0);
  }
  SUBCASE("aligned float uses 128-bit accesses") {
    const LaunchGeometry g = launch_geometry(1003, DataType::kFloat32, 0x1000, 0x2000, 132);
    CHECK(g.vector_width == 4);
    CHECK(g.vector_count == 250);
    CHECK(g.tail_begin == 1000);
    CHECK(g.blocks == 1);  // 250 + 3 items fit one block of 512
    CHECK(g.threads == kThreadsPerBlock);
  }
  SUBCASE("operands at the same offset from a 16-byte boundary peel a scalar head") {
    const LaunchGeometry g = launch_geometry(1003, DataType::kFloat32, 0x1004, 0x2004, 132);
    CHECK(g.vector_width == 4);
    CHECK(g.head == 3);  // 0x1004 + 3·4 = 0x1010
    CHECK(g.vector_count == 250);
    CHECK(g.tail_begin == 1003);  // 3 + 1000: no tail
  }
  SUBCASE("operands at different offsets fall back to scalar") {
    const LaunchGeometry g = launch_geometry(1003, DataType::kFloat32, 0x1000, 0x2004, 132);
    CHECK(g.vector_width == 1);
    CHECK(g.vector_count == 0);
    CHECK(g.tail_begin == 0);
    CHECK(g.blocks == 2);  // 1003 items / 512 threads
  }
  SUBCASE("large counts cap the grid at kBlocksPerSm per SM") {
    const LaunchGeometry g = launch_geometry(std::int64_t{1} << 30, DataType::kFloat16, 0, 0, 132);
    CHECK(g.blocks == 132 * kBlocksPerSm);
    CHECK(g.vector_count == (std::int64_t{1} << 30) / 8);
  }
  SUBCASE("a bad SM count still launches") {
    const LaunchGeometry g = launch_geometry(std::int64_t{1} << 20, DataType::kInt64, 0, 0, 0);
    CHECK(g.blocks == kBlocksPerSm);
  }
}

// Replays the kernels' index arithmetic (grid-stride head, vector body, then tail) and checks
// that every element is touched exactly once and every vector access is 16-byte aligned.
static void check_coverage(std::int64_t count, DataType type, std::uintptr_t dst, std::uintptr_t src, int sms) {
  const LaunchGeometry g = launch_geometry(count, type, dst, src, sms);
  std::vector<int> touched(static_cast<std::size_t>(count), 0);
  const std::int64_t stride = static_cast<std::int64_t>(g.blocks) * g.threads;
  for (std::int64_t thread = 0; thread < stride; ++thread) {
    for (std::int64_t i = thread; i < g.head; i += stride) ++touched[static_cast<std::size_t>(i)];
    for (std::int64_t k = thread; k < g.vector_count; k += stride) {
      for (int j = 0; j < g.vector_width; ++j) ++touched[static_cast<std::size_t>(g.head + k * g.vector_width + j)];
    }
    for (std::int64_t i = g.tail_begin + thread; i < g.count; i += stride) ++touched[static_cast<std::size_t>(i)];
  }
  const auto es = static_cast<std::uintptr_t>(element_size(type));
  if (g.vector_count > 0) {
    CHECK((dst + static_cast<std::uintptr_t>(g.head) * es) % kVectorBytes == 0);
    CHECK((src + static_cast<std::uintptr_t>(g.head) * es) % kVectorBytes == 0);
  }
  for (std::int64_t i = 0; i < count; ++i) {
    if (touched[static_cast<std::size_t>(i)] != 1) {
      FAIL("element " << i << " of " << count << " touched " << touched[static_cast<std::size_t>(i)] << " times");
    }
  }
  if (count > 0) CHECK(g.blocks >= 1);
}

TEST_CASE("cuda_dispatch.grid_is_capped_by_occupancy") {
  // 1 GiB of float on 132 SMs: the grid is one wave of the kernel's resident blocks as the backend reads
  // them from the occupancy API (with 40–46 registers per thread, 2 or 3 blocks of 512 fit an SM's 64 K
  // registers), not a fixed 4 per SM.
  const std::int64_t count = std::int64_t{1} << 28;
  CHECK(launch_geometry(count, DataType::kFloat32, 0x1000, 0x2000, 132, 2).blocks == 264);
  CHECK(launch_geometry(count, DataType::kFloat32, 0x1000, 0x2000, 132, 3).blocks == 396);
  CHECK(launch_geometry(count, DataType::kFloat32, 0x1000, 0x2000, 132).blocks == 132 * kBlocksPerSm);
  CHECK(launch_geometry(count, DataType::kFloat32, 0x1000, 0x2000, 132, 0).blocks == 132);  // never 0 blocks
  CHECK(launch_geometry(1003, DataType::kFloat32, 0x1000, 0x2000, 132, 2).blocks == 1);     // small: as needed
}

TEST_CASE("cuda_dispatch.geometry_covers_every_element_once") {
  for (DataType t : all_data_types()) {
    CAPTURE(to_string(t));
    for (std::int64_t count : {1, 2, 7, 15, 16, 17, 513, 4099, 100003}) {
      CAPTURE(count);
      check_coverage(count, t, 0x10000, 0x20000, 1);    // aligned, grid capped at 4 blocks
      check_coverage(count, t, 0x10000, 0x20002, 1);    // misaligned source
      check_coverage(count, t, 0x10000, 0x20000, 200);  // uncapped grid
    }
  }
}

TEST_CASE("cuda_dispatch.geometry_on_sub_buffer_offsets") {
  // Plan regions start at element offsets inside 256-byte aligned allocations (cudaMalloc) or
  // page-aligned pinned memory: the 128-bit body is legal only on 16-byte aligned addresses, which a
  // common head reaches when both regions start at the same element offset; every element is still
  // covered once when they do not.
  const std::uintptr_t dst_base = 0x7f0000000000;  // like a cudaMalloc pointer
  const std::uintptr_t src_base = 0x7f0000100000;
  for (DataType t : all_data_types()) {
    CAPTURE(to_string(t));
    const auto es = static_cast<std::uintptr_t>(element_size(t));
    const int width = vector_width(t);
    for (int dst_off = 0; dst_off <= width; ++dst_off) {
      for (int src_off = 0; src_off <= width; ++src_off) {
        CAPTURE(dst_off);
        CAPTURE(src_off);
        const std::uintptr_t dst = dst_base + static_cast<std::uintptr_t>(dst_off) * es;
        const std::uintptr_t src = src_base + static_cast<std::uintptr_t>(src_off) * es;
        // Vectorised when both sit at the same offset from a 16-byte boundary (the head aligns both).
        const bool same_phase = dst % kVectorBytes == src % kVectorBytes;
        const std::int64_t head = same_phase ? (width - dst_off % width) % width : 0;
        const LaunchGeometry g = launch_geometry(1001, t, dst, src, 132);
        CHECK(g.vector_width == (same_phase ? width : 1));
        CHECK(g.head == head);
        CHECK(g.tail_begin == (same_phase ? head + (1001 - head) / width * width : 0));
        check_coverage(1001, t, dst, src, 1);
      }
    }
  }
}

TEST_CASE("cuda_dispatch.geometry_of_huge_counts") {
  // 2^40 bytes of uint8 (more than any GPU holds): 64-bit counts, the grid capped, nothing wraps.
  const std::int64_t count = std::int64_t{1} << 40;
  const LaunchGeometry g = launch_geometry(count, DataType::kUInt8, 0x1000, 0x2000, 132);
  CHECK(g.vector_count == count / 16);
  CHECK(g.tail_begin == count);
  CHECK(g.blocks == 132 * kBlocksPerSm);
  const LaunchGeometry odd = launch_geometry(count + 7, DataType::kFloat64, 0x1000, 0x2008, 132);
  CHECK(odd.vector_width == 1);
  CHECK(odd.vector_count == 0);
  CHECK(odd.blocks == 132 * kBlocksPerSm);
}

TEST_CASE("cuda_dispatch.nccl_enum_values") {
  CHECK(nccl_data_type_code(DataType::kUInt8) == 1);
  CHECK(nccl_data_type_code(DataType::kInt32) == 2);
  CHECK(nccl_data_type_code(DataType::kInt64) == 4);
  CHECK(nccl_data_type_code(DataType::kFloat16) == 6);
  CHECK(nccl_data_type_code(DataType::kFloat32) == 7);
  CHECK(nccl_data_type_code(DataType::kFloat64) == 8);
  CHECK(nccl_data_type_code(DataType::kBFloat16) == 9);
  CHECK(nccl_red_op_code(ReduceOp::kSum) == 0);
  CHECK(nccl_red_op_code(ReduceOp::kProd) == 1);
  CHECK(nccl_red_op_code(ReduceOp::kMax) == 2);
  CHECK(nccl_red_op_code(ReduceOp::kMin) == 3);
  CHECK(nccl_red_op_code(ReduceOp::kAvg) == 4);
#if defined(ARTUNE_HAVE_NCCL)
  // Built against nccl.h: the codes are the library's own enumerators.
  CHECK(nccl_data_type_code(DataType::kFloat32) == ncclFloat32);
  CHECK(nccl_data_type_code(DataType::kFloat16) == ncclFloat16);
  CHECK(nccl_data_type_code(DataType::kBFloat16) == ncclBfloat16);
  CHECK(nccl_data_type_code(DataType::kFloat64) == ncclFloat64);
  CHECK(nccl_data_type_code(DataType::kInt32) == ncclInt32);
  CHECK(nccl_data_type_code(DataType::kInt64) == ncclInt64);
  CHECK(nccl_data_type_code(DataType::kUInt8) == ncclUint8);
  CHECK(nccl_red_op_code(ReduceOp::kAvg) == ncclAvg);
  CHECK(nccl_red_op_code(ReduceOp::kMin) == ncclMin);
#endif
}

TEST_CASE("cuda_dispatch.backends_refuse_cleanly_without_a_gpu") {
#if ARTUNE_HAVE_CUDA_BACKEND
  if (cuda_device_count() > 0) {
    MESSAGE("a GPU is present: the refusal path is not reachable here");
    return;
  }
  CHECK_THROWS_WITH_AS(make_backend(BackendKind::kCuda, BackendOptions{}), "no CUDA device available", Unsupported);
#if ARTUNE_HAVE_NCCL_BACKEND
  // Checked before MPI is touched, so this works outside mpirun too.
  CHECK_THROWS_WITH_AS(make_backend(BackendKind::kNccl, BackendOptions{}), "no CUDA device available", Unsupported);
#endif
#else
  CHECK_THROWS_AS(make_backend(BackendKind::kCuda, BackendOptions{}), Unsupported);
  CHECK_THROWS_AS(make_backend(BackendKind::kNccl, BackendOptions{}), Unsupported);
#endif
}

#if ARTUNE_HAVE_CUDA_BACKEND
TEST_CASE("cuda_dispatch.stream_query_results") {
  // Polling: done, still running (not an error), or a real failure named after the call.
  CHECK(finished(cudaSuccess, "cudaStreamQuery(stream)"));
  CHECK_FALSE(finished(cudaErrorNotReady, "cudaStreamQuery(stream)"));
  CHECK_THROWS_WITH_AS(finished(cudaErrorIllegalAddress, "cudaStreamQuery(stream)"),
                       doctest::Contains("cudaStreamQuery(stream): "), BackendFailure);
  CHECK_THROWS_WITH_AS(finished(cudaErrorIllegalAddress, "q"), doctest::Contains("(cudaErrorIllegalAddress)"),
                       BackendFailure);
}

TEST_CASE("cuda_dispatch.device_query_classification") {
  // Only "no device" (or no driver installed at all) means no GPU; everything else is an error to report.
  CHECK(classify_device_query(cudaSuccess, 13000) == DeviceQuery::kDevices);
  CHECK(classify_device_query(cudaErrorNoDevice, 13000) == DeviceQuery::kNoDevice);
  CHECK(classify_device_query(cudaErrorNoDevice, 0) == DeviceQuery::kNoDevice);
  CHECK(classify_device_query(cudaErrorInsufficientDriver, 0) == DeviceQuery::kNoDevice);   // libcuda absent
  CHECK(classify_device_query(cudaErrorStubLibrary, 0) == DeviceQuery::kNoDevice);          // only the stub
  CHECK(classify_device_query(cudaErrorInsufficientDriver, 12020) == DeviceQuery::kError);  // driver too old
  CHECK(classify_device_query(cudaErrorStubLibrary, 12020) == DeviceQuery::kError);
  CHECK(classify_device_query(cudaErrorInitializationError, 13000) == DeviceQuery::kError);
  CHECK(classify_device_query(cudaErrorSystemDriverMismatch, 13000) == DeviceQuery::kError);
  CHECK(classify_device_query(cudaErrorCompatNotSupportedOnDevice, 13000) == DeviceQuery::kError);
  CHECK(classify_device_query(cudaErrorDevicesUnavailable, 13000) == DeviceQuery::kError);
  CHECK(classify_device_query(cudaErrorOperatingSystem, 13000) == DeviceQuery::kError);
  const std::string text = device_query_error(cudaErrorInsufficientDriver, 12020, 13000);
  CHECK(text.find("cudaGetDeviceCount: ") == 0);
  CHECK(text.find("(cudaErrorInsufficientDriver)") != std::string::npos);
  CHECK(text.find("CUDA driver 12.2, runtime 13.0") != std::string::npos);
  CHECK(device_query_error(cudaErrorInsufficientDriver, 0, 13000).find("CUDA driver none") != std::string::npos);
  // This machine's own answer is one of the first two: either GPUs or none, never a thrown error here
  // unless the driver is really broken (which must then fail this test, not skip it).
  CHECK_NOTHROW(cuda_device_count());
}

TEST_CASE("cuda_dispatch.cli_exits_2_without_a_gpu") {
  const char* bin = std::getenv("ARTUNE_BIN");
  if (bin == nullptr || cuda_device_count() > 0) {
    MESSAGE("needs ARTUNE_BIN and a machine without a GPU");
    return;
  }
  for (const char* backend : {"cuda", "nccl"}) {
    CAPTURE(backend);
    const std::string cmd =
        std::string("'") + bin + "' run -t uniform:2 -s xring --backend " + backend + " -b 1K -e 1K 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string out;
    std::array<char, 256> buf{};
    while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
    const int status = pclose(pipe);
    CAPTURE(out);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    CHECK(out.find("no CUDA device available") != std::string::npos);
  }
}
#endif
