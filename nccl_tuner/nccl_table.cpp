#include "nccl_tuner/nccl_table.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/json_reader.hpp"
#include "artune/core/nccl_names.hpp"
#include "artune/core/decision_table_schema.hpp"
#include "nccl_tuner/tuner_abi.h"

namespace artune::nccl_tuner {

namespace {

constexpr std::string_view kSchema = kDecisionTableSchema;
constexpr int kSchemaVersion = kDecisionTableSchemaVersion;

// The names' cost-table indices (core/nccl_names.hpp) are those of NCCL's tuner interface (tuner_abi.h).
static_assert(nccl_name(NcclAlgo::kTree).index == ARTUNE_NCCL_ALGO_TREE);
static_assert(nccl_name(NcclAlgo::kRing).index == ARTUNE_NCCL_ALGO_RING);
static_assert(nccl_name(NcclAlgo::kNvls).index == ARTUNE_NCCL_ALGO_NVLS);
static_assert(nccl_name(NcclAlgo::kNvlsTree).index == ARTUNE_NCCL_ALGO_NVLS_TREE);
static_assert(nccl_name(NcclAlgo::kPat).index == ARTUNE_NCCL_ALGO_PAT);
static_assert(nccl_name(NcclProto::kLL).index == ARTUNE_NCCL_PROTO_LL);
static_assert(nccl_name(NcclProto::kLL128).index == ARTUNE_NCCL_PROTO_LL128);
static_assert(nccl_name(NcclProto::kSimple).index == ARTUNE_NCCL_PROTO_SIMPLE);

struct NameIndex {
  std::string_view name;
  int index;
};
// A plan's "collective" (tuner/candidates.cpp candidate_to_json; collective_flag_name) → ncclFunc_t.
constexpr NameIndex kCollectives[] = {{"allreduce", artuneNcclFuncAllReduce},
                                      {"allgather", artuneNcclFuncAllGather},
                                      {"reducescatter", artuneNcclFuncReduceScatter}};
// Readable names of the same, for log lines.
constexpr NameIndex kCollectiveNames[] = {{"all-reduce", artuneNcclFuncAllReduce},
                                          {"all-gather", artuneNcclFuncAllGather},
                                          {"reduce-scatter", artuneNcclFuncReduceScatter}};

[[noreturn]] void fail(std::string_view where, std::string_view reason) {
  throw TableError(std::string(where) + ": " + std::string(reason));
}

}  // namespace

const Range& Table::lookup(std::uint64_t bytes) const {
  // Ranges ascend by min_bytes (read_table_json checks it): a binary search, the call NCCL makes per collective.
  return artune::range_for(ranges, bytes);
}

Pick parse_nccl_spec(std::string_view spec, std::string_view where) {
  auto not_nccl = [&]() {
    fail(where, "must be one of NCCL's choices (nccl or nccl.ALGO[.PROTO][.cN]), not '" +
                    std::string(spec) + "' (tune with artune autotune --target nccl)");
  };
  Pick pick;
  if (spec == "nccl") return pick;
  if (spec.substr(0, 5) != "nccl.") not_nccl();
  // ALGO[.PROTO][.cN]
  std::string_view rest = spec.substr(5);
  auto next_part = [&rest]() {
    const std::size_t dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
    return part;
  };
  const std::string_view algo = next_part();
  if (const auto a = nccl_algo_of(algo)) pick.algo = nccl_name(*a).index;
  if (pick.algo < 0) not_nccl();
  std::string_view part = next_part();
  if (const auto p = nccl_proto_of(part)) pick.proto = nccl_name(*p).index;
  if (pick.proto >= 0) part = next_part();
  if (!part.empty()) {
    pick.channels = std::max(nccl_channel_count(part), 0);
    if (pick.channels == 0) not_nccl();
  }
  if (!rest.empty() || (spec.back() == '.')) not_nccl();
  return pick;
}

namespace {

// An integer field that must be at least `least`: "must be ≥ 1, not 0".
std::uint64_t at_least(const JsonField& field, std::uint64_t least) {
  const std::uint64_t value = field.unsigned_integer();
  if (value < least) field.fail("must be ≥ " + std::to_string(least) + ", not " + std::to_string(value));
  return value;
}

// The table as core/json_reader reads every artune document; its InvalidInput becomes TableError in
// parse_table, so that nothing but TableError leaves the reader.
Table read_table_json(std::string_view text, std::string_view source) {
  const nlohmann::json doc = parse_json_input(text, source);
  const JsonField root(doc, source);
  root.expect_object();
  const std::string schema = root.at("schema").str();
  if (schema != kSchema) {
    root.at("schema").fail("must be \"" + std::string(kSchema) + "\", not \"" + schema + "\" (not a decision table)");
  }
  const std::uint64_t version = root.at("schema_version").unsigned_integer();
  if (version != static_cast<std::uint64_t>(kSchemaVersion)) {
    root.at("schema_version")
        .fail("must be " + std::to_string(kSchemaVersion) + ", not " + std::to_string(version) +
              " (this plugin reads version " + std::to_string(kSchemaVersion) + ")");
  }
  Table table;
  const JsonField topo = root.at("topology");
  table.ranks = static_cast<std::size_t>(at_least(topo.at("gpus"), 1));
  table.machines = static_cast<std::size_t>(at_least(topo.at("machines"), 1));
  const JsonField ranges = root.at("ranges");
  const std::size_t count = ranges.array_size();
  if (count == 0) ranges.fail("must hold at least one size range, not an empty array");
  for (std::size_t i = 0; i < count; ++i) {
    const JsonField range = ranges[i];
    Range r;
    r.min_bytes = range.at("min_bytes").unsigned_integer();
    r.max_bytes = range.at("max_bytes").unsigned_integer();
    const std::uint64_t* previous = table.ranges.empty() ? nullptr : &table.ranges.back().max_bytes;
    if (const auto problem = artune::range_bounds_problem(r.min_bytes, r.max_bytes, previous)) {
      range.at(problem->field).fail(problem->message);
    }
    const JsonField plan = range.at("plan");
    const std::string family = plan.at("family").str();
    r.spec = plan.at("spec").str();
    if (family != "nccl") {
      plan.at("family").fail("must be \"nccl\", not \"" + family + "\" (plan '" + r.spec +
                             "' is not one of NCCL's choices; tune with artune autotune --target nccl)");
    }
    r.pick = parse_nccl_spec(r.spec, plan.at("spec").where());
    int collective = artuneNcclFuncAllReduce;
    if (plan.has("collective")) {
      const JsonField field = plan.at("collective");
      const std::string name = field.str();
      collective = -1;
      for (const auto& c : kCollectives) {
        if (c.name == name) collective = c.index;
      }
      if (collective < 0) field.fail("must be allreduce, allgather or reducescatter, not '" + name + "'");
    }
    if (i == 0) table.collective = collective;
    if (collective != table.collective) plan.at("collective").fail("must be the first range's collective");
    table.ranges.push_back(std::move(r));
  }
  return table;
}

}  // namespace

Table parse_table(std::string_view text, std::string_view source) {
  try {
    return read_table_json(text, source);
  } catch (const InvalidInput& e) {
    throw TableError(e.what());
  }
}

std::string read_regular_file(const std::string& path) {
  // O_NONBLOCK: a FIFO named by mistake must not block NCCL's init; non-regular files are refused.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxTableBytes) {
    ::close(fd);
    fail(path, "larger than " + std::to_string(kMaxTableBytes >> 20) + " MiB");
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      fail(path, "read failed: " + reason);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxTableBytes) {
      ::close(fd);
      fail(path, "larger than " + std::to_string(kMaxTableBytes >> 20) + " MiB");
    }
  }
  ::close(fd);
  return text;
}

