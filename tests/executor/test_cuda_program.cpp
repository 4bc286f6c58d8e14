// The cuda and nccl lowerings, replayed on host arrays without a GPU.
//
// cuda: a Program is executed in issue order (a legal execution) while a
// vector-clock race detector follows every element access of every stream:
// two accesses to one element from different streams, one a write, must be
// ordered by stream order plus event record → wait edges, or the test fails.
// So one replay proves the result for every interleaving the GPU could pick.
//
// nccl: every rank's program runs against a simulated NCCL: sends and
// receives between a pair match in order (op ids and counts must agree),
// groups complete when all their sends and receives are matched, collectives
// complete when every member has posted the same call. A state where no rank
// can progress is a deadlock and fails the test.
//
// Both check the results with verification.hpp (float64) over plans of every
// family from the real builders.

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <random>
#include <string>
#include <vector>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/executor/cuda/cuda_program.hpp"
#include "artune/executor/nccl/nccl_program.hpp"
#include "artune/executor/reduce_kernels.hpp"
#include "artune/executor/schedule.hpp"
#include "artune/executor/harness/verification.hpp"
#include "hand_plans.hpp"
#include "artune/topology/io/io.hpp"
#include "artune/topology/topology.hpp"

using namespace artune;

namespace {

constexpr DataType kType = DataType::kFloat64;

using Buffers = std::vector<std::vector<std::vector<double>>>;  // [device][buffer][element]

Buffers make_buffers(const Plan& plan, ReduceOp op, int iteration) {
  Buffers mem(plan.devices.size());
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    for (std::int64_t size : plan.buffers[d]) mem[d].emplace_back(static_cast<std::size_t>(size), -12345.0);
  }
  for (int r = 0; r < plan.ranks(); ++r) {
    fill_input(mem[r][0].data(), kType, op, plan.ranks(), r, 0, plan.count, iteration);
  }
  return mem;
}

std::int64_t wrong_elements(const Plan& plan, const Buffers& mem, ReduceOp op, int iteration) {
  std::int64_t wrong = 0;
  for (int r = 0; r < plan.ranks(); ++r) {
    wrong += count_wrong(mem[r][0].data(), kType, op, plan.ranks(), 0, plan.count, iteration);
  }
  return wrong;
}

// ---------------------------------------------------------------------------
// cuda: issue-order replay with a vector-clock race detector.

struct Shadow {
  int writer = -1;
  std::uint64_t write_time = 0;
  std::vector<std::uint64_t> reads;  // per stream: time of its last read since the write (0 = none)
};

class CudaReplay {
 public:
  CudaReplay(const Plan& plan, const cuda::Program& prog, ReduceOp op) : plan_(plan), prog_(prog), op_(op) {}

  // Runs the program once on fresh inputs; returns #wrong. Races land in races_.
  std::int64_t run(int iteration) {
    mem_ = make_buffers(plan_, op_, iteration);
    const std::size_t n = plan_.devices.size();
    staging_.assign(n, {});
    for (std::size_t s = 0; s < n; ++s) staging_[s].assign(static_cast<std::size_t>(prog_.staging[s]), 0.0);
    clock_.assign(n, std::vector<std::uint64_t>(n, 0));
    for (std::size_t s = 0; s < n; ++s) clock_[s][s] = 1;
    events_.assign(static_cast<std::size_t>(prog_.events), std::nullopt);
    shadow_.clear();
    for (std::size_t i = 0; i < prog_.steps.size(); ++i) {
      const cuda::Step& st = prog_.steps[i];
      const int s = st.stream;
      auto& vc = clock_[static_cast<std::size_t>(s)];
      ++vc[static_cast<std::size_t>(s)];
      switch (st.kind) {
        case cuda::StepKind::kRecord: events_[static_cast<std::size_t>(st.event)] = vc; break;
        case cuda::StepKind::kWait: {
          const auto& ev = events_[static_cast<std::size_t>(st.event)];
          if (!ev) {
            problems_.push_back("step " + std::to_string(i) + ": waits on event " + std::to_string(st.event) +
                                " before it is recorded");
            break;
          }
          for (std::size_t k = 0; k < n; ++k) vc[k] = std::max(vc[k], (*ev)[k]);
          break;
        }
        case cuda::StepKind::kCopy: {
          access(i, s, st.src, st.count, false);
          access(i, s, st.dst, st.count, true);
          const std::vector<double> tmp(at(st.src), at(st.src) + st.count);
          std::copy(tmp.begin(), tmp.end(), at(st.dst));
          break;
        }
        case cuda::StepKind::kReduce:
          access(i, s, st.src, st.count, false);
          access(i, s, st.dst, st.count, false);
          access(i, s, st.dst, st.count, true);
          reduce_into(at(st.dst), at(st.src), st.count, kType, op_);
          break;
        case cuda::StepKind::kScale:
          access(i, s, st.dst, st.count, false);
          access(i, s, st.dst, st.count, true);
          scale_down(at(st.dst), st.count, kType, static_cast<int>(st.divisor));
          break;
      }
    }
    return wrong_elements(plan_, mem_, op_, iteration);
  }

  const std::vector<std::string>& problems() const { return problems_; }

 private:
  double* at(const cuda::Ref& r) {
    if (r.buffer == cuda::Ref::kStaging) {
      auto& v = staging_.at(static_cast<std::size_t>(r.device));
      REQUIRE(r.offset >= 0);
      return v.data() + r.offset;
    }
    return mem_.at(static_cast<std::size_t>(r.device)).at(static_cast<std::size_t>(r.buffer)).data() + r.offset;
  }

  void access(std::size_t step, int s, const cuda::Ref& r, std::int64_t count, bool write) {
    const std::size_t n = plan_.devices.size();
    const auto& vc = clock_[static_cast<std::size_t>(s)];
    const std::uint64_t now = vc[static_cast<std::size_t>(s)];
    // Bounds of the region (the real backend would corrupt memory).
    const std::int64_t size =
        r.buffer == cuda::Ref::kStaging
            ? static_cast<std::int64_t>(staging_.at(static_cast<std::size_t>(r.device)).size())
            : plan_.buffers.at(static_cast<std::size_t>(r.device)).at(static_cast<std::size_t>(r.buffer));
    if (r.offset < 0 || r.offset + count > size) {
      problems_.push_back("step " + std::to_string(step) + ": region out of bounds");
      return;
    }
    for (std::int64_t e = 0; e < count; ++e) {
      auto key = std::make_tuple(r.device, r.buffer, r.offset + e);
      Shadow& sh = shadow_[key];
      if (sh.reads.empty()) sh.reads.assign(n, 0);
      bool race = sh.writer >= 0 && sh.writer != s && vc[static_cast<std::size_t>(sh.writer)] < sh.write_time;
      if (write) {
        for (std::size_t t = 0; t < n; ++t) {
          if (static_cast<int>(t) != s && sh.reads[t] != 0 && vc[t] < sh.reads[t]) race = true;
        }
      }
      if (race && problems_.size() < 20) {
        problems_.push_back("step " + std::to_string(step) + " (stream " + std::to_string(s) + "): unordered " +
                            (write ? "write" : "read") + " of device " + std::to_string(r.device) + " buffer " +
                            std::to_string(r.buffer) + " element " + std::to_string(r.offset + e));
      }
      if (write) {
        sh.writer = s;
        sh.write_time = now;
        std::fill(sh.reads.begin(), sh.reads.end(), 0);
      } else {
        sh.reads[static_cast<std::size_t>(s)] = now;
      }
    }
  }

