// artune::Communicator on the cpu backend: caller buffers in and out of place, every type and op, odd
// counts, plans from a spec, a table file and in-memory tuning, the bounded plan cache with shared
// workers, and ranks that do not arrive (throw, stop) or disagree.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "artune/communicator.hpp"
#include "artune_config.hpp"
#if ARTUNE_HAVE_CUDA_BACKEND
#include "artune/executor/cuda/cuda_backend.hpp"
#endif
#include "artune/comm/call_split.hpp"
#include "tests/executor/comm_threads.hpp"
#include "artune/executor/harness/verification.hpp"
#include "tests/test_support.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/tuner/decision_table.hpp"
#include "artune/tuner/search.hpp"

using namespace artune;
using artune_test::code_of;
using artune_test::message_of;
using artune_test::on_threads;
using artune_test::require_no_errors;

namespace {

// All-reduces nccl-tests inputs of `count` elements on every rank (out of place or in place) `calls` times
// and returns the mismatching elements over all ranks; out of place also checks the send buffers are intact.
std::int64_t wrong_elements(std::vector<Communicator>& comms, std::int64_t count, DataType type, ReduceOp op,
                            bool in_place, int calls = 2) {
  const int ranks = static_cast<int>(comms.size());
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(type);
  std::vector<std::vector<std::byte>> send(comms.size(), std::vector<std::byte>(bytes + 1));
  std::vector<std::vector<std::byte>> recv(comms.size(), std::vector<std::byte>(bytes + 1));
  std::vector<std::byte> expected(bytes + 1);
  std::atomic<std::int64_t> wrong{0};
  for (int it = 0; it < calls; ++it) {
    fill_expected(expected.data(), type, op, ranks, 0, count, it);
    for (int r = 0; r < ranks; ++r)
      fill_input(send[static_cast<std::size_t>(r)].data(), type, op, ranks, r, 0, count, it);
    const auto errors = on_threads(comms, [&](int r) {
      auto& s = send[static_cast<std::size_t>(r)];
      auto& d = recv[static_cast<std::size_t>(r)];
      if (in_place) {
        comms[static_cast<std::size_t>(r)].allreduce(s.data(), s.data(), count, type, op);
        wrong += count_mismatches(s.data(), expected.data(), type, op, count);
      } else {
        comms[static_cast<std::size_t>(r)].allreduce(s.data(), d.data(), count, type, op);
        wrong += count_mismatches(d.data(), expected.data(), type, op, count);
        std::vector<std::byte> input(bytes + 1);
        fill_input(input.data(), type, op, ranks, r, 0, count, it);
        if (std::memcmp(input.data(), s.data(), bytes) != 0) wrong += 1000000;  // the send buffer was written
      }
    });
    require_no_errors(errors);
  }
  return wrong.load();
}

/// CUDA devices this process sees: 0 in a build without CUDA or on a machine without a GPU.
int cuda_devices() {
#if ARTUNE_HAVE_CUDA_BACKEND
  return cuda_device_count();
#else
  return 0;
#endif
}

CommOptions spec_options(const std::string& topology, const std::string& spec) {
  CommOptions o;
  o.topology = topology;
  o.spec = spec;
  o.timeout_s = 30;
  return o;
}

}  // namespace

