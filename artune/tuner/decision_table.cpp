#include "artune/tuner/decision_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artune/algorithms/builders.hpp"
#include "artune/algorithms/verifier/verifier.hpp"
#include "artune/core/error.hpp"
#include "artune/core/output_file.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/parameters.hpp"
#include "artune/tuner/json_fields.hpp"

namespace artune {

using tuner_detail::Field;

const TableRange& DecisionTable::lookup(std::uint64_t bytes) const {
  if (ranges.empty()) throw InvalidInput("decision table has no size ranges");
  return range_for(ranges, bytes);
}

std::vector<TableRange> merge_ranges(const std::vector<SizeChoice>& choices) {
  std::vector<TableRange> out;
  std::string last_label;
  for (const auto& choice : choices) {
    if (!out.empty() && choice.point.bytes <= out.back().max_bytes) {
      throw InvalidInput(
          fmt::format("merge_ranges: sizes must ascend ({} after {})", choice.point.bytes, out.back().max_bytes));
    }
    const std::string label = choice.plan.label();
    if (out.empty() || label != last_label) {
      TableRange range;
      range.min_bytes = choice.point.bytes;
      range.plan = choice.plan;
      out.push_back(std::move(range));
      last_label = label;
    }
    out.back().max_bytes = choice.point.bytes;
    out.back().points.push_back(choice.point);
  }
  return out;
}

namespace {

nlohmann::json figures_json(const Figures& f) {
  return {{"time_us", f.time_us}, {"algbw_gbps", f.algbw_gbps}, {"busbw_gbps", f.busbw_gbps}};
}

Figures figures_from(const Field& f) {
  Figures out;
  out.time_us = f.at("time_us").num();
  out.algbw_gbps = f.at("algbw_gbps").num();
  out.busbw_gbps = f.at("busbw_gbps").num();
  if (out.time_us < 0 || out.algbw_gbps < 0 || out.busbw_gbps < 0) f.fail("figures must be ≥ 0");
  return out;
}

nlohmann::json measurement_json(const Measurement& m) {
  auto doc = figures_json(m.figures);
  doc["backend"] = m.backend;
  doc["wrong"] = m.wrong;
  doc["iterations"] = m.iterations;
  doc["spread_pct"] = m.spread_pct;
  return doc;
}

Measurement measurement_from(const Field& f) {
  Measurement m;
  m.figures = figures_from(f);
  m.backend = f.at("backend").str();
  m.wrong = f.at("wrong").integer();
  m.iterations = f.at("iterations").int_in(0, std::numeric_limits<int>::max());
  if (f.has("spread_pct")) m.spread_pct = f.at("spread_pct").num();  // absent in tables of artune ≤ 0.1.0
  return m;
}

nlohmann::json point_json(const SizePoint& p) {
  nlohmann::json doc = {{"bytes", p.bytes}, {"count", p.count}, {"predicted", figures_json(p.predicted)}};
  if (p.measured) doc["measured"] = measurement_json(*p.measured);
  doc["runner_up"] = nlohmann::json{{"label", p.runner_up}, {"predicted", figures_json(p.runner_up_predicted)}};
  if (p.runner_up_measured) doc["runner_up"]["measured"] = measurement_json(*p.runner_up_measured);
  doc["margin_pct"] = p.margin_pct;
  doc["tf_choose_the_best"] = nlohmann::json{{"label", p.tf_pick}, {"predicted", figures_json(p.tf_predicted)}};
  if (p.tf_measured) doc["tf_choose_the_best"]["measured"] = measurement_json(*p.tf_measured);
  if (!p.kept.empty()) {
    doc["kept"] = {{"reason", p.kept}, {"fastest", p.fastest}, {"behind_fastest_pct", p.behind_fastest_pct}};
  }
  if (p.nccl_predicted.time_us > 0) doc["nccl"] = nlohmann::json{{"predicted", figures_json(p.nccl_predicted)}};
  if (p.bound.time_us > 0) doc["bound"] = figures_json(p.bound);
  return doc;
}

SizePoint point_from(const Field& f) {
  SizePoint p;
  p.bytes = f.at("bytes").unsigned_integer();
  p.count = f.at("count").integer();
  if (p.count < 1) f.at("count").fail("must be ≥ 1");
  p.predicted = figures_from(f.at("predicted"));
  if (f.has("measured")) p.measured = measurement_from(f.at("measured"));
  const Field ru = f.at("runner_up");
  p.runner_up = ru.at("label").str();
  p.runner_up_predicted = figures_from(ru.at("predicted"));
  if (ru.has("measured")) p.runner_up_measured = measurement_from(ru.at("measured"));
  p.margin_pct = f.at("margin_pct").num();
  const Field tf = f.at("tf_choose_the_best");
  p.tf_pick = tf.at("label").str();
  p.tf_predicted = figures_from(tf.at("predicted"));
  if (tf.has("measured")) p.tf_measured = measurement_from(tf.at("measured"));
  if (f.has("kept")) {  // optional: only picks that are not the fastest carry it
    const Field kept = f.at("kept");
    p.kept = kept.at("reason").str();
    if (p.kept != "hysteresis" && p.kept != "spread" && p.kept != "min-gain") {
      kept.at("reason").fail("must be \"hysteresis\", \"spread\" or \"min-gain\"");
    }
    p.fastest = kept.at("fastest").str();
    p.behind_fastest_pct = kept.at("behind_fastest_pct").num();
  }
  // Tables written before the NCCL baseline (issue 12) have no "nccl" entry.
  if (f.has("nccl")) p.nccl_predicted = figures_from(f.at("nccl").at("predicted"));
  // Tables written before the min-cut bound (issue 25) have no "bound" entry.
  if (f.has("bound")) p.bound = figures_from(f.at("bound"));
  return p;
}

}  // namespace

nlohmann::json table_to_json(const DecisionTable& table) {
  nlohmann::json ranges = nlohmann::json::array();
  for (const auto& r : table.ranges) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : r.points) points.push_back(point_json(p));
    ranges.push_back({{"min_bytes", r.min_bytes},
                      {"max_bytes", r.max_bytes},
                      {"plan", candidate_to_json(r.plan)},
                      {"points", std::move(points)}});
  }
  nlohmann::json doc;
  doc["schema"] = std::string(kDecisionTableSchema);
  doc["schema_version"] = table.schema_version;
  doc["created_by"] = table.created_by;
  doc["topology"] = {{"name", table.topology_name},
                     {"fingerprint", table.fingerprint},
                     {"source", table.topology_source},
                     {"gpus", table.gpus},
                     {"machines", table.machines}};
  doc["type"] = std::string(to_string(table.type));
  doc["op"] = std::string(to_string(table.op));
  doc["cost_model"] = table.cost_model.is_null() ? nlohmann::json::object() : table.cost_model;
  doc["calibration"] = table.calibration;
  doc["measured_backend"] = table.measured_backend;
  doc["ranges"] = std::move(ranges);
  return doc;
}

