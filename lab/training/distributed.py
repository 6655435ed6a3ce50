"""Training over several processes, started by torchrun: one run data-parallel, or a study's runs shared out.

    torchrun --nproc_per_node=4 -m lab train --preset leviathan-lstm ...
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 -m lab train ...
    torchrun --nproc_per_node=3 -m lab ablation --seeds 0 1 2 ...

torchrun starts one process per rank and sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT; without them everything here is a no-op and a run
is the single process it always was. Under torchrun, lab.training.train wraps the model
in DistributedDataParallel (gloo on CPUs, nccl on GPUs), which averages the
gradients of the ranks in every backward pass.

How a global batch of B windows is split (W ranks, B/W windows each):

    one seeded generator, the same on every rank -> windows w0 w1 ... w(B-1)
    rank 0 takes w0 .. w(B/W-1), rank 1 the next B/W, ...

so the ranks together see exactly the batch a single process would draw, and
averaging their gradients gives the single process's gradient: W ranks compute
the run one process computes, only faster. The dropout masks come from a
generator seeded per rank (seed + rank), so that ranks never share them.

Work made of independent jobs (the ablation's runs) is spread differently: each
rank trains whole runs on its own (`alone`), and the ranks meet only to share out
the work and hand their results to rank 0 (`object_from_rank0`, `gather_to_rank0`).
"""

import os
from contextlib import contextmanager

import torch
import torch.distributed as dist

from lab.errors import LabError

_alone = False  # inside `alone()`: this rank computes as a single process would


class RankFailed(RuntimeError):
    """Some rank's work failed, and every rank stops: the message says which rank and why."""


def launched():
    """Whether torchrun (or another launcher setting its variables) started this process."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def rank_and_world():
    """(this process's rank, the number of ranks): (0, 1) outside a process group, or `alone()`."""
    if dist.is_available() and dist.is_initialized() and not _alone:
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@contextmanager
def process_group(device, timeout=None):
    """Join torchrun's process group for the duration, if torchrun started us: nccl for a CUDA
    `device` (each rank on the GPU numbered by its LOCAL_RANK), gloo otherwise. The group is
    destroyed on the way out, after an error too. `timeout` (a timedelta): how long a rank waits
    for the others at a collective before failing (default: PyTorch's, 10-30 minutes)."""
    if not launched():
        yield
        return
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://", timeout=timeout)
    try:
        yield
    finally:
        dist.destroy_process_group()


@contextmanager
def alone():
    """Within: this rank computes on its own, as a single process (rank_and_world() is (0, 1)), though
    it belongs to torchrun's group: for whole runs given to one rank each, which lab.training.train must not
    split into shards nor average with the other ranks' gradients."""
    global _alone
    before, _alone = _alone, True
    try:
        yield
    finally:
        _alone = before


@contextmanager
def first_on_each_machine():
    """Within: each machine's first rank (LOCAL_RANK 0) runs the body before its other ranks do, so
    that a download or a cache they share on that machine is made once, not raced for."""
    if rank_and_world()[1] == 1:
        yield
        return
    first = int(os.environ.get("LOCAL_RANK", 0)) == 0
    if not first:
        dist.barrier()  # met by the first ranks once their body is done
    yield
    if first:
        dist.barrier()


def wrap(model, device):
    """The model as DistributedDataParallel in a group of several ranks, else the model itself."""
    if rank_and_world()[1] == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )


def _collective_device():
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def from_rank0(values):
    """Rank 0's list of floats, on every rank: decisions (stop now? at what progress?) that must not
    differ between ranks, or some would wait forever for the others at the next step."""
    if rank_and_world()[1] == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=_collective_device())
    dist.broadcast(tensor, src=0)
    return tensor.tolist()


def check_same_as_rank0(values, field, what):
    """ValueError, on the rank concerned, where `values` (floats that sum up what this rank read:
    sizes, sums) differ from rank 0's: it read `what` differently (e.g. from a file that differs
    between machines), and the ranks would not compute one run."""
    if from_rank0(values) != values:
        raise LabError(
            f"{field}: rank {rank_and_world()[0]} read {what} differently from rank 0 "
            "(a file that differs between machines?)"
        )


def object_from_rank0(value):
    """Rank 0's `value` (any picklable object), on every rank."""
    if rank_and_world()[1] == 1:
        return value
    values = [value]
    dist.broadcast_object_list(values, src=0)
    return values[0]


def gather_to_rank0(value):
    """Every rank's `value` (any picklable object), in rank order, on rank 0; None on the other ranks."""
    rank, world = rank_and_world()
    if world == 1:
        return [value]
    values = [None] * world if rank == 0 else None
    dist.gather_object(value, values, dst=0)
    return values


def mean(tensor):
    """The mean over ranks of a scalar tensor (each rank's loss -> the global batch's loss)."""
    if rank_and_world()[1] == 1:
        return tensor
    total = tensor.detach().to(_collective_device(), torch.float64)
    dist.all_reduce(total)
    return (total / dist.get_world_size()).to(tensor.device, tensor.dtype)


def stack(tensor):
    """Every rank's copy of `tensor` stacked along a new first dimension, in rank order, on every rank."""
    rank, world = rank_and_world()
    if world == 1:
        return tensor[None]
    local = tensor.to(_collective_device())
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    return torch.stack(gathered).to(tensor.device)