  const Plan& plan_;
  const cuda::Program& prog_;
  ReduceOp op_;
  Buffers mem_;
  std::vector<std::vector<double>> staging_;
  std::vector<std::vector<std::uint64_t>> clock_;
  std::vector<std::optional<std::vector<std::uint64_t>>> events_;
  std::map<std::tuple<int, int, std::int64_t>, Shadow> shadow_;
  std::vector<std::string> problems_;
};

// ---------------------------------------------------------------------------
// nccl: all ranks against a simulated NCCL.

class NcclReplay {
 public:
  NcclReplay(const Plan& plan, const std::vector<nccl::Program>& progs, ReduceOp op, unsigned seed)
      : plan_(plan), progs_(progs), op_(op), rng_(seed) {}

  // Returns #wrong; deadlocks and mismatches land in problems().
  std::int64_t run(int iteration) {
    mem_ = make_buffers(plan_, op_, iteration);
    const std::size_t ranks = progs_.size();
    staging_.assign(ranks, {});
    for (std::size_t r = 0; r < ranks; ++r) staging_[r].assign(static_cast<std::size_t>(progs_[r].staging), -777.0);
    pc_.assign(ranks, 0);
    posted_.assign(ranks, false);
    pending_.assign(ranks, 0);
    sends_.clear();
    recvs_.clear();
    coll_seq_.assign(ranks, {});
    coll_posts_.clear();
    std::vector<int> order(ranks);
    for (std::size_t r = 0; r < ranks; ++r) order[r] = static_cast<int>(r);
    for (;;) {
      bool progress = false;
      bool done = true;
      std::shuffle(order.begin(), order.end(), rng_);
      for (int r : order) {
        while (advance(r)) progress = true;
        if (pc_[static_cast<std::size_t>(r)] < progs_[static_cast<std::size_t>(r)].steps.size()) done = false;
      }
      if (done) break;
      if (!progress) {
        std::string where;
        for (std::size_t r = 0; r < ranks; ++r) {
          where += " rank " + std::to_string(r) + " at step " + std::to_string(pc_[r]) + ";";
        }
        problems_.push_back("deadlock:" + where);
        return -1;
      }
    }
    return wrong_elements(plan_, mem_, op_, iteration);
  }

  const std::vector<std::string>& problems() const { return problems_; }

 private:
  struct Message {
    int op;
    std::int64_t count;
    std::vector<double> data;  // sends: the snapshot
    int rank;                  // owner
    nccl::Ref ref;             // recvs: where it lands
  };
  struct CollPost {
    int rank;
    const nccl::Step* step;
  };

  double* at(int rank, const nccl::Ref& r) {
    if (r.buffer == nccl::Ref::kStaging) {
      auto& v = staging_[static_cast<std::size_t>(rank)];
      if (r.offset < 0 || r.offset > static_cast<std::int64_t>(v.size()))
        throw std::runtime_error("staging out of range");
      return v.data() + r.offset;
    }
    const auto& devs = progs_[static_cast<std::size_t>(rank)].devices;
    if (std::find(devs.begin(), devs.end(), r.device) == devs.end()) {
      problems_.push_back("rank " + std::to_string(rank) + " touches device " + std::to_string(r.device) +
                          " it does not host");
    }
    return mem_.at(static_cast<std::size_t>(r.device)).at(static_cast<std::size_t>(r.buffer)).data() + r.offset;
  }

  void match() {
    for (auto& [pair, sq] : sends_) {
      auto& rq = recvs_[pair];
      while (!sq.empty() && !rq.empty()) {
        Message& s = sq.front();
        Message& r = rq.front();
        if (s.op != r.op || s.count != r.count) {
          problems_.push_back("mismatched pair " + std::to_string(pair.first) + "->" + std::to_string(pair.second) +
                              ": send op " + std::to_string(s.op) + " x" + std::to_string(s.count) + " met recv op " +
                              std::to_string(r.op) + " x" + std::to_string(r.count));
        }
        std::copy(s.data.begin(), s.data.begin() + std::min(s.count, r.count), at(r.rank, r.ref));
        --pending_[static_cast<std::size_t>(s.rank)];
        --pending_[static_cast<std::size_t>(r.rank)];
        sq.pop_front();
        rq.pop_front();
      }
    }
  }

  void run_local(int rank, const nccl::Step& st) {
    switch (st.kind) {
      case nccl::StepKind::kCopy: {
        const std::vector<double> tmp(at(rank, st.src), at(rank, st.src) + st.count);
        std::copy(tmp.begin(), tmp.end(), at(rank, st.dst));
        break;
      }
      case nccl::StepKind::kReduce: reduce_into(at(rank, st.dst), at(rank, st.src), st.count, kType, op_); break;
      case nccl::StepKind::kScale: scale_down(at(rank, st.dst), st.count, kType, static_cast<int>(st.divisor)); break;
      default: break;
    }
  }

  void complete_collective(const std::vector<CollPost>& posts) {
    const nccl::Step& first = *posts.front().step;
    const int g = first.comm_size;
    std::vector<double*> region(static_cast<std::size_t>(g), nullptr);
    for (const CollPost& p : posts) {
      if (p.step->op != first.op || p.step->count != first.count || p.step->collective != first.collective) {
        problems_.push_back("collective mismatch on comm " + std::to_string(first.comm) + ": op " +
                            std::to_string(first.op) + " vs op " + std::to_string(p.step->op));
      }
      region[static_cast<std::size_t>(p.step->comm_rank)] = at(p.rank, p.step->dst);
    }
    const std::int64_t count = first.count;
    const ReduceOp combine = op_ == ReduceOp::kAvg ? ReduceOp::kSum : op_;
    auto reduce_range = [&](int root, std::int64_t off, std::int64_t cnt) {
      std::vector<double> acc(region[static_cast<std::size_t>(root)] + off,
                              region[static_cast<std::size_t>(root)] + off + cnt);
      for (int k = 0; k < g; ++k) {
        if (k != root) reduce_into(acc.data(), region[static_cast<std::size_t>(k)] + off, cnt, kType, combine);
      }
      return acc;
    };
    switch (first.collective) {
      case Collective::kAllReduce: {
        const auto acc = reduce_range(0, 0, count);
        for (int k = 0; k < g; ++k) std::copy(acc.begin(), acc.end(), region[static_cast<std::size_t>(k)]);
        break;
      }
      case Collective::kBroadcast:
        for (int k = 0; k < g; ++k) {
          if (k != first.root) {
            std::copy(region[static_cast<std::size_t>(first.root)],
                      region[static_cast<std::size_t>(first.root)] + count, region[static_cast<std::size_t>(k)]);
          }
        }
        break;
      case Collective::kReduce: {
        const auto acc = reduce_range(first.root, 0, count);
        std::copy(acc.begin(), acc.end(), region[static_cast<std::size_t>(first.root)]);
        break;
      }
      case Collective::kReduceScatter:
        for (int k = 0; k < g; ++k) {
          const auto [off, cnt] = even_piece(count, g, k);
          const auto acc = reduce_range(k, off, cnt);
          std::copy(acc.begin(), acc.end(), region[static_cast<std::size_t>(k)] + off);
        }
        break;
      case Collective::kAllGather:
        for (int k = 0; k < g; ++k) {
          const auto [off, cnt] = even_piece(count, g, k);
          for (int m = 0; m < g; ++m) {
            if (m != k) {
              std::copy(region[static_cast<std::size_t>(k)] + off, region[static_cast<std::size_t>(k)] + off + cnt,
                        region[static_cast<std::size_t>(m)] + off);
            }
          }
        }
        break;
    }
  }

