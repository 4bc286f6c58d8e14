/* artune's C API: the Communicator (artune/communicator.hpp) behind an opaque
 * handle, for C and for other languages' foreign-function interfaces.
 *
 * Every function returns an artune_result_t; on failure the calling thread's
 * artune_last_error() holds the one-line message. Handles are not shared
 * between threads: in a local group (cpu threads, cuda GPUs) each rank's
 * thread uses its own handle. */
#ifndef ARTUNE_ARTUNE_H
#define ARTUNE_ARTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A rank's communicator (opaque). */
typedef struct artune_comm* artune_comm_t;

/** Result of every call (artune_error_string names it). */
typedef enum {
  ARTUNE_SUCCESS = 0,                 /**< done */
  ARTUNE_ERR_INVALID_USAGE = 1,       /**< bad argument, option, file or call sequence */
  ARTUNE_ERR_UNSUPPORTED = 2,         /**< a valid request this build or machine cannot serve */
  ARTUNE_ERR_REMOTE = 3,              /**< a peer or a library call (MPI, CUDA, NCCL) failed */
  ARTUNE_ERR_TIMEOUT = 4,             /**< a peer did not arrive or answer within the timeout */
  ARTUNE_ERR_INTERNAL = 5,            /**< anything else (out of memory, an internal invariant) */
  ARTUNE_RESULT_MAX_ENUM = 0x7fffffff /* not a result: every int is a value of the enum */
} artune_result_t;

/** Element types (same order as artune::DataType). */
typedef enum {
  ARTUNE_FLOAT32 = 0, /**< float */
  ARTUNE_FLOAT64,     /**< double */
  ARTUNE_FLOAT16,     /**< IEEE half */
  ARTUNE_BFLOAT16,    /**< bfloat16 */
  ARTUNE_INT32,       /**< int32_t */
  ARTUNE_INT64,       /**< int64_t */
  ARTUNE_UINT8,       /**< uint8_t */
  /* Not a type: makes every int a valid value of the enum, so that a wrong value from a caller is refused
     with ARTUNE_ERR_INVALID_USAGE instead of being undefined behaviour in C++. */
  ARTUNE_DTYPE_MAX_ENUM = 0x7fffffff
} artune_dtype_t;

/** Reduce ops (same order as artune::ReduceOp). */
typedef enum {
  ARTUNE_SUM = 0,                 /**< sum */
  ARTUNE_PROD,                    /**< product */
  ARTUNE_MIN,                     /**< minimum */
  ARTUNE_MAX,                     /**< maximum */
  ARTUNE_AVG,                     /**< sum divided by the ranks */
  ARTUNE_OP_MAX_ENUM = 0x7fffffff /* not an op: every int is a value of the enum (see ARTUNE_DTYPE_MAX_ENUM) */
} artune_op_t;

/** Backends (same order as artune::BackendKind). */
typedef enum {
  ARTUNE_BACKEND_CPU = 0,              /**< threads of one process */
  ARTUNE_BACKEND_MPI,                  /**< one rank per MPI process */
  ARTUNE_BACKEND_CUDA,                 /**< GPUs of one process */
  ARTUNE_BACKEND_NCCL,                 /**< one GPU per MPI process */
  ARTUNE_BACKEND_MAX_ENUM = 0x7fffffff /* not a backend: every int is a value of the enum */
} artune_backend_t;

/** How a communicator picks its plans (see artune::CommOptions); strings may be NULL or "". */
typedef struct {
  /** sizeof(artune_options_t) as the caller was compiled (artune_options_init sets it). Later versions of the
      library may add fields at the end: they read only the fields this size covers and default the others, so a
      program built against this header keeps working. A size from an earlier header (down to the one that
      ends at reducescatter_table) defaults the fields it lacks; a smaller one is refused. */
  size_t struct_size;
  const char* topology;  /**< file, built-in name or generator; NULL = "uniform:<ranks>" */
  const char* table;     /**< decision table file; NULL = tune in memory (unless spec) */
  const char* spec;      /**< one plan spec for every size; NULL = from the table */
  double timeout_s;      /**< a peer silent this long ends the call with ARTUNE_ERR_TIMEOUT */
  size_t cache_capacity; /**< compiled plans kept (LRU) */
  uint64_t pad_limit; /**< mpi/cuda/nccl all-reduces up to this many bytes run padded to their bucket (CommOptions) */
  const char* allgather_table;     /**< `autotune --collective allgather` table; NULL = tune in memory */
  const char* reducescatter_table; /**< `autotune --collective reducescatter` table; NULL = tune in memory */
  /* Added in 0.1 with issue 29 (an earlier struct_size defaults them). */
  const char* profile;     /**< cost profile of in-memory tuning ("cpu", "mpi", "cuda", "nccl"); NULL = the backend's */
  const char* calibration; /**< `artune calibrate` overlay for in-memory tuning; NULL = the profile's defaults */
  const uint64_t* tune_sizes; /**< sizes in bytes tuned in memory (and a spec's buckets); NULL = 4 B to 256 MiB, x2 */
  size_t tune_sizes_count;    /**< entries of tune_sizes */
} artune_options_t;

