// The Python binding, the extension artune._artune (pybind11 from Debian's python3-pybind11); python/artune/
// __init__.py re-exports it as `artune`.
//
//   import artune
//   comm = artune.Communicator(backend="mpi")            # one per MPI rank (MPI initialised by artune)
//   comms = artune.local_communicators(4, backend="cpu")  # one per thread of this process
//   comm.allreduce(x)                                     # in place; allreduce(x, out=y) out of place
//   comm.allgather(x)                                     # every rank's x in rank order (or into out=)
//   comm.reducescatter(x, op="sum")                       # this rank's block, reduced (or into out=)
//   work = comm.allreduce(x, async_op=True); work.wait()  # asynchronous: a handle
//
// Arrays come in without copies: numpy arrays, objects with DLPack (`__dlpack__`: torch, CuPy, JAX …), with
// `__cuda_array_interface__` (CuPy, Numba) or with the array interface / buffer protocol. Results land in the
// caller's memory (in place, or `out`). The GIL is released during a call, so the ranks of a local group can be
// Python threads.

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "artune/communicator.hpp"
#include "artune/core/types.hpp"
#include "artune_config.hpp"

#if ARTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#if ARTUNE_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif
#if ARTUNE_HAVE_CUDA_BACKEND
#include <cuda_runtime.h>
#endif

namespace py = pybind11;

namespace {

using artune::DataType;
using artune::InvalidInput;

// DLPack's device types (dlpack.h), named here so that a build without the header still tells them apart.
constexpr int kDeviceCpu = 1;
constexpr int kDeviceCuda = 2;
constexpr int kDeviceCudaHost = 3;
constexpr int kDeviceCudaManaged = 13;

// The caller's memory for one argument: where it is, what it holds, and what keeps it alive.
struct Buffer {
  void* data = nullptr;
  std::int64_t count = 0;
  DataType type = DataType::kFloat32;
  std::string dtype;  // the producer's name of the element type, for messages
  bool cuda = false;  // device memory (the cuda and nccl backends)
  int device = 0;
  bool writable = true;
  std::optional<std::uintptr_t> producer_stream;  // __cuda_array_interface__'s stream (v3)
  py::object object;                              // the caller's object (what a call returns)
  py::object owner;                               // keeps the memory alive (a DLPack capsule, a numpy view)
  std::string where() const { return cuda ? "cuda:" + std::to_string(device) : "host memory"; }
  std::string shape() const { return dtype + " x " + std::to_string(count); }
};

std::string dtype_names() { return "float32, float64, float16, bfloat16, int32, int64, uint8"; }

[[noreturn]] void bad(const std::string& call, const std::string& param, const std::string& what) {
  throw InvalidInput(call + ": parameter " + param + " " + what);
}

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>(); }

Buffer from_numpy(py::array a, const std::string& call, const std::string& param) {
  Buffer b;
  if (!(a.flags() & py::array::c_style)) bad(call, param, "must be C-contiguous");
  const py::dtype d = a.dtype();
  const char kind = d.kind();
  const auto size = d.itemsize();
  b.dtype = py::str(static_cast<const py::handle&>(d)).cast<std::string>();
  if (kind == 'f' && size == 4) {
    b.type = DataType::kFloat32;
  } else if (kind == 'f' && size == 8) {
    b.type = DataType::kFloat64;
  } else if (kind == 'f' && size == 2) {
    b.type = DataType::kFloat16;
  } else if (kind == 'i' && size == 4) {
    b.type = DataType::kInt32;
  } else if (kind == 'i' && size == 8) {
    b.type = DataType::kInt64;
  } else if (kind == 'u' && size == 1) {
    b.type = DataType::kUInt8;
  } else if (b.dtype == "bfloat16" && size == 2) {  // ml_dtypes' bfloat16
    b.type = DataType::kBFloat16;
  } else {
    bad(call, param, "has numpy dtype " + b.dtype + ", which is not one of " + dtype_names());
  }
  b.data = a.size() > 0 ? const_cast<void*>(a.data()) : nullptr;
  b.count = static_cast<std::int64_t>(a.size());
  b.writable = a.writeable();
  b.owner = a;
  return b;
}

