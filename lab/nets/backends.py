"""Backends: the same cell computed three ways, chosen by name (registry `BACKENDS`).

    reference  lab/nets/cells.py: the equations line by line, autograd's backward pass.
               Gate traces and "Show code" always come from here.
    fast       lab/nets/kernels.py: the same parameters and function, loops optimised and
               the LSTM's and PyTorch-convention GRU's backward passes written by hand.
    fused      torch.nn.RNN / GRU / LSTM (oneDNN on a CPU, cuDNN on a GPU), behind the
               same contract (FusedLayer); only for the cells torch.nn has.

`default_backend(cell, device)` is the fastest measured on a device type, the
training default of the CLI and the Train page.
"""

import functools
import inspect

import torch
import torch.nn as nn

from lab.errors import LabError
from lab.nets.families import CELLS, FAMILIES
from lab.nets.randomness import initialise

FUSED_MODULES = {f.id: f.fused for f in FAMILIES.values() if f.fused}


class FusedLayer(nn.Module):
    """One torch.nn.RNN/GRU/LSTM layer behind the lab contract.

    Initialised exactly like its reference twin; it cannot trace gates, so the
    introspection tools run `to_reference()` first, which computes the same function.
    """

    def __init__(self, cell, input_size, hidden_size, keep_bias=1.0, chrono_tmax=None):
        super().__init__()
        if cell not in FUSED_MODULES:
            raise LabError(f"backend 'fused' supports cells {sorted(FUSED_MODULES)}, not {cell!r}")
        self.cell, self.input_size, self.hidden_size = cell, input_size, hidden_size
        self.keep_bias, self.chrono_tmax = keep_bias, chrono_tmax
        self.rnn = FUSED_MODULES[cell](input_size, hidden_size, batch_first=True)
        twin = CELLS[cell](input_size, hidden_size, keep_bias, chrono_tmax)
        self.load_reference(twin)
        self.gate_names = twin.gate_names

    def reset_parameters(self, generator=None):
        """The draws of the constructor, from `generator`: torch.nn's own initialisation (then replaced), the twin's."""
        initialise(self.rnn, generator)
        with torch.device("meta"):
            twin = CELLS[self.cell](self.input_size, self.hidden_size, self.keep_bias, self.chrono_tmax)
        twin.to_empty(device=self.rnn.weight_ih_l0.device).reset_parameters(generator)
        self.load_reference(twin)

    def load_reference(self, layer):
        """Copy a reference (or fast) layer's weights in (one lab bias -> b_ih, b_hh = 0)."""
        with torch.no_grad():
            self.rnn.weight_ih_l0.copy_(layer.weight_ih)
            self.rnn.weight_hh_l0.copy_(layer.weight_hh)
            self.rnn.bias_ih_l0.copy_(layer.bias)
            if layer.bias_hh is not None:
                self.rnn.bias_hh_l0.copy_(layer.bias_hh)
            else:  # zero_, not zeros_like: on the meta device that imports PyTorch's compiler stack
                self.rnn.bias_hh_l0.zero_()

    def to_reference(self):
        """The reference layer computing the same function (b = b_ih + b_hh where it has one bias)."""
        rnn = self.rnn
        weights = {"weight_ih": rnn.weight_ih_l0, "weight_hh": rnn.weight_hh_l0}
        layer = shapes_only_reference_layer(self.cell, self.input_size, self.hidden_size)
        if layer.bias_hh is not None:
            weights.update(bias=rnn.bias_ih_l0, bias_hh=rnn.bias_hh_l0)
        else:
            weights.update(bias=rnn.bias_ih_l0 + rnn.bias_hh_l0)
        return filled(layer, weights)

    def forward(self, x, state=None, trace=None):
        if trace is not None:
            raise LabError("fused layers cannot trace gates; trace the reference twin (to_reference())")
        if state is None:
            out, state = self.rnn(x)
        elif isinstance(state, tuple):
            out, state = self.rnn(x, tuple(s.unsqueeze(0).contiguous() for s in state))
        else:
            out, state = self.rnn(x, state.unsqueeze(0).contiguous())
        if isinstance(state, tuple):
            return out, tuple(s.squeeze(0) for s in state)
        return out, state.squeeze(0)