  // Moves rank r forward by one unit if it can.
  bool advance(int r) {
    const auto& steps = progs_[static_cast<std::size_t>(r)].steps;
    std::size_t& pc = pc_[static_cast<std::size_t>(r)];
    if (pc >= steps.size()) return false;
    const nccl::Step& st = steps[pc];
    switch (st.kind) {
      case nccl::StepKind::kCopy:
      case nccl::StepKind::kReduce:
      case nccl::StepKind::kScale:
        run_local(r, st);
        ++pc;
        return true;
      case nccl::StepKind::kGroupStart: {
        std::size_t end = pc + 1;
        while (end < steps.size() && steps[end].kind != nccl::StepKind::kGroupEnd) ++end;
        REQUIRE(end < steps.size());
        if (!posted_[static_cast<std::size_t>(r)]) {
          posted_[static_cast<std::size_t>(r)] = true;
          for (std::size_t i = pc + 1; i < end; ++i) {
            const nccl::Step& p = steps[i];
            if (p.kind == nccl::StepKind::kSend) {
              const double* src = at(r, p.src);
              sends_[{r, p.peer}].push_back(Message{p.op, p.count, std::vector<double>(src, src + p.count), r, {}});
            } else if (p.kind == nccl::StepKind::kRecv) {
              recvs_[{p.peer, r}].push_back(Message{p.op, p.count, {}, r, p.dst});
            } else {
              problems_.push_back("non-p2p step inside a group");
            }
            ++pending_[static_cast<std::size_t>(r)];
          }
          match();
          return true;
        }
        match();
        if (pending_[static_cast<std::size_t>(r)] == 0) {
          posted_[static_cast<std::size_t>(r)] = false;
          pc = end + 1;
          return true;
        }
        return false;
      }
      case nccl::StepKind::kCollective: {
        if (!posted_[static_cast<std::size_t>(r)]) {
          posted_[static_cast<std::size_t>(r)] = true;
          const int seq = coll_seq_[static_cast<std::size_t>(r)][st.comm]++;
          auto& posts = coll_posts_[{st.comm, seq}];
          posts.push_back(CollPost{r, &st});
          if (static_cast<int>(posts.size()) == st.comm_size) {
            complete_collective(posts);
            for (const CollPost& p : posts) done_colls_.insert({p.rank, p.step});
          }
          return true;
        }
        if (done_colls_.count({r, &st}) != 0) {
          done_colls_.erase({r, &st});
          posted_[static_cast<std::size_t>(r)] = false;
          ++pc;
          return true;
        }
        return false;
      }
      case nccl::StepKind::kSend:
      case nccl::StepKind::kRecv:
      case nccl::StepKind::kGroupEnd:
        problems_.push_back("p2p step outside a group");
        ++pc;
        return true;
    }
    return false;
  }

  const Plan& plan_;
  const std::vector<nccl::Program>& progs_;
  ReduceOp op_;
  std::mt19937 rng_;
  Buffers mem_;
  std::vector<std::vector<double>> staging_;
  std::vector<std::size_t> pc_;
  std::vector<bool> posted_;
  std::vector<int> pending_;
  std::map<std::pair<int, int>, std::deque<Message>> sends_;
  std::map<std::pair<int, int>, std::deque<Message>> recvs_;
  std::vector<std::map<int, int>> coll_seq_;
  std::map<std::pair<int, int>, std::vector<CollPost>> coll_posts_;
  std::set<std::pair<int, const nccl::Step*>> done_colls_;
  std::vector<std::string> problems_;
};

// ---------------------------------------------------------------------------

struct Case {
  const char* topo;
  const char* spec;
};

// Every family, hybrids included, on single machines and clusters.
const Case kCases[] = {
    {"uniform:2", "xring"},        {"uniform:2", "rechd"},         {"uniform:2", "nccl"},
    {"uniform:8", "xring"},        {"uniform:8", "xring#2"},       {"uniform:8", "rechd"},
    {"uniform:8", "pscpu"},        {"uniform:8", "psgpu#2"},       {"uniform:8", "nccl"},
    {"uniform:8", "tree"},         {"dgx1-v100", "hiercopy"},      {"dgx1-v100", "mring#2"},
    {"dgx1-v100", "xring"},        {"uniform:2x4", "nccl/xring"},  {"uniform:2x4", "nccl/rechd"},
    {"uniform:2x4", "nccl/pscpu"}, {"uniform:2x4", "pscpu/pscpu"}, {"uniform:2x4", "2d"},
    {"uniform:4x2", "xring"},      {"uniform:4x2", "pscpu/xring"}, {"uniform:3", "rechd"},
    {"uniform:5", "xring"},
};

Plan build(const Case& c, std::int64_t count, ReduceOp op, int segments = 1) {
  const Topology topo = load_topology(c.topo);
  BuildOptions o;
  o.count = count;
  o.reduce_op = op;
  o.segments = segments;
  Plan plan = build_plan(topo, c.spec, o);
  verify_or_throw(plan);
  return plan;
}

int gpu_devices(const Plan& plan) {
  int n = 0;
  for (const PlanDevice& d : plan.devices) n += cuda::parse_device_name(d.name).host ? 0 : 1;
  return n;
}

// Lowers and replays one plan under one GPU configuration; returns the problems found.
std::vector<std::string> replay_cuda(const Plan& plan, ReduceOp op, int cuda_devices,
                                     const std::vector<std::vector<bool>>& peer, const Topology* topo) {
  const auto placement = cuda::place_devices(plan, cuda_devices, topo);
  const cuda::Program prog = cuda::lower_plan(plan, placement, peer);
  CudaReplay replay(plan, prog, op);
  std::vector<std::string> problems;
  for (int iteration : {0, 3}) {
    const std::int64_t wrong = replay.run(iteration);
    if (wrong != 0)
      problems.push_back("#wrong = " + std::to_string(wrong) + " in iteration " + std::to_string(iteration));
  }
  for (const auto& p : replay.problems()) problems.push_back(p);
  if (!problems.empty()) MESSAGE(cuda::describe(prog));
  return problems;
}

std::vector<std::vector<bool>> peers(int n, int mode) {
  std::vector<std::vector<bool>> p(static_cast<std::size_t>(n), std::vector<bool>(static_cast<std::size_t>(n), false));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) p[a][b] = a == b || mode == 1 || (mode == 2 && (a + b) % 2 == 0);
  }
  return p;
}

