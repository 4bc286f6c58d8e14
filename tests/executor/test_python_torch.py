"""torch tensors through the binding and artune.torch, on threads of one process (cpu backend): every type
artune has (bfloat16 and float16 included) in place and into `out`; zero copies (the result lands in the
caller's tensor storage and no allocation of the tensor's size happens, counted by alloc_counter.c when it is
preloaded); the same errors as for numpy arrays; CUDA memory refused on a host backend and the stream plumbed to
DLPack producers; asynchronous calls; the DDP hook's future. Exits 77 (skip) without PyTorch.
The 4-rank DDP training and the torch.distributed backend run under mpirun: test_torch_ddp.py."""

import ctypes
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed (Debian: apt-get install python3-torch); the torch tests need it")
    sys.exit(77)

import numpy as np

import artune
import artune.torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, failures, on_threads  # noqa: E402 - beside this file


comms = artune.local_communicators(4, topology="uniform:4", spec="rechd")

# Every type, three ops, three counts; ranks 0 and 1 in place, 2 and 3 into `out`. Small integers: exact in every type.
dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8)
for dtype in dtypes:
    for op in ("sum", "max", "min"):
        for count in (1, 5, 1031):
            inputs = [((torch.arange(count) % 7) + r + 1).to(dtype) for r in range(4)]
            stacked = torch.stack([i.to(torch.float64) for i in inputs])
            want = {"sum": stacked.sum(0), "max": stacked.max(0).values, "min": stacked.min(0).values}[op].to(dtype)
            tensors = [i.clone() for i in inputs]
            outs = [torch.zeros_like(i) for i in inputs]
            results = [None] * 4

            def call(r):
                results[r] = comms[r].allreduce(tensors[r], op=op, out=outs[r] if r >= 2 else None)

            errors = on_threads(comms, call)
            check(errors == [None] * 4, f"{dtype} {op} {count}: {errors}")
            for r in range(4):
                got = tensors[r] if r < 2 else outs[r]
                check(results[r] is got, f"{dtype} {op} {count} rank {r}: the result is the caller's tensor")
                check(torch.equal(got, want), f"{dtype} {op} {count} rank {r}: {got[:4]} vs {want[:4]}")
            check(torch.equal(tensors[2], inputs[2]), f"{dtype}: out of place leaves the input alone")

# All-gather and reduce-scatter of tensors: into `out`, or a new tensor of the input's dtype (bfloat16 too).
for dtype in (torch.bfloat16, torch.float32, torch.int64):
    blocks = [torch.arange(5).to(dtype) + 10 * r for r in range(4)]
    gathered = [None] * 4
    outs = [torch.empty(20, dtype=dtype) for _ in range(4)]

    def gather(r):
        gathered[r] = comms[r].allgather(blocks[r], out=outs[r] if r % 2 else None)

    check(on_threads(comms, gather) == [None] * 4, f"allgather {dtype}")
    for r in range(4):
        check(isinstance(gathered[r], torch.Tensor) and gathered[r].dtype == dtype, f"allgather {dtype} result type")
        check(torch.equal(gathered[r], torch.cat(blocks)), f"allgather {dtype} rank {r}")
        check(r % 2 == 0 or gathered[r] is outs[r], "allgather into out")
    wholes = [torch.arange(20).to(dtype) * (r + 1) for r in range(4)]
    scattered = [None] * 4

    def scatter(r):
        scattered[r] = comms[r].reducescatter(wholes[r], op="sum")

    check(on_threads(comms, scatter) == [None] * 4, f"reducescatter {dtype}")
    for r in range(4):
        check(torch.equal(scattered[r], (torch.arange(20).to(dtype) * 10)[5 * r:5 * r + 5]), f"reducescatter {dtype} {r}")

