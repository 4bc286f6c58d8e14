"""The Python binding: artune.local_communicators over numpy arrays on threads (cpu backend), every
numpy dtype the binding maps, in place and into `out`, errors as artune exceptions, asynchronous calls
(a Work handle) and the tuning options (profile, calibration, tune_sizes). Needs numpy only (the torch
tests are test_python_torch.py). Run by meson test with PYTHONPATH set to the build tree's package folder."""

import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import weakref

import numpy as np

import artune

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, failures, on_threads  # noqa: E402 - beside this file


# The module says which artune it is (the project's version, as `artune --version` prints it).
check(isinstance(artune.__version__, str) and len(artune.__version__.split(".")) == 3, "artune.__version__")


comms = artune.local_communicators(4, topology="uniform:4", spec="rechd")
check([c.rank for c in comms] == [0, 1, 2, 3] and comms[0].size == 4, "ranks")
for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8):
    for op, combine in (("sum", sum), ("max", max), ("min", min)):
        for count in (1, 5, 1031):
            inputs = [((np.arange(count) % 7) + r + 1).astype(dtype) for r in range(4)]
            want = combine(inputs) if op == "sum" else np.array(
                [combine(vals) for vals in zip(*inputs)], dtype=dtype).reshape(count)
            arrays = [a.copy() for a in inputs]
            outs = [np.zeros_like(a) for a in inputs]
            # Ranks 0 and 1 in place, 2 and 3 into `out`.
            errors = on_threads(comms, lambda r: comms[r].allreduce(arrays[r], op=op, out=outs[r] if r >= 2 else None))
            check(errors == [None] * 4, f"{dtype.__name__} {op} {count}: {errors}")
            for r in range(4):
                got = arrays[r] if r < 2 else outs[r]
                check(np.array_equal(got, want), f"{dtype.__name__} {op} {count} rank {r}")
            check(np.array_equal(arrays[2], inputs[2]), "out of place leaves the input alone")
check(comms[0].last_plan() == "rechd", "last plan")
check(comms[0].dump_cache().startswith(
      "allreduce rechd  spec  bucket 9 (2048 B)  count 1031 uint8 min  devices 4  calls 1\n"),
      comms[0].dump_cache())
check(comms[0].worker_threads() == 4, "workers")

# A 2-D array is reduced element-wise like its flat view.
two = artune.local_communicators(2, topology="uniform:2", spec="xring")
mats = [np.full((3, 4), r + 1, dtype=np.float32) for r in range(2)]
check(on_threads(two, lambda r: two[r].allreduce(mats[r])) == [None, None], "2-D")
check(np.all(mats[0] == 3.0) and np.all(mats[1] == 3.0), "2-D values")
# 12 floats: the 64 B bucket's plan re-targeted to 12 (one exact run, no padding).
check(two[0].dump_cache().startswith("allreduce xring  spec  bucket 4 (64 B)  count 12 float sum"), two[0].dump_cache())

# All-gather and reduce-scatter return new flat arrays (odd blocks of 5; the inputs are left alone).
blocks = [np.arange(5, dtype=np.int32) + 10 * r for r in range(4)]
gathered = [None] * 4
def gather(r):
    gathered[r] = comms[r].allgather(blocks[r])
check(on_threads(comms, gather) == [None] * 4, "allgather")
check(all(np.array_equal(g, np.concatenate(blocks)) for g in gathered), f"allgather values {gathered}")
wholes = [np.arange(20, dtype=np.float64) * (r + 1) for r in range(4)]
scattered = [None] * 4
def scatter(r):
    scattered[r] = comms[r].reducescatter(wholes[r], op="max")
check(on_threads(comms, scatter) == [None] * 4, "reducescatter")
check(all(np.array_equal(scattered[r], np.arange(20.0)[5 * r:5 * r + 5] * 4) for r in range(4)), f"{scattered}")
check(np.array_equal(wholes[1], np.arange(20.0) * 2), "reducescatter leaves the input alone")
check(comms[0].dump_cache().startswith("reducescatter "), comms[0].dump_cache())

# Errors map to artune exceptions.
one = artune.Communicator(backend="cpu", topology="uniform:1", spec="xring")
try:
    one.allreduce(np.zeros(4, dtype=np.complex64))
    check(False, "complex dtype accepted")
except artune.InvalidUsage as e:
    check("complex64" in str(e), str(e))
try:
    one.allreduce(np.zeros(8, dtype=np.float32)[::2])
    check(False, "strided array accepted")
except artune.InvalidUsage as e:
    check(str(e) == "allreduce: parameter array must be C-contiguous", str(e))
try:
    two[0].reducescatter(np.zeros(3, dtype=np.float32))
    check(False, "reducescatter of 3 over 2 ranks accepted")