namespace {

void check_schema(const Field& root) {
  const nlohmann::json& doc = root.value();
  if (!doc.is_object()) root.fail("not a decision table (expected a JSON object)");
  if (!root.has("schema") || !doc["schema"].is_string() || doc["schema"].get<std::string>() != kDecisionTableSchema) {
    root.fail(fmt::format("not a decision table (\"schema\" is not \"{}\")", kDecisionTableSchema));
  }
}

std::string type_op_text(const DecisionTable& t) { return fmt::format("{} {}", to_string(t.type), to_string(t.op)); }

}  // namespace

DecisionTable table_from_json(const nlohmann::json& doc, std::string_view source) {
  const Field root{doc, std::string(source)};
  check_schema(root);
  if (root.has("schema_version") && doc["schema_version"].is_number_integer() &&
      doc["schema_version"].get<long long>() == kDecisionTableMultiSchemaVersion) {
    std::vector<DecisionTable> tables = tables_from_json(doc, source);
    if (tables.size() != 1) {
      std::vector<std::string> held;
      for (const auto& t : tables) held.push_back(type_op_text(t));
      root.fail(fmt::format("holds {} tables ({}); select one by type and op", tables.size(), fmt::join(held, ", ")));
    }
    return std::move(tables.front());
  }
  DecisionTable t;
  t.schema_version = root.at("schema_version").int_in(std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (t.schema_version != kDecisionTableSchemaVersion) {
    root.at("schema_version")
        .fail(fmt::format("version {} is not supported (this artune reads version {}); re-run artune autotune",
                          t.schema_version, kDecisionTableSchemaVersion));
  }
  t.created_by = root.at("created_by").str();
  const Field topo = root.at("topology");
  t.topology_name = topo.at("name").str();
  if (topo.has("source")) t.topology_source = topo.at("source").str();  // absent in tables of artune ≤ 0.1.0
  t.fingerprint = topo.at("fingerprint").str();
  if (t.fingerprint.empty()) topo.at("fingerprint").fail("must not be empty");
  t.gpus = topo.at("gpus").int_in(0, std::numeric_limits<int>::max());
  t.machines = topo.at("machines").int_in(0, std::numeric_limits<int>::max());
  t.type = parse_data_type(root.at("type").str(), fmt::format("{}.type", source));
  t.op = parse_reduce_op(root.at("op").str(), fmt::format("{}.op", source));
  root.at("cost_model").expect_object();
  t.cost_model = doc["cost_model"];
  t.calibration = root.at("calibration").str();
  t.measured_backend = root.at("measured_backend").str();
  const Field ranges = root.at("ranges");
  const std::size_t n = ranges.array_size();
  if (n == 0) ranges.fail("must hold at least one size range");
  for (std::size_t i = 0; i < n; ++i) {
    const Field r = ranges[i];
    TableRange range;
    range.min_bytes = r.at("min_bytes").unsigned_integer();
    range.max_bytes = r.at("max_bytes").unsigned_integer();
    const std::uint64_t* previous = t.ranges.empty() ? nullptr : &t.ranges.back().max_bytes;
    if (const auto problem = range_bounds_problem(range.min_bytes, range.max_bytes, previous)) {
      r.at(problem->field).fail(problem->message);
    }
    range.plan = candidate_from_json(r.at("plan").value(), r.at("plan").where());
    const Field points = r.at("points");
    const std::size_t np = points.array_size();
    for (std::size_t k = 0; k < np; ++k) {
      SizePoint p = point_from(points[k]);
      if (p.bytes < range.min_bytes || p.bytes > range.max_bytes) points[k].fail("size outside its range");
      range.points.push_back(std::move(p));
    }
    t.ranges.push_back(std::move(range));
  }
  return t;
}

std::function<Plan(std::int64_t count)> table_plan_factory(DecisionTable table, const Topology& topo,
                                                           std::size_t element_bytes, ReduceOp op) {
  if (table.ranges.empty()) throw InvalidInput("decision table has no size ranges");
  return [table = std::move(table), &topo, element_bytes, op](std::int64_t count) {
    Plan plan = plan_from_table(table, topo, count, element_bytes, op);
    // What ran at this size, by the table's own name for it (run --table prints it per row).
    plan.spec = table.lookup(static_cast<std::uint64_t>(count) * element_bytes).plan.label();
    verify_or_throw(plan);
    return plan;
  };
}

void write_file_atomically(const std::string& path, const std::string& text) { write_output_file(path, text); }

nlohmann::json tables_to_json(const std::vector<DecisionTable>& tables) {
  if (tables.empty()) throw InvalidInput("decision table: nothing to write");
  if (tables.size() == 1) return table_to_json(tables.front());
  const DecisionTable& first = tables.front();
  nlohmann::json doc;
  doc["schema"] = std::string(kDecisionTableSchema);
  doc["schema_version"] = kDecisionTableMultiSchemaVersion;
  doc["created_by"] = first.created_by;
  doc["topology"] = {{"name", first.topology_name},
                     {"fingerprint", first.fingerprint},
                     {"source", first.topology_source},
                     {"gpus", first.gpus},
                     {"machines", first.machines}};
  doc["tables"] = nlohmann::json::array();
  for (const auto& t : tables) {
    if (t.fingerprint != first.fingerprint) throw InvalidInput("decision table: tables of different topologies");
    doc["tables"].push_back(table_to_json(t));
  }
  return doc;
}

std::vector<DecisionTable> tables_from_json(const nlohmann::json& doc, std::string_view source) {
  const Field root{doc, std::string(source)};
  check_schema(root);
  const long long version = root.at("schema_version").integer();
  if (version == kDecisionTableSchemaVersion) return {table_from_json(doc, source)};
  if (version != kDecisionTableMultiSchemaVersion) {
    root.at("schema_version")
        .fail(fmt::format("version {} is not supported (this artune reads versions {} and {}); re-run artune autotune",
                          version, kDecisionTableSchemaVersion, kDecisionTableMultiSchemaVersion));
  }
  const std::string fingerprint = root.at("topology").at("fingerprint").str();
  const Field list = root.at("tables");
  const std::size_t n = list.array_size();
  if (n == 0) list.fail("must hold at least one table");
  std::vector<DecisionTable> out;
  for (std::size_t i = 0; i < n; ++i) {
    const Field item = list[i];
    check_schema(item);
    if (item.at("schema_version").integer() != kDecisionTableSchemaVersion) {
      item.at("schema_version").fail(fmt::format("must be {} inside \"tables\"", kDecisionTableSchemaVersion));
    }
    DecisionTable t = table_from_json(item.value(), item.where());
    if (t.fingerprint != fingerprint) item.at("topology").at("fingerprint").fail("differs from the file's topology");
    for (const auto& other : out) {
      if (other.type == t.type && other.op == t.op) item.fail(fmt::format("a second table for {}", type_op_text(t)));
    }
    out.push_back(std::move(t));
  }
  return out;
}

void write_decision_tables(const std::string& path, const std::vector<DecisionTable>& tables) {
  write_file_atomically(path, tables_to_json(tables).dump(1) + "\n");
}

std::vector<DecisionTable> read_decision_tables(const std::string& path) {
  const nlohmann::json doc = parse_json_input(read_input_file(path, "decision table"), path);
  return tables_from_json(doc, path);
}

const DecisionTable& select_table(const std::vector<DecisionTable>& tables, DataType type, ReduceOp op,
                                  std::string_view source) {
  std::vector<std::string> held;
  for (const auto& t : tables) {
    if (t.type == type && t.op == op) return t;
    held.push_back(type_op_text(t));
  }
  throw InvalidInput(fmt::format("{}: no table for {} {} (it holds {}); tune again with {} {} {} {}", source,
                                 to_string(type), to_string(op), fmt::join(held, ", "), parameter("datatype"),
                                 to_string(type), parameter("op"), to_string(op)));
}

DecisionTable load_decision_table(const std::string& path, const Topology& topo, DataType type, ReduceOp op) {
  const std::vector<DecisionTable> tables = read_decision_tables(path);
  DecisionTable table = select_table(tables, type, op, path);
  check_table_topology(table, topo, path);
  return table;
}

void write_decision_table(const std::string& path, const DecisionTable& table) {
  write_file_atomically(path, table_to_json(table).dump(1) + "\n");
}

DecisionTable read_decision_table(const std::string& path) {
  // The shared readers refuse directories, devices such as /dev/zero, oversized files and
  // numbers nlohmann cannot hold (1e400), each as one InvalidInput line naming the file.
  const nlohmann::json doc = parse_json_input(read_input_file(path, "decision table"), path);
  return table_from_json(doc, path);
}

void check_table_topology(const DecisionTable& table, const Topology& topo, std::string_view source) {
  const std::string fp = topo.fingerprint();
  if (fp != table.fingerprint) {
    throw InvalidInput(fmt::format(
        "{}: tuned for topology '{}' (fingerprint {}), not for '{}' (fingerprint {}); re-run artune autotune here",
        source, table.topology_name, table.fingerprint, topo.name(), fp));
  }
}

DecisionTable load_decision_table(const std::string& path, const Topology& topo) {
  DecisionTable table = read_decision_table(path);
  check_table_topology(table, topo, path);
  return table;
}

Plan plan_from_table(const DecisionTable& table, const Topology& topo, std::uint64_t bytes, std::int64_t count,
                     ReduceOp op, bool verify) {
  return build_candidate(topo, table.lookup(bytes).plan, count, op, verify);
}

Plan plan_from_table(const DecisionTable& table, const Topology& topo, std::int64_t count, std::size_t element_bytes,
                     ReduceOp op) {
  return plan_from_table(table, topo, static_cast<std::uint64_t>(count) * element_bytes, count, op, true);
}

}  // namespace artune