// Row-major and dense (dimensions of extent 1 may have any stride).
bool c_contiguous(int ndim, const std::int64_t* shape, const std::int64_t* strides) {
  if (strides == nullptr) return true;
  std::int64_t expected = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// The caller's stream for a CUDA producer: `stream` as given (an int, or an object with .cuda_stream / .ptr).
std::optional<std::uintptr_t> stream_handle(py::handle stream) {
  if (stream.is_none()) return std::nullopt;
  if (py::isinstance<py::int_>(stream)) return stream.cast<std::uintptr_t>();
  if (py::hasattr(stream, "cuda_stream")) return stream.attr("cuda_stream").cast<std::uintptr_t>();  // torch
  if (py::hasattr(stream, "ptr")) return stream.attr("ptr").cast<std::uintptr_t>();                  // CuPy
  throw InvalidInput("parameter stream: a " + type_name(stream) +
                     " is not a CUDA stream (an int handle, a torch.cuda.Stream or an object with .ptr)");
}

#if ARTUNE_HAVE_DLPACK
Buffer from_dlpack(py::handle obj, const std::string& call, const std::string& param,
                   std::optional<std::uintptr_t> stream) {
  Buffer b;
  py::object capsule;
  try {
    // With a stream, the producer orders its pending work before it; without one it assumes CUDA's legacy default
    // stream, where the call then runs (DLPack's protocol). The device is read from the tensor itself:
    // __dlpack_device__ costs PyTorch 1.13 three times what __dlpack__ does.
    capsule = stream ? obj.attr("__dlpack__")(py::arg("stream") = *stream) : obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    bad(call, param, "(a " + type_name(obj) + ") refused DLPack export: " + std::string(e.what()));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    bad(call, param, "(a " + type_name(obj) + "): __dlpack__ did not return an unused \"dltensor\" capsule");
  }
  const DLTensor& t = managed->dl_tensor;
  const int device_type = static_cast<int>(t.device.device_type);
  b.device = t.device.device_id;
  b.cuda = device_type == kDeviceCuda || device_type == kDeviceCudaManaged;
  if (!b.cuda && device_type != kDeviceCpu && device_type != kDeviceCudaHost) {
    bad(call, param,
        "is on DLPack device type " + std::to_string(device_type) + ", not host memory (1, 3) or CUDA (2, 13)");
  }
  std::int64_t count = 1;
  for (int i = 0; i < t.ndim; ++i) count *= t.shape[i];
  const DLDataType d = t.dtype;
  const std::string code = d.code == kDLFloat    ? "float"
                           : d.code == kDLBfloat ? "bfloat"
                           : d.code == kDLInt    ? "int"
                           : d.code == kDLUInt   ? "uint"
                           : d.code == 5         ? "complex"  // kDLComplex (DLPack 0.6)
                                                 : "code" + std::to_string(d.code) + "_";
  b.dtype = code + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
  if (d.lanes != 1) {
    bad(call, param, "has DLPack type " + b.dtype + ", which is not one of " + dtype_names());
  } else if (d.code == kDLFloat && d.bits == 32) {
    b.type = DataType::kFloat32;
  } else if (d.code == kDLFloat && d.bits == 64) {
    b.type = DataType::kFloat64;
  } else if (d.code == kDLFloat && d.bits == 16) {
    b.type = DataType::kFloat16;
  } else if (d.code == kDLBfloat && d.bits == 16) {
    b.type = DataType::kBFloat16;
  } else if (d.code == kDLInt && d.bits == 32) {
    b.type = DataType::kInt32;
  } else if (d.code == kDLInt && d.bits == 64) {
    b.type = DataType::kInt64;
  } else if (d.code == kDLUInt && d.bits == 8) {
    b.type = DataType::kUInt8;
  } else {
    bad(call, param, "has DLPack type " + b.dtype + ", which is not one of " + dtype_names());
  }
  if (!c_contiguous(t.ndim, t.shape, t.strides)) bad(call, param, "must be C-contiguous");
  b.data = count > 0 ? static_cast<std::byte*>(t.data) + t.byte_offset : nullptr;
  b.count = count;
  // The capsule stays unconsumed (not renamed): its destructor gives the tensor back when the call is done.
  b.owner = capsule;
  return b;
}
#endif

Buffer from_cuda_array_interface(py::handle obj, const std::string& call, const std::string& param) {
  Buffer b;
  const py::dict cai = obj.attr("__cuda_array_interface__");
  const py::tuple data = cai["data"];
  const py::tuple shape = cai["shape"];
  const std::string typestr = cai["typestr"].cast<std::string>();
  std::int64_t count = 1;
  std::vector<std::int64_t> extents;
  for (auto s : shape) {
    extents.push_back(s.cast<std::int64_t>());
    count *= extents.back();
  }
  const std::string t = typestr.size() >= 2 ? typestr.substr(1) : typestr;
  b.dtype = typestr;
  if (t == "f4") {
    b.type = DataType::kFloat32;
  } else if (t == "f8") {
    b.type = DataType::kFloat64;
  } else if (t == "f2") {
    b.type = DataType::kFloat16;
  } else if (t == "i4") {
    b.type = DataType::kInt32;
  } else if (t == "i8") {
    b.type = DataType::kInt64;
  } else if (t == "u1") {
    b.type = DataType::kUInt8;
  } else {
    bad(call, param, "has __cuda_array_interface__ typestr " + typestr + ", which is not one of " + dtype_names());
  }
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    const std::size_t elem = artune::element_size(b.type);
    std::vector<std::int64_t> strides;
    for (auto s : cai["strides"].cast<py::tuple>())
      strides.push_back(s.cast<std::int64_t>() / static_cast<std::int64_t>(elem));
    if (!c_contiguous(static_cast<int>(extents.size()), extents.data(), strides.data())) {
      bad(call, param, "must be C-contiguous");
    }
  }
  b.data = count > 0 ? reinterpret_cast<void*>(data[0].cast<std::uintptr_t>()) : nullptr;
  b.writable = !data[1].cast<bool>();
  b.count = count;
  b.cuda = true;
  b.device = -1;
#if ARTUNE_HAVE_CUDA_BACKEND
  cudaPointerAttributes attr{};
  if (b.data != nullptr && cudaPointerGetAttributes(&attr, b.data) == cudaSuccess) b.device = attr.device;
  (void)cudaGetLastError();
#endif
  if (cai.contains("stream") && !cai["stream"].is_none()) b.producer_stream = cai["stream"].cast<std::uintptr_t>();
  b.owner = py::reinterpret_borrow<py::object>(obj);
  return b;
}

