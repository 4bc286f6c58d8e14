// The nccl backend on real GPUs, one MPI rank per GPU. Started by `meson test`
// as a plain program: it counts the GPUs, exits 77 (skip) without one, and
// otherwise re-launches itself under `mpirun -np P` (P = GPUs, at most 4; NCCL
// needs one GPU per rank) and returns the job's status. Each worker runs every
// plan family × type × op with #wrong = 0 (summed over ranks), then the
// back-to-back modes (issued n times, or one captured CUDA graph launched n
// times; buffers registered or not), then that a peer that never joins a run,
// alone or back to back, ends in Timeout (the watchdog's abort) instead of a hang.

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings warn under -Wextra)
#endif
#include <mpi.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/backend.hpp"
#include "artune/executor/cuda/cuda_backend.hpp"
#include "artune/executor/nccl/nccl_backend.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

using namespace artune;

namespace {

int failures = 0;

void fail(int rank, const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
}

// An exception leaves this rank at a different MPI call than its peers (which would wait for it
// forever): report it and end the whole job at once.
[[noreturn]] void abort_job(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

struct Case {
  std::string topo;
  const char* spec;
};

std::vector<Case> cases_for(int ranks) {
  const std::string u = "uniform:" + std::to_string(ranks);
  std::vector<Case> out = {{u, "xring"}, {u, "rechd"}, {u, "nccl"}, {u, "tree"}, {u, "pscpu"}, {u, "psgpu"}};
  if (ranks >= 2) out.push_back({u, "xring#2"});
  if (ranks == 4) {
    out.push_back({"uniform:2x2", "nccl/xring"});
    out.push_back({"uniform:2x2", "nccl/rechd"});
    out.push_back({"uniform:2x2", "nccl/pscpu"});
    out.push_back({"uniform:2x2", "2d"});
    out.push_back({"uniform:2x2", "pscpu/pscpu"});
  }
  return out;
}

int worker() {
  int rank = 0;
  int size = 1;
  MPI_Init(nullptr, nullptr);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int checked = 0;
  try {
    BackendOptions bo;
    bo.timeout_s = 60;
    auto backend = make_nccl_backend(bo);
    for (const Case& c : cases_for(size)) {
      const Topology topo = load_topology(c.topo);
      for (std::int64_t count : {std::int64_t{1}, std::int64_t{7}, std::int64_t{4099}, std::int64_t{(1 << 20) + 3}}) {
        for (ReduceOp op : all_reduce_ops()) {
          BuildOptions o;
          o.count = count;
          o.reduce_op = op;
          Plan plan;
          try {
            plan = build_plan(topo, c.spec, o);
          } catch (const InvalidInput& e) {
            if (rank == 0) std::printf("skip %s %s: %s\n", c.topo.c_str(), c.spec, e.what());
            continue;
          }
          for (DataType type : all_data_types()) {
            if (count > 100000 && type != DataType::kFloat32 && type != DataType::kFloat16) continue;
            backend->prepare(plan, type, op);
            for (int iteration : {0, 1}) {
              backend->fill_inputs(iteration);
              backend->run();
              const double wrong = backend->all_sum(static_cast<double>(backend->count_wrong(iteration)));
              ++checked;
              if (wrong != 0) {
                fail(rank, c.topo + " " + c.spec + " count " + std::to_string(count) + " " +
                               std::string(to_string(type)) + " " + std::string(to_string(op)) + ": #wrong " +
                               std::to_string(wrong));
              }
            }
          }
        }
      }
    }
  } catch (const std::exception& e) {
    abort_job(rank, std::string("exception: ") + e.what());
  }

  // Back to back: one iteration through each mode is checked exactly (the in-place runs compound, so more
  // are checked by running again after a refill: a captured graph must keep reading the same buffers).
  if (failures == 0) {
    for (const bool graph : {false, true}) {
      for (const char* registered : {"1", "0"}) {
        const std::string mode = std::string(graph ? "graph" : "issued") + ", ARTUNE_NCCL_REGISTER=" + registered;
        try {
          setenv("ARTUNE_NCCL_REGISTER", registered, 1);
          BackendOptions bo;
          bo.timeout_s = 60;
          bo.nccl_graph = graph;
          auto backend = make_nccl_backend(bo);
          const Topology topo = load_topology("uniform:" + std::to_string(size));
          for (const char* spec : {"xring", "nccl"}) {
            BuildOptions o;
            o.count = (1 << 20) + 3;
            Plan plan;
            try {
              plan = build_plan(topo, spec, o);
            } catch (const InvalidInput&) {
              continue;  // not buildable on this many ranks (skipped above too)
            }
            backend->prepare(plan, DataType::kFloat32, ReduceOp::kSum);
            for (int iteration : {0, 1}) {
              backend->fill_inputs(iteration);
              backend->run_back_to_back(1);
              const double wrong = backend->all_sum(static_cast<double>(backend->count_wrong(iteration)));
              ++checked;
              if (wrong != 0) {
                fail(rank, std::string(spec) + " back to back (" + mode + "): #wrong " + std::to_string(wrong));
              }
            }
            backend->run_back_to_back(20);  // in flight together, one wait: must finish
          }
        } catch (const std::exception& e) {
          abort_job(rank, "back to back (" + mode + "): " + e.what());
        }
      }
    }
    unsetenv("ARTUNE_NCCL_REGISTER");
  }

  // A stuck peer: rank 0 runs (alone, then back to back), the others never join; rank 0 must see Timeout
  // (the watchdog aborts the communicators), not hang.
  for (const bool back_to_back : {false, true}) {
    if (size < 2 || failures != 0) break;
    try {
      BackendOptions bo;
      bo.timeout_s = 5;
      auto backend = make_nccl_backend(bo);
      const Topology topo = load_topology("uniform:" + std::to_string(size));
      BuildOptions o;
      o.count = 1 << 16;
      const Plan plan = build_plan(topo, "xring", o);
      backend->prepare(plan, DataType::kFloat32, ReduceOp::kSum);
      backend->fill_inputs(0);
      if (rank == 0) {
        try {
          if (back_to_back) {
            backend->run_back_to_back(10);
          } else {
            backend->run();
          }
          fail(rank, "run with absent peers returned normally");
        } catch (const Timeout& e) {
          std::printf("rank 0: timeout as expected: %s\n", e.what());
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
    } catch (const std::exception& e) {
      abort_job(rank, std::string("timeout check: ") + e.what());
    }
  }

  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("nccl backend: %d checks per rank, %d failures\n", checked, total);
  // What this run could not check says so on a line of its own (scripts/gpu_bundle.py counts it as reduced).
  if (rank == 0 && size < 2) {
    std::printf("REDUCED: one rank (one GPU): the multi-rank plans and the stuck-peer timeout need 2 or more GPUs\n");
  }
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--worker") return worker();
  int gpus = 0;
  try {
    gpus = cuda_device_count();  // any error but "no GPU" fails the test instead of skipping it
  } catch (const std::exception& e) {
    std::printf("test_nccl_backend: %s\n", e.what());
    return 1;
  }
  if (gpus == 0) {
    std::puts("test_nccl_backend: no CUDA device available: skipping");
    return 77;
  }
  const int ranks = std::min(gpus, 4);
  // Open MPI refuses to start as root (containers, CI machines) unless both variables say so.
  const std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np " +
                          std::to_string(ranks) + " '" + argv[0] + "' --worker";
  std::printf("running: %s\n", cmd.c_str());
  std::fflush(stdout);
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status)) return 1;
  return WEXITSTATUS(status);
}
