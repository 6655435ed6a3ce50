"""A run's randomness is its own: a run is a function of its settings and seed, even beside other runs in the
same process (a class's server trains dozens in threads of one process, where torch's process-wide generator
belongs to nobody: whoever draws next changes everyone else's numbers).

    model = seeded_build(build, seed)            initial weights: the same for the same seed, whatever else runs
    with drawing_from(generator):                dropout masks while a run trains: from the run's generator
        logits = model(x)

A constructor draws its weights from the process-wide generator, which any thread may draw from or reseed at
any moment. So a seeded build draws nothing there: the model is built on the meta device (shapes only), then
`initialise` draws every parameter from a generator of the run's own, seeded by `seed`, with the draws the
constructors make, in their order: the weights equal those of `torch.manual_seed(seed); build()` in a quiet
process, bit for bit (tests/test_determinism.py). What a model draws while it trains (dropout, DropConnect)
comes from the generator the run hands `drawing_from` for its thread (lab.training.train).
"""

import contextlib
import math
import threading

import torch
import torch.nn.functional as F
from torch import nn

_drawing = threading.local()


def seeded_build(build, seed):
    """`build()` (a model's constructor), its parameters drawn from a generator seeded by `seed` alone."""
    with torch.device("meta"):
        model = build()
    model.to_empty(device="cpu")
    initialise(model, torch.Generator().manual_seed(seed))
    return model


def initialise(module, generator):
    """Draw `module`'s parameters from `generator` as its constructors draw them from torch's, in the same order:
    children in the order they were built, each lab module by its own reset_parameters(generator), each of
    torch's by the initialisation its reset_parameters gives it."""
    reset = getattr(module, "reset_parameters", None)
    if isinstance(module, nn.Linear):
        nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
        if module.bias is not None:
            bound = 1 / math.sqrt(module.in_features) if module.in_features > 0 else 0
            nn.init.uniform_(module.bias, -bound, bound, generator=generator)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, generator=generator)
    elif isinstance(module, nn.RNNBase):
        bound = 1 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0
        for weight in module.parameters():
            nn.init.uniform_(weight, -bound, bound, generator=generator)
    elif isinstance(module, nn.LayerNorm):
        module.reset_parameters()  # ones and zeros: nothing drawn
    elif reset is not None and type(module).__module__.startswith("lab."):
        reset(generator=generator)  # covers the module's own parameters and those of its children
    elif any(True for _ in module.parameters(recurse=False)):
        raise TypeError(f"{type(module).__name__} has parameters initialise cannot draw")
    else:
        for child in module.children():
            initialise(child, generator)


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
