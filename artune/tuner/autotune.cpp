#include "artune/tuner/autotune.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "artune/core/error.hpp"
#include "artune/core/sizes.hpp"
#include "artune/simulator/simulator.hpp"

namespace artune {

namespace {

// Tensor fusion of `list`: each pack all-reduced with the pick of the table for the list's type (the first table
// when none matches), simulated at its exact size; the tensors picked sparse leave the packs (issue 17).
FusionReport tune_list_fusion(const Topology& topo, const AutotuneRequest& request, const AutotuneResult& tuned,
                              GradientList list) {
  std::size_t which = 0;
  for (std::size_t i = 0; i < tuned.results.size(); ++i) {
    if (tuned.searched[i].type == list.type && tuned.searched[i].op == request.ops.front()) {
      which = i;
      break;
    }
  }
  const DecisionTable& table = tuned.results[which].table;
  const ReduceOp op = tuned.searched[which].op;
  const CostModel& model = request.search.model;
  const std::size_t esize = element_size(list.type);
  const AllReduceTimeFn time = [&](std::uint64_t bytes) {
    const std::int64_t count = static_cast<std::int64_t>((bytes + esize - 1) / esize);
    const Plan plan = plan_from_table(table, topo, count, esize, op);
    return simulate(plan, topo, model, esize).time_us;
  };
  FusionReport fr;
  const double memory_gbps = model.memory_for(NodeKind::kGpu);
  fr.sparse = decide_sparse_tensors(list, topo, model);
  std::vector<SeparateTensor> separate;
  std::uint64_t packed_elements = list.total_elements();
  for (std::size_t i = 0; i < fr.sparse.size(); ++i) {
    if (!fr.sparse[i].sparse) continue;
    separate.push_back({list.sparse[i].tensor, fr.sparse[i].sparse_us});
    packed_elements -= list.elements[list.sparse[i].tensor];
  }
  fr.result = tune_fusion(list.bytes(), default_pack_sizes(packed_elements * esize), time, memory_gbps,
                          list.backward_times(memory_gbps), separate);
  fr.list = std::move(list);
  return fr;
}

}  // namespace

std::vector<DecisionTable> AutotuneResult::tables() const {
  std::vector<DecisionTable> out;
  for (const auto& r : results) out.push_back(r.table);
  return out;
}

AutotuneResult autotune(const Topology& topo, const AutotuneRequest& request) {
  if (request.types.empty() || request.ops.empty()) throw InvalidInput("autotune: no data type or reduce op to tune");
  const auto note = [&](const std::string& line) {
    if (request.note) request.note(line);
  };
  const auto stage_done = [&] {
    if (request.stage_done) request.stage_done();
  };
  AutotuneResult out;
  for (const DataType type : request.types) {
    for (const ReduceOp op : request.ops) {
      SearchOptions one = request.search;
      one.type = type;
      one.op = op;
      if (request.types.size() * request.ops.size() > 1) note(fmt::format("tuning {} {}", to_string(type), to_string(op)));
      SearchResult r = search(topo, one);
      stage_done();
      if (request.measure) {
        measure_top(r, topo, one, *request.measure);
        stage_done();
        if (!r.unmeasured_for_memory.empty()) {
          std::vector<std::string> skipped;
          for (const auto bytes : r.unmeasured_for_memory) skipped.push_back(format_size(bytes));
          const std::string line = fmt::format(
              "not measured (predicted only): sizes {} need more memory than the {} backend may use here ({} MiB)",
              fmt::join(skipped, ", "), to_string(request.measure->backend), host_memory_budget() >> 20);
          note(line);
          out.notes.push_back(line);
        }
        for (const auto& s : r.sizes) {
          for (const auto& [c, m] : s.measured) {
            if (m.wrong == 0) continue;
            out.wrong += m.wrong;
            out.wrong_plans.push_back(fmt::format("{} at {}", r.set.candidates[c].label(), format_size(s.bytes)));
          }
        }
      }
      r.table.topology_source = request.topology_source;
      out.results.push_back(std::move(r));
      out.searched.push_back(std::move(one));
    }
  }
  for (const GradientList& list : request.fusion) out.fusion.push_back(tune_list_fusion(topo, request, out, list));
  return out;
}

}  // namespace artune
