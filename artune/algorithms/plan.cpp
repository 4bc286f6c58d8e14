#include "artune/algorithms/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "artune/core/error.hpp"
#include "artune/core/json_reader.hpp"
#include "artune/core/parameters.hpp"

namespace artune {

int Plan::ranks() const {
  int n = 0;
  for (const PlanDevice& d : devices) n += d.participant ? 1 : 0;
  return n;
}

int Plan::add(Op op) {
  op.id = static_cast<int>(ops.size());
  ops.push_back(std::move(op));
  return ops.back().id;
}

int Plan::add_buffer(int device, std::int64_t elements) {
  if (device < 0 || device >= static_cast<int>(devices.size())) {
    throw InvalidInput(
        fmt::format("plan: add_buffer: device {} out of range (plan has {} devices)", device, devices.size()));
  }
  if (elements < 0) throw InvalidInput(fmt::format("plan: add_buffer: negative size {}", elements));
  if (buffers.size() < devices.size()) buffers.resize(devices.size());
  auto& list = buffers[static_cast<std::size_t>(device)];
  // A participant's buffer 0 is always the user buffer, so scratch starts at 1.
  if (list.empty() && devices[static_cast<std::size_t>(device)].participant) list.push_back(count);
  list.push_back(elements);
  return static_cast<int>(list.size()) - 1;
}

std::string_view to_string(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::kCopy: return "copy";
    case OpKind::kReduce: return "reduce";
    case OpKind::kScale: return "scale";
    case OpKind::kGroup: return "group";
  }
  return "?";
}

std::string_view to_string(Collective c) noexcept {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "all_gather";
  }
  return "?";
}

std::string_view collective_flag_name(Collective c) noexcept {
  switch (c) {
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllReduce: break;
  }
  return "allreduce";
}

Collective parse_collective_kind(std::string_view text, std::string_view flag) {
  if (text == "allreduce" || text == "all_reduce") return Collective::kAllReduce;
  if (text == "allgather" || text == "all_gather") return Collective::kAllGather;
  if (text == "reducescatter" || text == "reduce_scatter") return Collective::kReduceScatter;
  throw InvalidInput(fmt::format("{}: unknown collective '{}' (allreduce, allgather, reducescatter)", flag, text));
}

