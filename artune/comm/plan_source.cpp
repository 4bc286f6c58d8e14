#include "artune/comm/plan_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/collectives.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/parameters.hpp"
#include "artune/topology/topology.hpp"
#include "artune/tuner/calibration/calibration.hpp"
#include "artune/tuner/candidates.hpp"
#include "artune/tuner/collective_tuning.hpp"
#include "artune/tuner/autotune.hpp"
#include "artune/tuner/search.hpp"

namespace artune {

namespace {

std::size_t tuning_index(Collective c) {
  switch (c) {
    case Collective::kAllGather: return 1;
    case Collective::kReduceScatter: return 2;
    default: return 0;
  }
}

}  // namespace

PlanSource::PlanSource(BackendKind kind, const CommOptions& options, const Topology& topo)
    : kind_(kind), options_(options), topo_(topo) {}

std::vector<std::uint64_t> default_tune_sizes() {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = 4; b <= (std::uint64_t{256} << 20); b *= 2) sizes.push_back(b);
  return sizes;
}

std::vector<std::uint64_t> table_buckets(const DecisionTable& table) {
  if (table.ranges.empty()) throw InvalidInput("communicator: the decision table has no size ranges");
  // The sizes the table was tuned at (a range's bounds when it lists none).
  std::vector<std::uint64_t> buckets;
  for (const TableRange& r : table.ranges) {
    if (r.points.empty()) {
      buckets.push_back(r.min_bytes);
      buckets.push_back(r.max_bytes);
    }
    for (const SizePoint& p : r.points) buckets.push_back(p.bytes);
  }
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  if (!buckets.empty() && buckets.front() == 0) buckets.erase(buckets.begin());
  return buckets;
}

BackendProfile PlanSource::tuning_profile() const {
  return options_.profile.empty() ? profile_for(kind_) : parse_backend_profile(options_.profile, parameter("profile"));
}

void PlanSource::warn_profile(std::string_view what, std::string_view profile) {
  if (warned_profile_) return;
  const std::string line = profile_mismatch_warning(what, profile, kind_);
  if (line.empty()) return;
  warned_profile_ = true;
  std::fprintf(stderr, "artune: warning: %s\n", line.c_str());
}

PlanSource::Tuning& PlanSource::tuning(Collective c) {
  Tuning& t = tunings_[tuning_index(c)];
  if (t.ready) return t;
  const std::string_view what = collective_flag_name(c);
  std::vector<std::uint64_t> sizes = options_.tune_sizes.empty() ? default_tune_sizes() : options_.tune_sizes;
  std::sort(sizes.begin(), sizes.end());
  const std::string& file = c == Collective::kAllReduce   ? options_.table
                            : c == Collective::kAllGather ? options_.allgather_table
                                                          : options_.reducescatter_table;
  if (c == Collective::kAllReduce && !options_.spec.empty()) {
    // A fixed spec: its buckets are the tune sizes.
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    if (!sizes.empty() && sizes.front() == 0) sizes.erase(sizes.begin());
    t.buckets = sizes;
  } else if (!file.empty()) {
    t.table = load_decision_table(file, topo_);
    if (!t.table->ranges.empty() && t.table->ranges.front().plan.collective != c) {
      const std::string option = c == Collective::kAllReduce ? "table" : std::string(what) + "_table";
      throw InvalidInput(fmt::format("CommOptions::{}: {} was tuned for {}, not {}", option, file,
                                     collective_flag_name(t.table->ranges.front().plan.collective), what));
    }
    t.buckets = table_buckets(*t.table);
    const auto& model = t.table->cost_model;
    if (model.is_object() && model.contains("profile") && model["profile"].is_string()) {
      t.profile = model["profile"].get<std::string>();
      warn_profile(fmt::format("the table {}", file), t.profile);
    }
  } else {
    SearchOptions s;
    s.sizes = sizes;
    s.candidates.collective = c;
    BackendProfile profile = tuning_profile();
    nlohmann::json overlay;
    const std::string source = fmt::format("{} '{}'", parameter("calibration"), options_.calibration);
    if (!options_.calibration.empty()) {
      overlay = read_json_input(options_.calibration, parameter("calibration"));
      // The overlay's own profile is the model it was fitted on (artune calibrate writes it).
      if (overlay.is_object() && overlay.contains("profile") && overlay["profile"].is_string()) {
        const BackendProfile own = parse_backend_profile(overlay["profile"].get<std::string>(), source + ": profile");
        if (!options_.profile.empty() && own != profile) {
          throw InvalidInput(fmt::format("{}: its profile is {}, not {} ({})", source, to_string(own), options_.profile,
                                         parameter("profile")));
        }
        profile = own;
      }
    }
    s.model = CostModel::defaults(profile);
    if (!options_.calibration.empty()) {
      s.model.apply_overlay(overlay, source);
      s.calibration = options_.calibration;
      warn_profile(fmt::format("the calibration {}", options_.calibration), to_string(s.model.profile));
    }
    t.profile = std::string(to_string(s.model.profile));
    AutotuneRequest request;  // the default data type and op: plans are built per call for the call's op
    request.search = s;
    t.table = autotune(topo_, request).results.front().table;
    t.buckets = table_buckets(*t.table);
  }
  if (t.buckets.empty()) {
    throw InvalidInput(fmt::format("communicator: no size to compile {} plans at (tune_sizes or the table)", what));
  }
  t.ready = true;
  return t;
}

Plan PlanSource::build(Collective c, std::int64_t count, ReduceOp op, int bucket, bool verify) {
  const Tuning& t = tuning(c);
  if (!t.table) {
    // A label with parameters ("xring perm=0,3,2,1"), as tables and dump_cache() print them, or a plain spec.
    if (options_.spec.find(' ') != std::string::npos) {
      return build_candidate(topo_, parse_candidate_label(options_.spec, parameter("spec")), count, op, verify);
    }
    BuildOptions b;
    b.count = count;
    b.reduce_op = op;
    b.verify = verify;
    return build_plan(topo_, options_.spec, b);
  }
  return plan_from_table(*t.table, topo_, t.buckets[static_cast<std::size_t>(bucket)], count, op, verify);
}

PlanInfo PlanSource::describe(Collective c, int bucket) {
  const Tuning& t = tuning(c);
  PlanInfo info;
  info.collective = c;
  info.bucket = bucket;
  info.bucket_bytes = t.buckets[static_cast<std::size_t>(bucket)];
  if (t.table) {
    const TableRange& range = t.table->lookup(info.bucket_bytes);
    info.label = range.plan.label();
    info.range = static_cast<int>(&range - t.table->ranges.data());
    info.min_bytes = range.min_bytes;
    info.max_bytes = range.max_bytes;
  } else {
    info.label = options_.spec;
  }
  return info;
}

}  // namespace artune