/** A call in flight (artune_allreduce_async …); finish it with artune_request_wait, then free it. */
typedef struct artune_request* artune_request_t;

/** Fills `options` with the defaults (no topology/table/spec, 60 s, 64 plans, pad limit 256 KiB). */
void artune_options_init(artune_options_t* options);

/** Creates `nranks` communicators of one process (cpu threads or cuda GPUs) into comms[0..nranks-1]. */
artune_result_t artune_comm_init_local(artune_backend_t backend, const artune_options_t* options, int nranks,
                                       artune_comm_t* comms);
/** Creates this process's rank of `*mpi_comm` (an MPI_Comm*, NULL = MPI_COMM_WORLD) on the mpi backend. */
artune_result_t artune_comm_init_mpi(const artune_options_t* options, const void* mpi_comm, artune_comm_t* comm);
/** Creates this process's rank of MPI_COMM_WORLD on the nccl backend. */
artune_result_t artune_comm_init_nccl(const artune_options_t* options, artune_comm_t* comm);

/** All-reduces `count` elements from `send` into `recv` (in place when equal); `stream` is a cudaStream_t
 * for cuda/nccl and must be NULL otherwise. */
artune_result_t artune_allreduce(artune_comm_t comm, const void* send, void* recv, int64_t count, artune_dtype_t dtype,
                                 artune_op_t op, void* stream);

/** All-gathers `count_per_rank` elements from every rank's `send` into `recv` (nranks blocks, block k from
 * rank k), as ncclAllGather; in place when send == recv + rank * count_per_rank. */
artune_result_t artune_allgather(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                 artune_dtype_t dtype, void* stream);
/** Reduce-scatters `send` (nranks blocks of `count_per_rank`): rank k's `recv` gets block k reduced with `op`,
 * as ncclReduceScatter; in place when recv == send + rank * count_per_rank (send's other blocks are then
 * unspecified afterwards). */
artune_result_t artune_reducescatter(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                     artune_dtype_t dtype, artune_op_t op, void* stream);
/** Asynchronous forms of the three calls: the same arguments and checks (a bad argument fails here), the call
 * itself finished by artune_request_wait. cpu/mpi: it runs on the rank's progress thread in call order, and
 * its buffers must stay untouched until then; cuda/nccl: queued on `stream`, as the synchronous call. */
artune_result_t artune_allreduce_async(artune_comm_t comm, const void* send, void* recv, int64_t count,
                                       artune_dtype_t dtype, artune_op_t op, void* stream, artune_request_t* request);
artune_result_t artune_allgather_async(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                       artune_dtype_t dtype, void* stream, artune_request_t* request);
artune_result_t artune_reducescatter_async(artune_comm_t comm, const void* send, void* recv, int64_t count_per_rank,
                                           artune_dtype_t dtype, artune_op_t op, void* stream,
                                           artune_request_t* request);
/** Waits for the call to finish; returns its result (a peer that never joins ends it within timeout_s). */
artune_result_t artune_request_wait(artune_request_t request);
/** *done = 1 when the call has finished (artune_request_wait then returns at once), else 0; never blocks. */
artune_result_t artune_request_test(artune_request_t request, int* done);
/** Releases a request (NULL is ignored); a call still in flight goes on and finishes unobserved. */
void artune_request_free(artune_request_t request);
/** This handle's rank. */
artune_result_t artune_comm_rank(artune_comm_t comm, int* rank);
/** Ranks in the group. */
artune_result_t artune_comm_size(artune_comm_t comm, int* size);
/** The label of the plan the last call used, NUL-terminated and truncated to `length` bytes. */
artune_result_t artune_comm_last_plan(artune_comm_t comm, char* text, size_t length);
/** The plan cache as text (one line per plan), NUL-terminated and truncated to `length` bytes. */
artune_result_t artune_comm_dump_cache(artune_comm_t comm, char* text, size_t length);
/** Releases a handle (NULL is ignored). */
void artune_comm_destroy(artune_comm_t comm);

/** A static description of a result code. */
const char* artune_error_string(artune_result_t result);
/** The message of this thread's last failed call ("" when none). */
const char* artune_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* ARTUNE_ARTUNE_H */
