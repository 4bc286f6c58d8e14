// The Communicator's speed (reported, never asserted). A plain program rather than Google Benchmark: two
// of its three figures need mpirun and process-wide counters (threads, peak memory).
//
//   mpirun -np N bench_communicator overhead [CALLS] [BYTES] [SPEC]
//       per-call time of CALLS float-sum all-reduces of BYTES (default 1000 x 4 KiB): MPI_Allreduce and the
//       communicator on the mpi backend, alternated over 3 rounds in the same job (median round; a round's
//       time is the slowest rank's), then the cpu communicator with N threads on rank 0 while the other
//       ranks sleep. Plans: SPEC, or tuned in memory on uniform:N.
//   bench_communicator large RANKS BYTES SPEC [ITERS] [PAD_LIMIT]
//       one plan (SPEC on uniform:RANKS), float sum of BYTES per rank: the median of ITERS runs of the cpu
//       backend on its own buffers (what `artune run` times) and of ITERS communicator calls on caller
//       buffers (persistent rank threads), alternated in 4 blocks.
//   bench_communicator resnet RANKS FILE [STEPS] [PAD_LIMIT]
//       200 different sizes from a configs/fusion list (its distinct tensor sizes, then neighbours of them)
//       through one cpu communicator per step, STEPS steps: time per step (the first compiles the plans),
//       peak threads of the process, peak RSS, plans compiled.
//   mpirun -np N bench_communicator allgather [CALLS] [BYTES]
//       per-call time of CALLS float all-gathers of BYTES per rank (default 1000 x 4 KiB): MPI_Allgather and
//       the communicator on the mpi backend (plans tuned in memory on uniform:N), alternated over 3 rounds
//       (median round; a round's time is the slowest rank's).
//   bench_communicator odd RANKS [CALLS] [SPEC]
//       float sums of odd counts (1 MiB + 4 B, 3 MiB - 4 B, 5,000,001 floats) and of the exact bucket
//       counts beside them on a cpu communicator of RANKS ranks (plans tuned in memory, or SPEC): process
//       CPU time (user + sys, every thread) and wall time per call, over CALLS calls after one warm-up; then
//       1000 floats every call against 1000 and 1001 alternately (one bucket re-targeted on every call).

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "artune/algorithms/builders.hpp"
#include "artune/communicator.hpp"
#include "artune/comm/call_split.hpp"
#include "artune/core/sizes.hpp"
#include "artune/executor/cpu/cpu_backend.hpp"
#include "artune/topology/io/io.hpp"

using namespace artune;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A field of /proc/self/status ("Threads", "VmHWM") as a number.
long proc_status(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::strtol(line.c_str() + key.size(), nullptr, 10);
  }
  return -1;
}

// Runs fn(rank) on one thread per rank and waits.
template <typename F>
void on_threads(int ranks, F&& fn) {
  std::vector<std::thread> t;
  for (int r = 0; r < ranks; ++r) t.emplace_back([&, r] { fn(r); });
  for (auto& x : t) x.join();
}

// Per-call seconds of `calls` cpu-communicator calls of `count` floats on every rank.
double cpu_per_call(std::vector<Communicator>& comms, std::int64_t count, int calls) {
  const int ranks = static_cast<int>(comms.size());
  std::vector<std::vector<float>> data(static_cast<std::size_t>(ranks),
                                       std::vector<float>(static_cast<std::size_t>(count), 1.0f));
  const auto t0 = Clock::now();
  on_threads(ranks, [&](int r) {
    for (int i = 0; i < calls; ++i)
      comms[r].allreduce(data[r].data(), data[r].data(), count, DataType::kFloat32, ReduceOp::kSum);
  });
  return seconds_since(t0) / calls;
}

// The MPI modes' common start: MPI_Init, this rank and the world size, CALLS (argv[2], default 1000) and
// the elements per rank of BYTES of floats (argv[3], default 4 KiB).
struct MpiRun {
  int rank = 0;
  int size = 1;
  int calls = 1000;
  std::int64_t count = 1024;
};

