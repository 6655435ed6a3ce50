"""A checkpoint a student uploads, read as one job of the server's training budget.

Reading an upload holds its bytes (the browser's upload, then a copy) and, at its peak, the weights
decoded and the model built: ~3-5x a float16 file's bytes over them, measured on the bundled LSTM
(9.8 MB: +30 to +50 MB peak, benchmarks/job_memory.py). A page charges the budget for it while it
reads, so that thirty students uploading at once queue like thirty runs instead of taking the server's
memory.
"""

import time

from lab.server.capacity import CapacityError, server_budget
from lab.training.checkpoints import load_checkpoint

UPLOAD_COST_PER_MB = 5
UPLOAD_WAIT_SECONDS = 30.0


def load_upload(data, owner, budget=None, wait_seconds=UPLOAD_WAIT_SECONDS):
    """load_checkpoint(data) on the CPU as one admitted job of the server's budget (lab.server.capacity), so
    that uploads are counted like runs: it waits up to `wait_seconds` for room, then CapacityError."""
    budget = budget or server_budget()
    ticket = budget.request(UPLOAD_COST_PER_MB * len(data) / 2**20, owner, "reading an uploaded checkpoint")
    deadline = time.monotonic() + wait_seconds
    try:
        if not ticket.wait(lambda: time.monotonic() > deadline):
            raise CapacityError(
                f"upload: the server's training budget has had no room for {wait_seconds:.0f} s; "
                "try again when a run has ended"
            )
        return load_checkpoint(data, "cpu")
    finally:
        ticket.release()
