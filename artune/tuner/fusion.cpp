#include "artune/tuner/fusion.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/core/input.hpp"
#include "artune/core/json_input.hpp"
#include "artune/core/parameters.hpp"
#include "artune/core/sizes.hpp"
#include "artune/tuner/json_fields.hpp"

namespace artune {

using tuner_detail::Field;

namespace {

// A tensor's "sparse" mark: rows × width must be its `elements`; "density" in (0, 1] or "nnz" in [1, rows].
SparseMark read_sparse_mark(const Field& s, std::size_t tensor, std::uint64_t elements) {
  if (!s.value().is_object()) {
    s.fail(fmt::format("must be an object with \"rows\", \"width\" and \"density\" or \"nnz\", not {}",
                       json_reader::describe(s.value())));
  }
  const std::uint64_t rows = s.at("rows").unsigned_integer();
  if (rows == 0) s.at("rows").fail("must be ≥ 1");
  const std::uint64_t width = s.at("width").unsigned_integer();
  if (width == 0) s.at("width").fail("must be ≥ 1");
  if (rows > elements || width != elements / rows || elements % rows != 0) {
    s.fail(fmt::format("{} rows of {} values are not the tensor's {} elements", rows, width, elements));
  }
  SparseMark mark{tensor, static_cast<std::int64_t>(rows), static_cast<std::int64_t>(width), 0.0};
  if (s.has("density") == s.has("nnz")) s.fail("give one of \"density\" and \"nnz\"");
  if (s.has("density")) {
    mark.density = s.at("density").num();
    if (!(mark.density > 0) || mark.density > 1) s.at("density").fail("must be in (0, 1]");
  } else {
    const std::uint64_t nnz = s.at("nnz").unsigned_integer();
    if (nnz == 0 || nnz > rows) s.at("nnz").fail(fmt::format("must be between 1 and rows ({})", rows));
    mark.density = static_cast<double>(nnz) / static_cast<double>(rows);
  }
  return mark;
}

}  // namespace

std::vector<std::vector<std::size_t>> group_by_size(const std::vector<std::uint64_t>& tensor_bytes,
                                                    std::uint64_t bytes_per_pack) {
  std::vector<std::vector<std::size_t>> packs;
  if (bytes_per_pack == 0) {
    packs.emplace_back();
    for (std::size_t i = 0; i < tensor_bytes.size(); ++i) packs.back().push_back(i);
    return packs;
  }
  std::uint64_t last_pack_size = 0;
  for (std::size_t i = 0; i < tensor_bytes.size(); ++i) {
    // As in TF: the pack is closed only once it exceeds the threshold, so every pack but the last
    // holds at least bytes_per_pack bytes.
    if (packs.empty() || last_pack_size > bytes_per_pack) {
      packs.emplace_back();
      last_pack_size = 0;
    }
    packs.back().push_back(i);
    last_pack_size += tensor_bytes[i];
  }
  return packs;
}

std::vector<std::uint64_t> GradientList::bytes() const {
  std::vector<std::uint64_t> out;
  out.reserve(elements.size());
  for (auto e : elements) out.push_back(e * element_size(type));
  return out;
}

std::vector<double> GradientList::backward_times(double memory_gbps) const {
  if (!backward_us.empty()) return backward_us;
  if (!(memory_gbps > 0)) throw InvalidInput("fusion: memory bandwidth must be > 0");
  std::vector<double> out;
  for (auto b : bytes()) out.push_back(3.0 * static_cast<double>(b) / (memory_gbps * 1e3));
  return out;
}

std::uint64_t GradientList::total_elements() const {
  std::uint64_t total = 0;
  for (auto e : elements) total += e;
  return total;
}

GradientList gradient_list_from_json(const nlohmann::json& doc, const std::string& source) {
  const Field root{doc, source};
  if (!doc.is_object())
    root.fail(fmt::format("must be an object with \"tensors\", not {}", json_reader::describe(doc)));
  GradientList list;
  list.source = source;
  list.model = root.has("model") ? root.at("model").str() : std::string();
  if (root.has("type")) list.type = parse_data_type(root.at("type").str(), fmt::format("{}: type", source));
  std::string unit = "elements";
  if (root.has("unit")) unit = root.at("unit").str();
  if (unit != "elements" && unit != "bytes") root.at("unit").fail("must be \"elements\" or \"bytes\"");
  const Field tensors = root.at("tensors");
  const std::size_t n = tensors.array_size();
  if (n == 0) tensors.fail("must list at least one tensor");
  const std::uint64_t esize = element_size(list.type);
  const auto too_big = [] {
    return fmt::format("larger than the {} bytes (1 PiB) artune all-reduces", kMaxMessageBytes);
  };
  std::uint64_t total_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Field t = tensors[i];
    std::string name;
    std::uint64_t elements = 0;
    auto from_bytes = [&](const Field& f, std::uint64_t bytes) {
      if (bytes % esize != 0) f.fail(fmt::format("{} bytes is not a multiple of the element size {}", bytes, esize));
      return bytes / esize;
    };
    if (t.value().is_number()) {
      // Bare numbers count in the file's unit.
      elements = unit == "bytes" ? from_bytes(t, t.unsigned_integer()) : t.unsigned_integer();
    } else {
      if (t.has("name")) name = t.at("name").str();
      if (t.has("shape")) {
        const Field shape = t.at("shape");
        elements = 1;
        for (std::size_t d = 0; d < shape.array_size(); ++d) {
          const std::uint64_t dim = shape[d].unsigned_integer();
          if (dim == 0) shape[d].fail("dimensions must be ≥ 1");
          // Checked per step so that the product cannot wrap around 64 bits.
          if (dim > kMaxMessageBytes / elements) t.fail(too_big());
          elements *= dim;
        }
        if (t.has("elements") && t.at("elements").unsigned_integer() != elements) {
          t.at("elements").fail(fmt::format("does not match the shape ({} elements)", elements));
        }
      } else if (t.has("elements")) {
        elements = t.at("elements").unsigned_integer();
      } else if (t.has("bytes")) {
        elements = from_bytes(t.at("bytes"), t.at("bytes").unsigned_integer());
      } else {
        t.fail("expected \"shape\", \"elements\" or \"bytes\"");
      }
    }
    if (elements == 0) t.fail("a tensor must have at least one element");
    if (elements > kMaxMessageBytes / esize) t.fail(too_big());
    total_bytes += elements * esize;  // ≤ n · 2^50: no wrap for any list that fits in memory
    if (total_bytes > kMaxMessageBytes) {
      t.fail(fmt::format("the tensors up to here add up to more than the {} bytes (1 PiB) artune all-reduces",
                         kMaxMessageBytes));
    }
    if (!t.value().is_number() && t.has("sparse")) list.sparse.push_back(read_sparse_mark(t.at("sparse"), i, elements));
    list.names.push_back(std::move(name));
    list.elements.push_back(elements);
    if (!t.value().is_number() && t.has("backward_us")) {
      const double b = t.at("backward_us").num();
      if (!(b >= 0) || !std::isfinite(b)) t.at("backward_us").fail("must be a finite time ≥ 0 (µs)");
      if (list.backward_us.size() != i) t.fail("\"backward_us\" must be given on every tensor or on none");
      list.backward_us.push_back(b);
    } else if (!list.backward_us.empty()) {
      t.fail("\"backward_us\" must be given on every tensor or on none");
    }
  }
  if (root.has("backward_us")) {
    if (!list.backward_us.empty()) root.at("backward_us").fail("give the total or per-tensor times, not both");
    const double total = root.at("backward_us").num();
    if (!(total >= 0) || !std::isfinite(total)) root.at("backward_us").fail("must be a finite time ≥ 0 (µs)");
    const double elements = static_cast<double>(list.total_elements());
    for (auto e : list.elements) list.backward_us.push_back(total * static_cast<double>(e) / elements);
  }
  return list;
}

