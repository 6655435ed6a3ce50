"""A run's randomness is its own: a run is a function of its settings and seed, even beside other runs in the
same process (a class's server trains dozens in threads of one process, where torch's process-wide generator
belongs to nobody: whoever draws next changes everyone else's numbers).

    model = seeded_build(build, seed)            initial weights: the same for the same seed, whatever else runs
    with drawing_from(generator):                dropout masks while a run trains: from the run's generator
        logits = model(x)

Initialisation goes through torch.nn's own initialisers, which draw from the process-wide generator: each build
seeds it under one lock, inside torch.random.fork_rng, so the caller's state is left as it was, and no build's
draws interleave with another's. What a model draws while it trains (dropout, DropConnect) comes from the
generator the run hands `drawing_from` for its thread (lab.training.train), never from the process-wide one.
"""

import contextlib
import threading

import torch
import torch.nn.functional as F
from torch import nn

_BUILD_LOCK = threading.Lock()
_drawing = threading.local()


def seeded_build(build, seed):
    """`build()` (a model's constructor) with torch's generator seeded by `seed`, under one process-wide lock,
    the generator's state put back afterwards."""
    with _BUILD_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


@contextlib.contextmanager
def drawing_from(generator):
    """Dropout masks drawn in this thread come from `generator` (on the model's device) until the block ends."""
    previous = getattr(_drawing, "generator", None)
    _drawing.generator = generator
    try:
        yield
    finally:
        _drawing.generator = previous


def dropout(x, p, training=True):
    """Inverted dropout: zero each element with probability p, scale the rest by 1/(1-p). The mask comes from
    the generator `drawing_from` set for this thread, else (outside a run: a student's own script) from torch's."""
    if not training or p == 0:
        return x
    generator = getattr(_drawing, "generator", None)
    if generator is None:
        return F.dropout(x, p, True)
    keep = torch.empty_like(x).bernoulli_(1 - p, generator=generator)
    return x * keep / (1 - p)


class Dropout(nn.Module):
    """nn.Dropout drawing its masks through `dropout` (the run's generator)."""

    def __init__(self, p=0.0):
        super().__init__()
        self.p = p

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