TEST_CASE("communicator.cpu_every_type_and_op_in_and_out_of_place") {
  for (const char* spec : {"xring", "rechd"}) {
    auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:3", spec), 3);
    REQUIRE(comms.size() == 3);
    CHECK(comms[2].rank() == 2);
    CHECK(comms[0].size() == 3);
    for (DataType type : all_data_types()) {
      for (ReduceOp op : all_reduce_ops()) {
        if (max_verifiable_ranks(type, op) < 3) continue;
        for (std::int64_t count : {1, 2, 13, 1031}) {
          for (bool in_place : {true, false}) {
            INFO(spec << " " << to_string(type) << " " << to_string(op) << " count " << count << " in place "
                      << in_place);
            CHECK(wrong_elements(comms, count, type, op, in_place) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("communicator.cpu_helper_devices_share_the_workers") {
  // pscpu gathers on a CPU helper: the plan has a device more than ranks, and its worker is the group's.
  auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:4", "pscpu"), 4);
  CHECK(wrong_elements(comms, 1000, DataType::kFloat32, ReduceOp::kSum, false) == 0);
  CHECK(comms[0].last_plan().devices == 5);
  CHECK(comms[0].worker_threads() == 5);
}

TEST_CASE("communicator.split_call_into_bucket_plans") {
  const std::vector<std::uint64_t> buckets = {1024, 2048, 4096, 8192, 16384};
  using P = CallPiece;
  // Small calls: one run of the smallest bucket that holds them, padded unless the count is the bucket's.
  CHECK(split_call(buckets, 4096, 0, 4).empty());
  CHECK(split_call(buckets, 4096, 1, 4) == std::vector<P>{{0, 0, 1, 256}});
  CHECK(split_call(buckets, 4096, 256, 4) == std::vector<P>{{0, 0, 256, 256}});
  CHECK(split_call(buckets, 4096, 257, 4) == std::vector<P>{{1, 0, 257, 512}});
  CHECK(split_call(buckets, 4096, 1000, 4) == std::vector<P>{{2, 0, 1000, 1024}});  // 4000 B <= pad limit
  // Larger ones: the largest fitting bucket on the caller's buffer, the last <= pad limit bytes padded.
  CHECK(split_call(buckets, 4096, 1025, 4) == std::vector<P>{{2, 0, 1024, 1024}, {0, 1024, 1, 256}});
  CHECK(split_call(buckets, 4096, 3000, 4) == std::vector<P>{{3, 0, 2048, 2048}, {2, 2048, 952, 1024}});
  // Beyond the largest bucket: as many runs of it as fit.
  CHECK(split_call(buckets, 4096, 3 * 4096 + 5, 4) ==
        std::vector<P>{{4, 0, 4096, 4096}, {4, 4096, 4096, 4096}, {4, 8192, 4096, 4096}, {0, 12288, 5, 256}});
  // A pad limit beyond the largest bucket still splits what does not fit in it.
  CHECK(split_call(buckets, 1 << 30, 5000, 4) == std::vector<P>{{4, 0, 4096, 4096}, {2, 4096, 904, 1024}});
  // Wide elements: buckets with the same count collapse to the first.
  CHECK(split_call(std::vector<std::uint64_t>{4, 8, 16}, 0, 3, 8) == std::vector<P>{{2, 0, 2, 2}, {0, 2, 1, 1}});
  CHECK(bucket_count(4, 8) == 1);
  CHECK(bucket_count(12, 8) == 2);
  CHECK_THROWS_AS(split_call(std::vector<std::uint64_t>{}, 0, 1, 4), InvalidInput);
  CHECK_THROWS_AS(split_call(std::vector<std::uint64_t>{8, 4}, 0, 1, 4), InvalidInput);
  // Every split covers the call exactly, in order, within the buckets' counts.
  for (std::int64_t n : {1, 255, 256, 257, 4095, 4096, 4097, 20000, 123457}) {
    std::int64_t next = 0;
    for (const P& p : split_call(buckets, 4096, n, 4)) {
      CHECK(p.offset == next);
      CHECK(p.count <= p.compiled);
      CHECK(p.compiled == bucket_count(buckets[static_cast<std::size_t>(p.bucket)], 4));
      next += p.count;
    }
    CHECK(next == n);
  }
}

TEST_CASE("communicator.cpu_cache_is_bounded_and_workers_are_shared") {
  CommOptions o = spec_options("uniform:4", "xring");
  o.cache_capacity = 3;
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 4);
  // 50 sizes (4 to 200 B): one plan per size bucket (4, 8, 16 … 256 B), not per size; before, a prepared cpu
  // backend per size kept 4 threads each (200); now the group has 4.
  for (std::int64_t count = 1; count <= 50; ++count) {
    CHECK(wrong_elements(comms, count, DataType::kInt32, ReduceOp::kSum, true, 1) == 0);
  }
  CHECK(comms[0].worker_threads() == 4);
  CHECK(comms[2].compiled_plans() == 7);
  auto plans = comms[1].cached_plans();
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].bucket_bytes == 256);  // most recent first
  CHECK(plans[0].count == 50);          // re-targeted to the last call's count
  CHECK(plans[0].calls == 18);  // counts 33 … 50
  CHECK(plans[1].bucket_bytes == 128);
  CHECK(plans[1].count == 32);
  CHECK(plans[1].calls == 16);
  CHECK(plans[2].bucket_bytes == 64);
  // Reusing a cached bucket moves it to the front and counts its calls; a new type is a new plan.
  CHECK(wrong_elements(comms, 48, DataType::kInt32, ReduceOp::kSum, true, 1) == 0);
  CHECK(wrong_elements(comms, 48, DataType::kFloat64, ReduceOp::kMax, true, 1) == 0);
  CHECK(comms[2].compiled_plans() == 8);
  plans = comms[1].cached_plans();
  REQUIRE(plans.size() == 3);
  CHECK(plans[0].bucket_bytes == 512);
  CHECK(plans[0].count == 48);
  CHECK(plans[0].type == DataType::kFloat64);
  CHECK(plans[0].op == ReduceOp::kMax);
  CHECK(plans[1].bucket_bytes == 256);
  CHECK(plans[1].calls == 19);
  CHECK(plans[2].bucket_bytes == 128);
  const PlanInfo last = comms[3].last_plan();
  CHECK(last.label == "xring");
  CHECK(last.range == -1);
  CHECK(last.bucket == 7);
  const std::string dump = comms[0].dump_cache();
  CHECK(dump.find("allreduce xring  spec  bucket 7 (512 B)  count 48 double max  devices 4  calls 1\n") == 0);
  CHECK(dump.find("allreduce xring  spec  bucket 6 (256 B)  count 48 int32 sum  devices 4  calls 19\n") !=
        std::string::npos);
}

TEST_CASE("communicator.cpu_resnet50_sizes_compile_one_plan_per_bucket") {
  // 200 different sizes: ResNet-50's 22 distinct tensor sizes, then neighbours of them (n - 1, n + 1, n + 2 …)
  // until there are 200, in the list's order, through one communicator: at most one plan per bucket (one type,
  // one op), exact sums (inputs are small integers).
  const auto doc = nlohmann::json::parse(
      artune_test::slurp(std::string(std::getenv("ARTUNE_SOURCE_ROOT")) + "/configs/fusion/resnet50.json"));
  std::vector<std::int64_t> sizes;
  for (const auto& t : doc.at("tensors")) {
    const auto n = t.at("elements").get<std::int64_t>();
    if (std::find(sizes.begin(), sizes.end(), n) == sizes.end()) sizes.push_back(n);
  }
  REQUIRE(sizes.size() == 22);
  const std::vector<std::int64_t> distinct = sizes;
  for (std::int64_t d = 1; sizes.size() < 200; ++d) {
    for (std::int64_t n : distinct) {
      for (std::int64_t m : {n - d, n + d}) {
        if (sizes.size() < 200 && m > 0 && std::find(sizes.begin(), sizes.end(), m) == sizes.end()) sizes.push_back(m);
      }
    }
  }
  CommOptions o;
  o.topology = "uniform:4";
  o.timeout_s = 60;
  o.cache_capacity = 1000;
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 4);
  std::vector<std::vector<float>> data(4);
  std::atomic<std::int64_t> wrong{0};
  const auto errors = on_threads(comms, [&](int r) {
    auto& v = data[static_cast<std::size_t>(r)];
    for (std::int64_t n : sizes) {
      v.resize(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>((i + r) % 7);
      comms[static_cast<std::size_t>(r)].allreduce(v.data(), v.data(), n, DataType::kFloat32, ReduceOp::kSum);
      for (std::int64_t i = 0; i < n; ++i) {
        // sum over ranks q of (i + q) % 7
        float expect = 0;
        for (int q = 0; q < 4; ++q) expect += static_cast<float>((i + q) % 7);
        if (v[static_cast<std::size_t>(i)] != expect) ++wrong;
      }
    }
  });
  require_no_errors(errors);
  CHECK(wrong.load() == 0);
  const auto buckets = comms[0].size_buckets();
  CHECK(comms[0].compiled_plans() <= buckets.size());
  // Exactly the buckets the splits name (the cpu backend re-targets: no pad limit), each compiled once.
  std::set<int> used;
  for (std::int64_t n : sizes) {
    for (const CallPiece& p : split_call(buckets, UINT64_MAX, n, 4)) used.insert(p.bucket);
  }
  CHECK(comms[0].retargeted_plans() > 0);
  CHECK(comms[0].compiled_plans() == used.size());
  CHECK(comms[0].cached_plans().size() == used.size());
  // One worker per plan device: the ranks, and the CPU sockets where a picked plan stages copies (the trees
  // family's picks at the largest buckets of uniform:4 stage through cpu0).
  int devices = 0;
  for (const PlanInfo& p : comms[0].cached_plans()) devices = std::max(devices, p.devices);
  CHECK(devices >= 4);
  CHECK(comms[0].worker_threads() == static_cast<std::size_t>(devices));
}

TEST_CASE("communicator.cpu_plans_from_a_table_file_and_from_tuning") {
  const Topology topo = load_topology("uniform:4");
  SearchOptions s;
  s.sizes = {1024, 1024 * 1024};
  const DecisionTable table = search(topo, s).table;
  artune_test::ScratchDir dir("artune-comm");
  const std::string path = (dir.path() / "table.json").string();
  write_decision_table(path, table);

  CommOptions from_file;
  from_file.topology = "uniform:4";
  from_file.table = path;
  CommOptions tuned;
  tuned.topology = "uniform:4";
  tuned.tune_sizes = s.sizes;
  tuned.profile = "nccl";  // the table's (SearchOptions' default); a cpu communicator would tune with "cpu"
  for (const CommOptions& o : {from_file, tuned}) {
    auto comms = Communicator::create_local(BackendKind::kCpu, o, 4);
    CHECK(comms[0].size_buckets() == s.sizes);
    // 7 floats: the 1 KiB bucket's plan re-targeted to 7; 64 Ki + 3 floats: the 1 MiB bucket's re-targeted;
    // 256 Ki + 3 floats: the 1 MiB bucket's on the first 256 Ki, then the 1 KiB one for the last 3.
    for (std::int64_t count : {7, 64 * 1024 + 3, 256 * 1024 + 3}) {
      CHECK(wrong_elements(comms, count, DataType::kFloat32, ReduceOp::kSum, false, 1) == 0);
      const PlanInfo p = comms[0].last_plan();
      const bool large = count == 64 * 1024 + 3;  // the others end with a run of the 1 KiB bucket
      const std::uint64_t bytes = large ? 1024 * 1024 : 1024;
      const TableRange& range = table.lookup(bytes);
      CHECK(p.label == range.plan.label());
      CHECK(p.bucket == (large ? 1 : 0));
      CHECK(p.bucket_bytes == bytes);
      CHECK(p.range == static_cast<int>(&range - table.ranges.data()));
      CHECK(p.min_bytes == range.min_bytes);
      CHECK(p.count == (count == 256 * 1024 + 3 ? 3 : count));
    }
    CHECK(comms[0].compiled_plans() == 2);
    const auto plans = comms[0].cached_plans();
    REQUIRE(plans.size() == 2);
    CHECK(plans[1].bucket == 1);
    CHECK(plans[1].count == 256 * 1024);
    CHECK(plans[1].label == table.lookup(1024 * 1024).plan.label());
    CHECK(plans[1].calls == 2);
    CHECK(plans[0].calls == 2);
    CHECK(plans[0].count == 3);
  }
  // A table of another topology is refused at creation.
  CommOptions other = from_file;
  other.topology = "uniform:8";
  CHECK_THROWS_AS(Communicator::create_local(BackendKind::kCpu, other, 8), InvalidInput);
}

TEST_CASE("communicator.cpu_rank_that_throws_ends_the_call_with_a_timeout") {
  CommOptions o = spec_options("uniform:4", "rechd");
  o.timeout_s = 0.5;
  auto comms = Communicator::create_local(BackendKind::kCpu, o, 4);
  std::vector<std::vector<float>> data(4, std::vector<float>(100, 1.0f));
  auto errors = on_threads(comms, [&](int r) {
    if (r == 2) throw std::runtime_error("rank 2 failed before its call");
    comms[static_cast<std::size_t>(r)].allreduce(data[r].data(), data[r].data(), 100, DataType::kFloat32,
                                                 ReduceOp::kSum);
  });
  CHECK(message_of(errors[2]) == "rank 2 failed before its call");
  for (int r : {0, 1, 3}) {
    INFO("rank " << r);
    REQUIRE(errors[static_cast<std::size_t>(r)]);
    CHECK(code_of(errors[static_cast<std::size_t>(r)]) == ErrorCode::kTimeout);
    CHECK(message_of(errors[static_cast<std::size_t>(r)]).find("did not call allreduce within 0.5 s") !=
          std::string::npos);
  }
  // The group is broken: later calls fail at once with the reason.
  errors = on_threads(comms, [&](int r) {
    comms[static_cast<std::size_t>(r)].allreduce(data[r].data(), data[r].data(), 100, DataType::kFloat32,
                                                 ReduceOp::kSum);
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    CHECK(code_of(e) == ErrorCode::kTimeout);
    CHECK(message_of(e).find("communicator is broken by an earlier failure") != std::string::npos);
  }
}

TEST_CASE("communicator.cpu_ranks_that_disagree_fail_together") {
  auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:2", "xring"), 2);
  std::vector<std::vector<float>> data(2, std::vector<float>(10, 1.0f));
  const auto errors = on_threads(comms, [&](int r) {
    comms[static_cast<std::size_t>(r)].allreduce(data[r].data(), data[r].data(), r == 0 ? 10 : 9, DataType::kFloat32,
                                                 ReduceOp::kSum);
  });
  for (const auto& e : errors) {
    REQUIRE(e);
    CHECK(code_of(e) == ErrorCode::kInvalidInput);
    CHECK(message_of(e) == "allreduce: rank 1 called with 9 x float sum but rank 0 with 10 x float sum");
  }
  // Invalid usage does not break the group.
  CHECK(wrong_elements(comms, 10, DataType::kFloat32, ReduceOp::kSum, true, 1) == 0);
}

TEST_CASE("communicator.invalid_usage") {
  auto comms = Communicator::create_local(BackendKind::kCpu, spec_options("uniform:1", "xring"), 1);
  std::vector<float> a(8, 2.0f);
  using artune_test::error_of;
  CHECK(error_of([&] { comms[0].allreduce(a.data(), a.data(), -1, DataType::kFloat32, ReduceOp::kSum); }) ==
        "allreduce: count -1 is negative");
  CHECK(error_of([&] { comms[0].allreduce(nullptr, a.data(), 4, DataType::kFloat32, ReduceOp::kSum); }) ==
        "allreduce: null buffer");
  CHECK(error_of([&] { comms[0].allreduce(a.data(), a.data() + 2, 4, DataType::kFloat32, ReduceOp::kSum); }) ==
        "allreduce: send and recv overlap without being the same buffer");
  int fake_stream = 0;
  CHECK(error_of([&] {
          comms[0].allreduce(a.data(), a.data(), 4, DataType::kFloat32, ReduceOp::kSum, &fake_stream);
        }) == "allreduce: a stream is for the cuda and nccl backends");
  CHECK(error_of([&] { (void)Communicator::create_local(BackendKind::kMpi, CommOptions{}, 2); }) ==
        "create_local: the mpi backend runs one rank per process (create_mpi / create_nccl)");
  CHECK(error_of([&] { (void)Communicator::create_local(BackendKind::kCpu, spec_options("uniform:4", "xring"), 3); }) ==
        "create_local: 3 ranks asked but the topology 'uniform:4' has 4 GPUs");
  // Without a GPU (or a CUDA build) the cuda backend says so at creation; with one it is created
  // (test_communicator_cuda runs it).
  if (cuda_devices() == 0) {
    CHECK_THROWS_AS((void)Communicator::create_local(BackendKind::kCuda, spec_options("uniform:2", "xring"), 2),
                    Unsupported);
  } else {
    CHECK(Communicator::create_local(BackendKind::kCuda, spec_options("uniform:2", "xring"), 2).size() == 2);
  }
  // One rank: the result is its own input; count 0 does nothing.
  comms[0].allreduce(a.data(), a.data(), 8, DataType::kFloat32, ReduceOp::kSum);
  CHECK(a[7] == 2.0f);
  comms[0].allreduce(a.data(), a.data(), 0, DataType::kFloat32, ReduceOp::kSum);
}