GradientList load_gradient_list(const std::string& path) {
  const nlohmann::json doc = parse_json_input(read_input_file(path, parameter("gradient_list")), path);
  return gradient_list_from_json(doc, path);
}

std::vector<std::uint64_t> default_pack_sizes(std::uint64_t total_bytes) {
  std::vector<std::uint64_t> out = {1};
  for (std::uint64_t s = 4096; s < total_bytes; s *= 2) out.push_back(s);
  out.push_back(0);
  return out;
}

FusionResult tune_fusion(const std::vector<std::uint64_t>& tensor_bytes, const std::vector<std::uint64_t>& pack_sizes,
                         const AllReduceTimeFn& allreduce_time, double copy_gbps,
                         const std::vector<double>& backward_us, const std::vector<SeparateTensor>& separate) {
  if (tensor_bytes.empty()) throw InvalidInput("fusion: no tensors");
  // Which tensors are packed (dense[j] = list index of the j-th packed tensor) and which go alone.
  std::vector<bool> alone(tensor_bytes.size(), false);
  for (const SeparateTensor& t : separate) {
    if (t.tensor >= tensor_bytes.size()) {
      throw InvalidInput(fmt::format("fusion: separate tensor {} of {} tensors", t.tensor, tensor_bytes.size()));
    }
    if (alone[t.tensor]) throw InvalidInput(fmt::format("fusion: tensor {} is separate twice", t.tensor));
    if (!(t.us >= 0)) throw InvalidInput(fmt::format("fusion: tensor {} has no time of its own", t.tensor));
    alone[t.tensor] = true;
  }
  std::vector<std::size_t> dense;
  std::vector<std::uint64_t> dense_bytes;
  for (std::size_t i = 0; i < tensor_bytes.size(); ++i) {
    if (alone[i]) continue;
    dense.push_back(i);
    dense_bytes.push_back(tensor_bytes[i]);
  }
  if (!backward_us.empty() && backward_us.size() != tensor_bytes.size()) {
    throw InvalidInput(
        fmt::format("fusion: {} backward times for {} tensors", backward_us.size(), tensor_bytes.size()));
  }
  // ready[i]: when tensor i's gradient exists (backward runs from the last tensor to the first).
  std::vector<double> ready(tensor_bytes.size(), 0.0);
  double backward_total = 0;
  for (std::size_t i = backward_us.size(); i-- > 0;) {
    backward_total += backward_us[i];
    ready[i] = backward_total;
  }
  if (pack_sizes.empty()) throw InvalidInput("fusion: no pack sizes to try");
  if (!(copy_gbps > 0)) throw InvalidInput("fusion: copy bandwidth must be > 0");
  FusionResult result;
  result.tensors = tensor_bytes.size();
  for (auto b : tensor_bytes) result.total_bytes += b;
  for (auto b : dense_bytes) result.packed_bytes += b;
  result.separate = separate;
  std::sort(result.separate.begin(), result.separate.end(),
            [](const SeparateTensor& a, const SeparateTensor& b) { return a.tensor < b.tensor; });
  std::map<std::uint64_t, double> memo;  // pack sizes repeat across thresholds
  auto time_of = [&](std::uint64_t bytes) {
    auto it = memo.find(bytes);
    if (it == memo.end()) it = memo.emplace(bytes, allreduce_time(bytes)).first;
    return it->second;
  };
  result.overlap = !backward_us.empty();
  double best = std::numeric_limits<double>::infinity();
  double best_no_overlap = std::numeric_limits<double>::infinity();
  for (const std::uint64_t threshold : pack_sizes) {
    FusionOption option;
    option.bytes_per_pack = threshold;
    std::vector<std::vector<std::size_t>> packs;
    if (!dense.empty()) {
      for (const auto& pack : group_by_size(dense_bytes, threshold)) {
        packs.emplace_back();
        for (const std::size_t j : pack) packs.back().push_back(dense[j]);
      }
    }
    std::vector<double> pack_cost;  // all-reduce plus packing copies, per pack
    for (const auto& pack : packs) {
      std::uint64_t bytes = 0;
      for (auto i : pack) bytes += tensor_bytes[i];
      option.pack_bytes.push_back(bytes);
      const double reduce = time_of(bytes);
      option.allreduce_us += reduce;
      // Concatenate into the pack before and split it after: two copies of the pack's bytes.
      const double packing = pack.size() > 1 ? 2.0 * static_cast<double>(bytes) / (copy_gbps * 1e3) : 0.0;
      option.packing_us += packing;
      pack_cost.push_back(reduce + packing);
    }
    for (const SeparateTensor& t : result.separate) option.separate_us += t.us;
    option.total_us = option.allreduce_us + option.packing_us + option.separate_us;
    if (result.overlap) {
      // What communicates, by the list index it becomes ready with (a pack: its first tensor), and its cost.
      std::vector<std::pair<std::size_t, double>> queue;
      for (std::size_t k = 0; k < packs.size(); ++k) queue.emplace_back(packs[k].front(), pack_cost[k]);
      for (const SeparateTensor& t : result.separate) queue.emplace_back(t.tensor, t.us);
      // Backward runs from the last tensor to the first: a later index is ready first.
      std::sort(queue.begin(), queue.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      double link_free = 0;
      for (const auto& [first, cost] : queue) {
        const double start = std::max(ready[first], link_free);
        link_free = start + cost;
      }
      option.backward_us = backward_total;
      option.step_us = std::max(backward_total, link_free);
      option.exposed_us = option.step_us - backward_total;
    } else {
      option.step_us = option.total_us;
      option.exposed_us = option.total_us;
    }
    if (option.step_us < best) {
      best = option.step_us;
      result.best = result.options.size();
    }
    if (option.total_us < best_no_overlap) {
      best_no_overlap = option.total_us;
      result.best_no_overlap = result.options.size();
    }
    option.packs = std::move(packs);
    result.options.push_back(std::move(option));
  }
  return result;
}

std::string pack_size_text(std::uint64_t bytes_per_pack) {
  if (bytes_per_pack == 0) return "one pack";
  if (bytes_per_pack == 1) return "per tensor";
  return format_size(bytes_per_pack);
}

nlohmann::json fusion_to_json(const FusionResult& result, const GradientList& list) {
  nlohmann::json options = nlohmann::json::array();
  for (const auto& o : result.options) {
    options.push_back({{"bytes_per_pack", o.bytes_per_pack},
                       {"packs", o.pack_bytes.size()},
                       {"allreduce_us", o.allreduce_us},
                       {"packing_us", o.packing_us},
                       {"separate_us", o.separate_us},
                       {"total_us", o.total_us},
                       {"backward_us", o.backward_us},
                       {"step_us", o.step_us},
                       {"exposed_us", o.exposed_us}});
  }
  nlohmann::json separate = nlohmann::json::array();
  for (const SeparateTensor& t : result.separate) {
    separate.push_back(
        {{"tensor", t.tensor},
         {"name", t.tensor < list.names.size() ? list.names[t.tensor] : std::string()},
         {"bytes", t.tensor < list.elements.size() ? list.elements[t.tensor] * element_size(list.type) : 0},
         {"us", t.us}});
  }
  return {{"model", list.model},
          {"source", list.source},
          {"type", std::string(to_string(list.type))},
          {"tensors", result.tensors},
          {"total_bytes", result.total_bytes},
          {"packed_bytes", result.packed_bytes},
          {"separate", std::move(separate)},
          {"best_bytes_per_pack", result.options.at(result.best).bytes_per_pack},
          {"best_packs", result.options.at(result.best).pack_bytes.size()},
          {"best_total_us", result.options.at(result.best).total_us},
          {"overlap", result.overlap},
          {"best_step_us", result.options.at(result.best).step_us},
          {"best_no_overlap_bytes_per_pack", result.options.at(result.best_no_overlap).bytes_per_pack},
          {"best_no_overlap_total_us", result.options.at(result.best_no_overlap).total_us},
          {"options", std::move(options)}};
}

}  // namespace artune