// The memory of `obj` for parameter `param` of `call`, without a copy.
Buffer acquire(py::handle obj, const std::string& call, const std::string& param,
               std::optional<std::uintptr_t> stream) {
  Buffer b;
  if (py::isinstance<py::array>(obj)) {
    b = from_numpy(py::reinterpret_borrow<py::array>(obj), call, param);
  } else if (py::hasattr(obj, "__dlpack__")) {
#if ARTUNE_HAVE_DLPACK
    b = from_dlpack(obj, call, param, stream);
#else
    if (!py::hasattr(obj, "__array_interface__") && !PyObject_CheckBuffer(obj.ptr())) {
      bad(call, param,
          "(a " + type_name(obj) +
              ") needs DLPack, which this build of artune lacks (rebuild with Debian's libdlpack-dev)");
    }
    b = from_numpy(py::module_::import("numpy").attr("asarray")(obj), call, param);
#endif
  } else if (py::hasattr(obj, "__cuda_array_interface__")) {
    b = from_cuda_array_interface(obj, call, param);
  } else if (py::hasattr(obj, "__array_interface__") || PyObject_CheckBuffer(obj.ptr())) {
    // A view of the caller's memory (numpy does not copy what exposes these interfaces).
    b = from_numpy(py::module_::import("numpy").attr("asarray")(obj), call, param);
  } else {
    bad(call, param,
        "is a " + type_name(obj) +
            ", not an array (a numpy array, a torch tensor, an object with __dlpack__, "
            "__cuda_array_interface__ or __array_interface__); a result could not land in it");
  }
  b.object = py::reinterpret_borrow<py::object>(obj);
  return b;
}

