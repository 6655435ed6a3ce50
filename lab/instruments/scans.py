"""The selective scan's recurrence computed two ways, checked equal and timed (seed 004).

Glossary: B batch, T time, H hidden units.

    h_t = a_t * h_{t-1} + b_t        (the scan cell's A_t and B_t * e_t)

`lab.nets.cells.scan_sequential` walks t = 1..T: T small steps, each waiting for the
one before and each paying Python's and PyTorch's fixed cost per operation.
`lab.nets.cells.scan_parallel` does log2(T) rounds of whole-sequence tensor
operations, O(T log T) work in all. On a CPU which wins depends on the size:
with few units (small B*H) the loop's fixed cost per step dominates and the
scan wins; with many units the scan's extra log2(T) factor of arithmetic on a
few cores costs more than the steps it saves. On a GPU the rounds spread over
thousands of cores and the loop's T dependent kernel launches dominate, so the
scan wins. `race_scans` measures which wins on the machine it runs on.
"""

import time

import numpy as np
import pandas as pd
import torch

from lab.errors import LabError
from lab.nets.cells import scan_parallel, scan_sequential
from lab.training.train import resolve_device

MAX_RACE_LENGTH = 8192  # the longest T raced (T = 4096 at H = 2048: ~0.8 s per parallel call on 2 busy cores)


def _best_seconds(fn, repeats, device):
    """The fastest of `repeats` calls: the least disturbed by other work on shared cores. On CUDA the
    clock is read after the device has finished (its kernels run asynchronously)."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def race_scans(lengths, hidden=64, batch=1, repeats=3, seed=0, device="auto"):
    """For each T in `lengths`: random gates a (B, T, H) in (0, 1) and inputs b, both scans run on
    them; their largest absolute difference, and each one's best time of `repeats` in ms (after one
    warm-up call). Returns a DataFrame with columns T, max_abs_diff, sequential_ms, parallel_ms,
    speedup (sequential / parallel: above 1 the parallel scan wins). On `device` (lab.training.train.resolve_device:
    CUDA when there is one), where the answer differs."""
    if not lengths or any(not isinstance(T, int) or not 1 <= T <= MAX_RACE_LENGTH for T in lengths):
        raise LabError(f"lengths: need integers in [1, {MAX_RACE_LENGTH}], got {lengths!r}")
    device = resolve_device(device)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    with torch.no_grad():
        for T in lengths:
            a = torch.rand(batch, T, hidden, generator=generator).to(device)  # (B, T, H) keep gates
            b = torch.randn(batch, T, hidden, generator=generator).to(device)  # (B, T, H) what each step writes
            looped, scanned = scan_sequential(a, b), scan_parallel(a, b)  # also the warm-up
            sequential = _best_seconds(lambda: scan_sequential(a, b), repeats, device)
            parallel = _best_seconds(lambda: scan_parallel(a, b), repeats, device)
            rows.append(
                {
                    "T": T,
                    "max_abs_diff": float((looped - scanned).abs().max()),
                    "sequential_ms": 1000 * sequential,
                    "parallel_ms": 1000 * parallel,
                    "speedup": sequential / parallel,
                }
            )
    return pd.DataFrame(rows)
