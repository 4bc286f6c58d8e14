// artune example: four ranks as threads of one process, each all-reducing its own gradients through its
// communicator (cpu backend). Plans come from an in-memory tuning run on a 4-GPU uniform topology (pass
// a decision table file as argv[1] to use `artune autotune`'s instead).
//
//   c++ -std=c++20 threads_cpu.cpp $(pkg-config --cflags --libs artune)

#include <artune/communicator.hpp>

#include <cstdio>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  artune::CommOptions options;
  options.topology = "uniform:4";
  if (argc > 1) options.table = argv[1];
  options.tune_sizes = {1024, 64 * 1024, 4 * 1024 * 1024};
  try {
    std::vector<artune::Communicator> comms = artune::Communicator::create_local(artune::BackendKind::kCpu, options, 4);
    const std::vector<std::int64_t> sizes = {1000, 25088, 1, 513};  // gradient tensors of a step
    std::vector<std::vector<float>> grads(4);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 4; ++r) {
      ranks.emplace_back([&, r] {
        for (std::int64_t n : sizes) {
          grads[r].assign(static_cast<std::size_t>(n), static_cast<float>(r + 1));
          comms[r].allreduce(grads[r].data(), grads[r].data(), n, artune::DataType::kFloat32, artune::ReduceOp::kAvg);
        }
      });
    }
    for (auto& t : ranks) t.join();
    std::printf("rank 3: %zu elements, first %.2f (expected 2.50), last plan %s\n", grads[3].size(), grads[3][0],
                comms[3].last_plan().label.c_str());
    std::printf("plan cache:\n%s", comms[0].dump_cache().c_str());
    return grads[3][0] == 2.5f ? 0 : 1;
  } catch (const artune::Error& e) {
    std::fprintf(stderr, "threads_cpu: %s\n", e.what());
    return 2;
  }
}