// The slowest rank's `local` (every rank calls it).
double slowest(double local) {
  double worst = 0;
  MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

MpiRun start_mpi_run(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MpiRun run;
  MPI_Comm_rank(MPI_COMM_WORLD, &run.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &run.size);
  if (argc > 2) run.calls = std::atoi(argv[2]);
  const std::int64_t bytes = argc > 3 ? static_cast<std::int64_t>(parse_size(argv[3], "BYTES")) : 4096;
  run.count = bytes / 4;
  return run;
}

int overhead(int argc, char** argv) {
  const MpiRun run = start_mpi_run(argc, argv);
  const int rank = run.rank;
  const int size = run.size;
  const int calls = run.calls;
  const std::int64_t count = run.count;
  CommOptions o;
  o.topology = fmt::format("uniform:{}", size);
  if (argc > 4) o.spec = argv[4];  // default: tuned in memory
  std::optional<Communicator> holder(Communicator::create_mpi(o));
  Communicator& comm = *holder;
  std::vector<float> data(static_cast<std::size_t>(count), 1.0f);
  auto mpi_round = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return slowest(seconds_since(t0)) / calls;
  };
  // What the mpi backend's engine does for one group op: the non-blocking collective, polled.
  auto impi_round = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) {
      MPI_Request req;
      MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
      for (int done = 0; !done;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) sched_yield();
      }
    }
    return slowest(seconds_since(t0)) / calls;
  };
  auto comm_round = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) comm.allreduce(data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
    return slowest(seconds_since(t0)) / calls;
  };
  (void)mpi_round();  // warm-up (and the communicator's plan compile)
  (void)comm_round();
  (void)impi_round();
  std::vector<double> mpi, ours, impi;
  for (int round = 0; round < 3; ++round) {
    mpi.push_back(mpi_round());
    ours.push_back(comm_round());
    impi.push_back(impi_round());
  }
  double cpu = 0;
  std::string cpu_plan;
  if (rank == 0) {
    auto comms = Communicator::create_local(BackendKind::kCpu, o, size);
    (void)cpu_per_call(comms, count, std::max(1, calls / 10));
    std::vector<double> rounds;
    for (int round = 0; round < 3; ++round) rounds.push_back(cpu_per_call(comms, count, calls));
    cpu = median(rounds);
    cpu_plan = comms[0].last_plan().label;
    int one = 1;
    for (int r = 1; r < size; ++r) MPI_Send(&one, 1, MPI_INT, r, 7, MPI_COMM_WORLD);
  } else {
    // Sleep rather than poll, so the cpu communicator's threads have the cores.
    MPI_Request req;
    int got = 0;
    MPI_Irecv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &req);
    for (int done = 0; !done;) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) usleep(2000);
    }
  }
  if (rank == 0) {
    const double m = median(mpi);
    const double c = median(ours);
    std::printf("overhead: %d ranks, %d calls of %lld B float sum (median of 3 rounds, per call)\n", size, calls,
                static_cast<long long>(count * 4));
    std::printf("  MPI_Allreduce              %8.2f us\n", m * 1e6);
    std::printf("  MPI_Iallreduce + MPI_Test  %8.2f us  (%.2fx MPI)\n", median(impi) * 1e6, median(impi) / m);
    std::printf("  communicator, mpi backend  %8.2f us  (%.2fx MPI)  plan %s\n", c * 1e6, c / m,
                comm.last_plan().label.c_str());
    std::printf("  communicator, cpu backend  %8.2f us  (%.2fx MPI)  plan %s, %d threads\n", cpu * 1e6, cpu / m,
                cpu_plan.c_str(), size);
  }
  holder.reset();  // its MPI communicators go before MPI does
  MPI_Finalize();
  return 0;
}

