"""artune: all-reduce, all-gather and reduce-scatter of arrays and tensors with tuned plans.

    import artune
    comm = artune.Communicator(backend="mpi")            # one per MPI rank (under mpirun)
    comm.allreduce(x)                                     # x: numpy array, torch tensor, any DLPack object
    work = comm.allreduce(x, op="avg", async_op=True)     # asynchronous; work.wait() returns x
    comms = artune.local_communicators(4, backend="cpu")  # one per thread of this process

The communicator is the C++ library's (artune/communicator.hpp), bound in the extension artune._artune.
PyTorch: artune.torch (a DDP communication hook and a torch.distributed backend); it imports torch.
"""

from artune._artune import (  # noqa: F401 - the package's API
    Communicator,
    Error,
    InvalidUsage,
    RemoteError,
    Timeout,
    Unsupported,
    Work,
    __version__,
    has_dlpack,
    local_communicators,
)

__all__ = [
    "Communicator",
    "Error",
    "InvalidUsage",
    "RemoteError",
    "Timeout",
    "Unsupported",
    "Work",
    "__version__",
    "has_dlpack",
    "local_communicators",
]
