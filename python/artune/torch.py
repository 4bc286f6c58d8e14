"""PyTorch on artune's plans: a DDP communication hook and a torch.distributed backend named "artune".

Tensors go to the communicator without copies (DLPack): CPU tensors to the cpu and mpi backends, CUDA tensors
to the cuda and nccl backends (on the tensor's current stream), every type artune has (float32, float64,
float16, bfloat16, int32, int64, uint8).

DDP communication hook (any PyTorch with DDP hooks)::

    import artune, artune.torch
    comm = artune.Communicator(backend="mpi")            # under mpirun, one rank per process
    ddp = torch.nn.parallel.DistributedDataParallel(model)   # any process group (gloo) for DDP's set-up
    ddp.register_comm_hook(comm, artune.torch.allreduce_hook)

torch.distributed backend (PyTorch 1.13 or later: a ProcessGroup written in Python)::

    import artune.torch                                  # registers "artune"
    torch.distributed.init_process_group("artune", init_method="env://", rank=r, world_size=n)
    torch.distributed.all_reduce(t)                      # and all_gather_into_tensor, reduce_scatter_tensor

all_reduce, all_gather_into_tensor (_all_gather_base) and reduce_scatter_tensor (_reduce_scatter_base) run on
artune; every other call (broadcast, barrier, the list forms of all_gather and reduce_scatter, send/recv,
gather, scatter, all_to_all, reduce) is delegated to a gloo group over the same store (CPU tensors) or an NCCL
group (CUDA tensors), so DDP's set-up (broadcast, list all-gather) runs unchanged. The backend runs under mpirun:
artune's mpi backend (CPU) and nccl backend (CUDA) bootstrap over MPI_COMM_WORLD, whose ranks must be
torch.distributed's; subgroups smaller than the world are refused.
"""

import torch
import torch.distributed as dist

import artune

__all__ = [
    "allreduce_hook",
    "backend_supported",
    "tcp_store",
    "ProcessGroupArtune",
    "register_backend",
    "BACKEND_NAME",
]

BACKEND_NAME = "artune"


def _version_tuple(text):
    parts = []
    for piece in text.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def backend_supported():
    """Whether this PyTorch takes a torch.distributed backend written in Python: 1.13 and later have
    Backend.register_backend, a ProcessGroup that C++ callers (DDP's reducer) reach in Python, and Works made
    from futures."""
    if not (dist.is_available() and hasattr(dist.Backend, "register_backend")):
        return False
    try:
        from torch._C._distributed_c10d import _create_work_from_future  # noqa: F401 - 1.13 and later
    except ImportError:
        return False
    return _version_tuple(torch.__version__) >= (1, 13)


def tcp_store(comm, timeout=60.0, host="127.0.0.1"):
    """A torch.distributed TCPStore for the ranks of `comm` (e.g. under mpirun, where no MASTER_ADDR/PORT is set):
    rank 0 listens on a port the system picks at `host` (rank 0's address; the default serves one machine) and
    tells the others through one all-reduce on the communicator. Pass it to init_process_group(store=…, rank=
    comm.rank, world_size=comm.size)."""
    import datetime

    import numpy as np

    wait = datetime.timedelta(seconds=timeout)
    port = np.zeros(1, dtype=np.int64)
    store = None
    if comm.rank == 0:
        store = dist.TCPStore(host, 0, comm.size, True, wait)
        port[0] = store.port
    comm.allreduce(port, op="max")
    if comm.rank != 0:
        store = dist.TCPStore(host, int(port[0]), comm.size, False, wait)
    return store


def _communicator_of(state, what):
    if isinstance(state, artune.Communicator):
        return state
    raise TypeError(
        f"{what}: parameter state is a {type(state).__name__}, not an artune.Communicator "
        "(register_comm_hook(comm, artune.torch.allreduce_hook))"
    )


