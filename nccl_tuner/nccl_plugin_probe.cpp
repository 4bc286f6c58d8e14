// nccl-plugin-probe: runs NCCL's own all-reduce with the tuner plugin loaded, the way a training job would, and
// checks every result; or, without NCCL or a GPU, replays the plugin the way NCCL consults it.
//
//   NCCL_TUNER_PLUGIN=/path/libnccl-tuner-artune.so ARTUNE_TUNER_TABLE=table.json NCCL_DEBUG=INFO
//     nccl-plugin-probe [--nccl-lib PATH] [--ranks N] [-b 8] [-e 256M] [-f 4] [-n 20] [-w 5]
//   nccl-plugin-probe --replay PLUGIN [--ranks N] [--nodes M] [-b 8] [-e 256M] [-f 4]
//
// NCCL mode: NCCL is opened with dlopen (default "libnccl.so.2" from the library path; --nccl-lib names a file, e.g.
// the nvidia-nccl wheel's), so the probe builds without linking NCCL and runs against whichever NCCL the machine
// has. One process drives --ranks communicators (ncclCommInitAll) on the GPUs it sees, rank r on GPU r mod GPUs.
// NCCL consults a tuner only for communicators of two or more ranks (one rank is a plain copy, NVIDIA/nccl
// src/enqueue.cc); several ranks on one GPU need NCCL ≥ 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1, which the probe
// sets itself when it asks for more ranks than GPUs. With an older NCCL it says so and runs one rank per GPU.
// Each size prints an nccl-tests row (float sum, out of place; time is the mean of -n iterations issued back to
// back, one wait): size, count, time(us), algbw, busbw = algbw·2(n−1)/n, #wrong (every element of every rank's
// output against the exact sum, from the -w warm-up's first run).
//
// Replay mode: dlopens the plugin, calls its ncclTunerPlugin_v5 init with --ranks and --nodes (reading
// ARTUNE_TUNER_TABLE as inside NCCL), then getCollInfo for an all-reduce of each size with a cost table of every
// algorithm × protocol enabled, and prints which entry the plugin made cheapest (or that it kept NCCL's).
//
// Exit status: 0 ok, 1 wrong results, 2 bad arguments, 3 NCCL or CUDA failure, 77 no GPU (NCCL mode).

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "artune/core/sizes.hpp"
#include "nccl_tuner/nccl_table.hpp"
#include "nccl_tuner/tuner_abi.h"

namespace {

struct Options {
  std::string nccl_lib = "libnccl.so.2";
  std::string replay;  ///< plugin path (replay mode)
  int ranks = 0;       ///< 0: NCCL mode picks (2 where NCCL allows several ranks per GPU, else the GPU count)
  int nodes = 1;
  std::int64_t min_bytes = 8, max_bytes = std::int64_t{256} << 20, factor = 4;
  int iters = 20, warmup = 5;
};

/// A failure of the probe's own (exit 3), or of its arguments (exit 2).
struct Failure : std::runtime_error {
  Failure(int code, const std::string& what) : std::runtime_error(what), code(code) {}
  int code;
};

[[noreturn]] void usage_error(const std::string& what) { throw Failure(2, "nccl-plugin-probe: " + what); }

std::int64_t parse_bytes(const char* flag, const char* text) {
  try {
    return static_cast<std::int64_t>(artune::parse_size(text, flag));
  } catch (const std::exception& e) {
    usage_error(e.what());
  }
}

int parse_int(const char* flag, const char* text, int lo, int hi) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) {
    usage_error(std::string(flag) + ": '" + text + "' is not an integer in " + std::to_string(lo) + ".." +
                std::to_string(hi));
  }
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::puts(
          "usage: nccl-plugin-probe [--nccl-lib PATH] [--ranks N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
          "       nccl-plugin-probe --replay PLUGIN [--ranks N] [--nodes M] [-b MIN] [-e MAX] [-f FACTOR]\n"
          "NCCL mode runs ncclAllReduce (float sum) with whatever NCCL_TUNER_PLUGIN names and checks every result;\n"
          "replay mode calls the plugin as NCCL does, without NCCL or a GPU. See the source's header.");
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(std::string(a) + " needs a value");
    const char* v = argv[++i];
    if (a == "--nccl-lib") {
      o.nccl_lib = v;
    } else if (a == "--replay") {
      o.replay = v;
    } else if (a == "--ranks") {
      o.ranks = parse_int("--ranks", v, 1, 64);
    } else if (a == "--nodes") {
      o.nodes = parse_int("--nodes", v, 1, 1 << 16);
    } else if (a == "-b") {
      o.min_bytes = parse_bytes("-b", v);
    } else if (a == "-e") {
      o.max_bytes = parse_bytes("-e", v);
    } else if (a == "-f") {
      o.factor = parse_int("-f", v, 2, 1 << 20);
    } else if (a == "-n") {
      o.iters = parse_int("-n", v, 1, 100000);
    } else if (a == "-w") {
      o.warmup = parse_int("-w", v, 1, 100000);
    } else {
      usage_error("unknown argument '" + std::string(a) + "' (see --help)");
    }
  }
  if (o.min_bytes < 4) usage_error("-b: at least 4 bytes (one float)");
  if (o.max_bytes < o.min_bytes) usage_error("-e is below -b");
  if (o.max_bytes > (std::int64_t{4} << 30)) usage_error("-e: at most 4G");
  return o;
}