double bus_factor(Collective c, int ranks) noexcept {
  if (ranks <= 1) return 0.0;
  const double n = ranks;
  return c == Collective::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

std::pair<std::int64_t, std::int64_t> collective_block(std::int64_t count, int ranks, int k,
                                                       const std::vector<std::int64_t>& blocks) {
  if (blocks.empty()) return even_piece(count, ranks, k);
  ARTUNE_CHECK(k >= 0 && static_cast<std::size_t>(k) < blocks.size(), "block index out of the plan's ranks");
  std::int64_t offset = 0;
  for (int i = 0; i < k; ++i) offset += blocks[static_cast<std::size_t>(i)];
  return {offset, blocks[static_cast<std::size_t>(k)]};
}

std::pair<std::int64_t, std::int64_t> collective_block(const Plan& plan, int k) {
  return collective_block(plan.count, plan.ranks(), k, plan.blocks);
}

void append_op_devices(const Op& op, std::vector<int>& out) {
  switch (op.kind) {
    case OpKind::kCopy:
    case OpKind::kReduce:
      out.push_back(op.src.device);
      if (op.dst.device != op.src.device) out.push_back(op.dst.device);
      break;
    case OpKind::kScale: out.push_back(op.dst.device); break;
    case OpKind::kGroup: {
      const auto from = static_cast<std::ptrdiff_t>(out.size());
      out.insert(out.end(), op.group.begin(), op.group.end());
      std::sort(out.begin() + from, out.end());
      out.erase(std::unique(out.begin() + from, out.end()), out.end());
      break;
    }
  }
}

std::vector<int> op_devices(const Op& op) {
  std::vector<int> out;
  append_op_devices(op, out);
  return out;
}

bool is_transfer(const Op& op) {
  if (op.kind == OpKind::kGroup) return op_devices(op).size() > 1;
  if (op.kind == OpKind::kScale) return false;
  return op.src.device != op.dst.device;
}

// ---------------------------------------------------------------------------
// JSON

namespace {

nlohmann::json location_to_json(const Location& l) {
  return {{"device", l.device}, {"buffer", l.buffer}, {"offset", l.offset}, {"count", l.count}};
}

// Reading helpers: every failure names the source and the JSON path.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    json_reader::fail(source_, path, reason);
  }

  const nlohmann::json& field(const nlohmann::json& obj, const std::string& path, const char* key) const {
    return json_reader::required(obj, source_, path, key);
  }

  void expect_object(const nlohmann::json& v, const std::string& path) const {
    json_reader::expect_object(v, source_, path);
  }
  void expect_array(const nlohmann::json& v, const std::string& path) const {
    json_reader::expect_array(v, source_, path);
  }

  std::int64_t integer(const nlohmann::json& v, const std::string& path) const {
    return json_reader::integer(v, source_, path);
  }

  int small_int(const nlohmann::json& v, const std::string& path) const {
    const std::int64_t x = integer(v, path);
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) fail(path, "out of range");
    return static_cast<int>(x);
  }

  std::string string(const nlohmann::json& v, const std::string& path) const {
    return json_reader::string(v, source_, path);
  }

  double number(const nlohmann::json& v, const std::string& path) const {
    return json_reader::number(v, source_, path);
  }

  // Rejects keys the format does not know, so that typos do not pass silently.
  void only_keys(const nlohmann::json& obj, const std::string& path,
                 std::initializer_list<std::string_view> keys) const {
    json_reader::allow_keys(obj, source_, path, keys);
  }

 private:
  std::string_view source_;
};

Location read_location(const Reader& r, const nlohmann::json& v, const std::string& path) {
  r.expect_object(v, path);
  r.only_keys(v, path, {"device", "buffer", "offset", "count"});
  Location l;
  l.device = r.small_int(r.field(v, path, "device"), path + ".device");
  l.buffer = r.small_int(r.field(v, path, "buffer"), path + ".buffer");
  l.offset = r.integer(r.field(v, path, "offset"), path + ".offset");
  l.count = r.integer(r.field(v, path, "count"), path + ".count");
  return l;
}

OpKind parse_kind(const Reader& r, const std::string& text, const std::string& path) {
  for (OpKind k : {OpKind::kCopy, OpKind::kReduce, OpKind::kScale, OpKind::kGroup}) {
    if (text == to_string(k)) return k;
  }
  r.fail(path, fmt::format("unknown op kind '{}' (copy, reduce, scale, group)", text));
}

Collective parse_collective(const Reader& r, const std::string& text, const std::string& path) {
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce, Collective::kReduceScatter,
                       Collective::kAllGather}) {
    if (text == to_string(c)) return c;
  }
  r.fail(path,
         fmt::format("unknown collective '{}' (all_reduce, broadcast, reduce, reduce_scatter, all_gather)", text));
}