std::vector<nccl::Program> lower_all(const Plan& plan, const Topology* topo) {
  const std::vector<int> machines = topo ? device_machines(plan, *topo) : nccl::machines_from_names(plan);
  std::vector<bool> host = nccl::host_devices_from_names(plan);
  if (topo != nullptr) {
    for (std::size_t d = 0; d < plan.devices.size(); ++d) {
      host[d] = topo->nodes()[static_cast<std::size_t>(plan.devices[d].node)].kind != NodeKind::kGpu;
    }
  }
  const std::vector<int> host_of = host_processes(plan, machines);
  std::vector<nccl::Program> progs;
  for (int r = 0; r < plan.ranks(); ++r) progs.push_back(nccl::lower_rank(plan, host_of, host, r));
  return progs;
}

}  // namespace

TEST_CASE("cuda_program.placement") {
  const Plan plan = build({"uniform:2x4", "nccl/pscpu"}, 10, ReduceOp::kSum);
  const Topology topo = load_topology("uniform:2x4");
  for (const Topology* t : {static_cast<const Topology*>(nullptr), &topo}) {
    const auto one = cuda::place_devices(plan, 1, t);
    const auto four = cuda::place_devices(plan, 4, t);
    bool saw_host = false;
    for (std::size_t d = 0; d < plan.devices.size(); ++d) {
      CAPTURE(plan.devices[d].name);
      const bool host = cuda::parse_device_name(plan.devices[d].name).host;
      CHECK(one[d].host == host);
      CHECK(one[d].cuda_device == 0);
      if (!host) CHECK(four[d].cuda_device == cuda::parse_device_name(plan.devices[d].name).gpu_index % 4);
      saw_host |= host;
    }
    CHECK(saw_host);  // pscpu gathers on CPU sockets
    CHECK(cuda::shares_gpus(one));
    CHECK(cuda::shares_gpus(four));  // two machines' gpu0 both land on CUDA device 0
  }
  CHECK_THROWS_AS(cuda::place_devices(plan, 0), Unsupported);
  const auto info = cuda::parse_device_name("m3/gpu12");
  CHECK(info.machine == 3);
  CHECK(info.gpu_index == 12);
  CHECK_FALSE(info.host);
  CHECK(cuda::parse_device_name("cpu1").host);
  CHECK(cuda::parse_device_name("m1/cpu0").machine == 1);
  CHECK(cuda::parse_device_name("nic0").gpu_index == -1);
}

TEST_CASE("cuda_program.devices_follow_pci_bus_order") {
  // CUDA numbers GPUs fastest first; nvidia-smi and topology import by PCI bus id. gpuK is the K-th by bus.
  const std::vector<int> order = cuda::pci_bus_order({"0000:C1:00.0", "0000:1B:00.0", "0000:43:00.0", "0001:05:00.0"});
  CHECK(order == std::vector<int>{1, 2, 0, 3});
  CHECK(cuda::pci_bus_order({"00000000:0A:00.0", "00000000:09:00.1", "00000000:09:00.0"}) == std::vector<int>{2, 1, 0});
  CHECK_THROWS_AS(cuda::pci_bus_order({"GPU-0"}), InvalidInput);
  const Plan plan = build({"uniform:8", "xring"}, 8, ReduceOp::kSum);
  const auto placed = cuda::place_devices(plan, 4, nullptr, order);
  const std::vector<int> expected{1, 2, 0, 3, 1, 2, 0, 3};  // gpuK -> order[K mod 4]
  for (std::size_t d = 0; d < 8; ++d) CHECK(placed[d].cuda_device == expected[d]);
  CHECK(cuda::place_devices(plan, 4)[2].cuda_device == 2);  // without bus ids: CUDA order
  CHECK_THROWS_AS(cuda::place_devices(plan, 4, nullptr, {0, 1}), InvalidInput);
}

TEST_CASE("cuda_program.every_family_is_race_free_and_exact") {
  int replays = 0;
  for (const Case& c : kCases) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      for (std::int64_t count : {std::int64_t{1}, std::int64_t{7}, std::int64_t{101}}) {
        const std::string topo_name = c.topo;
        CAPTURE(topo_name);
        const std::string spec_name = c.spec;
        CAPTURE(spec_name);
        CAPTURE(to_string(op));
        CAPTURE(count);
        const Plan plan = build(c, count, op);
        const int gpus = gpu_devices(plan);
        // One GPU for all (the single-GPU test machine), one per device with full P2P, none with P2P
        // (every cross-GPU reduce staged), and an odd count with partial P2P.
        struct Config {
          int devices;
          int peer_mode;
        };
        for (const Config cfg : {Config{1, 1}, Config{gpus, 1}, Config{gpus, 0}, Config{3, 2}}) {
          CAPTURE(cfg.devices);
          CAPTURE(cfg.peer_mode);
          const auto problems =
              replay_cuda(plan, op, cfg.devices, peers(std::max(cfg.devices, 1), cfg.peer_mode), nullptr);
          for (const auto& p : problems) FAIL_CHECK(p);
          ++replays;
        }
      }
    }
  }
  CHECK(replays == static_cast<int>(std::size(kCases)) * 3 * 3 * 4);
}

TEST_CASE("cuda_program.pipelined_plans") {
  for (const Case& c : {Case{"uniform:8", "xring"}, Case{"dgx1-v100", "hiercopy"}, Case{"uniform:2x4", "nccl/rechd"}}) {
    const std::string spec_name = c.spec;
    CAPTURE(spec_name);
    const Plan plan = build(c, 1000, ReduceOp::kSum, 4);
    const auto problems = replay_cuda(plan, ReduceOp::kSum, 2, peers(2, 0), nullptr);
    for (const auto& p : problems) FAIL_CHECK(p);
  }
}

TEST_CASE("cuda_program.detector_catches_a_missing_wait") {
  // The replay must be able to fail: drop each cross-stream wait in turn; the result must then
  // be racy (or wrong) for at least most of them — and for some at all.
  const Plan plan = build({"uniform:4", "xring"}, 16, ReduceOp::kSum);
  const auto placement = cuda::place_devices(plan, 4);
  const cuda::Program good = cuda::lower_plan(plan, placement, peers(4, 1));
  int waits = 0;
  int caught = 0;
  for (std::size_t i = 0; i < good.steps.size(); ++i) {
    if (good.steps[i].kind != cuda::StepKind::kWait) continue;
    ++waits;
    cuda::Program broken = good;
    broken.steps.erase(broken.steps.begin() + static_cast<std::ptrdiff_t>(i));
    CudaReplay replay(plan, broken, ReduceOp::kSum);
    const std::int64_t wrong = replay.run(0);
    if (wrong != 0 || !replay.problems().empty()) {
      ++caught;
    } else {
      MESSAGE("not caught: the wait at step " << i);
    }
  }
  CHECK(waits > 0);
  CHECK(caught == waits);
}

