"""lab.training.process: readying a process to train (configure_cpu's malloc settings are glibc's, Linux)."""

import resource
import subprocess
import sys
from pathlib import Path

import pytest

_FAULTS_PER_STEP = """
import os, resource, sys, torch
from lab.training.process import configure_cpu
if sys.argv[1] == "configured":
    assert configure_cpu(2) == min(2, len(os.sched_getaffinity(0)))
def step():  # three 16 MB buffers, written and freed, as a training step's saved gates are
    buffers = [torch.empty(4 << 20).fill_(1.0) for _ in range(3)]
for _ in range(3):
    step()
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) // 10)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc settings are glibc's (Linux)")
def test_configure_cpu_keeps_freed_buffers_for_the_next_step():
    def faults_per_step(mode):
        done = subprocess.run(
            [sys.executable, "-c", _FAULTS_PER_STEP, mode],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout)

    pages_per_step = 3 * (16 << 20) // resource.getpagesize()
    configured = faults_per_step("configured")
    # the buffers are reused, not page-faulted in afresh: a few pages per step, not all 12,288 of them
    assert configured < pages_per_step // 10, (configured, faults_per_step("default"))