int allgather(int argc, char** argv) {
  const MpiRun run = start_mpi_run(argc, argv);
  const int rank = run.rank;
  const int size = run.size;
  const int calls = run.calls;
  const std::int64_t count = run.count;
  CommOptions o;
  o.topology = fmt::format("uniform:{}", size);
  std::optional<Communicator> holder(Communicator::create_mpi(o));
  Communicator& comm = *holder;
  std::vector<float> send(static_cast<std::size_t>(count), static_cast<float>(rank));
  std::vector<float> recv(static_cast<std::size_t>(count * size));
  auto mpi_round = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i)
      MPI_Allgather(send.data(), static_cast<int>(count), MPI_FLOAT, recv.data(), static_cast<int>(count), MPI_FLOAT,
                    MPI_COMM_WORLD);
    return slowest(seconds_since(t0)) / calls;
  };
  auto comm_round = [&] {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) comm.allgather(send.data(), recv.data(), count, DataType::kFloat32);
    return slowest(seconds_since(t0)) / calls;
  };
  (void)mpi_round();  // warm-up (and the communicator's tuning and plan compile)
  (void)comm_round();
  std::vector<double> mpi, ours;
  for (int round = 0; round < 3; ++round) {
    mpi.push_back(mpi_round());
    ours.push_back(comm_round());
  }
  bool right = true;
  for (int k = 0; k < size; ++k) right = right && recv[static_cast<std::size_t>(k * count)] == static_cast<float>(k);
  if (rank == 0) {
    const double m = median(mpi);
    const double c = median(ours);
    std::printf("allgather: %d ranks, %d calls of %lld B float per rank (median of 3 rounds, per call)%s\n", size,
                calls, static_cast<long long>(count * 4), right ? "" : "  WRONG RESULT");
    std::printf("  MPI_Allgather              %8.2f us\n", m * 1e6);
    std::printf("  communicator, mpi backend  %8.2f us  (%.2fx MPI)  plan %s\n", c * 1e6, c / m,
                comm.last_plan().label.c_str());
  }
  holder.reset();  // its MPI communicators go before MPI does
  MPI_Finalize();
  return 0;
}

int large(int argc, char** argv) {
  if (argc < 5) return 2;
  const int ranks = std::atoi(argv[2]);
  const auto bytes = static_cast<std::int64_t>(parse_size(argv[3], "BYTES"));
  const std::string spec = argv[4];
  const int iters = argc > 5 ? std::atoi(argv[5]) : 10;
  const std::int64_t count = bytes / 4;
  CommOptions o;
  o.topology = fmt::format("uniform:{}", ranks);
  o.spec = spec;
  if (argc > 6) o.pad_limit = parse_size(argv[6], "PAD_LIMIT");
  auto comms = Communicator::create_local(BackendKind::kCpu, o, ranks);
  const Topology topo = load_topology(o.topology);
  BuildOptions b;
  b.count = count;
  CpuBackend backend(BackendOptions{});
  backend.prepare(build_plan(topo, spec, b), DataType::kFloat32, ReduceOp::kSum);
  backend.fill_inputs(0);
  std::vector<std::vector<float>> data(static_cast<std::size_t>(ranks),
                                       std::vector<float>(static_cast<std::size_t>(count), 1.0f));
  // Per-call times of `n` communicator calls, taken on rank 0's thread; the rank threads live for all of them.
  auto comm_calls = [&](int n) {
    std::vector<double> times;
    on_threads(ranks, [&](int r) {
      for (int i = 0; i < n; ++i) {
        const auto t0 = Clock::now();
        comms[r].allreduce(data[r].data(), data[r].data(), count, DataType::kFloat32, ReduceOp::kSum);
        if (r == 0) times.push_back(seconds_since(t0));
      }
    });
    return times;
  };
  auto run_calls = [&](int n) {
    std::vector<double> times;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      backend.run();
      times.push_back(seconds_since(t0));
    }
    return times;
  };
  (void)comm_calls(1);
  (void)run_calls(1);
  // Alternated in 4 blocks, so that a change of machine load hits both alike.
  std::vector<double> ours, run;
  for (int block = 0; block < 4; ++block) {
    const int n = std::max(1, iters / 4);
    for (double t : run_calls(n)) run.push_back(t);
    for (double t : comm_calls(n)) ours.push_back(t);
  }
  const double r = median(run);
  const double c = median(ours);
  const auto pieces = split_call(comms[0].size_buckets(), o.pad_limit, count, 4);
  std::printf("large: %s on uniform:%d, %lld B float sum, median of %zu calls each\n", spec.c_str(), ranks,
              static_cast<long long>(bytes), run.size());
  std::printf("  cpu backend run() (artune run)   %10.1f us\n", r * 1e6);
  std::printf("  communicator on caller buffers   %10.1f us  (%+.1f%%; %zu bucket run(s)%s)\n", c * 1e6,
              (c / r - 1) * 100, pieces.size(), pieces.back().count != pieces.back().compiled ? ", last padded" : "");
  return 0;
}

