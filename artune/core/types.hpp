#pragma once
// Element types, reduction operators, collectives and backends: the vocabulary every module and the public API
// (include/artune/communicator.hpp) share.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace artune {

/// Element type of the reduced buffers.
enum class DataType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };

/// Reduction operator; kAvg is a sum followed by a scale by 1/ranks.
enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

/// What a group op or a communicator call computes. For reduce-scatter and all-gather a region is split with
/// even_piece(count, ranks, k) and shard k belongs to rank k: reduce-scatter leaves the reduced shard k on rank k,
/// all-gather takes shard k from rank k and leaves the whole region on every rank (algorithms/plan.hpp).
enum class Collective { kAllReduce, kBroadcast, kReduce, kReduceScatter, kAllGather };

/// Which backend executes a plan (artune/executor/backend.hpp).
enum class BackendKind { kCpu, kMpi, kCuda, kNccl };
/// Whether a backend's plans run on caller memory queued on CUDA streams (cuda, nccl: Backend::run_on_streams)
/// rather than on host buffers from the calling thread (cpu, mpi: Backend::run_on).
constexpr bool runs_on_streams(BackendKind kind) noexcept {
  return kind == BackendKind::kCuda || kind == BackendKind::kNccl;
}

/// Name of a backend kind ("cpu", "mpi", "cuda", "nccl").
std::string_view to_string(BackendKind kind) noexcept;
/// Parses "cpu", "mpi", "cuda", "nccl"; InvalidInput naming `what`.
BackendKind parse_backend_kind(std::string_view text, std::string_view what = "parameter backend");

/// Bytes per element of a type.
std::size_t element_size(DataType type) noexcept;
/// nccl-tests style name of a type ("float", "double", "half", "bfloat16", "int32", "int64", "uint8").
std::string_view to_string(DataType type) noexcept;
/// nccl-tests style name of an op ("sum", "prod", "min", "max", "avg").
std::string_view to_string(ReduceOp op) noexcept;
/// Parses a type name (also accepts float32/float64/float16/fp32/… aliases); throws InvalidInput naming `what`.
DataType parse_data_type(std::string_view text, std::string_view what = "type");
/// Parses an op name; throws InvalidInput naming `what`.
ReduceOp parse_reduce_op(std::string_view text, std::string_view what = "op");
/// All types, in a stable order (for tests and help texts).
const std::vector<DataType>& all_data_types();
/// All reduce ops, in a stable order.
const std::vector<ReduceOp>& all_reduce_ops();

}  // namespace artune