// A call's buffers checked against the communicator's backend: host memory for cpu/mpi, device memory for
// cuda/nccl; `stream` only for the latter.
void check_place(const artune::Communicator& c, const Buffer& b, const std::string& call, const std::string& param,
                 bool stream_given) {
  const bool gpu = c.backend() == artune::BackendKind::kCuda || c.backend() == artune::BackendKind::kNccl;
  const std::string backend(artune::to_string(c.backend()));
  if (b.cuda && !gpu) {
    bad(call, param,
        "is in CUDA memory (" + b.where() + ") but this communicator runs on the " + backend +
            " backend, which reads host memory: move it to the host or use backend=\"nccl\"");
  }
  if (!b.cuda && gpu && b.count > 0) {
    bad(call, param, "is in host memory but the " + backend + " backend needs device memory (a CUDA tensor)");
  }
  if (stream_given && !gpu) {
    throw InvalidInput(call + ": parameter stream is for the cuda and nccl backends, not " + backend);
  }
}

void check_writable(const Buffer& b, const std::string& call, const std::string& param) {
  if (!b.writable) bad(call, param, "is read-only");
}

void check_same(const Buffer& out, const Buffer& in, std::int64_t count, const std::string& call) {
  if (out.type != in.type || out.count != count) {
    bad(call, "out",
        "must hold " + in.dtype + " x " + std::to_string(count) + " (from parameter array " + in.shape() + "), not " +
            out.shape());
  }
  if (out.cuda != in.cuda || (out.cuda && out.device != in.device)) {
    bad(call, "out", "is in " + out.where() + " but parameter array in " + in.where());
  }
}

// numpy's name of a type ("" for bfloat16, which numpy lacks).
std::string numpy_name(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
    case DataType::kBFloat16: break;
  }
  return "";
}

// A new flat result of `n` elements like `like`: `like.new_empty` for torch tensors (same dtype and device), numpy
// for the others in host memory.
Buffer new_result(const Buffer& like, std::int64_t n, const std::string& call) {
  py::object made;
  const bool numpy_in = py::isinstance<py::array>(like.object);
  if (!numpy_in && py::hasattr(like.object, "new_empty")) {
    made = like.object.attr("new_empty")(py::make_tuple(n));
  } else if (numpy_in) {
    made = py::module_::import("numpy").attr("empty")(n, like.object.attr("dtype"));
  } else if (!like.cuda && !numpy_name(like.type).empty()) {
    made = py::module_::import("numpy").attr("empty")(n, numpy_name(like.type));
  } else {
    bad(call, "out",
        "is needed for a " + type_name(like.object) + " of " + like.dtype +
            " (artune makes numpy results in host memory and torch results like the input)");
  }
  return acquire(made, call, "out", std::nullopt);
}

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// The callbacks still to run that take the GIL on a communicator's progress thread. Python ends a thread that asks
// for the GIL while the interpreter exits by unwinding it, which C++ frames on the way (torch's future, ours) do not
// survive (std::terminate); so the interpreter's exit waits for them (atexit, registered in the module's init).
// Each belongs to a call in flight, which ends within its communicator's timeout. Leaked: outlives every thread.
class PendingCallbacks {
 public:
  void add() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  void done() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--count_ == 0) cv_.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return count_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t count_ = 0;
};

PendingCallbacks& pending_callbacks() {
  static auto* pending = new PendingCallbacks;
  return *pending;
}

// Keeps the Python objects of a call in flight alive until it has finished; released with the GIL held.
struct Held {
  std::vector<py::object> objects;
  ~Held() {
    if (objects.empty()) return;
    if (!Py_IsInitialized() || finalizing()) {
      for (auto& o : objects) o.release();  // the interpreter is gone or going: leave them
      return;
    }
    py::gil_scoped_acquire gil;
    objects.clear();
  }
};

// An asynchronous call: artune.Work.
struct Work {
  artune::Request request;
  py::object result;
  std::string call;
};