int resnet(int argc, char** argv) {
  if (argc < 4) return 2;
  const int ranks = std::atoi(argv[2]);
  const int steps = argc > 4 ? std::atoi(argv[4]) : 3;
  std::ifstream in(argv[3]);
  const auto doc = nlohmann::json::parse(in);
  // 200 different sizes: the list's distinct tensor sizes in order (22 for ResNet-50), then their neighbours
  // (n - 1, n + 1, n - 2 …) until there are 200 (as test_communicator's resnet50 case).
  std::vector<std::int64_t> sizes;
  for (const auto& t : doc.at("tensors")) {
    const auto n = t.at("elements").get<std::int64_t>();
    if (std::find(sizes.begin(), sizes.end(), n) == sizes.end()) sizes.push_back(n);
  }
  const std::vector<std::int64_t> distinct = sizes;
  for (std::int64_t d = 1; sizes.size() < 200; ++d) {
    for (std::int64_t n : distinct) {
      for (std::int64_t m : {n - d, n + d}) {
        if (sizes.size() < 200 && m > 0 && std::find(sizes.begin(), sizes.end(), m) == sizes.end()) sizes.push_back(m);
      }
    }
  }
  std::int64_t total = 0;
  for (std::int64_t n : sizes) total += n;
  CommOptions o;
  o.topology = fmt::format("uniform:{}", ranks);
  o.cache_capacity = 256;
  if (argc > 5) o.pad_limit = parse_size(argv[5], "PAD_LIMIT");
  const long threads_before = proc_status("Threads");
  auto comms = Communicator::create_local(BackendKind::kCpu, o, ranks);
  std::vector<std::vector<float>> grads(static_cast<std::size_t>(ranks));
  for (auto& g : grads) g.assign(static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end())), 1.0f);
  long peak_threads = 0;
  std::printf(
      "resnet: %zu different sizes (%zu distinct tensor sizes of %s and neighbours), %lld floats per step, "
      "%d ranks, plans tuned in memory on uniform:%d (%zu size buckets)\n",
      sizes.size(), distinct.size(), argv[3], static_cast<long long>(total), ranks, ranks,
      comms[0].size_buckets().size());
  for (int step = 0; step < steps; ++step) {
    const auto t0 = Clock::now();
    on_threads(ranks, [&](int r) {
      for (std::int64_t n : sizes) {
        comms[r].allreduce(grads[r].data(), grads[r].data(), n, DataType::kFloat32, ReduceOp::kSum);
        if (r == 0) peak_threads = std::max(peak_threads, proc_status("Threads"));
      }
    });
    std::printf("  step %d: %8.1f ms%s\n", step, seconds_since(t0) * 1e3, step == 0 ? " (compiles the plans)" : "");
  }
  std::printf("  peak threads %ld (main 1 + %d rank threads + %zu workers; %ld before the communicator)\n",
              peak_threads, ranks, comms[0].worker_threads(), threads_before);
  std::printf("  peak RSS %ld MiB, plans compiled %llu, cached %zu, pad limit %llu B\n", proc_status("VmHWM") / 1024,
              static_cast<unsigned long long>(comms[0].compiled_plans()), comms[0].cached_plans().size(),
              static_cast<unsigned long long>(o.pad_limit));
  return 0;
}

