"""Readying a process to train: its CPU threads and malloc tuned, and PyTorch's lazy start-up paid in advance.

    configure_cpu(threads)     threads capped to the usable cores, freed training buffers kept for reuse
    cap_malloc_arenas(n)       at most n malloc arenas, before a process's training threads start
    usable_cores()             the cores this process may run on
    train_two_tiny_steps()     a warm-up: two steps of a tiny model, before a first student's Start

The CLI, the app, the background workers and the benchmarks call these once, before training; the loop
itself (lab.training.train) never does.
"""

import ctypes
import os
import sys

import torch

from lab.training.train import TrainConfig, train

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h


def _glibc_mallopt():
    """glibc's mallopt, or None: another platform, or a libc without it (musl's ignores it anyway)."""
    return getattr(ctypes.CDLL(None), "mallopt", None) if sys.platform.startswith("linux") else None


def cap_malloc_arenas(arenas):
    """At most `arenas` malloc arenas in this process, on Linux. glibc gives a thread that finds the
    others' arenas busy one of its own (up to 8 per core), and memory freed in an arena stays with it:
    four race runs, each a thread of one process, added 326 MB where with two arenas they added 200 MB
    (benchmarks/job_memory.py, BENCHMARKS.md). Call it before the threads start."""
    mallopt = _glibc_mallopt()
    if mallopt:
        mallopt(_M_ARENA_MAX, max(1, arenas))


def usable_cores():
    """The cores this process may run on (containers report the host's in os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def configure_cpu(max_threads=4):
    """Set this process up to train on the CPU; returns the number of threads.

    Threads: PyTorch's are capped to the cores this process may use (containers
    report the host's). Memory, on Linux: a training step frees buffers of several
    MB (a layer's saved gates and their gradients) and asks for the same sizes on
    the next step. By default glibc's malloc hands much of that back to the OS, so
    every step page-faults it in afresh (27,000-36,000 faults per step of
    benchmarks/cells.py's cells). Keeping blocks up to 64 MB on the heap and up to
    256 MB of it free for reuse, as jemalloc or tcmalloc would, removes most of
    that (BENCHMARKS-HISTORY.md). The cost: memory a job has freed stays with the process,
    for the next step or job, instead of going back to the OS.
    """
    threads = max(1, min(usable_cores(), max_threads))
    torch.set_num_threads(threads)
    mallopt = _glibc_mallopt()
    if mallopt:
        # 64 MB covers an LSTM's (T, B, 4H) gates at B=64, T=128, H=256; 32 MB where glibc refuses more
        mallopt(_M_MMAP_THRESHOLD, 64 << 20) or mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    return threads


def train_two_tiny_steps(emit=None, should_stop=None):
    """Two steps of a tiny model: PyTorch initialises autograd, the optimiser and its kernels lazily (about
    a second on a busy CPU), which a server does before its first student's Start (ui.app.warm_up)."""
    from lab.nets.models import LMConfig, build_model
    from lab.training.tasks import LMTask

    task = LMTask.from_text("to be or not to be " * 20, "char")
    model = build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=4, hidden_size=8), seed=0)
    train(model, task, TrainConfig(max_steps=2, batch_size=2, block_size=8, eval_windows=2), emit, should_stop)