def allreduce_hook(state, bucket):
    """DDP communication hook: averages each gradient bucket over the ranks through the artune communicator
    `state` (register with ddp.register_comm_hook(comm, artune.torch.allreduce_hook)), in place on the bucket's
    buffer, and returns a torch.futures.Future of it.

    CPU buckets run asynchronously on the communicator's progress thread, so communication overlaps the rest of
    backward; the future completes when the all-reduce has (with its error, e.g. artune.Timeout, when a rank
    does not join within the communicator's timeout). CUDA buckets are queued on the bucket device's current
    stream (cuda and nccl backends) and the future is complete at once, as stream order covers the rest."""
    comm = _communicator_of(state, "allreduce_hook")
    buffer = bucket.buffer()
    future = torch.futures.Future()
    if buffer.is_cuda:
        stream = torch.cuda.current_stream(buffer.device).cuda_stream
        comm.allreduce(buffer, op="avg", stream=stream)
        future.set_result(buffer)
        return future

    def done(work):
        try:
            work.wait()
        except Exception as error:  # noqa: BLE001 - handed to DDP through the future
            future.set_exception(error)
        else:
            future.set_result(buffer)

    comm.allreduce(buffer, op="avg", async_op=True).add_done_callback(done)
    return future


# torch.distributed's reduce ops that artune has ("avg": sum, then divided by the ranks).
def _op_name(op, what):
    table = [
        (dist.ReduceOp.SUM, "sum"),
        (dist.ReduceOp.PRODUCT, "prod"),
        (dist.ReduceOp.MIN, "min"),
        (dist.ReduceOp.MAX, "max"),
    ]
    if hasattr(dist.ReduceOp, "AVG"):
        table.append((dist.ReduceOp.AVG, "avg"))
    for torch_op, name in table:
        try:
            if op == torch_op:
                return name
        except TypeError:
            continue
    raise ValueError(f"artune backend: {what}: parameter op {op} is not one of SUM, PRODUCT, MIN, MAX, AVG")


