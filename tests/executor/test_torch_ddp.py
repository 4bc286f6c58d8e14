"""PyTorch DDP training on artune's plans, run by meson test as `mpirun -np 4 python3 test_torch_ddp.py`.

Two models train STEPS steps on a fixed batch per rank, each three ways:
  gloo     DistributedDataParallel on a gloo process group, PyTorch's default reduction (the reference);
  hook     the same with artune.torch.allreduce_hook on an artune mpi communicator (several buckets);
  backend  DistributedDataParallel on the torch.distributed backend "artune" (PyTorch 1.13+), no hook.
"exact", a float64 linear model whose gradient sums are exact in any order: the parameters and losses must equal
gloo's bit for bit. "mlp", a float32 3-layer MLP: artune sums the ranks in another order than gloo's ring, so the
parameters must match gloo's to rounding (1e-5) only. In both, every rank must hold the same parameters bit for
bit (replicas identical) and the loss must fall. Then torch.distributed's all_reduce, all_gather_into_tensor and reduce_scatter_tensor on
the artune group, every type, exact. Exits 77 (skip) without PyTorch."""

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
dist.init_process_group("gloo", store=artune.torch.tcp_store(comm), rank=rank, world_size=size)
artune_group = dist.new_group(backend="artune") if artune.torch.backend_supported() else None


def exact_model():
    # A linear model in float64 from zeros: inputs in {-1, 0, 1}, integer targets, power-of-two scales (the mean over
    # 4 x 4 outputs, the average over 4 ranks, lr 1/4). Every gradient is a dyadic number of few bits, so every sum
    # is exact in any order: a correct all-reduce gives gloo's bits whatever its plan.
    net = torch.nn.Linear(8, 4, bias=False).double()
    torch.nn.init.zeros_(net.weight)
    return net


def mlp_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 8))


def exact_batch(data):
    x = torch.randint(-1, 2, (4, 8), generator=data).double()
    teacher = torch.arange(-16, 16, dtype=torch.float64).reshape(4, 8) % 7 - 3
    return x, x @ teacher.t()


def mlp_batch(data):
    x = torch.randn(16, 32, generator=data)
    return x, torch.sin(x[:, :8]) + 0.5 * x[:, 8:16]  # a function the MLP can learn


def train(mode, make_model, batch, lr):
    net = make_model()
    group = artune_group if mode == "backend" else None
    # 10 KB buckets: the MLP's 27 KB of gradients go as 3 buckets, so communication overlaps backward.
    ddp = DistributedDataParallel(net, process_group=group, bucket_cap_mb=0.01)
    if mode == "hook":
        ddp.register_comm_hook(comm, artune.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    data = torch.Generator().manual_seed(1000 + rank)
    x, y = batch(data)  # one batch per rank, trained on STEPS times: the loss must fall
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]), losses


modes = ["hook"] + (["backend"] if artune_group is not None else [])
for name, make_model, batch, lr in (("exact", exact_model, exact_batch, 0.25), ("mlp", mlp_model, mlp_batch, 0.05)):
    reference, reference_losses = train("gloo", make_model, batch, lr)
    check(reference_losses[-1] < reference_losses[0], f"{name} gloo: loss did not fall: {reference_losses}")
    for mode in modes:
        params, losses = train(mode, make_model, batch, lr)
        diff = (params - reference).abs().max().item()
        if name == "exact":
            # Exact sums: the same bits as gloo, every parameter, every loss.
            check(torch.equal(params, reference), f"{name} {mode}: parameters differ from gloo's (max |diff| {diff})")
            check(losses == reference_losses, f"{name} {mode}: losses {losses} vs gloo {reference_losses}")
        else:
            # Rounded sums: artune's plans add the four ranks' values in another order than gloo's ring (gloo's chunk
            # c as ((c-1 + c-2) + c-3) + c, artune's ring ((c+1 + c+2) + c+3) + c), so the last bits may differ.
            check(diff <= 1e-5 * max(1.0, reference.abs().max().item()), f"{name} {mode}: max |diff| {diff} vs gloo")
        check(losses[-1] < losses[0], f"{name} {mode}: loss did not fall: {losses}")
        # Replicas: every rank holds the same parameters, bit for bit.
        everyone = [torch.empty_like(params) for _ in range(size)]
        dist.all_gather(everyone, params)
        check(all(torch.equal(everyone[0], p) for p in everyone), f"{name} {mode}: replicas differ")
        print(f"rank {rank}: DDP {name} {mode}: {STEPS} steps, loss {losses[0]:.4g} -> {losses[-1]:.4g}, "
              f"max |diff| vs gloo {diff:.3g}, replicas identical ({comm.last_plan()})")

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
