"""PyTorch DDP training on artune's plans, run by meson test as `mpirun -np 4 python3 test_torch_ddp.py`.

The same 3-layer MLP, seed and per-rank data train for STEPS steps three ways:
  gloo     DistributedDataParallel on a gloo process group, PyTorch's default reduction (the reference);
  hook     the same with artune.torch.allreduce_hook on an artune mpi communicator (several buckets);
  backend  DistributedDataParallel on the torch.distributed backend "artune" (PyTorch 1.13+), no hook.
The parameters after every run must equal the gloo run's bit for bit, on every rank (replicas identical), and
the loss must fall. Then torch.distributed's all_reduce, all_gather_into_tensor and reduce_scatter_tensor on
the artune group, every type, exact. Exits 77 (skip) without PyTorch."""

import datetime
import sys

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed (Debian: apt-get install python3-torch); the DDP tests need it")
    sys.exit(77)

import numpy as np
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import artune
import artune.torch

STEPS = 8
failures = []
comm = artune.Communicator(backend="mpi", timeout=60)
rank, size = comm.rank, comm.size


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"rank {rank} FAILED: {what}", file=sys.stderr)


# torch.distributed's store: rank 0 listens on a port the system picks and tells the others through artune.
timeout = datetime.timedelta(seconds=60)
port = np.zeros(1, dtype=np.int64)
if rank == 0:
    store = dist.TCPStore("127.0.0.1", 0, size, True, timeout)
    port[0] = store.port
comm.allreduce(port, op="max")
if rank != 0:
    store = dist.TCPStore("127.0.0.1", int(port[0]), size, False, timeout)
dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
artune_group = dist.new_group(backend="artune") if artune.torch.backend_supported() else None


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 8))


def train(mode):
    net = model()
    group = artune_group if mode == "backend" else None
    # 10 KB buckets: the 27 KB of gradients go as 3 buckets, so communication overlaps backward.
    ddp = DistributedDataParallel(net, process_group=group, bucket_cap_mb=0.01)
    if mode == "hook":
        ddp.register_comm_hook(comm, artune.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(16, 32, generator=data)
        y = torch.randn(16, 8, generator=data)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]), losses


reference, reference_losses = train("gloo")
modes = ["hook"] + (["backend"] if artune_group is not None else [])
for mode in modes:
    params, losses = train(mode)
    check(torch.equal(params, reference), f"{mode}: parameters differ from gloo's after {STEPS} steps "
                                          f"(max |diff| {(params - reference).abs().max().item()})")
    check(losses == reference_losses, f"{mode}: losses {losses} vs gloo {reference_losses}")
    check(losses[-1] < losses[0], f"{mode}: loss did not fall: {losses}")
    # Replicas: every rank holds the same parameters, bit for bit.
    everyone = [torch.empty_like(params) for _ in range(size)]
    dist.all_gather(everyone, params)
    check(all(torch.equal(everyone[0], p) for p in everyone), f"{mode}: replicas differ")
print(f"rank {rank}: DDP {'+'.join(modes)} = gloo after {STEPS} steps, loss {reference_losses[0]:.4f} -> "
      f"{reference_losses[-1]:.4f} ({comm.last_plan()})")

if artune_group is not None:
    # torch.distributed's calls on the artune group, every type artune has; exact small integers.
    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8)
    for dtype in dtypes:
        t = (torch.arange(1001) % 5 + rank + 1).to(dtype)
        work = dist.all_reduce(t, group=artune_group, async_op=True)
        work.wait()
        want = (torch.arange(1001) % 5 * size + size * (size + 1) // 2).to(dtype)
        check(torch.equal(t, want), f"all_reduce {dtype}")
        t = (torch.arange(7) + rank).to(dtype)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=artune_group)
        check(torch.equal(t, (torch.arange(7) + size - 1).to(dtype)), f"all_reduce max {dtype}")
        block = (torch.arange(6) + 10 * rank).to(dtype)
        whole = torch.empty(6 * size, dtype=dtype)
        dist.all_gather_into_tensor(whole, block, group=artune_group)
        check(torch.equal(whole, torch.cat([(torch.arange(6) + 10 * r).to(dtype) for r in range(size)])),
              f"all_gather_into_tensor {dtype}")
        source = (torch.arange(6 * size) % 9 + 1).to(dtype)
        mine = torch.empty(6, dtype=dtype)
        dist.reduce_scatter_tensor(mine, source, group=artune_group)
        check(torch.equal(mine, ((torch.arange(6 * size) % 9 + 1) * size)[6 * rank:6 * rank + 6].to(dtype)),
              f"reduce_scatter_tensor {dtype}")
    # Delegated to gloo: broadcast and barrier (DDP's set-up uses broadcast and the list all-gather).
    b = torch.full((3,), float(rank))
    dist.broadcast(b, src=2, group=artune_group)
    check(torch.equal(b, torch.full((3,), 2.0)), "broadcast (gloo)")
    dist.barrier(group=artune_group)
    try:
        dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND, group=artune_group)
        check(False, "BAND accepted")
    except ValueError as e:
        check("parameter op" in str(e), str(e))
    print(f"rank {rank}: torch.distributed on artune: all_reduce, all_gather_into_tensor, reduce_scatter_tensor "
          f"x {len(dtypes)} types exact")
else:
    print(f"rank {rank}: PyTorch {torch.__version__} has no Python backends: the artune backend is not tested")

ok = np.array([len(failures)], dtype=np.int64)
comm.allreduce(ok)
dist.destroy_process_group()
sys.exit(0 if ok[0] == 0 else 1)