TEST_CASE("cuda_program.group_ops_are_lowered_to_pulls") {
  const Plan plan = build({"uniform:4", "nccl"}, 10, ReduceOp::kSum);
  const auto placement = cuda::place_devices(plan, 4);
  const cuda::Program prog = cuda::lower_plan(plan, placement, peers(4, 0));
  int copies = 0;
  int reduces = 0;
  for (const cuda::Step& s : prog.steps) {
    if (s.kind == cuda::StepKind::kReduce) ++reduces;
    if (s.kind == cuda::StepKind::kCopy && s.dst.buffer != cuda::Ref::kStaging) ++copies;
  }
  // Reduce-scatter: each of 4 members reduces 3 peers' shards; all-gather: each copies 3 shards.
  CHECK(reduces == 12);
  CHECK(copies == 12);
  CHECK(prog.staging[0] == 3);  // no P2P: shards (10 = 3+3+2+2) are staged, the largest is 3
}

TEST_CASE("cuda_program.group_phases_have_fan_in_one") {
  // No device is read by more than one peer in any round of any group phase, for g = 2…8, with and
  // without P2P (staged reads count at their source) and on one GPU; the rotated lowering stays exact.
  for (int g = 2; g <= 8; ++g) {
    for (Collective first : {Collective::kReduceScatter, Collective::kReduce, Collective::kAllReduce}) {
      CAPTURE(g);
      CAPTURE(to_string(first));
      const Plan plan = test::group_plan(g, 37, ReduceOp::kSum, first);
      for (const int mode : {0, 1}) {
        CAPTURE(mode);
        const auto placement = cuda::place_devices(plan, g);
        const cuda::Program prog = cuda::lower_plan(plan, placement, peers(g, mode));
        std::map<cuda::Phase, int> rounds;
        for (const cuda::RoundFanIn& r : cuda::fan_in(prog)) {
          CAPTURE(to_string(r.phase));
          CAPTURE(r.round);
          CHECK(r.max() == 1);
          // Every round reads as many devices as it has pulls: g-1 rounds of g pulls, or a tree.
          const int reads = static_cast<int>(std::count(r.readers.begin(), r.readers.end(), 1));
          if (r.phase == cuda::Phase::kReduceScatter || r.phase == cuda::Phase::kAllGather) CHECK(reads == g);
          if (r.phase == cuda::Phase::kBroadcast) CHECK(reads == std::min(1 << r.round, g - (1 << r.round)));
          if (r.phase == cuda::Phase::kReduce) CHECK(reads == 1);
          rounds[r.phase] = std::max(rounds[r.phase], r.round + 1);
        }
        int log2g = 0;
        while ((1 << log2g) < g) ++log2g;
        switch (first) {
          case Collective::kReduceScatter:
          case Collective::kAllReduce:
            CHECK(rounds[cuda::Phase::kReduceScatter] == g - 1);
            CHECK(rounds[cuda::Phase::kAllGather] == g - 1);
            break;
          default:
            CHECK(rounds[cuda::Phase::kReduce] == g - 1);
            CHECK(rounds[cuda::Phase::kBroadcast] == log2g);
            break;
        }
        CudaReplay replay(plan, prog, ReduceOp::kSum);
        CHECK(replay.run(0) == 0);
        for (const auto& p : replay.problems()) FAIL_CHECK(p);
      }
    }
  }
}

TEST_CASE("cuda_program.fan_in_sees_an_unrotated_lowering") {
  // The measure can fail: three members all pulling from member 0 in their first step.
  cuda::Program prog;
  prog.placement.resize(4);
  for (int m = 1; m < 4; ++m) {
    cuda::Step s;
    s.kind = cuda::StepKind::kCopy;
    s.stream = m;
    s.dst = {m, 0, 0};
    s.src = {0, 0, 0};
    s.count = 5;
    s.op = 0;
    s.phase = cuda::Phase::kAllGather;
    s.round = 0;
    prog.steps.push_back(s);
  }
  const auto f = cuda::fan_in(prog);
  REQUIRE(f.size() == 1);
  CHECK(f[0].max() == 3);
  CHECK(f[0].readers == std::vector<int>{3, 0, 0, 0});
}

TEST_CASE("cuda_program.broadcast_is_a_binomial_tree") {
  // 8 members, root 2 (relative order 2,3,…,1): 7 full copies in 3 rounds; each child pulls from the member
  // 2^r before it, and a parent that received in an earlier round is waited for.
  Plan plan = test::empty_plan(8, 16, ReduceOp::kSum);
  test::add_auto(plan, test::group_op(Collective::kBroadcast, {0, 1, 2, 3, 4, 5, 6, 7}, 0, 0, 16, 2));
  const cuda::Program prog = cuda::lower_plan(plan, cuda::place_devices(plan, 8), peers(8, 1));
  std::vector<std::pair<int, int>> pulls;  // (child, parent)
  int waits = 0;
  for (const cuda::Step& s : prog.steps) {
    if (s.kind == cuda::StepKind::kCopy) pulls.emplace_back(s.stream, s.src.device);
    if (s.kind == cuda::StepKind::kWait) ++waits;
  }
  CHECK(pulls == std::vector<std::pair<int, int>>{{3, 2}, {4, 2}, {5, 3}, {6, 2}, {7, 3}, {0, 4}, {1, 5}});
  CHECK(waits == 4);  // 5 and 7 wait for 3, 0 for 4, 1 for 5 (the root's data needs no event)
}

namespace {

// Happens-before of the stream/event program, straight from CUDA's stream semantics: per work step,
// every work step ordered before it (same stream earlier, or before a record its stream waited on).
std::vector<std::set<int>> stream_order(const cuda::Program& prog) {
  std::vector<std::set<int>> before_stream(prog.placement.size());
  std::vector<std::set<int>> before_event(static_cast<std::size_t>(prog.events));
  std::vector<std::set<int>> out(prog.steps.size());
  for (std::size_t i = 0; i < prog.steps.size(); ++i) {
    const cuda::Step& s = prog.steps[i];
    auto& mine = before_stream[static_cast<std::size_t>(s.stream)];
    if (s.kind == cuda::StepKind::kRecord) {
      before_event[static_cast<std::size_t>(s.event)] = mine;
    } else if (s.kind == cuda::StepKind::kWait) {
      const auto& theirs = before_event[static_cast<std::size_t>(s.event)];
      mine.insert(theirs.begin(), theirs.end());
    } else {
      out[i] = mine;
      mine.insert(static_cast<int>(i));
    }
  }
  return out;
}

// Records what add_graph_nodes hands a builder, as the backend's CUDA builder receives it.
struct RecordingBuilder final : cuda::GraphBuilder {
  std::vector<int> steps;
  std::vector<std::vector<int>> deps;
  int add(int step, const std::vector<int>& d) override {
    for (int x : d) CHECK(x < static_cast<int>(steps.size()));  // topological order
    steps.push_back(step);
    deps.push_back(d);
    return static_cast<int>(steps.size()) - 1;
  }
};

// Per work step: the work steps before it in the graph (transitive closure of the recorded edges).
std::map<int, std::set<int>> graph_order(const RecordingBuilder& b) {
  std::vector<std::set<int>> closure(b.steps.size());
  std::map<int, std::set<int>> out;
  for (std::size_t n = 0; n < b.steps.size(); ++n) {
    for (int d : b.deps[n]) {
      closure[n].insert(b.steps[static_cast<std::size_t>(d)]);
      closure[n].insert(closure[static_cast<std::size_t>(d)].begin(), closure[static_cast<std::size_t>(d)].end());
    }
    out[b.steps[n]] = closure[n];
  }
  return out;
}

bool same_order(const cuda::Program& prog) {
  RecordingBuilder b;
  cuda::add_graph_nodes(prog, b);
  const auto streams = stream_order(prog);
  const auto graph = graph_order(b);
  std::size_t work = 0;
  bool same = true;
  for (std::size_t i = 0; i < prog.steps.size(); ++i) {
    const auto k = prog.steps[i].kind;
    if (k == cuda::StepKind::kRecord || k == cuda::StepKind::kWait) continue;
    ++work;
    const auto it = graph.find(static_cast<int>(i));
    if (it == graph.end() || it->second != streams[i]) same = false;
  }
  return same && work == b.steps.size();
}

}  // namespace