# Zero copies: the result is written into the caller's storage (same data_ptr), and no allocation of half the
# tensor's size or more happens during steady-state calls (alloc_counter.c, preloaded by meson test; a positive
# control proves it counts).
n = 1 << 22  # 16 MiB of float32
big = [torch.full((n,), float(r + 1)) for r in range(4)]
big_out = [torch.empty(n) for _ in range(4)]
arrays = [np.full(n, float(r + 1), dtype=np.float32) for r in range(4)]
ptrs = [t.data_ptr() for t in big]
out_ptrs = [t.data_ptr() for t in big_out]


def steady(r):
    comms[r].allreduce(big[r], op="avg")
    comms[r].allreduce(big[r], out=big_out[r])
    comms[r].allreduce(arrays[r], op="avg")
    comms[r].allreduce(big[r], op="avg", async_op=True).wait()


check(on_threads(comms, steady) == [None] * 4, "warm-up")  # compiles the plans
counter = None
try:
    lib = ctypes.CDLL(None)
    counter = (lib.artune_alloc_counter_start, lib.artune_alloc_counter_stop)
    counter[0].argtypes = [ctypes.c_size_t]
    counter[1].restype = ctypes.c_long
except AttributeError:
    print("note: alloc_counter.c is not preloaded (a sanitized build): the allocation count is not checked")