BACKENDS = {
    "reference": CELLS,
    "fast": {f.id: f.fast for f in FAMILIES.values()},
    "fused": {cell: functools.partial(FusedLayer, cell) for cell in FUSED_MODULES},
}


def check_cell(cell, backend="fast"):
    """ValueError naming the field unless `backend` computes `cell`."""
    if cell not in CELLS:
        raise LabError(f"cell: unknown cell {cell!r}; valid cells are {sorted(CELLS)}")
    if backend not in BACKENDS:
        raise LabError(f"backend: unknown backend {backend!r}; valid backends are {list(BACKENDS)}")
    if cell not in BACKENDS[backend]:
        raise LabError(f"backend: {backend!r} exists only for cells {sorted(BACKENDS[backend])}, not {cell!r}")


FUSED_ON_CPU = {"lstm"}  # cells whose torch.nn kernel beats the fast backend on a CPU (BENCHMARKS.md run 15)


def default_backend(cell, device="cpu"):
    """The training default for `cell` on `device` (a torch.device or its name): the fastest measured.

    On CUDA, torch.nn's cuDNN kernels where they exist. On a CPU, `fast`, except for the LSTM:
    BENCHMARKS.md (run 15, torch 2.15, 2 threads, B=64, T=128, H=256) measures the fast GRU at
    0.87x nn.GRU's step time but the fast LSTM at 1.72x nn.LSTM's (torch's CPU LSTM got faster;
    runs 6-13 on an older torch had 1.08-1.18x).
    """
    if cell in FUSED_MODULES and (torch.device(device).type == "cuda" or cell in FUSED_ON_CPU):
        return "fused"
    return "fast"


def default_scan_mode(device="cpu"):
    """The scan's faster form on `device`: the parallel scan on CUDA, where its log2(T) rounds spread over
    thousands of cores; the loop on a CPU, where the parallel form measured 5.7-15.9x slower (BENCHMARKS-HISTORY.md)."""
    return "parallel" if torch.device(device).type == "cuda" else "sequential"


def make_layer(
    cell,
    input_size,
    hidden_size,
    backend="fast",
    keep_bias=1.0,
    chrono_tmax=None,
    scan_mode="parallel",
    gate_hidden=None,
):
    """Build one recurrent layer from the registry, given the options its form takes (the gated cells a keep
    bias, the scans a scan mode, the selective scan its gate's width): read from the form's own signature."""
    check_cell(cell, backend)
    form = BACKENDS[backend][cell]
    options = dict(keep_bias=keep_bias, chrono_tmax=chrono_tmax, scan_mode=scan_mode, gate_hidden=gate_hidden)
    taken = inspect.signature(form).parameters
    return form(input_size, hidden_size, **{name: value for name, value in options.items() if name in taken})


def to_reference_layer(layer):
    """The reference layer computing the same function as `layer` (of any backend); itself if it is one."""
    if isinstance(layer, FusedLayer):
        return layer.to_reference()
    reference = CELLS[layer.cell]
    if type(layer) is reference:
        return layer
    twin = shapes_only_reference_layer(layer.cell, layer.input_size, layer.hidden_size)
    return filled(twin, layer.state_dict())  # fast layers share the reference's parameters' names


# A twin is built on the meta device and given copies of the weights (load_state_dict's assign): no
# initialisation runs (the orthogonal one of a 2x640 LSTM's twin took 0.7 s of a first Gates visit),
# and no Module.to_empty, which on the meta device imports PyTorch's compiler stack (about 1 s)


def shapes_only_reference_layer(cell, input_size, hidden_size):
    with torch.device("meta"):
        return CELLS[cell](input_size, hidden_size)


def filled(layer, weights):
    """`layer` (on the meta device) holding copies of `weights`, every one of its state dict's entries."""
    layer.load_state_dict({name: w.detach().clone() for name, w in weights.items()}, assign=True)
    return layer