// User + system CPU seconds of the whole process so far.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

int odd(int argc, char** argv) {
  if (argc < 3) return 2;
  const int ranks = std::atoi(argv[2]);
  const int calls = argc > 3 ? std::atoi(argv[3]) : 20;
  CommOptions o;
  o.topology = fmt::format("uniform:{}", ranks);
  if (argc > 4) o.spec = argv[4];
  auto comms = Communicator::create_local(BackendKind::kCpu, o, ranks);
  const std::vector<std::pair<std::string, std::int64_t>> cases = {
      {"1 MiB (bucket)", (1 << 20) / 4},         {"1 MiB + 4 B", (1 << 20) / 4 + 1},
      {"3 MiB - 4 B", 3 * (1 << 20) / 4 - 1},  {"4 MiB (bucket)", (4 << 20) / 4},
      {"5,000,001 floats", 5'000'001},         {"8 MiB (bucket)", (8 << 20) / 4}};
  std::int64_t largest = 0;
  for (const auto& c : cases) largest = std::max(largest, c.second);
  std::vector<std::vector<float>> data(static_cast<std::size_t>(ranks),
                                       std::vector<float>(static_cast<std::size_t>(largest), 1.0f));
  std::printf("odd: cpu communicator, %d ranks, float sum, %d calls per size (%s)\n", ranks, calls,
              o.spec.empty() ? "plans tuned in memory" : o.spec.c_str());
  for (const auto& [name, count] : cases) {
    auto calls_of = [&](int n) {
      on_threads(ranks, [&](int r) {
        for (int i = 0; i < n; ++i)
          comms[r].allreduce(data[r].data(), data[r].data(), count, DataType::kFloat32, ReduceOp::kSum);
      });
    };
    calls_of(2);  // compiles the plans
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    calls_of(calls);
    const double wall = seconds_since(t0) / calls;
    const double cpu = (process_cpu_seconds() - cpu0) / calls;
    std::printf("  %-18s %9lld floats  cpu %8.1f us/call  wall %8.1f us/call  plan %s\n", name.c_str(),
                static_cast<long long>(count), cpu * 1e6, wall * 1e6, comms[0].last_plan().label.c_str());
  }
  for (const std::int64_t other : {1000, 1001}) {
    auto calls_of = [&](int n) {
      on_threads(ranks, [&](int r) {
        for (int i = 0; i < n; ++i)
          comms[r].allreduce(data[r].data(), data[r].data(), i % 2 == 0 ? 1000 : other, DataType::kFloat32,
                             ReduceOp::kSum);
      });
    };
    calls_of(2);
    const int n = 10 * calls;
    const std::uint64_t retargets = comms[0].retargeted_plans();
    const double cpu0 = process_cpu_seconds();
    calls_of(n);
    std::printf("  1000 and %lld floats alternately: cpu %8.1f us/call  (%llu re-targets)\n",
                static_cast<long long>(other), (process_cpu_seconds() - cpu0) / n * 1e6,
                static_cast<unsigned long long>(comms[0].retargeted_plans() - retargets));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "overhead") return overhead(argc, argv);
    if (mode == "large") return large(argc, argv);
    if (mode == "resnet") return resnet(argc, argv);
    if (mode == "odd") return odd(argc, argv);
    if (mode == "allgather") return allgather(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_communicator: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr,
               "usage: mpirun -np N bench_communicator overhead [CALLS] [BYTES] [SPEC]\n"
               "       bench_communicator large RANKS BYTES SPEC [ITERS] [PAD_LIMIT]\n"
               "       bench_communicator resnet RANKS FILE [STEPS] [PAD_LIMIT]\n"
               "       mpirun -np N bench_communicator allgather [CALLS] [BYTES]\n"
               "       bench_communicator odd RANKS [CALLS] [SPEC]\n");
  return 2;
}