except artune.InvalidUsage as e:
    check(str(e) == "reducescatter: parameter array has 3 elements, not a multiple of the group's 2 ranks", str(e))
try:
    one.allgather(np.zeros(4, dtype=np.complex64))
    check(False, "complex dtype accepted by allgather")
except artune.InvalidUsage as e:
    check(str(e).startswith("allgather: parameter array has numpy dtype complex64"), str(e))
try:
    artune.local_communicators(3, topology="uniform:2")
    check(False, "rank mismatch accepted")
except artune.Error as e:
    check(isinstance(e, artune.InvalidUsage), repr(e))
late = artune.local_communicators(2, topology="uniform:2", spec="xring", timeout=0.3)
try:
    late[0].allreduce(np.ones(4, dtype=np.float32))
    check(False, "a missing rank did not time out")
except artune.Timeout as e:
    check("1 of 2 ranks did not call allreduce within 0.3 s" in str(e), str(e))

# Read-only results and mismatched `out` are refused before anything runs; a list is not an array (a result
# could not land in it).
frozen = np.ones(4, dtype=np.float32)
frozen.flags.writeable = False
for call, want in ((lambda: one.allreduce(frozen), "allreduce: parameter array is read-only"),
                   (lambda: one.allreduce(np.ones(4, np.float32), out=frozen), "allreduce: parameter out is read-only"),
                   (lambda: one.allreduce(np.ones(4, np.float32), out=np.ones(4, np.float64)),
                    "allreduce: parameter out must hold float32 x 4 (from parameter array float32 x 4), not float64 x 4"),
                   (lambda: one.allreduce([1.0, 2.0]), "allreduce: parameter array is a list, not an array"),
                   (lambda: one.allreduce(np.ones(4, np.float32), op="xor"), "parameter op"),
                   (lambda: one.allreduce(np.ones(4, np.float32), stream=7),
                    "allreduce: parameter stream is for the cuda and nccl backends, not cpu")):
    try:
        call()
        check(False, f"accepted: {want}")
    except artune.InvalidUsage as e:
        check(str(e).startswith(want) or want in str(e), f"{want!r} vs {e}")
check(np.all(frozen == 1), "a refused call leaves the arrays alone")
# An object with the array interface (here: a memoryview, the buffer protocol) is read without a copy: the result
# lands in its memory.
raw = bytearray(np.full(6, 2, dtype=np.int32).tobytes())
view = memoryview(raw).cast("i")
got = on_threads(two, lambda r: two[r].allreduce(view if r == 0 else np.full(6, 2, dtype=np.int32)))
check(got == [None, None], f"memoryview: {got}")
check(list(view) == [4] * 6, f"memoryview result {list(view)}")
# The exceptions are RuntimeErrors (what PyTorch's futures and callers expect of a failed collective).
check(issubclass(artune.Timeout, RuntimeError) and issubclass(artune.InvalidUsage, artune.Error), "hierarchy")

# Asynchronous calls: a Work whose wait() returns the result; calls run in the order each rank made them, a
# synchronous call queued behind its rank's asynchronous ones.
works = [[None] * 3 for _ in range(4)]
vals = [[np.full(257, 10 * k + r, dtype=np.float64) for k in range(3)] for r in range(4)]
sync_results = [None] * 4
def mixed(r):
    works[r][0] = comms[r].allreduce(vals[r][0], async_op=True)
    works[r][1] = comms[r].allreduce(vals[r][1], op="max", async_op=True)
    sync_results[r] = comms[r].allreduce(vals[r][2], op="min")  # waits behind the two
    works[r][2] = comms[r].allgather(np.arange(3, dtype=np.int64) + r, async_op=True)
check(on_threads(comms, mixed) == [None] * 4, "async calls")
for r in range(4):
    check(isinstance(works[r][0], artune.Work), "Work")
    check(works[r][0].wait() is vals[r][0] and np.all(vals[r][0] == 0 + 1 + 2 + 3), f"async sum {vals[r][0][:3]}")
    check(works[r][1].wait(timeout=30) is vals[r][1] and np.all(vals[r][1] == 13), "async max")
    check(sync_results[r] is vals[r][2] and np.all(vals[r][2] == 20), "sync min behind the async calls")
    check(np.array_equal(works[r][2].wait(), np.concatenate([np.arange(3) + k for k in range(4)])), "async allgather")
    check(works[r][0].is_completed(), "is_completed after wait")
# add_done_callback runs once the call has finished (at once when it has), with the Work.
seen = []
done_event = threading.Event()
def callback(w):
    seen.append(w.wait())
    done_event.set()
late_cb = [None] * 2
def with_callback(r):
    w = two[r].allreduce(np.full(3, r + 1.0), async_op=True)
    if r == 0:
        w.add_done_callback(callback)
    late_cb[r] = w
