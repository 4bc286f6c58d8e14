"""torch CUDA tensors through the binding, on threads of one process (the cuda backend; every rank on the GPUs there
are, round-robin, so one GPU runs every rank): every type artune has in place and into `out`, the result in the
caller's device storage; all-gather and reduce-scatter; the call ordered after the producer's kernels (on the
caller's `stream=`, or on the legacy default stream after DLPack's export); asynchronous calls; and CUDA memory refused on the cpu
backend. Exits 77 (skip) without PyTorch, without CUDA in it, or without a GPU; runs in scripts/gpu_check.sh
(phase 1) from a binding built on the GPU machine (scripts/gpu_python.sh)."""

import os
import sys

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed; the CUDA tensor tests need it")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: this PyTorch has no CUDA device (a GPU and a CUDA build of PyTorch are needed)")
    sys.exit(77)

import artune

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, failures, on_threads  # noqa: E402 - beside this file

RANKS = 4
gpus = torch.cuda.device_count()
device = [torch.device("cuda", r % gpus) for r in range(RANKS)]
try:
    comms = artune.local_communicators(RANKS, backend="cuda", topology=f"uniform:{RANKS}", spec="rechd")
except Exception as e:  # noqa: BLE001 - a build without the cuda backend says so here
    print(f"SKIP: no cuda communicator: {e}")
    sys.exit(77)
print(f"{RANKS} ranks on {gpus} GPU(s): {torch.cuda.get_device_name(0)}")

# Every type, three ops; ranks 0 and 1 in place, 2 and 3 into `out` (device tensors, the caller's storage).
dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8)
for dtype in dtypes:
    for op in ("sum", "max", "min"):
        for count in (1, 1031, 1 << 18):
            inputs = [((torch.arange(count, device=device[r]) % 7) + r + 1).to(dtype) for r in range(RANKS)]
            stacked = torch.stack([i.cpu().to(torch.float64) for i in inputs])
            want = {"sum": stacked.sum(0), "max": stacked.max(0).values, "min": stacked.min(0).values}[op].to(dtype)
            tensors = [i.clone() for i in inputs]
            outs = [torch.zeros_like(i) for i in inputs]
            ptrs = [t.data_ptr() for t in tensors] + [o.data_ptr() for o in outs]
            results = [None] * RANKS
            torch.cuda.synchronize()

            def call(r):
                results[r] = comms[r].allreduce(tensors[r], op=op, out=outs[r] if r >= 2 else None)

            errors = on_threads(comms, call)
            torch.cuda.synchronize()
            check(errors == [None] * RANKS, f"{dtype} {op} {count}: {errors}")
            for r in range(RANKS):
                got = tensors[r] if r < 2 else outs[r]
                check(results[r] is got, f"{dtype} {op} {count} rank {r}: the result is the caller's tensor")
                check(got.is_cuda, f"{dtype} {op} {count} rank {r}: the result stays on the GPU")
                check(torch.equal(got.cpu(), want), f"{dtype} {op} {count} rank {r}: {got[:4]} vs {want[:4]}")
            check([t.data_ptr() for t in tensors] + [o.data_ptr() for o in outs] == ptrs,
                  f"{dtype} {op} {count}: no tensor was reallocated")
            check(torch.equal(tensors[2].cpu(), inputs[2].cpu()), f"{dtype} {op}: out of place leaves the input alone")

# All-gather and reduce-scatter of device tensors, into `out` and into a new tensor.
for dtype in (torch.bfloat16, torch.float32, torch.int64):
    blocks = [torch.arange(5, device=device[r]).to(dtype) + 10 * r for r in range(RANKS)]
    outs = [torch.empty(5 * RANKS, dtype=dtype, device=device[r]) for r in range(RANKS)]
    gathered = [None] * RANKS

    def gather(r):
        gathered[r] = comms[r].allgather(blocks[r], out=outs[r] if r % 2 else None)

    check(on_threads(comms, gather) == [None] * RANKS, f"allgather {dtype}")
    torch.cuda.synchronize()
    want = torch.cat([b.cpu() for b in blocks])
    for r in range(RANKS):
        check(gathered[r].is_cuda and torch.equal(gathered[r].cpu(), want), f"allgather {dtype} rank {r}")
        if r % 2:
            check(gathered[r] is outs[r], f"allgather {dtype} rank {r}: into the caller's out")

    full = [torch.arange(4 * RANKS, device=device[r]).to(dtype) + r for r in range(RANKS)]
    scattered = [None] * RANKS

    def scatter(r):
        scattered[r] = comms[r].reducescatter(full[r], op="sum")

    check(on_threads(comms, scatter) == [None] * RANKS, f"reducescatter {dtype}")
    torch.cuda.synchronize()
    total = sum(f.cpu().to(torch.float64) for f in full).to(dtype)
    for r in range(RANKS):
        check(torch.equal(scattered[r].cpu(), total[4 * r:4 * r + 4]), f"reducescatter {dtype} rank {r}")

# The caller's stream: a producer kernel on a side stream, the all-reduce on that stream (stream=) or, given none,
# on the legacy default stream after the producer (DLPack's export orders it), then the consumer on the side
# stream; no device-wide synchronization in between.
streams = [torch.cuda.Stream(device=device[r]) for r in range(RANKS)]
bufs = [torch.zeros(1 << 20, device=device[r]) for r in range(RANKS)]
torch.cuda.synchronize()


def on_stream(r):
    with torch.cuda.stream(streams[r]):
        bufs[r].fill_(r + 1.0)  # the producer, queued on the caller's stream
        if r % 2:
            comms[r].allreduce(bufs[r], stream=streams[r].cuda_stream)
        else:
            comms[r].allreduce(bufs[r])  # no stream: the legacy default stream, after torch's pending work (DLPack)
        bufs[r].mul_(2.0)  # the consumer, after the all-reduce in stream order


check(on_threads(comms, on_stream) == [None] * RANKS, "allreduce on the caller's stream")
torch.cuda.synchronize()
want = 2.0 * sum(range(1, RANKS + 1))
for r in range(RANKS):
    check(bool((bufs[r] == want).all()), f"stream order rank {r}: {bufs[r][:2].tolist()} vs {want}")

# Asynchronous calls: a handle per rank; wait() returns the caller's tensor.
async_bufs = [torch.full((4096,), float(r), device=device[r]) for r in range(RANKS)]
works = [None] * RANKS


def post(r):
    works[r] = comms[r].allreduce(async_bufs[r], async_op=True)


errors = on_threads(comms, post)
check(errors == [None] * RANKS, f"async allreduce posted: {errors}")
waited = [None] * RANKS


def wait(r):
    waited[r] = works[r].wait()


errors = on_threads(comms, wait)
check(errors == [None] * RANKS, f"async allreduce waited: {errors}")
torch.cuda.synchronize()
for r in range(RANKS):
    check(bool((async_bufs[r] == float(sum(range(RANKS)))).all()), f"async rank {r}: {async_bufs[r][:2].tolist()}")

# A host backend refuses device memory with a clear error, before any rank blocks.
cpu = artune.local_communicators(2, backend="cpu", topology="uniform:2")[0]
try:
    cpu.allreduce(torch.ones(4, device=device[0]))
    check(False, "a cpu communicator accepted a CUDA tensor")
except Exception as e:  # noqa: BLE001
    check("CUDA memory" in str(e), f"the cpu backend's refusal names CUDA memory: {e}")

if failures:
    print(f"{len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("python_cuda: every check passed")
