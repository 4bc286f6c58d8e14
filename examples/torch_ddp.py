"""PyTorch DistributedDataParallel on artune's plans, on CPUs, one process per rank:

    mpirun -np 4 python3 examples/torch_ddp.py [--steps N] [--backend]

Each rank trains the same small MLP on its own data. Gradients are averaged through artune:
  default     torch.distributed runs on gloo (for DDP's set-up); the gradient buckets go through
              artune.torch.allreduce_hook on an artune communicator (mpi backend, plans tuned in memory);
  --backend   the whole process group is artune's torch.distributed backend (PyTorch 1.13 or later).
The script prints the loss every few steps, the plan artune used, and checks that every rank ends with the same
parameters bit for bit. Needs artune's Python package (meson install, or PYTHONPATH=<build>/python) and PyTorch
(Debian: python3-torch)."""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import artune
import artune.torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--backend", action="store_true", help="use the artune torch.distributed backend")
    args = parser.parse_args()

    # One artune communicator per process (mpirun's ranks); it also tells the others rank 0's store port.
    comm = artune.Communicator(backend="mpi")
    rank, size = comm.rank, comm.size
    store = artune.torch.tcp_store(comm)

    if args.backend:
        if not artune.torch.backend_supported():
            raise SystemExit(f"PyTorch {torch.__version__} takes no Python backends (1.13 and later do): "
                             "run without --backend (the DDP hook)")
        dist.init_process_group("artune", store=store, rank=rank, world_size=size)
    else:
        dist.init_process_group("gloo", store=store, rank=rank, world_size=size)

    torch.manual_seed(0)  # the same initial parameters on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DistributedDataParallel(model)
    if not args.backend:
        ddp.register_comm_hook(comm, artune.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)

    data = torch.Generator().manual_seed(rank)  # each rank its own data
    x = torch.randn(256, 16, generator=data)
    y = x[:, :4].sum(dim=1, keepdim=True) - x[:, 4:8].prod(dim=1, keepdim=True)
    for step in range(args.steps):
        batch = torch.randint(0, 256, (32,), generator=data)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()
        opt.step()
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.4f}", flush=True)

    # The plan of the last gradient bucket: the hook's communicator, or the backend's own.
    grads = dist.distributed_c10d._get_default_group().communicator() if args.backend else comm
    plan = grads.last_plan()
    # Every rank holds the same parameters, bit for bit.
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = params.new_empty(size * params.numel())
    comm.allgather(params, out=everyone)
    same = all(torch.equal(block, params) for block in everyone.split(params.numel()))
    if rank == 0:
        how = "artune torch.distributed backend" if args.backend else "artune.torch.allreduce_hook"
        print(f"{size} ranks, {how}, gradient plan {plan}; replicas identical: {same}")
    dist.destroy_process_group()
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