std::vector<std::int64_t> sizes_of(const Options& o) {
  std::vector<std::int64_t> out;
  for (std::int64_t s = o.min_bytes; s <= o.max_bytes; s *= o.factor) {
    out.push_back(s / 4 * 4);
    if (s > o.max_bytes / o.factor) break;
  }
  return out;
}

// ---------------------------------------------------------------- replay mode

void replay_logger(artuneNcclLogLevel level, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
                   const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::printf("plugin log (%s): ", level == artuneNcclLogWarn ? "WARN" : "INFO");
  std::vprintf(fmt, args);
  std::printf("\n");
  va_end(args);
}

int run_replay(const Options& o) {
  void* handle = ::dlopen(o.replay.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw Failure(3, std::string("nccl-plugin-probe: dlopen: ") + ::dlerror());
  auto* plugin = static_cast<artuneNcclTunerV5*>(::dlsym(handle, "ncclTunerPlugin_v5"));
  if (plugin == nullptr) throw Failure(3, "nccl-plugin-probe: " + o.replay + " has no ncclTunerPlugin_v5");
  const int ranks = o.ranks > 0 ? o.ranks : 2;
  std::printf("# replay of %s (plugin '%s'): %d ranks on %d node(s), as NCCL calls it\n", o.replay.c_str(),
              plugin->name, ranks, o.nodes);
  void* ctx = nullptr;
  artuneNcclNvlDomainInfo nvl{1, ranks, ranks};
  artuneNcclTunerConstants constants{};
  if (plugin->init(&ctx, 1, static_cast<size_t>(ranks), static_cast<size_t>(o.nodes), replay_logger, &nvl,
                   &constants) != artuneNcclSuccess) {
    throw Failure(3, "nccl-plugin-probe: the plugin's init failed");
  }
  std::printf("%12s  %s\n", "size", "all-reduce pick");
  for (const std::int64_t bytes : sizes_of(o)) {
    float costs[ARTUNE_NCCL_NUM_ALGORITHMS][ARTUNE_NCCL_NUM_PROTOCOLS];
    for (auto& row : costs) std::fill(std::begin(row), std::end(row), 100.0f);
    int channels = 0;
    plugin->getCollInfo(ctx, artuneNcclFuncAllReduce, static_cast<size_t>(bytes), 1, reinterpret_cast<float**>(costs),
                        ARTUNE_NCCL_NUM_ALGORITHMS, ARTUNE_NCCL_NUM_PROTOCOLS, 0, &channels);
    std::string pick = "NCCL's own";
    for (int a = 0; a < ARTUNE_NCCL_NUM_ALGORITHMS; ++a) {
      for (int p = 0; p < ARTUNE_NCCL_NUM_PROTOCOLS; ++p) {
        if (costs[a][p] < 100.0f) {
          pick = std::string(artune::nccl_tuner::algo_name(a)) + "." + artune::nccl_tuner::proto_name(p);
        }
      }
    }
    if (channels > 0) pick += " on " + std::to_string(channels) + " channel(s)";
    std::printf("%12lld  %s\n", static_cast<long long>(bytes), pick.c_str());
  }
  plugin->finalize(ctx);
  ::dlclose(handle);
  return 0;
}

// ---------------------------------------------------------------- NCCL mode

/// NCCL's entry points, looked up in the library the probe opened.
struct Nccl {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) init_all = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  std::string path;  ///< the file the loader found

  explicit Nccl(const std::string& lib) {
    void* h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) throw Failure(3, std::string("nccl-plugin-probe: dlopen NCCL: ") + ::dlerror());
    bind(h, get_version, "ncclGetVersion");
    bind(h, error_string, "ncclGetErrorString");
    bind(h, init_all, "ncclCommInitAll");
    bind(h, destroy, "ncclCommDestroy");
    bind(h, all_reduce, "ncclAllReduce");
    bind(h, group_start, "ncclGroupStart");
    bind(h, group_end, "ncclGroupEnd");
    Dl_info info{};
    path = ::dladdr(reinterpret_cast<void*>(get_version), &info) != 0 && info.dli_fname != nullptr ? info.dli_fname
                                                                                                  : lib;
  }
  template <typename F>
  static void bind(void* h, F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(h, name));
    if (f == nullptr) throw Failure(3, std::string("nccl-plugin-probe: NCCL has no ") + name);
  }
  void check(ncclResult_t r, const char* call) const {
    if (r != ncclSuccess) throw Failure(3, std::string("nccl-plugin-probe: ") + call + ": " + error_string(r));
  }
};