const Location kUnusedLocation{};

}  // namespace

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json doc;
  doc["spec"] = plan.spec;
  doc["count"] = plan.count;
  doc["op"] = std::string(to_string(plan.reduce_op));
  if (plan.collective != Collective::kAllReduce) doc["collective"] = std::string(to_string(plan.collective));
  if (!plan.blocks.empty()) doc["blocks"] = plan.blocks;
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json helpers = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.devices.size(); ++i) {
    const PlanDevice& d = plan.devices[i];
    if (d.participant) {
      ranks.push_back({{"rank", static_cast<int>(i)}, {"device", d.name}, {"node", d.node}});
    } else {
      helpers.push_back({{"index", static_cast<int>(i)}, {"device", d.name}, {"node", d.node}});
    }
  }
  doc["ranks"] = std::move(ranks);
  doc["helpers"] = std::move(helpers);
  doc["buffers"] = plan.buffers;
  nlohmann::json ops = nlohmann::json::array();
  for (const Op& op : plan.ops) {
    nlohmann::json j;
    j["id"] = op.id;
    j["kind"] = std::string(to_string(op.kind));
    // Fields an op kind does not use are written only when set, which keeps
    // the output readable and the round trip exact.
    const bool uses_src = op.kind == OpKind::kCopy || op.kind == OpKind::kReduce;
    if (uses_src || op.src != kUnusedLocation) j["src"] = location_to_json(op.src);
    j["dst"] = location_to_json(op.dst);
    j["deps"] = op.deps;
    const Op defaults;
    if (op.kind == OpKind::kGroup || op.collective != defaults.collective || !op.group.empty() ||
        op.root != defaults.root) {
      j["collective"] = std::string(to_string(op.collective));
      j["group"] = op.group;
      j["root"] = op.root;
    }
    if (op.kind == OpKind::kScale || op.divisor != defaults.divisor) j["divisor"] = op.divisor;
    if (!op.algo.empty()) j["algo"] = op.algo;
    if (op.phase != defaults.phase) j["phase"] = op.phase;
    ops.push_back(std::move(j));
  }
  doc["ops"] = std::move(ops);
  return doc;
}