TEST_CASE("cuda_program.graph_dag_equals_the_stream_lowering") {
  // Every family, one GPU per device with and without P2P and all on one GPU, pipelined too: the graph
  // the backend builds orders exactly the work the streams and events order (host replay).
  int checked = 0;
  for (const Case& c : kCases) {
    for (int segments : {1, 3}) {
      const std::string spec_name = c.spec;
      CAPTURE(spec_name);
      CAPTURE(segments);
      const Plan plan = build(c, 101, ReduceOp::kAvg, segments);
      const int gpus = gpu_devices(plan);
      for (const auto& [devices, mode] : {std::pair{gpus, 1}, std::pair{gpus, 0}, std::pair{1, 1}}) {
        const cuda::Program prog = cuda::lower_plan(plan, cuda::place_devices(plan, devices), peers(devices, mode));
        CHECK(same_order(prog));
        const cuda::GraphDag dag = cuda::graph_of(prog);
        std::size_t work = 0;
        for (const cuda::Step& s : prog.steps) {
          work += s.kind != cuda::StepKind::kRecord && s.kind != cuda::StepKind::kWait ? 1 : 0;
        }
        CHECK(dag.step.size() == work);
        ++checked;
      }
    }
  }
  CHECK(checked == static_cast<int>(std::size(kCases)) * 2 * 3);
}

TEST_CASE("cuda_program.graph_dag_check_can_fail") {
  // Dropping a cross-stream wait changes the stream order; an extra graph edge would too: the
  // comparison sees the difference between a program and the graph of a different one.
  const Plan plan = build({"uniform:4", "xring"}, 16, ReduceOp::kSum);
  const cuda::Program good = cuda::lower_plan(plan, cuda::place_devices(plan, 4), peers(4, 1));
  RecordingBuilder b;
  cuda::add_graph_nodes(good, b);
  const auto graph = graph_order(b);
  int differ = 0;
  int waits = 0;
  for (std::size_t i = 0; i < good.steps.size(); ++i) {
    if (good.steps[i].kind != cuda::StepKind::kWait) continue;
    ++waits;
    cuda::Program broken = good;
    broken.steps.erase(broken.steps.begin() + static_cast<std::ptrdiff_t>(i));
    const auto streams = stream_order(broken);
    // Same work steps, shifted by one index after the dropped wait.
    bool same = true;
    for (std::size_t j = 0; j < broken.steps.size(); ++j) {
      const auto k = broken.steps[j].kind;
      if (k == cuda::StepKind::kRecord || k == cuda::StepKind::kWait) continue;
      std::set<int> shifted;
      for (int x : streams[j]) shifted.insert(x >= static_cast<int>(i) ? x + 1 : x);
      if (graph.at(static_cast<int>(j >= i ? j + 1 : j)) != shifted) same = false;
    }
    differ += same ? 0 : 1;
  }
  CHECK(waits > 0);
  CHECK(differ == waits);
}

TEST_CASE("nccl_program.communicator_cache_reuses_across_sizes") {
  // The backend's cache as a sweep drives it: the first size splits every group, later sizes none; a
  // plan with other groups splits only those; the same ranks in another order are another communicator.
  const Topology topo = load_topology("uniform:2x4");
  const auto keys_of = [&](const char* spec, std::int64_t count) {
    BuildOptions o;
    o.count = count;
    const Plan plan = build_plan(topo, spec, o);
    return nccl::communicator_keys(plan, host_processes(plan, device_machines(plan, topo)));
  };
  std::vector<nccl::CommKey> cache;
  int splits = 0;
  const auto prepare = [&](const std::vector<nccl::CommKey>& needed) {
    const nccl::CommPlan p = nccl::plan_communicators(cache, needed);
    splits += static_cast<int>(p.create.size());
    cache.insert(cache.end(), p.create.begin(), p.create.end());
    REQUIRE(p.slot.size() == needed.size());
    for (std::size_t g = 0; g < needed.size(); ++g) CHECK(cache.at(static_cast<std::size_t>(p.slot[g])) == needed[g]);
    return p;
  };
  const auto first = keys_of("nccl/xring", 2);
  REQUIRE(first.size() == 2);  // one NCCL group per machine
  CHECK(first[0] == nccl::CommKey{0, 1, 2, 3});
  CHECK(first[1] == nccl::CommKey{4, 5, 6, 7});
  prepare(first);
  CHECK(splits == 2);
  for (std::int64_t count : {std::int64_t{64}, std::int64_t{1} << 18, std::int64_t{1} << 20}) {
    const auto again = keys_of("nccl/xring", count);
    CHECK(again == first);
    const nccl::CommPlan p = prepare(again);
    CHECK(p.create.empty());
    CHECK(p.slot == std::vector<int>{0, 1});
  }
  CHECK(splits == 2);
  // Another key, and a permutation of a cached one, are new; a repeated key is split once.
  const nccl::CommPlan p = prepare({{0, 4}, {3, 2, 1, 0}, {0, 4}, {4, 5, 6, 7}});
  CHECK(p.create == std::vector<nccl::CommKey>{{0, 4}, {3, 2, 1, 0}});
  CHECK(p.slot == std::vector<int>{2, 3, 2, 1});
  CHECK(splits == 4);
}

TEST_CASE("nccl_program.every_family_matches_and_is_exact") {
  const Topology* none = nullptr;
  int replays = 0;
  for (const Case& c : kCases) {
    const Topology topo = load_topology(c.topo);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin}) {
      for (std::int64_t count : {std::int64_t{1}, std::int64_t{13}, std::int64_t{256}}) {
        for (int segments : {1, 3}) {
          const std::string topo_name = c.topo;
          CAPTURE(topo_name);
          const std::string spec_name = c.spec;
          CAPTURE(spec_name);
          CAPTURE(to_string(op));
          CAPTURE(count);
          CAPTURE(segments);
          const Plan plan = build(c, count, op, segments);
          const auto progs = lower_all(plan, (count % 2) ? &topo : none);
          // Transfers between devices of one rank are local copies: NCCL never sees a self send.
          for (const nccl::Program& p : progs) {
            for (const nccl::Step& st : p.steps) {
              if (st.kind == nccl::StepKind::kSend || st.kind == nccl::StepKind::kRecv) CHECK(st.peer != p.rank);
            }
          }
          NcclReplay replay(plan, progs, op, static_cast<unsigned>(count * 31 + segments));
          const std::int64_t wrong = replay.run(1);
          for (const auto& p : replay.problems()) FAIL_CHECK(p);
          CHECK(wrong == 0);
          if (!replay.problems().empty() || wrong != 0) {
            for (const auto& p : progs) MESSAGE(nccl::describe(p));
          }
          ++replays;
        }
      }
    }
  }
  CHECK(replays == static_cast<int>(std::size(kCases)) * 3 * 3 * 2);
}