void cuda_check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw Failure(3, std::string("nccl-plugin-probe: ") + call + ": " + cudaGetErrorString(e));
}

/// Rank r's input element i: small integers, so that every float sum is exact.
float input_value(int rank, std::int64_t i) { return static_cast<float>((i % 13) + rank + 1); }

struct Rank {
  int gpu = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

/// One all-reduce of `count` floats on every rank, in one group.
void all_reduce(const Nccl& nccl, std::vector<Rank>& ranks, std::int64_t count) {
  nccl.check(nccl.group_start(), "ncclGroupStart");
  for (Rank& r : ranks) {
    cuda_check(cudaSetDevice(r.gpu), "cudaSetDevice");
    nccl.check(nccl.all_reduce(r.send, r.recv, static_cast<size_t>(count), ncclFloat32, ncclSum, r.comm, r.stream),
               "ncclAllReduce");
  }
  nccl.check(nccl.group_end(), "ncclGroupEnd");
}

void synchronize(std::vector<Rank>& ranks) {
  for (Rank& r : ranks) {
    cuda_check(cudaSetDevice(r.gpu), "cudaSetDevice");
    cuda_check(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize");
  }
}

int run_nccl(const Options& o) {
  int gpus = 0;
  const cudaError_t count_status = cudaGetDeviceCount(&gpus);
  if (count_status == cudaErrorNoDevice || count_status == cudaErrorInsufficientDriver ||
      count_status == cudaErrorStubLibrary || (count_status == cudaSuccess && gpus == 0)) {
    std::printf("nccl-plugin-probe: no CUDA device available: skipping\n");
    return 77;
  }
  cuda_check(count_status, "cudaGetDeviceCount");
  const Nccl nccl(o.nccl_lib);
  int version = 0;
  nccl.check(nccl.get_version(&version), "ncclGetVersion");
  // NCCL_MULTI_RANK_GPU_ENABLE (several ranks of one communicator on one GPU) arrived in NCCL 2.30.
  const bool multi_rank_gpu = version >= 23000;
  int ranks = o.ranks > 0 ? o.ranks : (multi_rank_gpu ? std::max(gpus, 2) : gpus);
  if (ranks > gpus && !multi_rank_gpu) {
    std::printf("# NCCL %d refuses two ranks on one GPU (NCCL_MULTI_RANK_GPU_ENABLE arrived in 2.30): %d rank(s)\n",
                version, gpus);
    ranks = gpus;
  }
  if (ranks > gpus) ::setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const char* plugin = std::getenv("NCCL_TUNER_PLUGIN");
  const char* table = std::getenv("ARTUNE_TUNER_TABLE");
  std::printf("# NCCL %d from %s\n# %d GPU(s), GPU 0 %s (sm %d%d); %d rank(s), rank r on GPU r mod %d\n", version,
              nccl.path.c_str(), gpus, prop.name, prop.major, prop.minor, ranks, gpus);
  std::printf("# NCCL_TUNER_PLUGIN=%s ARTUNE_TUNER_TABLE=%s\n", plugin ? plugin : "(unset)", table ? table : "(unset)");
  if (ranks == 1) std::printf("# one rank: NCCL runs a local copy and never consults a tuner (src/enqueue.cc)\n");

  std::vector<Rank> rs(static_cast<std::size_t>(ranks));
  std::vector<int> devs;
  for (int r = 0; r < ranks; ++r) {
    rs[static_cast<std::size_t>(r)].gpu = r % gpus;
    devs.push_back(r % gpus);
  }
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  nccl.check(nccl.init_all(comms.data(), ranks, devs.data()), "ncclCommInitAll");
  const std::int64_t max_count = o.max_bytes / 4;
  const std::size_t max_bytes = static_cast<std::size_t>(max_count) * 4;
  std::vector<float> host(static_cast<std::size_t>(max_count));
  for (int r = 0; r < ranks; ++r) {
    Rank& x = rs[static_cast<std::size_t>(r)];
    x.comm = comms[static_cast<std::size_t>(r)];
    cuda_check(cudaSetDevice(x.gpu), "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&x.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaMalloc(&x.send, max_bytes), "cudaMalloc");
    cuda_check(cudaMalloc(&x.recv, max_bytes), "cudaMalloc");
    for (std::int64_t i = 0; i < max_count; ++i) host[static_cast<std::size_t>(i)] = input_value(r, i);
    cuda_check(cudaMemcpy(x.send, host.data(), max_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  std::printf("%12s %12s %10s %8s %8s %8s\n", "size", "count", "time(us)", "algbw", "busbw", "#wrong");
  std::int64_t wrong_total = 0;
  for (const std::int64_t bytes : sizes_of(o)) {
    const std::int64_t count = bytes / 4;
    for (Rank& r : rs) {
      cuda_check(cudaSetDevice(r.gpu), "cudaSetDevice");
      cuda_check(cudaMemset(r.recv, 0xff, static_cast<std::size_t>(bytes)), "cudaMemset");  // NaN until written
    }
    all_reduce(nccl, rs, count);
    synchronize(rs);
    std::int64_t wrong = 0;
    for (Rank& r : rs) {
      cuda_check(cudaMemcpy(host.data(), r.recv, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost),
                 "cudaMemcpy");
      for (std::int64_t i = 0; i < count; ++i) {
        float expected = 0;
        for (int q = 0; q < ranks; ++q) expected += input_value(q, i);
        wrong += host[static_cast<std::size_t>(i)] != expected ? 1 : 0;
      }
    }
    for (int w = 1; w < o.warmup; ++w) all_reduce(nccl, rs, count);
    synchronize(rs);
    const auto start = std::chrono::steady_clock::now();
    for (int it = 0; it < o.iters; ++it) all_reduce(nccl, rs, count);
    synchronize(rs);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.iters;
    const double algbw = static_cast<double>(bytes) / us / 1e3;
    const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
    std::printf("%12lld %12lld %10.2f %8.2f %8.2f %8lld\n", static_cast<long long>(bytes),
                static_cast<long long>(count), us, algbw, busbw, static_cast<long long>(wrong));
    wrong_total += wrong;
  }
  for (Rank& r : rs) {
    cudaSetDevice(r.gpu);
    cudaFree(r.send);
    cudaFree(r.recv);
    cudaStreamDestroy(r.stream);
    nccl.destroy(r.comm);
  }
  std::printf("# %s\n", wrong_total == 0 ? "every result exact" : "WRONG RESULTS");
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    return o.replay.empty() ? run_nccl(o) : run_replay(o);
  } catch (const Failure& f) {
    std::fprintf(stderr, "%s\n", f.what());
    return f.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl-plugin-probe: %s\n", e.what());
    return 3;
  }
}
