#include "artune/core/types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "artune/core/error.hpp"

namespace artune {

std::size_t element_size(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  return 1;
}

std::string_view to_string(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kFloat16: return "half";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}
}  // namespace

DataType parse_data_type(std::string_view text, std::string_view what) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"float", DataType::kFloat32},     {"float32", DataType::kFloat32}, {"fp32", DataType::kFloat32},
      {"double", DataType::kFloat64},    {"float64", DataType::kFloat64}, {"fp64", DataType::kFloat64},
      {"half", DataType::kFloat16},      {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},
      {"bfloat16", DataType::kBFloat16}, {"bf16", DataType::kBFloat16},   {"int32", DataType::kInt32},
      {"int", DataType::kInt32},         {"int64", DataType::kInt64},     {"uint8", DataType::kUInt8},
  };
  const std::string key = lower(text);
  for (const auto& [name, type] : kNames) {
    if (key == name) return type;
  }
  throw InvalidInput(
      fmt::format("{}: unknown data type '{}' (float, double, half, bfloat16, int32, int64, uint8)", what, text));
}

ReduceOp parse_reduce_op(std::string_view text, std::string_view what) {
  const std::string key = lower(text);
  for (ReduceOp op : all_reduce_ops()) {
    if (key == to_string(op)) return op;
  }
  if (key == "mean") return ReduceOp::kAvg;
  throw InvalidInput(fmt::format("{}: unknown reduce op '{}' (sum, prod, min, max, avg)", what, text));
}

const std::vector<DataType>& all_data_types() {
  static const std::vector<DataType> kAll = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                             DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                                             DataType::kUInt8};
  return kAll;
}

const std::vector<ReduceOp>& all_reduce_ops() {
  static const std::vector<ReduceOp> kAll = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kAvg};
  return kAll;
}

std::string_view to_string(BackendKind kind) noexcept {
  switch (kind) {
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kMpi: return "mpi";
    case BackendKind::kCuda: return "cuda";
    case BackendKind::kNccl: return "nccl";
  }
  return "?";
}

BackendKind parse_backend_kind(std::string_view text, std::string_view what) {
  for (BackendKind k : {BackendKind::kCpu, BackendKind::kMpi, BackendKind::kCuda, BackendKind::kNccl}) {
    if (text == to_string(k)) return k;
  }
  throw InvalidInput(fmt::format("{}: unknown backend '{}' (cpu, mpi, cuda, nccl)", what, text));
}

}  // namespace artune
