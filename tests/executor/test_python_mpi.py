"""The Python binding on the mpi backend, run by meson test as `mpirun -np 2 python3 test_python_mpi.py`:
artune.Communicator() initialises MPI, all-reduces numpy arrays (plans tuned in memory, with the mpi backend's
host cost profile), synchronously and asynchronously, and finalises MPI at exit.
`... test_python_mpi.py fault` (4 ranks, run by test_python_mpi_fault.py with ARTUNE_TEST_FAULT stopping a rank):
asynchronous calls until one fails; a survivor prints what it caught and leaves at once (exit 3)."""

import os
import sys

import numpy as np

import artune

if sys.argv[1:] == ["fault"]:
    comm = artune.Communicator(backend="mpi", spec="xring", timeout=3)
    data = np.ones(1000, dtype=np.float32)
    try:
        for _ in range(6):
            comm.allreduce(data, async_op=True).wait()
        print(f"rank {comm.rank}: no error", flush=True)
    except RuntimeError as e:
        print(f"rank {comm.rank}: caught {type(e).__name__} (a RuntimeError): {e}", flush=True)
        os._exit(3)  # a peer is stopped: MPI cannot be finalised
    sys.exit(0)

comm = artune.Communicator(backend="mpi", topology="uniform:2", timeout=30)
ok = comm.size == 2
ok &= comm.profile == "mpi"
for dtype in (np.float32, np.int64, np.float16):
    for count in (1, 999, 70001):
        a = ((np.arange(count) % 11) * (comm.rank + 1)).astype(dtype)
        out = np.empty_like(a)
        comm.allreduce(a, out=out)
        ok &= bool(np.array_equal(out, ((np.arange(count) % 11) * 3).astype(dtype)))
        comm.allreduce(a, op="max")
        ok &= bool(np.array_equal(a, ((np.arange(count) % 11) * 2).astype(dtype)))
ok &= comm.last_plan() != ""
# Asynchronous calls, several in flight, finished in order; a synchronous one queued behind them.
arrays = [np.full(5000, float(comm.rank + k), dtype=np.float64) for k in range(4)]
works = [comm.allreduce(a, async_op=True) for a in arrays[:3]]
comm.allreduce(arrays[3], op="max")
ok &= all(np.all(w.wait() == 2 * k + 1) for k, w in enumerate(works))
ok &= bool(np.all(arrays[3] == 4.0))
print(f"rank {comm.rank}: {'ok' if ok else 'WRONG'} ({comm.last_plan()})")
sys.exit(0 if ok else 1)