if counter is not None:
    counter[0](n * 4 // 2)
    errors = on_threads(comms, steady)
    counted = counter[1]()
    check(errors == [None] * 4, f"steady calls: {errors}")
    check(counted == 0, f"{counted} allocations of >= 8 MiB during 4 ranks x 4 calls of 16 MiB (zero copy)")
    counter[0](n * 4 // 2)
    control = big[0].clone()
    check(counter[1]() == 1, "the allocation counter sees a tensor-sized allocation (positive control)")
    del control
check([t.data_ptr() for t in big] == ptrs and [t.data_ptr() for t in big_out] == out_ptrs, "storage unchanged")
# Values: avg of 1..4 = 2.5 (twice: stays 2.5), then out = sum = 10; the async avg keeps 2.5.
check(all(torch.all(t == 2.5) for t in big), f"avg values {big[0][:3]}")
check(all(torch.all(t == 10.0) for t in big_out), f"out values {big_out[0][:3]}")

# The same errors as for numpy arrays: not contiguous, mismatched out, unknown dtype; and what tensors add.
one = artune.Communicator(backend="cpu", topology="uniform:1", spec="xring")
cases = (
    (lambda: one.allreduce(torch.zeros(8)[::2]), "allreduce: parameter array must be C-contiguous"),
    (lambda: one.allreduce(torch.zeros(3, 4).t()), "allreduce: parameter array must be C-contiguous"),
    (lambda: one.allreduce(torch.zeros(4), out=torch.zeros(4, dtype=torch.float64)),
     "allreduce: parameter out must hold float32 x 4 (from parameter array float32 x 4), not float64 x 4"),
    (lambda: one.allreduce(torch.zeros(4), out=torch.zeros(5)),
     "allreduce: parameter out must hold float32 x 4 (from parameter array float32 x 4), not float32 x 5"),
    (lambda: one.allreduce(torch.zeros(4, dtype=torch.int16)), "allreduce: parameter array has DLPack type int16"),
    (lambda: one.allreduce(torch.zeros(4, dtype=torch.complex64)), "allreduce: parameter array has DLPack type"),
    (lambda: one.allreduce(torch.zeros(4, requires_grad=True)), "allreduce: parameter array (a Tensor) refused DLPack"),
    (lambda: one.allgather(torch.zeros(4)[::2]), "allgather: parameter array must be C-contiguous"),
    (lambda: one.reducescatter(torch.zeros(4), out=torch.zeros(2)),
     "reducescatter: parameter out must hold float32 x 4 (from parameter array float32 x 4), not float32 x 2"),
)
for call, want in cases:
    try:
        call()
        check(False, f"accepted: {want}")
    except artune.InvalidUsage as e:
        check(str(e).startswith(want), f"{want!r} vs {e}")
# A contiguous view with an offset is fine, and only its elements change.
base = torch.arange(10, dtype=torch.float32)
one.allreduce(base[3:7])
check(torch.equal(base, torch.arange(10, dtype=torch.float32)), "a one-rank sum leaves a view as it was")


# CUDA memory on a host backend is refused before anything runs, and the call's stream reaches the DLPack
# producer (none given: None, DLPack's "legacy default stream"). A stand-in for a CUDA tensor exports a DLPack
# capsule made here with ctypes (device kDLCUDA 0, 4 float32) and records the stream it is asked for.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCuda:
    name = b"dltensor"  # PyCapsule keeps the pointer: a class attribute lives as long as the capsules

    def __init__(self):
        self.shape = (ctypes.c_int64 * 1)(4)
        self.managed = DLManagedTensor()
        self.managed.dl_tensor = DLTensor(0x1000, DLDevice(2, 0), 1, DLDataType(2, 32, 1), self.shape, None, 0)
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return capsule_new(ctypes.addressof(self.managed), FakeCuda.name, None)


fake = FakeCuda()
for kwargs in ({}, {"stream": 1234}):
    try:
        one.allreduce(fake, **kwargs)
        check(False, "a CUDA buffer accepted by the cpu backend")
    except artune.InvalidUsage as e:
        check(str(e).startswith("allreduce: parameter array is in CUDA memory (cuda:0) but this communicator runs "
                                "on the cpu backend"), str(e))
check(fake.streams == [None, 1234], f"streams given to __dlpack__: {fake.streams}")


class TorchLikeStream:
    cuda_stream = 4321


one_stream = FakeCuda()
try:
    one.allreduce(one_stream, stream=TorchLikeStream())
except artune.InvalidUsage:
    pass
check(one_stream.streams == [4321], f"a torch.cuda.Stream-like object's handle: {one_stream.streams}")
try:
    one.allreduce(FakeCuda(), stream="default")
    check(False, "a string stream accepted")
except artune.InvalidUsage as e:
    check(str(e).startswith("parameter stream: a str is not a CUDA stream"), str(e))


class FakeCai:
    __cuda_array_interface__ = {"data": (0x1000, False), "shape": (4,), "typestr": "<f4", "version": 3,
                                "strides": None, "stream": 1}


try:
    one.allreduce(FakeCai())
    check(False, "a __cuda_array_interface__ buffer accepted by the cpu backend")
except artune.InvalidUsage as e:
    check("is in CUDA memory" in str(e) and "cpu backend" in str(e), str(e))
check(isinstance(artune.has_dlpack, bool) and artune.has_dlpack, "built with DLPack")


# The DDP hook on a stand-in bucket: the future holds the bucket's buffer, averaged in place; a bad state is a
# TypeError naming the parameter.
class Bucket:
    def __init__(self, t):
        self.t = t

    def buffer(self):
        return self.t


buckets = [Bucket(torch.full((100,), float(r), dtype=torch.float32)) for r in range(4)]
futures = [None] * 4


def hook(r):
    futures[r] = artune.torch.allreduce_hook(comms[r], buckets[r])


check(on_threads(comms, hook) == [None] * 4, "hook")
for r in range(4):
    value = futures[r].wait()
    check(value is buckets[r].t and torch.all(value == 1.5), f"hook future {value[:3]}")
try:
    artune.torch.allreduce_hook(object(), buckets[0])
    check(False, "a non-communicator state accepted")
except TypeError as e:
    check("parameter state is a object, not an artune.Communicator" in str(e), str(e))
# A rank that never joins: the hook's future carries artune.Timeout (a RuntimeError) within the timeout.
lonely = artune.local_communicators(2, topology="uniform:2", spec="xring", timeout=0.5)
future = artune.torch.allreduce_hook(lonely[0], Bucket(torch.ones(8)))
try:
    future.wait()
    check(False, "the hook's future completed without the other rank")
except RuntimeError as e:
    check("did not call allreduce within 0.5 s" in str(e), str(e))
check(artune.torch.backend_supported() == (tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (1, 13)),
      "backend_supported follows the version")

if failures:
    sys.exit(1)
print(f"python torch ({torch.__version__}): all checks passed")