Table read_table(const std::string& path) { return parse_table(read_regular_file(path), path); }

void check_fits(const Table& table, std::size_t ranks, std::size_t machines, std::string_view source) {
  if (table.ranks != ranks || table.machines != machines) {
    fail(source, "tuned for " + std::to_string(table.ranks) + " GPUs on " + std::to_string(table.machines) +
                     " machine(s), this communicator has " + std::to_string(ranks) + " ranks on " +
                     std::to_string(machines) + " node(s)");
  }
}

bool apply_pick(const Pick& pick, float* costs, int num_algo, int num_proto) {
  if (costs == nullptr || pick.algo < 0 || pick.algo >= num_algo || num_proto <= 0) return false;
  float* row = costs + static_cast<std::ptrdiff_t>(pick.algo) * num_proto;
  int proto = pick.proto;
  if (proto < 0) {
    // Only the algorithm was tuned: keep NCCL's cheapest protocol of that algorithm.
    for (int p = 0; p < num_proto; ++p) {
      if (row[p] >= 0 && (proto < 0 || row[p] < row[proto])) proto = p;
    }
    if (proto < 0) return false;
  }
  if (proto >= num_proto || !(row[proto] >= 0)) return false;
  row[proto] = 0.0f;
  return true;
}

const char* collective_name(int collective) {
  for (const auto& c : kCollectiveNames) {
    if (c.index == collective) return c.name.data();
  }
  return "?";
}

const char* algo_name(int algo) {
  for (const NcclName& a : kNcclAlgoNames) {
    if (a.index == algo) return a.spec.data();  // a literal: NUL-terminated
  }
  return "?";
}

const char* proto_name(int proto) {
  for (const NcclName& p : kNcclProtoNames) {
    if (p.index == proto) return p.spec.data();
  }
  return "?";
}

}  // namespace artune::nccl_tuner
