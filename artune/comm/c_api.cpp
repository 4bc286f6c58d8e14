// The C API: each function catches everything, keeps the message per thread and returns a code.

#include "artune/artune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "artune/communicator.hpp"

struct artune_comm {
  artune::Communicator comm;
};

struct artune_request {
  artune::Request request;
};

namespace {

thread_local std::string g_last_error;

artune_result_t code_of(artune::ErrorCode code) {
  switch (code) {
    case artune::ErrorCode::kInvalidInput: return ARTUNE_ERR_INVALID_USAGE;
    case artune::ErrorCode::kUnsupported: return ARTUNE_ERR_UNSUPPORTED;
    case artune::ErrorCode::kBackendFailure: return ARTUNE_ERR_REMOTE;
    case artune::ErrorCode::kTimeout: return ARTUNE_ERR_TIMEOUT;
    case artune::ErrorCode::kWrongResult:
    case artune::ErrorCode::kInternal: break;
  }
  return ARTUNE_ERR_INTERNAL;
}

template <typename F>
artune_result_t guarded(F&& fn) {
  try {
    fn();
    return ARTUNE_SUCCESS;
  } catch (const artune::Error& e) {
    g_last_error = e.what();
    return code_of(e.code());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return ARTUNE_ERR_INTERNAL;
  } catch (...) {
    g_last_error = "unknown exception";
    return ARTUNE_ERR_INTERNAL;
  }
}

/// The largest artune_options_t a caller may pass (a later header's): far above any realistic growth.
constexpr std::size_t kMaxOptionsSize = 4096;

artune::CommOptions to_options(const artune_options_t* o) {
  artune::CommOptions out;
  if (o == nullptr) return out;
  // Every field of this version is read; a caller compiled against a later header passes a larger size (its extra
  // fields are not this library's to read), one that never called artune_options_init a wrong one.
  // An earlier header's options end at reducescatter_table: the fields after it take their defaults.
  constexpr std::size_t kFirstVersionSize = offsetof(artune_options_t, profile);
  if (o->struct_size < kFirstVersionSize || o->struct_size > kMaxOptionsSize) {
    throw artune::InvalidInput(
        fmt::format("options->struct_size is {}, expected at least {}: initialise the options "
                    "with artune_options_init",
                    o->struct_size, kFirstVersionSize));
  }
  if (o->topology != nullptr) out.topology = o->topology;
  if (o->table != nullptr) out.table = o->table;
  if (o->spec != nullptr) out.spec = o->spec;
  out.timeout_s = o->timeout_s;
  out.cache_capacity = o->cache_capacity;
  out.pad_limit = o->pad_limit;
  if (o->allgather_table != nullptr) out.allgather_table = o->allgather_table;
  if (o->reducescatter_table != nullptr) out.reducescatter_table = o->reducescatter_table;
  if (o->struct_size < sizeof(artune_options_t)) return out;
  if (o->profile != nullptr) out.profile = o->profile;
  if (o->calibration != nullptr) out.calibration = o->calibration;
  if (o->tune_sizes_count > 0) {
    if (o->tune_sizes == nullptr) throw artune::InvalidInput("options->tune_sizes is NULL but tune_sizes_count > 0");
    out.tune_sizes.assign(o->tune_sizes, o->tune_sizes + o->tune_sizes_count);
  }
  return out;
}

void require(bool ok, const char* what) {
  if (!ok) throw artune::InvalidInput(what);
}

template <typename E>
E checked_enum(int value, int last, const char* what) {
  require(value >= 0 && value <= last, what);
  return static_cast<E>(value);
}

void copy_text(const std::string& s, char* text, std::size_t length) {
  require(text != nullptr && length > 0, "text: NULL or zero length");
  const std::size_t n = std::min(s.size(), length - 1);
  std::memcpy(text, s.data(), n);
  text[n] = '\0';
}

}  // namespace