// Runs the call, `start(false)` synchronously (GIL released) or `start(true)` asynchronously, and returns its
// result: the result object, or a Work whose wait() returns it.
template <typename Start>
py::object finish_call(bool async_op, py::object result, std::vector<py::object> keep, const std::string& call,
                       Start&& start) {
  artune::Request request;
  {
    // Without the GIL, asynchronous calls too: on cuda and nccl the call is queued before it returns, which for a
    // group of this process's threads is a rendezvous with the other ranks, whose threads need the GIL to reach it
    // (the first GPU run of the CUDA tensor test found every asynchronous call of a 4-thread group timing out).
    py::gil_scoped_release release;
    request = start(async_op);
  }
  if (!async_op) return result;
  auto held = std::make_shared<Held>();
  held->objects = std::move(keep);
  // The buffers' owners live until the call has finished, even when the Work is dropped.
  pending_callbacks().add();
  request.on_done([held](std::exception_ptr) mutable {
    held.reset();
    pending_callbacks().done();
  });
  return py::cast(Work{request, result, call});
}

artune::CommOptions options_of(const std::string& topology, const std::string& table, const std::string& spec,
                               double timeout, std::size_t cache, std::uint64_t pad_limit,
                               const std::string& allgather_table, const std::string& reducescatter_table,
                               const std::string& profile, const std::string& calibration,
                               const std::optional<std::vector<std::int64_t>>& tune_sizes) {
  artune::CommOptions o;
  o.topology = topology;
  o.table = table;
  o.spec = spec;
  o.allgather_table = allgather_table;
  o.reducescatter_table = reducescatter_table;
  o.timeout_s = timeout;
  o.cache_capacity = cache;
  o.pad_limit = pad_limit;
  o.profile = profile;
  o.calibration = calibration;
  if (tune_sizes) {
    if (tune_sizes->empty()) throw InvalidInput("parameter tune_sizes: empty (None = the default sizes)");
    for (std::int64_t s : *tune_sizes) {
      if (s <= 0) throw InvalidInput("parameter tune_sizes: " + std::to_string(s) + " is not a size in bytes > 0");
      o.tune_sizes.push_back(static_cast<std::uint64_t>(s));
    }
  }
  return o;
}

artune::ReduceOp op_of(const std::string& op) { return artune::parse_reduce_op(op, "parameter op"); }

void* as_stream(std::optional<std::uintptr_t> s) {
  // DLPack's 1 (and no stream) is CUDA's legacy default stream, which the communicator calls null.
  if (!s || *s == 1) return nullptr;
  return reinterpret_cast<void*>(*s);
}

// __cuda_array_interface__ producers name the stream their writes are on: the call's stream waits for it.
void order_after_producer(const Buffer& b, void* stream, const std::string& call) {
  if (!b.producer_stream || as_stream(b.producer_stream) == stream) return;
#if ARTUNE_HAVE_CUDA_BACKEND
  cudaEvent_t event = nullptr;
  const bool ok = cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess &&
                  cudaEventRecord(event, static_cast<cudaStream_t>(as_stream(b.producer_stream))) == cudaSuccess &&
                  cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event, 0) == cudaSuccess;
  if (event != nullptr) cudaEventDestroy(event);
  if (!ok) throw artune::BackendFailure(call + ": cannot order the call after the producer's stream");
#else
  (void)stream;
  (void)call;
#endif
}

// The stream a call runs on (the caller's, else the input's producer stream), after the producers of its input and
// its result on CUDA.
void* call_stream(const Buffer& in, const Buffer& target, const std::optional<std::uintptr_t>& stream,
                  const std::string& call) {
  void* s = as_stream(stream.has_value() ? stream : in.producer_stream);
  if (in.cuda) {
    order_after_producer(in, s, call);
    order_after_producer(target, s, call);
  }
  return s;
}

// The result buffer of an all-gather or reduce-scatter of `count` elements: `out`, checked, or a new one like the
// input.
Buffer result_of(const Buffer& in, py::handle out, std::int64_t count, const std::string& call,
                 const std::optional<std::uintptr_t>& stream) {
  Buffer target = out.is_none() ? new_result(in, count, call) : acquire(out, call, "out", stream);
  check_same(target, in, count, call);
  check_writable(target, call, "out");
  return target;
}

