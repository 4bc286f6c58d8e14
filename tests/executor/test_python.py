"""The Python binding: artune.local_communicators over numpy arrays on threads (cpu backend), every
numpy dtype the binding maps, in place and into `out`, errors as artune exceptions. Run by meson test
with PYTHONPATH set to the folder of the built module."""

import sys
import threading

import numpy as np

import artune

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what, file=sys.stderr)


# The module says which artune it is (the project's version, as `artune --version` prints it).
check(isinstance(artune.__version__, str) and len(artune.__version__.split(".")) == 3, "artune.__version__")


def on_threads(comms, fn):
    errors = [None] * len(comms)

    def body(r):
        try:
            fn(r)
        except Exception as e:  # noqa: BLE001 - reported per rank
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


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
    check(str(e) == "allreduce: the array must be C-contiguous", str(e))
try:
    two[0].reducescatter(np.zeros(3, dtype=np.float32))
    check(False, "reducescatter of 3 over 2 ranks accepted")
except artune.InvalidUsage as e:
    check(str(e) == "reducescatter: the array's size 3 is not a multiple of the group's 2 ranks", str(e))
try:
    one.allgather(np.zeros(4, dtype=np.complex64))
    check(False, "complex dtype accepted by allgather")
except artune.InvalidUsage as e:
    check(str(e).startswith("allgather: numpy dtype complex64"), str(e))
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

if failures:
    sys.exit(1)
print("python binding: all checks passed")
