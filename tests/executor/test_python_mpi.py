"""The Python binding on the mpi backend, run by meson test as `mpirun -np 2 python3 test_python_mpi.py`:
artune.Communicator() initialises MPI, all-reduces numpy arrays (plans tuned in memory) and finalises MPI
at exit."""

import sys

import numpy as np

import artune

comm = artune.Communicator(backend="mpi", topology="uniform:2", timeout=30)
ok = comm.size == 2
for dtype in (np.float32, np.int64, np.float16):
    for count in (1, 999, 70001):
        a = ((np.arange(count) % 11) * (comm.rank + 1)).astype(dtype)
        out = np.empty_like(a)
        comm.allreduce(a, out=out)
        ok &= bool(np.array_equal(out, ((np.arange(count) % 11) * 3).astype(dtype)))
        comm.allreduce(a, op="max")
        ok &= bool(np.array_equal(a, ((np.arange(count) % 11) * 2).astype(dtype)))
ok &= comm.last_plan() != ""
print(f"rank {comm.rank}: {'ok' if ok else 'WRONG'} ({comm.last_plan()})")
sys.exit(0 if ok else 1)