py::object allreduce(artune::Communicator& c, py::handle array, const std::string& op, py::handle out, bool async_op,
                     py::handle stream_arg) {
  const std::string call = "allreduce";
  const auto stream = stream_handle(stream_arg);
  const auto reduce = op_of(op);
  Buffer in = acquire(array, call, "array", stream);
  check_place(c, in, call, "array", stream.has_value());
  Buffer target = in;
  if (!out.is_none()) {
    target = acquire(out, call, "out", stream);
    check_same(target, in, in.count, call);
    check_writable(target, call, "out");
  } else {
    check_writable(in, call, "array");
  }
  void* s = call_stream(in, target, stream, call);
  return finish_call(async_op, target.object, {in.owner, target.owner, in.object, target.object}, call,
                     [&](bool async) {
                       if (async) return c.allreduce_async(in.data, target.data, in.count, in.type, reduce, s);
                       c.allreduce(in.data, target.data, in.count, in.type, reduce, s);
                       return artune::Request();
                     });
}

py::object allgather(artune::Communicator& c, py::handle array, py::handle out, bool async_op, py::handle stream_arg) {
  const std::string call = "allgather";
  const auto stream = stream_handle(stream_arg);
  Buffer in = acquire(array, call, "array", stream);
  check_place(c, in, call, "array", stream.has_value());
  const std::int64_t total = in.count * c.size();
  const Buffer target = result_of(in, out, total, call, stream);
  void* s = call_stream(in, target, stream, call);
  return finish_call(async_op, target.object, {in.owner, target.owner, in.object, target.object}, call,
                     [&](bool async) {
                       if (async) return c.allgather_async(in.data, target.data, in.count, in.type, s);
                       c.allgather(in.data, target.data, in.count, in.type, s);
                       return artune::Request();
                     });
}

py::object reducescatter(artune::Communicator& c, py::handle array, const std::string& op, py::handle out,
                         bool async_op, py::handle stream_arg) {
  const std::string call = "reducescatter";
  const auto stream = stream_handle(stream_arg);
  const auto reduce = op_of(op);
  Buffer in = acquire(array, call, "array", stream);
  check_place(c, in, call, "array", stream.has_value());
  if (in.count % c.size() != 0) {
    bad(call, "array",
        "has " + std::to_string(in.count) + " elements, not a multiple of the group's " + std::to_string(c.size()) +
            " ranks");
  }
  const std::int64_t count = in.count / c.size();
  const Buffer target = result_of(in, out, count, call, stream);
  void* s = call_stream(in, target, stream, call);
  return finish_call(async_op, target.object, {in.owner, target.owner, in.object, target.object}, call,
                     [&](bool async) {
                       if (async) return c.reducescatter_async(in.data, target.data, count, in.type, reduce, s);
                       c.reducescatter(in.data, target.data, count, in.type, reduce, s);
                       return artune::Request();
                     });
}

}  // namespace