if backend_supported():

    from torch._C._distributed_c10d import _create_work_from_future

    def _work_of(work, result):
        """torch.distributed's Work for an artune call in flight: a C++ Work around a torch future that the call
        completes (with `result`, or its error). A C++ Work, not a Python subclass: DDP's reducer keeps only the C++
        side of what allreduce returns, and asks it for its future after the Python object may be gone."""
        future = torch.futures.Future()

        def done(w):
            try:
                w.wait()
            except Exception as error:  # noqa: BLE001 - handed to the waiter through the future
                future.set_exception(error)
            else:
                future.set_result(result)

        work.add_done_callback(done)
        return _create_work_from_future(future)

    class ProcessGroupArtune(dist.ProcessGroup):
        """torch.distributed's process group on artune: all_reduce, all_gather_into_tensor and
        reduce_scatter_tensor run on artune's plans; the other calls go to a gloo (CPU) or NCCL (CUDA) group
        over the same store."""

        def __init__(self, store, rank, size, timeout, **options):
            super().__init__(rank, size)
            self._store = store
            self._timeout = timeout
            self._options = dict(options)
            self._options.setdefault("timeout", max(timeout.total_seconds(), 1.0))
            self._comms = {}
            self._delegates = {}
            self._host = self._communicator("mpi")
            if self._host.size != size or self._host.rank != rank:
                raise artune.InvalidUsage(
                    f"artune backend: torch.distributed's rank {rank} of {size} is MPI_COMM_WORLD's rank "
                    f"{self._host.rank} of {self._host.size}: run every rank under one mpirun with "
                    "RANK = OMPI_COMM_WORLD_RANK (subgroups smaller than the world are not supported)"
                )

        def getBackendName(self):  # noqa: N802 - PyTorch's name
            return BACKEND_NAME

        def communicator(self, device="cpu"):
            """The artune communicator that runs this group's calls on `device` ("cpu": the mpi backend, "cuda":
            the nccl backend): last_plan(), dump_cache() and profile say what it ran."""
            return self._communicator("nccl") if str(device).startswith("cuda") else self._host

        def _communicator(self, backend):
            comm = self._comms.get(backend)
            if comm is None:
                options = dict(self._options)
                options.setdefault("topology", f"uniform:{self.size()}")
                comm = artune.Communicator(backend=backend, **options)
                self._comms[backend] = comm
            return comm

        def _comm_for(self, tensor):
            return self._communicator("nccl") if tensor.is_cuda else self._host

        def _delegate(self, tensor):
            name = "nccl" if tensor.is_cuda else "gloo"
            group = self._delegates.get(name)
            if group is None:
                store = dist.PrefixStore(f"artune-{name}", self._store)
                if name == "gloo":
                    group = dist.ProcessGroupGloo(store, self.rank(), self.size(), self._timeout)
                else:
                    group = dist.ProcessGroupNCCL(store, self.rank(), self.size())
                self._delegates[name] = group
            return group

        def _run(self, call, tensor, *args, result, **kwargs):
            kwargs["async_op"] = True
            if tensor.is_cuda:
                kwargs["stream"] = torch.cuda.current_stream(tensor.device).cuda_stream
            return _work_of(getattr(self._comm_for(tensor), call)(tensor, *args, **kwargs), result)

        @staticmethod
        def _one(tensors, what):
            if len(tensors) != 1:
                raise ValueError(f"artune backend: {what}: one tensor per rank, not {len(tensors)}")
            return tensors[0]

        # --- on artune ---
        def allreduce(self, tensors, opts=None):
            tensor = self._one(tensors, "all_reduce")
            op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "all_reduce")
            return self._run("allreduce", tensor.detach(), op=op, result=tensors)

        def _allgather_base(self, output, input, opts=None):  # noqa: A002 - PyTorch's name
            return self._run("allgather", input.detach(), out=output.detach(), result=[output])

        def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 - PyTorch's name
            op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce_scatter_tensor")
            return self._run("reducescatter", input.detach(), op=op, out=output.detach(), result=[output])

        # --- delegated to gloo (CPU) or NCCL (CUDA) ---
        def broadcast(self, tensors, opts=None):
            group = self._delegate(tensors[0])
            return group.broadcast(tensors, opts) if opts is not None else group.broadcast(tensors)

        def allgather(self, output_tensors, input_tensors, opts=None):
            group = self._delegate(input_tensors[0])
            if opts is None:
                return group.allgather(output_tensors, input_tensors)
            return group.allgather(output_tensors, input_tensors, opts)

        def reduce_scatter(self, output_tensors, input_tensors, opts=None):
            group = self._delegate(output_tensors[0])
            if opts is None:
                return group.reduce_scatter(output_tensors, input_tensors)
            return group.reduce_scatter(output_tensors, input_tensors, opts)

        def barrier(self, opts=None):
            group = self._delegate(torch.empty(0))
            return group.barrier(opts) if opts is not None else group.barrier()

        def send(self, tensors, dst, tag=0):
            return self._delegate(tensors[0]).send(tensors, dst, tag)

        def recv(self, tensors, src, tag=0):
            return self._delegate(tensors[0]).recv(tensors, src, tag)

    def _delegated(name):
        def call(self, *args):
            tensor = next(_tensors_in(args), torch.empty(0))
            return getattr(self._delegate(tensor), name)(*args)

        call.__name__ = name
        call.__doc__ = f"{name}: run by the gloo (CPU) or NCCL (CUDA) group over the same store"
        return call

    # The other calls of torch.distributed, from Python callers: the delegate's.
    for _name in ("reduce", "gather", "scatter", "alltoall", "alltoall_base", "allgather_coalesced",
                  "allreduce_coalesced", "recv_anysource", "monitored_barrier"):
        if hasattr(dist.ProcessGroup, _name):
            setattr(ProcessGroupArtune, _name, _delegated(_name))

    def _tensors_in(args):
        for a in args:
            if isinstance(a, torch.Tensor):
                yield a
            elif isinstance(a, (list, tuple)):
                yield from _tensors_in(a)

    def _create(store, rank, size, timeout):
        return ProcessGroupArtune(store, rank, size, timeout)

    def register_backend():
        """Registers the torch.distributed backend "artune" (done when artune.torch is imported)."""
        if BACKEND_NAME.upper() not in getattr(dist.Backend, "_plugins", {}):
            dist.Backend.register_backend(BACKEND_NAME, _create)

    register_backend()

else:

    class ProcessGroupArtune:  # noqa: D101 - the stand-in says why there is none
        def __init__(self, *args, **kwargs):
            raise artune.Unsupported(
                f"artune backend: PyTorch {torch.__version__} has no torch.distributed backends written in Python "
                "(1.13 and later do); use artune.torch.allreduce_hook with DDP instead"
            )

    def register_backend():
        """Unsupported on this PyTorch (see backend_supported())."""
        ProcessGroupArtune()
