// The Python binding: artune.Communicator over numpy arrays (pybind11 from Debian's python3-pybind11).
//
//   import artune
//   comm = artune.Communicator(backend="mpi")            # one per MPI rank (MPI initialised by artune)
//   comms = artune.local_communicators(4, backend="cpu")  # one per thread of this process
//   comm.allreduce(arr)                                   # in place; allreduce(arr, out=res) out of place
//   comm.allgather(arr)                                   # new flat array: every rank's arr, rank order
//   comm.reducescatter(arr, op="sum")                     # new flat array: this rank's block, reduced
//
// The GIL is released during a call, so the ranks of a local group can be Python threads.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "artune/communicator.hpp"
#include "artune_config.hpp"
#include "artune/core/types.hpp"

#if ARTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace py = pybind11;

namespace {

artune::DataType dtype_of(const py::array& a, const std::string& call = "allreduce") {
  const py::dtype d = a.dtype();
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return artune::DataType::kFloat32;
  if (kind == 'f' && size == 8) return artune::DataType::kFloat64;
  if (kind == 'f' && size == 2) return artune::DataType::kFloat16;
  if (kind == 'i' && size == 4) return artune::DataType::kInt32;
  if (kind == 'i' && size == 8) return artune::DataType::kInt64;
  if (kind == 'u' && size == 1) return artune::DataType::kUInt8;
  throw artune::InvalidInput(call + ": numpy dtype " +
                             py::cast<std::string>(py::str(static_cast<const py::handle&>(d))) +
                             " is not one of float32, float64, float16, int32, int64, uint8");
}

artune::CommOptions options_of(const std::string& topology, const std::string& table, const std::string& spec,
                               double timeout, std::size_t cache, std::uint64_t pad_limit,
                               const std::string& allgather_table, const std::string& reducescatter_table) {
  artune::CommOptions o;
  o.topology = topology;
  o.table = table;
  o.spec = spec;
  o.allgather_table = allgather_table;
  o.reducescatter_table = reducescatter_table;
  o.timeout_s = timeout;
  o.cache_capacity = cache;
  o.pad_limit = pad_limit;
  return o;
}

// A new flat numpy array of `n` elements of `like`'s dtype.
py::array empty_like_dtype(const py::array& like, std::int64_t n) {
  return py::module_::import("numpy").attr("empty")(n, like.attr("dtype")).cast<py::array>();
}

void check_array(const py::array& a, const char* what, const std::string& call = "allreduce") {
  if (!(a.flags() & py::array::c_style)) throw artune::InvalidInput(call + ": " + what + " must be C-contiguous");
}

}  // namespace