PYBIND11_MODULE(_artune, m) {
  m.doc() = "artune: all-reduce, all-gather and reduce-scatter of arrays and tensors with tuned plans";
  m.attr("__version__") = ARTUNE_VERSION;
  m.attr("has_dlpack") = static_cast<bool>(ARTUNE_HAVE_DLPACK);
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    py::gil_scoped_release release;
    pending_callbacks().drain();
  }));

  // Error classes carry the artune code in their name; all derive from artune.Error, a RuntimeError.
  static py::exception<artune::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<artune::InvalidInput> invalid(m, "InvalidUsage", error.ptr());
  static py::exception<artune::Unsupported> unsupported(m, "Unsupported", error.ptr());
  static py::exception<artune::BackendFailure> remote(m, "RemoteError", error.ptr());
  static py::exception<artune::Timeout> timeout(m, "Timeout", error.ptr());
  // PyErr_SetString, not exception<T>::operator() (deprecated in pybind11 2.12 in favour of set_error, which
  // Debian's 2.10 lacks): the same call either way.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const artune::InvalidInput& e) {
      PyErr_SetString(invalid.ptr(), e.what());
    } catch (const artune::Unsupported& e) {
      PyErr_SetString(unsupported.ptr(), e.what());
    } catch (const artune::BackendFailure& e) {
      PyErr_SetString(remote.ptr(), e.what());
    } catch (const artune::Timeout& e) {
      PyErr_SetString(timeout.ptr(), e.what());
    } catch (const artune::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  py::class_<Work>(m, "Work", "A call in flight (async_op=True): wait() for its result")
      .def(
          "wait",
          [](Work& w, std::optional<double> seconds) {
            {
              py::gil_scoped_release release;
              if (!seconds) {
                w.request.wait();
              } else if (!(*seconds >= 0)) {
                throw InvalidInput("wait: parameter timeout " + std::to_string(*seconds) + " is not >= 0");
              } else if (!w.request.wait_for(*seconds)) {
                throw artune::Timeout(w.call + ": not finished within the " + std::to_string(*seconds) +
                                      " s of wait(timeout=); the call is still in flight");
              }
            }
            return w.result;
          },
          py::arg("timeout") = py::none(),
          "Blocks until the call has finished and returns its result (the array or tensor it wrote); raises its "
          "error (artune.Timeout when a rank never joined within the communicator's timeout, or when `timeout` "
          "seconds pass first; the call then goes on)")
      .def(
          "is_completed", [](const Work& w) { return w.request.done(); },
          "Whether the call has finished (wait() then returns at once)")
      .def(
          "add_done_callback",
          [](py::object self, py::function fn) {
            Work& w = self.cast<Work&>();
            auto held = std::make_shared<Held>();
            held->objects.push_back(fn);
            held->objects.push_back(self);
            pending_callbacks().add();
            w.request.on_done([held](std::exception_ptr) mutable {
              if (Py_IsInitialized() && !finalizing()) {
                py::gil_scoped_acquire gil;
                try {
                  held->objects[0](held->objects[1]);
                } catch (py::error_already_set& e) {
                  e.discard_as_unraisable("artune.Work callback");
                }
                held.reset();
              }
              pending_callbacks().done();
            });
          },
          py::arg("fn"),
          "Calls fn(work) once the call has finished, on the thread that finishes it (holding the GIL), or at "
          "once when it has; fn calls work.wait() for the result or the error");

  py::class_<artune::Communicator>(m, "Communicator")
      .def(py::init([](const std::string& backend, const std::string& topology, const std::string& table,
                       const std::string& spec, double timeout, std::size_t cache, std::uint64_t pad_limit,
                       const std::string& allgather_table, const std::string& reducescatter_table,
                       const std::string& profile, const std::string& calibration,
                       const std::optional<std::vector<std::int64_t>>& tune_sizes) {
             const auto kind = artune::parse_backend_kind(backend, "parameter backend");
             const auto options = options_of(topology, table, spec, timeout, cache, pad_limit, allgather_table,
                                             reducescatter_table, profile, calibration, tune_sizes);
             if (kind == artune::BackendKind::kMpi || kind == artune::BackendKind::kNccl) {
#if ARTUNE_HAVE_MPI
               int initialized = 0;
               MPI_Initialized(&initialized);
               if (!initialized) {
                 // MPI_THREAD_MULTIPLE: asynchronous calls run MPI on each communicator's progress thread while
                 // other communicators (or the caller) use it too.
                 int provided = 0;
                 MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
                 // Finalised when the interpreter exits; communicators that outlive it skip their MPI frees.
                 py::module_::import("atexit").attr("register")(py::cpp_function([] {
                   {
                     py::gil_scoped_release release;
                     pending_callbacks().drain();  // the calls in flight first: they may still run MPI
                   }
                   int finalized = 0;
                   MPI_Finalized(&finalized);
                   if (!finalized) MPI_Finalize();
                 }));
               }
#endif
               return kind == artune::BackendKind::kMpi ? artune::Communicator::create_mpi(options)
                                                        : artune::Communicator::create_nccl(options);
             }
             auto one = artune::Communicator::create_local(kind, options, 1);
             return std::move(one.front());
           }),
           py::arg("backend") = "mpi", py::arg("topology") = "", py::arg("table") = "", py::arg("spec") = "",
           py::arg("timeout") = 60.0, py::arg("cache") = 64, py::arg("pad_limit") = artune::CommOptions{}.pad_limit,
           py::arg("allgather_table") = "", py::arg("reducescatter_table") = "", py::arg("profile") = "",
           py::arg("calibration") = "", py::arg("tune_sizes") = py::none(),
           "One rank's communicator: mpi or nccl (this process's rank of MPI_COMM_WORLD), or a one-rank cpu group. "
           "profile (cpu, mpi, cuda, nccl; default: the backend's), calibration (an `artune calibrate` overlay) "
           "and tune_sizes (bytes) shape in-memory tuning when there is neither table nor spec.")
      .def("allreduce", &allreduce, py::arg("array"), py::arg("op") = "sum", py::arg("out") = py::none(),
           py::arg("async_op") = false, py::arg("stream") = py::none(),
           "All-reduces `array` over the group in place, or into `out` (same dtype and size); returns the result "
           "(that object), or with async_op=True an artune.Work whose wait() returns it. `array`: a numpy array, a "
           "torch tensor or any object with __dlpack__, __cuda_array_interface__ or __array_interface__, "
           "C-contiguous, read without a copy. `stream` (cuda/nccl): the CUDA stream to run on (default: "
           "the legacy default stream).")
      .def("allgather", &allgather, py::arg("array"), py::arg("out") = py::none(), py::arg("async_op") = false,
           py::arg("stream") = py::none(),
           "All-gathers `array` into `out` (size x array's elements, rank k's array at block k), or into a new "
           "flat numpy array or torch tensor; returns it (or a Work)")
      .def("reducescatter", &reducescatter, py::arg("array"), py::arg("op") = "sum", py::arg("out") = py::none(),
           py::arg("async_op") = false, py::arg("stream") = py::none(),
           "Reduce-scatters `array` (size blocks, flat) into `out` (one block), or into a new flat numpy array or "
           "torch tensor: this rank's block reduced over the group; the input is left alone")
      .def_property_readonly("rank", &artune::Communicator::rank)
      .def_property_readonly("size", &artune::Communicator::size)
      .def_property_readonly("backend",
                             [](const artune::Communicator& c) { return std::string(to_string(c.backend())); })
      .def_property_readonly("profile", &artune::Communicator::profile,
                             "The cost-model profile the all-reduce plans were priced with ('' for a fixed spec)")
      .def(
          "last_plan", [](const artune::Communicator& c) { return c.last_plan().label; },
          "Label of the plan the last call used. A `nccl` plan is NCCL only on the nccl backend: on cpu it is "
          "artune's shared-memory group op, on mpi the MPI collective (MPI_Iallreduce …); dump_cache() says "
          "which ('runs as')")
      .def("dump_cache", &artune::Communicator::dump_cache,
           "The plan cache, one line per plan; '[runs as X]' where a plan has library ops (X: cpu group op, "
           "MPI_Iallreduce …, cuda kernels, ncclAllReduce …)")
      .def("worker_threads", &artune::Communicator::worker_threads, "Worker threads of the group's backend (cpu)");

  m.def(
      "local_communicators",
      [](int ranks, const std::string& backend, const std::string& topology, const std::string& table,
         const std::string& spec, double timeout, std::size_t cache, std::uint64_t pad_limit,
         const std::string& allgather_table, const std::string& reducescatter_table, const std::string& profile,
         const std::string& calibration, const std::optional<std::vector<std::int64_t>>& tune_sizes) {
        return artune::Communicator::create_local(
            artune::parse_backend_kind(backend, "parameter backend"),
            options_of(topology, table, spec, timeout, cache, pad_limit, allgather_table, reducescatter_table, profile,
                       calibration, tune_sizes),
            ranks);
      },
      py::arg("ranks"), py::arg("backend") = "cpu", py::arg("topology") = "", py::arg("table") = "",
      py::arg("spec") = "", py::arg("timeout") = 60.0, py::arg("cache") = 64,
      py::arg("pad_limit") = artune::CommOptions{}.pad_limit, py::arg("allgather_table") = "",
      py::arg("reducescatter_table") = "", py::arg("profile") = "", py::arg("calibration") = "",
      py::arg("tune_sizes") = py::none(),
      "One communicator per rank of this process (cpu threads or cuda GPUs); each rank's thread calls its own");
}