Plan plan_from_json(const nlohmann::json& doc, std::string_view source) {
  const Reader r(source);
  r.expect_object(doc, "");
  Plan plan;
  plan.spec = doc.contains("spec") ? r.string(doc["spec"], "spec") : std::string();
  plan.count = r.integer(r.field(doc, "", "count"), "count");
  if (plan.count < 0) r.fail("count", "must be ≥ 0");
  if (doc.contains("op")) {
    const std::string op = r.string(doc["op"], "op");
    plan.reduce_op = parse_reduce_op(op, fmt::format("{}: op", source));
  }
  if (doc.contains("collective")) {
    plan.collective = parse_collective(r, r.string(doc["collective"], "collective"), "collective");
    if (plan.collective == Collective::kBroadcast || plan.collective == Collective::kReduce) {
      r.fail("collective", "a plan computes all_reduce, all_gather or reduce_scatter");
    }
  }

  // Devices: ranks 0..R-1, then helpers.
  const auto& ranks = r.field(doc, "", "ranks");
  r.expect_array(ranks, "ranks");
  auto read_device = [&](const nlohmann::json& v, const std::string& path, const char* index_key, bool participant) {
    r.expect_object(v, path);
    r.only_keys(v, path, {index_key, "device", "node"});
    const int index = r.small_int(r.field(v, path, index_key), path + "." + index_key);
    if (index != static_cast<int>(plan.devices.size())) {
      r.fail(path + "." + index_key,
             fmt::format("must be {} (ranks first, then helpers, in order)", plan.devices.size()));
    }
    PlanDevice d;
    d.participant = participant;
    d.name = r.string(r.field(v, path, "device"), path + ".device");
    d.node = r.small_int(r.field(v, path, "node"), path + ".node");
    if (d.node < -1) r.fail(path + ".node", "must be a topology node index or -1");
    plan.devices.push_back(std::move(d));
  };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    read_device(ranks[i], fmt::format("ranks[{}]", i), "rank", true);
  }
  if (doc.contains("helpers")) {
    const auto& helpers = doc["helpers"];
    r.expect_array(helpers, "helpers");
    for (std::size_t i = 0; i < helpers.size(); ++i) {
      read_device(helpers[i], fmt::format("helpers[{}]", i), "index", false);
    }
  }
  const int ndev = static_cast<int>(plan.devices.size());
  if (doc.contains("blocks")) {
    const auto& blocks = doc["blocks"];
    r.expect_array(blocks, "blocks");
    if (plan.collective == Collective::kAllReduce)
      r.fail("blocks", "only all_gather and reduce_scatter plans have blocks");
    if (blocks.size() != ranks.size()) {
      r.fail("blocks",
             fmt::format("must list the block of each of the {} ranks (has {})", ranks.size(), blocks.size()));
    }
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const std::int64_t n = r.integer(blocks[k], fmt::format("blocks[{}]", k));
      if (n < 0 || n > plan.count - sum) r.fail(fmt::format("blocks[{}]", k), "blocks must be ≥ 0 and sum to count");
      sum += n;
      plan.blocks.push_back(n);
    }
    if (sum != plan.count) r.fail("blocks", fmt::format("sum to {}, not count = {}", sum, plan.count));
  }

  // Buffers.
  const auto& buffers = r.field(doc, "", "buffers");
  r.expect_array(buffers, "buffers");
  if (static_cast<int>(buffers.size()) != ndev) {
    r.fail("buffers", fmt::format("must list the buffers of each of the {} devices (has {})", ndev, buffers.size()));
  }
  for (int d = 0; d < ndev; ++d) {
    const std::string path = fmt::format("buffers[{}]", d);
    const auto& list = buffers[static_cast<std::size_t>(d)];
    r.expect_array(list, path);
    std::vector<std::int64_t> sizes;
    for (std::size_t b = 0; b < list.size(); ++b) {
      const std::string bpath = fmt::format("{}[{}]", path, b);
      const std::int64_t n = r.integer(list[b], bpath);
      if (n < 0) r.fail(bpath, "must be ≥ 0");
      sizes.push_back(n);
    }
    if (plan.devices[static_cast<std::size_t>(d)].participant) {
      if (sizes.empty()) r.fail(path, "a rank needs its user buffer 0");
      if (sizes[0] != plan.count) {
        r.fail(path + "[0]", fmt::format("user buffer must hold count = {} elements (has {})", plan.count, sizes[0]));
      }
    }
    plan.buffers.push_back(std::move(sizes));
  }

  // Ops.
  const auto& ops = r.field(doc, "", "ops");
  r.expect_array(ops, "ops");
  auto check_location = [&](const Location& l, const std::string& path) {
    if (l.device < 0 || l.device >= ndev) {
      r.fail(path + ".device", fmt::format("device {} out of range (plan has {} devices)", l.device, ndev));
    }
    const auto& list = plan.buffers[static_cast<std::size_t>(l.device)];
    if (l.buffer < 0 || l.buffer >= static_cast<int>(list.size())) {
      r.fail(path + ".buffer",
             fmt::format("buffer {} out of range (device {} has {})", l.buffer, l.device, list.size()));
    }
    if (l.offset < 0) r.fail(path + ".offset", "must be ≥ 0");
    if (l.count < 0) r.fail(path + ".count", "must be ≥ 0");
    const std::int64_t size = list[static_cast<std::size_t>(l.buffer)];
    if (l.offset > size || l.count > size - l.offset) {
      r.fail(path, fmt::format("[{}, {}) exceeds device {} buffer {} of {} elements", l.offset, l.offset + l.count,
                               l.device, l.buffer, size));
    }
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string path = fmt::format("ops[{}]", i);
    const auto& v = ops[i];
    r.expect_object(v, path);
    r.only_keys(v, path, {"id", "kind", "src", "dst", "deps", "collective", "group", "root", "divisor", "algo",
                                 "phase"});
    Op op;
    op.id = r.small_int(r.field(v, path, "id"), path + ".id");
    if (op.id != static_cast<int>(i)) r.fail(path + ".id", fmt::format("must be {} (ids are positions)", i));
    op.kind = parse_kind(r, r.string(r.field(v, path, "kind"), path + ".kind"), path + ".kind");
    const bool uses_src = op.kind == OpKind::kCopy || op.kind == OpKind::kReduce;
    if (v.contains("src")) {
      op.src = read_location(r, v["src"], path + ".src");
      if (uses_src) check_location(op.src, path + ".src");
    } else if (uses_src) {
      r.fail(path, "missing field 'src'");
    }
    op.dst = read_location(r, r.field(v, path, "dst"), path + ".dst");
    if (op.kind == OpKind::kGroup) {
      // The region's device is unused: check the region against every member instead.
      if (op.dst.buffer < 0) r.fail(path + ".dst.buffer", "must be ≥ 0");
      if (op.dst.offset < 0) r.fail(path + ".dst.offset", "must be ≥ 0");
      if (op.dst.count < 0) r.fail(path + ".dst.count", "must be ≥ 0");
    } else {
      check_location(op.dst, path + ".dst");
    }
    if (v.contains("deps")) {
      const auto& deps = v["deps"];
      r.expect_array(deps, path + ".deps");
      for (std::size_t k = 0; k < deps.size(); ++k) {
        const std::string dpath = fmt::format("{}.deps[{}]", path, k);
        const int dep = r.small_int(deps[k], dpath);
        if (dep < 0 || dep >= op.id) {
          r.fail(dpath, fmt::format("dependency {} must name an earlier op (0..{})", dep, op.id - 1));
        }
        op.deps.push_back(dep);
      }
    }
    if (v.contains("collective")) {
      op.collective = parse_collective(r, r.string(v["collective"], path + ".collective"), path + ".collective");
    }
    if (v.contains("group")) {
      const auto& g = v["group"];
      r.expect_array(g, path + ".group");
      for (std::size_t k = 0; k < g.size(); ++k)
        op.group.push_back(r.small_int(g[k], fmt::format("{}.group[{}]", path, k)));
    }
    if (v.contains("root")) op.root = r.small_int(v["root"], path + ".root");
    if (v.contains("divisor")) op.divisor = r.small_int(v["divisor"], path + ".divisor");
    if (v.contains("phase")) {
      op.phase = r.number(v["phase"], path + ".phase");
      if (!(op.phase >= 0 && op.phase < 1)) r.fail(path + ".phase", "must be in [0, 1)");
    }
    if (v.contains("algo")) {
      op.algo = r.string(v["algo"], path + ".algo");
      if (op.kind != OpKind::kGroup) r.fail(path + ".algo", "only group ops run a library algorithm");
    }
    if (op.kind == OpKind::kGroup) {
      if (!v.contains("collective")) r.fail(path, "missing field 'collective'");
      if (op.group.empty()) r.fail(path + ".group", "must list at least one device");
      std::vector<int> seen;
      for (std::size_t k = 0; k < op.group.size(); ++k) {
        const std::string gpath = fmt::format("{}.group[{}]", path, k);
        const int d = op.group[k];
        if (d < 0 || d >= ndev) r.fail(gpath, fmt::format("device {} out of range (plan has {} devices)", d, ndev));
        if (std::find(seen.begin(), seen.end(), d) != seen.end()) r.fail(gpath, fmt::format("device {} twice", d));
        seen.push_back(d);
        Location region = op.dst;
        region.device = d;
        check_location(region, path + ".dst");
      }
      const bool rooted = op.collective == Collective::kBroadcast || op.collective == Collective::kReduce;
      if (rooted && std::find(op.group.begin(), op.group.end(), op.root) == op.group.end()) {
        r.fail(path + ".root", fmt::format("root {} is not a member of the group", op.root));
      }
    }
    if (op.kind == OpKind::kScale && op.divisor < 1) r.fail(path + ".divisor", "must be ≥ 1");
    plan.ops.push_back(std::move(op));
  }
  return plan;
}