PYBIND11_MODULE(artune, m) {
  m.doc() = "artune: all-reduce of numpy arrays with tuned plans (cpu threads, MPI)";
  m.attr("__version__") = ARTUNE_VERSION;

  // Error classes carry the artune code in their name; all derive from artune.Error.
  static py::exception<artune::Error> error(m, "Error");
  static py::exception<artune::InvalidInput> invalid(m, "InvalidUsage", error.ptr());
  static py::exception<artune::Unsupported> unsupported(m, "Unsupported", error.ptr());
  static py::exception<artune::BackendFailure> remote(m, "RemoteError", error.ptr());
  static py::exception<artune::Timeout> timeout(m, "Timeout", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const artune::InvalidInput& e) {
      invalid(e.what());
    } catch (const artune::Unsupported& e) {
      unsupported(e.what());
    } catch (const artune::BackendFailure& e) {
      remote(e.what());
    } catch (const artune::Timeout& e) {
      timeout(e.what());
    } catch (const artune::Error& e) {
      error(e.what());
    }
  });

  py::class_<artune::Communicator>(m, "Communicator")
      .def(py::init([](const std::string& backend, const std::string& topology, const std::string& table,
                       const std::string& spec, double timeout, std::size_t cache, std::uint64_t pad_limit,
                       const std::string& allgather_table, const std::string& reducescatter_table) {
             const auto kind = artune::parse_backend_kind(backend, "backend");
             const auto options =
                 options_of(topology, table, spec, timeout, cache, pad_limit, allgather_table, reducescatter_table);
             if (kind == artune::BackendKind::kMpi || kind == artune::BackendKind::kNccl) {
#if ARTUNE_HAVE_MPI
               int initialized = 0;
               MPI_Initialized(&initialized);
               if (!initialized) {
                 MPI_Init(nullptr, nullptr);
                 // Finalised when the interpreter exits; communicators that outlive it skip their MPI frees.
                 py::module_::import("atexit").attr("register")(py::cpp_function([] {
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
           py::arg("allgather_table") = "", py::arg("reducescatter_table") = "",
           "One rank's communicator: mpi or nccl (this process's rank of MPI_COMM_WORLD), or a one-rank cpu group")
      .def(
          "allreduce",
          [](artune::Communicator& c, py::array arr, const std::string& op, py::object out) {
            check_array(arr, "the array");
            const auto type = dtype_of(arr);
            const auto reduce = artune::parse_reduce_op(op, "op");
            py::array target = arr;
            if (!out.is_none()) {
              target = out.cast<py::array>();
              check_array(target, "out");
              if (!target.dtype().is(arr.dtype()) || target.size() != arr.size()) {
                throw artune::InvalidInput("allreduce: out must have the array's dtype and size");
              }
            }
            if (!target.writeable()) throw artune::InvalidInput("allreduce: the result array is read-only");
            const void* send = arr.data();
            void* recv = target.mutable_data();
            const auto count = static_cast<std::int64_t>(arr.size());
            {
              py::gil_scoped_release release;
              c.allreduce(send, recv, count, type, reduce);
            }
            return target;
          },
          py::arg("array"), py::arg("op") = "sum", py::arg("out") = py::none(),
          "All-reduces the array over the group (in place, or into `out`); returns the result array")
      .def(
          "allgather",
          [](artune::Communicator& c, py::array arr) {
            check_array(arr, "the array", "allgather");
            const auto type = dtype_of(arr, "allgather");
            const auto count = static_cast<std::int64_t>(arr.size());
            py::array out = empty_like_dtype(arr, count * c.size());
            const void* send = arr.data();
            void* recv = out.mutable_data();
            {
              py::gil_scoped_release release;
              c.allgather(send, recv, count, type);
            }
            return out;
          },
          py::arg("array"), "All-gathers the array: a new flat array of size x array.size, rank k's array at block k")
      .def(
          "reducescatter",
          [](artune::Communicator& c, py::array arr, const std::string& op) {
            check_array(arr, "the array", "reducescatter");
            const auto type = dtype_of(arr, "reducescatter");
            const auto reduce = artune::parse_reduce_op(op, "op");
            const auto total = static_cast<std::int64_t>(arr.size());
            if (total % c.size() != 0) {
              throw artune::InvalidInput("reducescatter: the array's size " + std::to_string(total) +
                                         " is not a multiple of the group's " + std::to_string(c.size()) + " ranks");
            }
            const std::int64_t count = total / c.size();
            py::array out = empty_like_dtype(arr, count);
            const void* send = arr.data();
            void* recv = out.mutable_data();
            {
              py::gil_scoped_release release;
              c.reducescatter(send, recv, count, type, reduce);
            }
            return out;
          },
          py::arg("array"), py::arg("op") = "sum",
          "Reduce-scatters the array (size blocks, flat): a new flat array holding this rank's block reduced over "
          "the group; the input is left alone")
      .def_property_readonly("rank", &artune::Communicator::rank)
      .def_property_readonly("size", &artune::Communicator::size)
      .def(
          "last_plan", [](const artune::Communicator& c) { return c.last_plan().label; },
          "Label of the plan the last call used")
      .def("dump_cache", &artune::Communicator::dump_cache, "The plan cache, one line per plan")
      .def("worker_threads", &artune::Communicator::worker_threads, "Worker threads of the group's backend (cpu)");

  m.def(
      "local_communicators",
      [](int ranks, const std::string& backend, const std::string& topology, const std::string& table,
         const std::string& spec, double timeout, std::size_t cache, std::uint64_t pad_limit,
         const std::string& allgather_table, const std::string& reducescatter_table) {
        return artune::Communicator::create_local(
            artune::parse_backend_kind(backend, "backend"),
            options_of(topology, table, spec, timeout, cache, pad_limit, allgather_table, reducescatter_table), ranks);
      },
      py::arg("ranks"), py::arg("backend") = "cpu", py::arg("topology") = "", py::arg("table") = "",
      py::arg("spec") = "", py::arg("timeout") = 60.0, py::arg("cache") = 64,
      py::arg("pad_limit") = artune::CommOptions{}.pad_limit, py::arg("allgather_table") = "",
      py::arg("reducescatter_table") = "",
      "One communicator per rank of this process (cpu threads or cuda GPUs); each rank's thread calls its own");
}