check(on_threads(two, with_callback) == [None, None], "callback calls")
check(done_event.wait(30) and len(seen) == 1 and np.all(seen[0] == 3.0), f"callback {seen}")
late_cb[1].wait()
late_cb[1].add_done_callback(lambda w: seen.append("at once"))
check(seen[-1] == "at once", "a callback on a finished Work runs at once")
# The interpreter's exit waits for the callbacks of calls in flight: a script that ends while its callback has yet
# to run (here, its call times out after the script's last line) still sees the callback finish, instead of a
# progress thread ended inside it (which aborted the process when a torch future sat in the callback).
exiting = subprocess.run(
    [sys.executable, "-c",
     "import time, artune, numpy as np\n"
     "c = artune.local_communicators(2, topology='uniform:2', spec='xring', timeout=0.3)\n"
     "def late(w):\n"
     "    time.sleep(0.2)\n"
     "    print('callback finished', flush=True)\n"
     "c[0].allreduce(np.ones(4), async_op=True).add_done_callback(late)\n"],
    capture_output=True, text=True, timeout=60)
check(exiting.returncode == 0 and exiting.stdout == "callback finished\n",
      f"exit with a callback pending: {exiting.returncode} {exiting.stdout!r} {exiting.stderr[-300:]!r}")
# The buffers of a call in flight stay alive when the caller drops them (and its Work).
pending = np.full(1000, 5.0)
gone = weakref.ref(pending)
first = two[0].allreduce(pending, async_op=True)
del pending, first
gc.collect()
check(gone() is not None, "the buffer of a call in flight was freed")
other = np.full(1000, 1.0)
two[1].allreduce(other)
check(np.all(other == 6.0), "the dropped call completed")
deadline = threading.Event()
for _ in range(300):
    gc.collect()
    if gone() is None:
        break
    deadline.wait(0.01)
check(gone() is None, "the buffer is released once the call has finished")
# A rank that never joins: the asynchronous call ends with artune.Timeout (a RuntimeError) within the timeout,
# and wait(timeout=) of a call still in flight says so without breaking the communicator.
lonely = artune.local_communicators(2, topology="uniform:2", spec="xring", timeout=0.5)
w = lonely[0].allreduce(np.ones(4), async_op=True)
try:
    w.wait()
    check(False, "a missing rank did not end the asynchronous call")
except RuntimeError as e:
    check(isinstance(e, artune.Timeout) and "did not call allreduce within 0.5 s" in str(e), str(e))
patient = artune.local_communicators(2, topology="uniform:2", spec="xring", timeout=30)
w = patient[0].allreduce(np.ones(4), async_op=True)
try:
    w.wait(timeout=0.05)
    check(False, "wait(timeout=) returned before the call finished")
except artune.Timeout as e:
    check("still in flight" in str(e), str(e))
patient[1].allreduce(np.ones(4))
check(np.all(w.wait() == 2.0), "the call goes on after wait(timeout=) ran out")

# Tuning options: the cost profile follows the backend (cpu prices plans for host threads); profile, calibration
# and tune_sizes shape in-memory tuning; bad values name their parameter.
tuned = artune.local_communicators(2, topology="uniform:2", tune_sizes=[64, 4096])
check(tuned[0].profile == "cpu", f"profile {tuned[0].profile}")
check(artune.local_communicators(2, topology="uniform:2", tune_sizes=[64], profile="nccl")[0].profile == "nccl", "nccl")
check(artune.local_communicators(2, topology="uniform:2", spec="xring")[0].profile == "", "a spec has no profile")
for kwargs, want in (({"profile": "gpu"}, "parameter profile"), ({"tune_sizes": [0]}, "parameter tune_sizes"),
                     ({"tune_sizes": []}, "parameter tune_sizes"),
                     ({"calibration": "no-such-calibration.json"}, "parameter calibration")):
    try:
        artune.local_communicators(2, topology="uniform:2", **kwargs)
        check(False, f"{kwargs} accepted")
    except artune.InvalidUsage as e:
        check(want in str(e), f"{kwargs}: {e}")
with tempfile.TemporaryDirectory() as folder:
    overlay = os.path.join(folder, "calibration.json")
    with open(overlay, "w") as f:
        json.dump({"profile": "cpu", "op_overhead_us": 3.0}, f)
    calibrated = artune.local_communicators(2, topology="uniform:2", tune_sizes=[64, 1024], calibration=overlay)
    check(calibrated[0].profile == "cpu", "calibrated profile")
    try:
        artune.local_communicators(2, topology="uniform:2", tune_sizes=[64], calibration=overlay, profile="mpi")
        check(False, "a cpu calibration under profile mpi accepted")
    except artune.InvalidUsage as e:
        check("its profile is cpu, not mpi (parameter profile)" in str(e), str(e))

if failures:
    sys.exit(1)
print("python binding: all checks passed")