TEST_CASE("nccl_program.groups_batch_independent_transfers") {
  // A ring step sends and receives at once: each rank's first group holds a send and a
  // receive, groups batch several transfers, and a reduce-receive lands in staging and is
  // combined right after its group.
  const Plan plan = build({"uniform:4", "xring"}, 8, ReduceOp::kSum);
  const auto progs = lower_all(plan, nullptr);
  for (const nccl::Program& p : progs) {
    CAPTURE(nccl::describe(p));
    REQUIRE(p.steps.size() > 3);
    CHECK(p.steps[0].kind == nccl::StepKind::kGroupStart);
    int groups = 0;
    int transfers = 0;
    bool first = true;
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      if (p.steps[i].kind != nccl::StepKind::kGroupStart) continue;
      ++groups;
      int sends = 0;
      int recvs = 0;
      std::vector<std::int64_t> staged;
      std::size_t j = i + 1;
      for (; p.steps[j].kind != nccl::StepKind::kGroupEnd; ++j) {
        sends += p.steps[j].kind == nccl::StepKind::kSend;
        recvs += p.steps[j].kind == nccl::StepKind::kRecv;
        if (p.steps[j].kind == nccl::StepKind::kRecv && p.steps[j].dst.buffer == nccl::Ref::kStaging) {
          staged.push_back(p.steps[j].dst.offset);
        }
      }
      transfers += sends + recvs;
      if (first) {
        CHECK(sends >= 1);
        CHECK(recvs >= 1);
        first = false;
      }
      // Each staged receive is reduced in right after the group ends.
      for (std::size_t k = 0; k < staged.size(); ++k) {
        REQUIRE(j + 1 + k < p.steps.size());
        CHECK(p.steps[j + 1 + k].kind == nccl::StepKind::kReduce);
        CHECK(p.steps[j + 1 + k].src.buffer == nccl::Ref::kStaging);
        CHECK(p.steps[j + 1 + k].src.offset == staged[k]);
      }
    }
    // 3 reduce-scatter + 3 all-gather steps, each a send and a receive: batched into fewer groups.
    CHECK(transfers == 12);
    CHECK(groups < transfers);
    CHECK(p.staging >= 2);
  }
}

TEST_CASE("nccl_program.simulator_catches_a_deadlock") {
  // Swapping the order of a rank's first two units must be caught as a deadlock or a
  // mismatched pair: the simulator can fail.
  const Plan plan = build({"uniform:2", "nccl"}, 8, ReduceOp::kSum);
  auto progs = lower_all(plan, nullptr);
  REQUIRE(progs.size() == 2);
  // Each rank has one collective; add a receive nobody sends: a stuck peer.
  nccl::Step start, recv, end;
  start.kind = nccl::StepKind::kGroupStart;
  recv.kind = nccl::StepKind::kRecv;
  recv.peer = 1;
  recv.count = 4;
  recv.op = 99;
  recv.dst = nccl::Ref{0, 0, 0};
  end.kind = nccl::StepKind::kGroupEnd;
  progs[0].steps.insert(progs[0].steps.begin(), {start, recv, end});
  NcclReplay replay(plan, progs, ReduceOp::kSum, 1);
  CHECK(replay.run(0) == -1);
  REQUIRE_FALSE(replay.problems().empty());
  CHECK(replay.problems().front().rfind("deadlock", 0) == 0);
}

TEST_CASE("nccl_program.host_group_member_is_rejected") {
  Plan plan;
  plan.count = 4;
  plan.devices = {PlanDevice{0, "gpu0", true}, PlanDevice{1, "cpu0", true}};
  plan.buffers = {{4}, {4}};
  Op g;
  g.kind = OpKind::kGroup;
  g.collective = Collective::kAllReduce;
  g.group = {0, 1};
  g.dst = Location{-1, 0, 0, 4};
  plan.add(g);
  CHECK_THROWS_AS(nccl::lower_rank(plan, {0, 1}, {false, true}, 0), InvalidInput);
}

namespace {

// True when a copy step reads and writes host memory directly (a host-to-host cudaMemcpyAsync,
// which is synchronous with respect to the host instead of stream-ordered).
bool host_to_host(const cuda::Step& s, const std::vector<cuda::Placement>& placement) {
  auto host = [&](const cuda::Ref& r) {
    return r.buffer != cuda::Ref::kStaging && placement[static_cast<std::size_t>(r.device)].host;
  };
  return s.kind == cuda::StepKind::kCopy && host(s.dst) && host(s.src);
}

// Two GPUs and two CPU helpers of one machine: the helpers gather, combine and exchange through a
// host-to-host copy, then hand the sum back (sum only: no scale).
Plan two_helper_plan(std::int64_t count) {
  Plan p = test::empty_plan(2, count, ReduceOp::kSum, 2);
  const int a = p.add_buffer(2, count);
  const int b = p.add_buffer(3, count);
  const Location g0{0, 0, 0, count}, g1{1, 0, 0, count}, h0{2, a, 0, count}, h1{3, b, 0, count};
  test::add_auto(p, test::copy_op(g0, h0));    // gpu0 -> cpu0
  test::add_auto(p, test::copy_op(g1, h1));    // gpu1 -> cpu1
  test::add_auto(p, test::reduce_op(h1, h0));  // cpu0 += cpu1
  test::add_auto(p, test::copy_op(h0, h1));    // cpu1 := cpu0 (host to host)
  test::add_auto(p, test::copy_op(h1, g0));    // cpu1 -> gpu0
  test::add_auto(p, test::copy_op(h0, g1));    // cpu0 -> gpu1
  return p;
}

}  // namespace

TEST_CASE("cuda_program.host_to_host_copies_are_staged") {
  // pscpu/pscpu over two machines exchanges between the machines' CPU helpers; the hand plan
  // copies from one helper to the other directly.
  const Plan hier = build({"uniform:2x4", "pscpu/pscpu"}, 101, ReduceOp::kSum);
  const Plan hand = two_helper_plan(37);
  verify_or_throw(hand);
  for (const Plan* plan : {&hier, &hand}) {
    int host_copies = 0;
    for (const Op& op : plan->ops) {
      host_copies += op.kind == OpKind::kCopy && cuda::parse_device_name(plan->devices[op.src.device].name).host &&
                     cuda::parse_device_name(plan->devices[op.dst.device].name).host;
    }
    REQUIRE(host_copies > 0);  // the case this test is about
    for (int gpus : {1, 2}) {
      CAPTURE(gpus);
      const auto placement = cuda::place_devices(*plan, gpus);
      const cuda::Program prog = cuda::lower_plan(*plan, placement, peers(gpus, 1));
      int staged_in = 0;
      for (const cuda::Step& s : prog.steps) {
        CHECK_FALSE(host_to_host(s, placement));
        staged_in += s.kind == cuda::StepKind::kCopy && s.dst.buffer == cuda::Ref::kStaging &&
                     placement[static_cast<std::size_t>(s.src.device)].host;
      }
      CHECK(staged_in >= host_copies);
      for (const auto& p : replay_cuda(*plan, ReduceOp::kSum, gpus, peers(gpus, 1), nullptr)) FAIL_CHECK(p);
    }
  }
}