namespace {

// Stores a request made by `submit` in *request (nothing is left behind when that fails).
template <typename F>
artune_result_t submitted(artune_request_t* request, const char* what, F&& submit) {
  return guarded([&] {
    require(request != nullptr, what);
    auto* r = new artune_request{};
    try {
      r->request = submit();
    } catch (...) {
      delete r;
      throw;
    }
    *request = r;
  });
}

}  // namespace

extern "C" {

void artune_options_init(artune_options_t* options) {
  if (options == nullptr) return;
  const artune::CommOptions d;
  options->struct_size = sizeof(artune_options_t);
  options->topology = nullptr;
  options->table = nullptr;
  options->spec = nullptr;
  options->timeout_s = d.timeout_s;
  options->cache_capacity = d.cache_capacity;
  options->pad_limit = d.pad_limit;
  options->allgather_table = nullptr;
  options->reducescatter_table = nullptr;
  options->profile = nullptr;
  options->calibration = nullptr;
  options->tune_sizes = nullptr;
  options->tune_sizes_count = 0;
}

artune_result_t artune_comm_init_local(artune_backend_t backend, const artune_options_t* options, int nranks,
                                       artune_comm_t* comms) {
  return guarded([&] {
    require(comms != nullptr, "artune_comm_init_local: comms is NULL");
    require(nranks > 0, "artune_comm_init_local: nranks must be > 0");
    const auto kind = checked_enum<artune::BackendKind>(backend, 3, "artune_comm_init_local: unknown backend");
    auto list = artune::Communicator::create_local(kind, to_options(options), nranks);
    std::vector<artune_comm_t> made;
    try {
      for (auto& c : list) made.push_back(new artune_comm{std::move(c)});
    } catch (...) {
      for (artune_comm_t c : made) delete c;
      throw;
    }
    for (std::size_t i = 0; i < made.size(); ++i) comms[i] = made[i];
  });
}

artune_result_t artune_comm_init_mpi(const artune_options_t* options, const void* mpi_comm, artune_comm_t* comm) {
  return guarded([&] {
    require(comm != nullptr, "artune_comm_init_mpi: comm is NULL");
    *comm = new artune_comm{artune::Communicator::create_mpi(to_options(options), mpi_comm)};
  });
}

artune_result_t artune_comm_init_nccl(const artune_options_t* options, artune_comm_t* comm) {
  return guarded([&] {
    require(comm != nullptr, "artune_comm_init_nccl: comm is NULL");
    *comm = new artune_comm{artune::Communicator::create_nccl(to_options(options))};
  });
}

artune_result_t artune_allreduce(artune_comm_t comm, const void* send, void* recv, int64_t count, artune_dtype_t dtype,
                                 artune_op_t op, void* stream) {
  return guarded([&] {
    require(comm != nullptr, "artune_allreduce: comm is NULL");
    const auto type = checked_enum<artune::DataType>(dtype, 6, "artune_allreduce: unknown dtype");
    const auto reduce = checked_enum<artune::ReduceOp>(op, 4, "artune_allreduce: unknown op");
    comm->comm.allreduce(send, recv, count, type, reduce, stream);
  });
}

artune_result_t artune_allgather(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                 artune_dtype_t dtype, void* stream) {
  return guarded([&] {
    require(comm != nullptr, "artune_allgather: comm is NULL");
    const auto type = checked_enum<artune::DataType>(dtype, 6, "artune_allgather: unknown dtype");
    comm->comm.allgather(send, recv, count_per_rank, type, stream);
  });
}

artune_result_t artune_reducescatter(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                     artune_dtype_t dtype, artune_op_t op, void* stream) {
  return guarded([&] {
    require(comm != nullptr, "artune_reducescatter: comm is NULL");
    const auto type = checked_enum<artune::DataType>(dtype, 6, "artune_reducescatter: unknown dtype");
    const auto reduce = checked_enum<artune::ReduceOp>(op, 4, "artune_reducescatter: unknown op");
    comm->comm.reducescatter(send, recv, count_per_rank, type, reduce, stream);
  });
}

artune_result_t artune_allreduce_async(artune_comm_t comm, const void* send, void* recv, int64_t count,
                                       artune_dtype_t dtype, artune_op_t op, void* stream, artune_request_t* request) {
  return submitted(request, "artune_allreduce_async: request is NULL", [&] {
    require(comm != nullptr, "artune_allreduce_async: comm is NULL");
    const auto type = checked_enum<artune::DataType>(dtype, 6, "artune_allreduce_async: unknown dtype");
    const auto reduce = checked_enum<artune::ReduceOp>(op, 4, "artune_allreduce_async: unknown op");
    return comm->comm.allreduce_async(send, recv, count, type, reduce, stream);
  });
}

artune_result_t artune_allgather_async(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                       artune_dtype_t dtype, void* stream, artune_request_t* request) {
  return submitted(request, "artune_allgather_async: request is NULL", [&] {
    require(comm != nullptr, "artune_allgather_async: comm is NULL");
    const auto type = checked_enum<artune::DataType>(dtype, 6, "artune_allgather_async: unknown dtype");
    return comm->comm.allgather_async(send, recv, count_per_rank, type, stream);
  });
}

artune_result_t artune_reducescatter_async(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                           artune_dtype_t dtype, artune_op_t op, void* stream,
                                           artune_request_t* request) {
  return submitted(request, "artune_reducescatter_async: request is NULL", [&] {
    require(comm != nullptr, "artune_reducescatter_async: comm is NULL");
    const auto type = checked_enum<artune::DataType>(dtype, 6, "artune_reducescatter_async: unknown dtype");
    const auto reduce = checked_enum<artune::ReduceOp>(op, 4, "artune_reducescatter_async: unknown op");
    return comm->comm.reducescatter_async(send, recv, count_per_rank, type, reduce, stream);
  });
}

artune_result_t artune_request_wait(artune_request_t request) {
  return guarded([&] {
    require(request != nullptr, "artune_request_wait: request is NULL");
    request->request.wait();
  });
}

artune_result_t artune_request_test(artune_request_t request, int* done) {
  return guarded([&] {
    require(request != nullptr && done != nullptr, "artune_request_test: NULL argument");
    *done = request->request.done() ? 1 : 0;
  });
}

void artune_request_free(artune_request_t request) { delete request; }

artune_result_t artune_comm_rank(artune_comm_t comm, int* rank) {
  return guarded([&] {
    require(comm != nullptr && rank != nullptr, "artune_comm_rank: NULL argument");
    *rank = comm->comm.rank();
  });
}

artune_result_t artune_comm_size(artune_comm_t comm, int* size) {
  return guarded([&] {
    require(comm != nullptr && size != nullptr, "artune_comm_size: NULL argument");
    *size = comm->comm.size();
  });
}

artune_result_t artune_comm_last_plan(artune_comm_t comm, char* text, size_t length) {
  return guarded([&] {
    require(comm != nullptr, "artune_comm_last_plan: comm is NULL");
    copy_text(comm->comm.last_plan().label, text, length);
  });
}

artune_result_t artune_comm_dump_cache(artune_comm_t comm, char* text, size_t length) {
  return guarded([&] {
    require(comm != nullptr, "artune_comm_dump_cache: comm is NULL");
    copy_text(comm->comm.dump_cache(), text, length);
  });
}

void artune_comm_destroy(artune_comm_t comm) { delete comm; }

const char* artune_error_string(artune_result_t result) {
  switch (result) {
    case ARTUNE_SUCCESS: return "success";
    case ARTUNE_ERR_INVALID_USAGE: return "invalid usage";
    case ARTUNE_ERR_UNSUPPORTED: return "unsupported";
    case ARTUNE_ERR_REMOTE: return "remote or library failure";
    case ARTUNE_ERR_TIMEOUT: return "timeout";
    case ARTUNE_ERR_INTERNAL: return "internal error";
    case ARTUNE_RESULT_MAX_ENUM: break;
  }
  return "unknown result code";
}

const char* artune_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