// ---------------------------------------------------------------------------
// Splits

std::pair<std::int64_t, std::int64_t> ragged_piece(std::int64_t count, int pieces, int index) {
  if (pieces < 1 || index < 0 || index >= pieces || count < 0) {
    throw InvalidInput(fmt::format("ragged_piece: piece {} of {} over {} elements", index, pieces, count));
  }
  const std::int64_t chunk = count / pieces;
  const std::int64_t offset = chunk * index;
  if (index == pieces - 1) return {offset, count - offset};
  return {offset, chunk};
}

std::pair<std::int64_t, std::int64_t> even_piece(std::int64_t count, int pieces, int index) {
  if (pieces < 1 || index < 0 || index >= pieces || count < 0) {
    throw InvalidInput(fmt::format("even_piece: piece {} of {} over {} elements", index, pieces, count));
  }
  const std::int64_t base = count / pieces;
  const std::int64_t extra = count % pieces;
  const std::int64_t offset = base * index + std::min<std::int64_t>(index, extra);
  return {offset, base + (index < extra ? 1 : 0)};
}

// ---------------------------------------------------------------------------
// Pipelining

namespace {

// A memory region an op touches: (device, buffer, [offset, offset + count)).
struct Footprint {
  int device;
  int buffer;
  std::int64_t offset;
  std::int64_t count;
};

// Regions of an op in a fixed order; the pipeline splits each of them the
// same way (segment j covers relative range [s_j, e_j) of every region).
std::vector<Footprint> footprints(const Op& op) {
  std::vector<Footprint> out;
  switch (op.kind) {
    case OpKind::kCopy:
    case OpKind::kReduce:
      out.push_back({op.src.device, op.src.buffer, op.src.offset, op.src.count});
      out.push_back({op.dst.device, op.dst.buffer, op.dst.offset, op.dst.count});
      break;
    case OpKind::kScale: out.push_back({op.dst.device, op.dst.buffer, op.dst.offset, op.dst.count}); break;
    case OpKind::kGroup:
      for (int d : op.group) out.push_back({d, op.dst.buffer, op.dst.offset, op.dst.count});
      break;
  }
  return out;
}

// Whether an op's region can be cut into independent sub-ranges.
bool splittable(const Op& op) {
  if (op.kind != OpKind::kGroup) return true;
  // Reduce-scatter and all-gather shards are even pieces of the whole region;
  // a sub-range would shard differently, so those stay whole.
  return op.collective == Collective::kAllReduce || op.collective == Collective::kBroadcast ||
         op.collective == Collective::kReduce;
}

std::int64_t op_count(const Op& op) { return op.dst.count; }

struct Segments {
  int first = 0;                     // id of the first segment in the new plan
  std::vector<std::int64_t> starts;  // relative start of each segment; ends = next start / total
  std::int64_t total = 0;
  int size() const { return static_cast<int>(starts.size()); }
  std::int64_t end(int j) const { return j + 1 < size() ? starts[static_cast<std::size_t>(j) + 1] : total; }
};

}  // namespace