TEST_CASE("nccl_program.host_to_host_copies_are_staged") {
  // Both helpers live on rank 0 (the machine's lowest participant): cpu1 := cpu0 is a local copy
  // between two host buffers, lowered to host -> staging -> host.
  const Plan plan = two_helper_plan(37);
  verify_or_throw(plan);
  const auto progs = lower_all(plan, nullptr);
  REQUIRE(progs.size() == 2);
  const nccl::Program& p0 = progs[0];
  CAPTURE(nccl::describe(p0));
  int staged_pairs = 0;
  for (std::size_t i = 0; i < p0.steps.size(); ++i) {
    const nccl::Step& s = p0.steps[i];
    if (s.kind != nccl::StepKind::kCopy) continue;
    const bool src_host = s.src.buffer != nccl::Ref::kStaging && p0.host_device[static_cast<std::size_t>(s.src.device)];
    const bool dst_host = s.dst.buffer != nccl::Ref::kStaging && p0.host_device[static_cast<std::size_t>(s.dst.device)];
    CHECK_FALSE((src_host && dst_host));
    if (src_host && s.dst.buffer == nccl::Ref::kStaging && i + 1 < p0.steps.size() &&
        p0.steps[i + 1].kind == nccl::StepKind::kCopy && p0.steps[i + 1].src.buffer == nccl::Ref::kStaging) {
      ++staged_pairs;
    }
  }
  CHECK(staged_pairs == 1);
  CHECK(p0.staging >= 37);
  NcclReplay replay(plan, progs, ReduceOp::kSum, 5);
  CHECK(replay.run(2) == 0);
  for (const auto& problem : replay.problems()) FAIL_CHECK(problem);
}

TEST_CASE("cuda_program.memory_need") {
  // What prepare() allocates, per GPU and in pinned host memory, summed by hand from the plan:
  // the cuda backend's check_plan compares it with cudaMemGetInfo before allocating anything.
  const std::size_t es = 4;
  for (const Case& c :
       std::vector<Case>{{"uniform:8", "xring"}, {"uniform:8", "pscpu"}, {"uniform:2x4", "pscpu/pscpu"}}) {
    CAPTURE(c.spec);
    const Plan plan = build(c, 1001, ReduceOp::kSum);
    for (int gpus : {1, 2, 8}) {
      CAPTURE(gpus);
      const auto placement = cuda::place_devices(plan, gpus);
      const cuda::Program prog = cuda::lower_plan(plan, placement, peers(gpus, 0));
      const cuda::MemoryNeed need = cuda::memory_need(plan, prog, gpus, es);
      std::vector<std::uint64_t> gpu(static_cast<std::size_t>(gpus), 0);
      std::vector<int> sharing(static_cast<std::size_t>(gpus), 0);
      std::uint64_t host = 0;
      for (std::size_t d = 0; d < plan.devices.size(); ++d) {
        std::uint64_t own = 0;
        for (std::size_t b = 0; b < plan.buffers[d].size(); ++b) {
          std::int64_t elements = plan.buffers[d][b];
          if (b == 0 && plan.devices[d].participant) {
            CHECK(elements >= plan.count);  // the user's buffer holds the whole message
            elements = std::max(elements, plan.count);
          }
          own += static_cast<std::uint64_t>(elements) * es;
        }
        const auto g = static_cast<std::size_t>(placement[d].cuda_device);
        (placement[d].host ? host : gpu[g]) += own;
        gpu[g] += static_cast<std::uint64_t>(prog.staging[d]) * es;
        sharing[g] += placement[d].host ? 0 : 1;
      }
      CHECK(need.gpu_bytes == gpu);
      CHECK(need.host_bytes == host);
      CHECK(need.devices_on_gpu == sharing);
      // One GPU holds every GPU-placed device's buffers; helpers' buffers are host memory.
      if (gpus == 1) CHECK(need.devices_on_gpu[0] == gpu_devices(plan));
      CHECK((need.host_bytes > 0) == (std::string(c.spec).find("pscpu") != std::string::npos));
    }
  }
}

TEST_CASE("nccl_program.rank_memory") {
  // Per rank: its GPU devices' buffers and its staging on the GPU, its CPU helpers' buffers and the
  // message-sized check copy in pinned memory. Over all ranks the buffers add up to the plan's.
  const std::size_t es = 2;
  for (const Case& c :
       std::vector<Case>{{"uniform:8", "xring"}, {"uniform:2x4", "nccl/xring"}, {"uniform:2x4", "pscpu/pscpu"}}) {
    CAPTURE(c.spec);
    const Plan plan = build(c, 777, ReduceOp::kSum);
    const std::vector<int> machines = nccl::machines_from_names(plan);
    const std::vector<bool> host = nccl::host_devices_from_names(plan);
    const std::vector<int> host_of = host_processes(plan, machines);
    std::uint64_t gpu_total = 0, host_total = 0;
    for (int r = 0; r < plan.ranks(); ++r) {
      const nccl::Program prog = nccl::lower_rank(plan, host_of, host, r);
      const nccl::RankMemory need = nccl::rank_memory(plan, prog, es);
      std::uint64_t gpu = 0, pinned = 0;
      for (int d : prog.devices) {
        for (std::size_t b = 0; b < plan.buffers[static_cast<std::size_t>(d)].size(); ++b) {
          const std::int64_t elements = plan.buffers[static_cast<std::size_t>(d)][b];
          const std::int64_t held = b == 0 && plan.devices[static_cast<std::size_t>(d)].participant
                                        ? std::max(elements, plan.count)
                                        : elements;
          (host[static_cast<std::size_t>(d)] ? pinned : gpu) += static_cast<std::uint64_t>(held) * es;
        }
      }
      CHECK(need.gpu_bytes == gpu + static_cast<std::uint64_t>(prog.staging) * es);
      CHECK(need.host_bytes == pinned + static_cast<std::uint64_t>(plan.count) * es);
      gpu_total += gpu;
      host_total += pinned;
    }
    std::uint64_t plan_gpu = 0, plan_host = 0;
    for (std::size_t d = 0; d < plan.devices.size(); ++d) {
      for (std::size_t b = 0; b < plan.buffers[d].size(); ++b) {
        (host[d] ? plan_host : plan_gpu) +=
            static_cast<std::uint64_t>(cuda::buffer_elements(plan, static_cast<int>(d), static_cast<int>(b))) * es;
      }
    }
    CHECK(gpu_total == plan_gpu);  // every device is hosted by exactly one rank
    CHECK(host_total == plan_host);
    CHECK((plan_host > 0) == (std::string(c.spec).find("pscpu") != std::string::npos));
  }
}
