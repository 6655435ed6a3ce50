"""One step of a recurrent cell, equation by equation, with the numbers the cell computed.

Glossary: T time (tokens of the text), t a step counted from 1 (the step that reads token t),
I input features, H hidden units.

    steps = step_through(model, tokenizer, "To be, or not")
    step = steps.step(4)                  # the step that reads the fourth token, "b"
    step.values["z"]                      # (H,) the update gate at that step
    [e.writes for e in step.equations]    # [("r",), ("z",), ("n",), ("h",)] for a GRU
    step.table(step.equations[-1], [0, 1, 2])   # units 0-2: z, h_{t-1}, n and h side by side

Nothing here computes a gate. Every number is the reference cell's own, recorded by one
pass of lab.instruments.introspect.trace_text (lab/nets/cells.py's forward, its docstring's equations line
by line) and read at step t: the layer's input x_t (layer 0: the token's embedding), the
state the step starts from (h_{t-1}, and the LSTM's c_{t-1}: the trace at t - 1, zeros at
t = 1), every gate, the candidate and the new state. The scan's e_t is the scan layer's own
input projection of x_t (ScanLayer.in_proj, the identity when the widths match).
tests/test_stepping.py checks that the new state is the state the model's own forward pass
(any backend) returns after t tokens.
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd
import torch

from lab.errors import LabError
from lab.instruments.introspect import GateTrace, trace_text
from lab.nets.families import FAMILIES
from lab.nets.models import recurrent_layers

MAX_STEP_TOKENS = 400  # a text to step through by hand, not a corpus


@dataclass
class RecurrentStep:
    """Step t of one layer, every value of its equations, as numpy."""

    t: int  # 1..T: the step that reads token t
    token: str  # that token's text
    cell: str  # its family's id (lab.nets.families.FAMILIES)
    convention: str  # the layer's equations in one line
    x: np.ndarray  # (I,) the layer's input at step t (layer 0: the token's embedding)
    values: dict  # name -> (H,): h_prev (and c_prev), every traced gate and state, e for the scan
    equations: tuple  # lab.nets.equations.Equation per line of the cell's equations

    @property
    def keep(self):
        """(H,) the factor that multiplies the old memory (its family's keep: 1 - z in the seeds' GRU, z in
        PyTorch's, f, A, ...), or None for the vanilla RNN, which has none."""
        keep = FAMILIES[self.cell].keep
        return keep(self.values) if keep else None

    def table(self, equation, units):
        """One equation's numbers for some units: a row per unit, its reads then its writes."""
        units = list(units)
        return pd.DataFrame(
            {"unit": units, **{name: self.values[name][units] for name in equation.reads + equation.writes}}
        )


@dataclass
class SteppedText:
    """One layer's pass over a text, ready to be read a step at a time."""

    trace: GateTrace
    layer: int
    projected: Optional[np.ndarray]  # (T, H) the scan's e_t; None for the other cells

    @property
    def length(self):
        return len(self.trace.token_ids)

    def step(self, t):
        """RecurrentStep for step t (1..length); ValueError naming the valid range."""
        if not isinstance(t, (int, np.integer)) or not 1 <= t <= self.length:
            raise LabError(f"step: {t!r} is out of range; this text has steps 1..{self.length}")
        gates, cell = self.trace.gates(self.layer), self.trace.cells[self.layer]
        values = {name: gates[name][t - 1] for name in self.trace.gate_names[self.layer]}
        for state in ("h", "c"):  # the state this step starts from: zeros before the first token
            if state in gates:
                values[f"{state}_prev"] = gates[state][t - 2] if t > 1 else np.zeros_like(gates[state][0])
        if self.projected is not None:
            values["e"] = self.projected[t - 1]
        return RecurrentStep(
            t=int(t),
            token=self.trace.token_texts[t - 1],
            cell=cell,
            convention=self.trace.conventions[self.layer],
            x=self.trace.inputs[self.layer][t - 1],
            values=values,
            equations=FAMILIES[cell].equations,
        )


def step_through(model, tokenizer, text, layer=0, max_tokens=MAX_STEP_TOKENS):
    """Read `text` once from the zero state through the reference cells and keep every value
    of one layer's equations at every step -> SteppedText (`.step(t)` for one step).

    ValueError for an empty text, characters outside the vocabulary, more than `max_tokens`
    tokens, or a layer the model does not have."""
    trace = trace_text(model, tokenizer, text, max_tokens)
    trace.gates(layer)  # ValueError naming the valid layers
    projected = None
    scan = recurrent_layers(model)[layer]
    if hasattr(scan, "in_proj"):  # the selective scan: its gates and update read e_t, x_t projected
        p = next(scan.parameters())
        with torch.no_grad():
            x = torch.from_numpy(trace.inputs[layer]).to(p.device, p.dtype)  # (T, I)
            projected = scan.in_proj(x).float().cpu().numpy()  # (T, H)
    return SteppedText(trace, layer, projected)
