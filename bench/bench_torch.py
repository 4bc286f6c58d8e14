"""PyTorch through artune against numpy and gloo, under mpirun (one rank per process; speed only, nothing asserted):

  mpirun -np 4 python3 bench/bench_torch.py allreduce [ROUNDS]
      gradient all-reduce (float32 sum, in place) at 4 KiB, 256 KiB and 4 MiB: artune from a torch tensor, artune from
      a numpy array, and gloo (torch.distributed.all_reduce), a block of calls each per round in rotating order;
      medians of the per-round means, and the ratios torch/numpy and artune/gloo.
  mpirun -np 4 python3 bench/bench_torch.py ddp [STEPS]
      one DistributedDataParallel training step (forward, backward with the gradients' all-reduce, SGD step) of a
      4-layer MLP (2.1 M parameters, 8.4 MB of gradients, DDP's default buckets): gloo's default reduction vs
      artune.torch.allreduce_hook vs the "artune" torch.distributed backend, one step of each in turn; and beside
      them the gradients' all-reduce alone (one 8 MiB buffer), through artune and through gloo.

The figures are rank 0's; the load average of the machine is printed before and after (it moves the figures more
than anything else on a shared machine). Run with PYTHONPATH pointing at the package (the build tree's python/
folder, or an installed artune)."""

import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import artune
import artune.torch


def setup():
    comm = artune.Communicator(backend="mpi", timeout=120)
    rank, size = comm.rank, comm.size
    dist.init_process_group("gloo", store=artune.torch.tcp_store(comm, timeout=120), rank=rank, world_size=size)
    torch.set_num_threads(1)
    return comm, rank, size


def say(rank, text):
    if rank == 0:
        print(text, flush=True)


def load():
    return "load average %.1f %.1f %.1f on %d cores" % (*os.getloadavg(), os.cpu_count())


def bench_allreduce(comm, rank, size, rounds):
    say(rank, f"# gradient all-reduce, float32 sum in place, {size} ranks; {load()}")
    say(rank, "# size     torch->artune(us)  numpy->artune(us)  gloo(us)   torch/numpy  artune/gloo  plan")
    for nbytes in (4 << 10, 256 << 10, 4 << 20):
        n = nbytes // 4
        t = torch.full((n,), 1.0)
        a = np.full(n, 1.0, dtype=np.float32)
        g = torch.full((n,), 1.0)
        calls = max(4, min(200, (8 << 20) // nbytes))
        for _ in range(3):  # warm-up: plans compiled, gloo connected
            comm.allreduce(t)
            comm.allreduce(a)
            dist.all_reduce(g)
        per = {"torch": [], "numpy": [], "gloo": []}
        calls_of = {"torch": lambda: comm.allreduce(t), "numpy": lambda: comm.allreduce(a),
                    "gloo": lambda: dist.all_reduce(g)}
        order = ["torch", "numpy", "gloo"]
        for k in range(rounds):
            # One block of calls per way, the order rotated every round (gloo's threads stay busy a while after
            # its calls: whatever follows them would pay for it).
            for name in order[k % 3:] + order[:k % 3]:
                fn = calls_of[name]
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                per[name].append((time.perf_counter() - start) / calls * 1e6)
        med = {k: statistics.median(v) for k, v in per.items()}
        say(rank, f"{nbytes:>8}   {med['torch']:>15.1f}  {med['numpy']:>17.1f}  {med['gloo']:>8.1f}   "
                  f"{med['torch'] / med['numpy']:>11.2f}  {med['torch'] / med['gloo']:>11.2f}  {comm.last_plan()}")
    say(rank, f"# after: {load()}")


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
            torch.nn.Linear(1024, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))

    def forward(self, x):
        return self.layers(x)


def bench_ddp(comm, rank, size, steps):
    params = sum(p.numel() for p in MLP().parameters())
    say(rank, f"# DDP step, MLP of {params / 1e6:.1f} M parameters, batch 32 per rank, {size} ranks; {load()}")
    artune_group = dist.new_group(backend="artune") if artune.torch.backend_supported() else None
    runs = {}
    for mode in ("gloo", "hook", "backend"):
        if mode == "backend" and artune_group is None:
            continue
        torch.manual_seed(0)
        net = MLP()
        ddp = DistributedDataParallel(net, process_group=artune_group if mode == "backend" else None)
        if mode == "hook":
            ddp.register_comm_hook(comm, artune.torch.allreduce_hook)
        runs[mode] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01))
    data = torch.Generator().manual_seed(rank)
    x = torch.randn(32, 512, generator=data)
    y = torch.randint(0, 10, (32,), generator=data)

    def step(mode):
        ddp, opt = runs[mode]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()

    for mode in runs:  # warm-up
        for _ in range(3):
            step(mode)
    times = {m: [] for m in runs}
    for _ in range(steps):
        for mode in runs:
            dist.barrier()
            start = time.perf_counter()
            step(mode)
            times[mode].append((time.perf_counter() - start) * 1e3)
    # The all-reduce alone: all the gradients as one buffer, averaged (what the hook does, bucket by bucket).
    grads = torch.zeros(params)
    alone = {"artune": [], "gloo": []}
    for _ in range(steps):
        dist.barrier()
        start = time.perf_counter()
        comm.allreduce(grads, op="avg")
        alone["artune"].append((time.perf_counter() - start) * 1e3)
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(grads)
        alone["gloo"].append((time.perf_counter() - start) * 1e3)
    med = {m: statistics.median(v) for m, v in times.items()}
    say(rank, "# mode      step (ms, median)   vs gloo")
    for mode, value in med.items():
        say(rank, f"{mode:<9}  {value:>17.2f}   {value / med['gloo']:>7.3f}")
    say(rank, f"# the gradients' all-reduce alone ({params * 4 / 2**20:.1f} MiB, one buffer): "
              f"artune {statistics.median(alone['artune']):.2f} ms ({comm.last_plan()}), "
              f"gloo {statistics.median(alone['gloo']):.2f} ms")
    say(rank, f"# after: {load()}")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "allreduce"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    comm, rank, size = setup()
    if mode == "allreduce":
        bench_allreduce(comm, rank, size, count or 15)
    elif mode == "ddp":
        bench_ddp(comm, rank, size, count or 30)
    else:
        say(rank, f"bench_torch.py: unknown mode '{mode}' (allreduce, ddp)")
        sys.exit(2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