std::vector<std::int64_t> staggered_pieces(std::int64_t count, int segments, double phase) {
  if (segments < 1 || !(phase > 0 && phase < 1)) {
    throw InvalidInput(fmt::format("staggered_pieces: {} segments at phase {} (needs ≥ 1 and a phase in (0, 1))",
                                   segments, phase));
  }
  std::vector<std::int64_t> starts{0};
  const double size = static_cast<double>(count) / segments;
  for (int k = 1; k <= segments; ++k) {
    const auto at = static_cast<std::int64_t>(std::llround((k - phase) * size));
    if (at > starts.back() && at < count) starts.push_back(at);
  }
  return starts;
}

Plan pipeline(const Plan& plan, int segments) {
  if (segments < 1 || segments > kMaxSegments) {
    throw InvalidInput(fmt::format("pipeline: segments must be between 1 and {} (got {})", kMaxSegments, segments));
  }
  if (segments == 1) return plan;
  // The exact size of the result (an op splits into min(segments, count) non-empty pieces), checked
  // before anything is allocated.
  std::size_t total_ops = 0;
  for (const Op& op : plan.ops) {
    const int k = splittable(op) ? segments + (op.phase > 0 ? 1 : 0) : 1;
    const std::int64_t pieces = std::min<std::int64_t>(k, op_count(op));
    total_ops += static_cast<std::size_t>(std::max<std::int64_t>(1, pieces));
  }
  if (total_ops > kMaxPlanOps) {
    throw InvalidInput(
        fmt::format("{} {}: plan {} would grow from {} to {} ops, more than artune's limit of "
                    "{} ops per plan (use fewer segments)",
                    parameter("segments"), segments, plan.spec, plan.ops.size(), total_ops, kMaxPlanOps));
  }

  Plan out;
  out.spec = plan.spec;
  out.count = plan.count;
  out.reduce_op = plan.reduce_op;
  out.collective = plan.collective;
  out.blocks = plan.blocks;
  out.devices = plan.devices;
  out.buffers = plan.buffers;
  out.ops.reserve(plan.ops.size() * static_cast<std::size_t>(segments));

  std::vector<Segments> split(plan.ops.size());
  std::vector<std::vector<Footprint>> prints(plan.ops.size());
  for (const Op& op : plan.ops) {
    const auto oi = static_cast<std::size_t>(op.id);
    if (op.id < 0 || oi >= plan.ops.size() || &plan.ops[oi] != &op) {
      throw InvalidInput(fmt::format("pipeline: op at position {} has id {}", &op - plan.ops.data(), op.id));
    }
    prints[oi] = footprints(op);
    Segments& seg = split[oi];
    seg.total = op_count(op);
    if (seg.total < 0) throw InvalidInput(fmt::format("pipeline: op {} has a negative count", op.id));
    const int k = splittable(op) ? segments : 1;
    if (k > 1 && op.phase > 0) {
      seg.starts = staggered_pieces(seg.total, k, op.phase);
    } else {
      for (int j = 0; j < k; ++j) {
        const auto [off, n] = even_piece(seg.total, k, j);
        if (n > 0 || (j == 0 && seg.total == 0)) seg.starts.push_back(off);
      }
    }
    seg.first = static_cast<int>(out.ops.size());

    // The op without its deps, copied for each segment: each segment's deps are its own (below).
    Op whole = op;
    whole.deps = {};
    std::vector<int> deps;
    for (int j = 0; j < seg.size(); ++j) {
      const std::int64_t s = seg.starts[static_cast<std::size_t>(j)];
      const std::int64_t e = seg.end(j);
      Op piece = whole;
      if (op.kind == OpKind::kCopy || op.kind == OpKind::kReduce) {
        piece.src.offset += s;
        piece.src.count = e - s;
      }
      piece.dst.offset += s;
      piece.dst.count = e - s;

      deps.clear();
      // Segments of one op run in order: then waiting for a segment means
      // waiting for everything before it too, which keeps every ordering the
      // original deps implied transitively, and it is how a link streams them.
      if (j > 0) deps.push_back(seg.first + j - 1);
      for (int d : op.deps) {
        if (d < 0 || d >= op.id) {
          throw InvalidInput(fmt::format("pipeline: op {} depends on op {} which is not earlier", op.id, d));
        }
        const Segments& ds = split[static_cast<std::size_t>(d)];
        // The latest segment of d that overlaps segment j in memory on a shared device.
        int latest = -1;
        for (const Footprint& a : prints[oi]) {
          const std::int64_t alo = a.offset + s;
          const std::int64_t ahi = a.offset + e;
          for (const Footprint& b : prints[static_cast<std::size_t>(d)]) {
            if (a.device != b.device || a.buffer != b.buffer) continue;
            const std::int64_t lo = std::max(alo, b.offset);
            const std::int64_t hi = std::min(ahi, b.offset + b.count);
            if (lo >= hi) continue;
            // Segments of d covering relative range [lo - b.offset, hi - b.offset): the
            // last one is where hi - 1 falls.
            const std::int64_t rel = hi - 1 - b.offset;
            const auto it = std::upper_bound(ds.starts.begin(), ds.starts.end(), rel);
            latest = std::max(latest, static_cast<int>(it - ds.starts.begin()) - 1);
          }
        }
        // Nothing overlaps: the dep is pure ordering, so wait for all of d.
        if (latest < 0) latest = ds.size() - 1;
        deps.push_back(ds.first + latest);
      }
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      piece.deps.assign(deps.begin(), deps.end());
      out.add(std::move(piece));
    }
  }
  return out;
}

}  // namespace artune
