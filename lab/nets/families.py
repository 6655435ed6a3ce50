"""One record per cell family: every fact about a cell that the rest of the lab reads, written once.

A family's record names it for students, gives its colour on every chart, its equations (LaTeX, one
per line of its reference `forward`; tests/test_cells.py runs them, and the docstring's, against the
cell), the gate that keeps its memory, its three forms (reference, fast, fused) and what its training
step costs. Adding a cell is writing its reference and fast forms and its record here; the pages, the
CLI, the instruments and the lessons list FAMILIES and read the record.
"""

import functools
from dataclasses import dataclass
from typing import Callable, Optional

import torch.nn as nn

from lab.nets import cells, kernels
from lab.nets.equations import parsed, plain

# the races a family may run in, each with its runners all at one parameter count (lab.instruments.race)
RACES = {
    "memory": "the toy tasks' race: the Train page's memory race and lesson 10's toy tasks (lab.experiments.probe)",
    "text": "the Train page's race on text, at the parameter count of the page's model",
}


@dataclass(frozen=True)
class CellFamily:
    id: str  # the name in checkpoints, links and the CLI
    name: str  # what a student reads, everywhere
    origin: str  # where the convention comes from, in plain words (the Train page's list of cells)
    colour: str  # its colour on every chart
    note: str  # one line for a student, Markdown
    latex: tuple  # its equations, one per line of the reference forward's loop
    reference: type  # lab.nets.cells: the equations, line by line
    fast: type  # lab.nets.kernels: the same function, faster
    fused: Optional[type] = None  # the torch.nn module computing the same function, if there is one
    # its fast form trains under bfloat16 autocast (lab.training.train.resolve_amp): a plain autograd loop does,
    # a hand-written backward into float32 buffers does not, nor a scan (its products over a text in 8 bits)
    fast_autocasts: bool = False
    no_fused_because: str = "PyTorch has no such built-in layer"
    keep: Optional[Callable] = None  # a layer's trace (name -> values) -> the factor multiplying the old memory
    keep_label: str = ""  # that factor as the equations write it
    keep_bias: Optional[Callable] = None  # a reference layer -> the bias b with keep = sigmoid(W x + U h + b)
    memory: str = "h"  # the state a unit's memory lives in: h, or the LSTM's cell state c
    candidate: str = "tanh candidate"  # what its candidate (n, or the LSTM's g) is, on the Gates page
    besides_keeping: str = ""  # what one step does besides keeping a share of the old state
    forgets_a_symbol_because: str = "has no gate that reads its state"  # the memory race, for ungated cells
    # float32 values autograd saves per token and hidden unit of one layer for the backward pass (gates,
    # candidates, states, the input projection), the larger of its backends: measured with
    # torch.autograd.graph.saved_tensors_hooks (tests/test_cost.py keeps the estimate within 1x-3x of that)
    saved_per_unit: int = 0
    kind: str = ""  # families of one kind (the two GRU conventions) are shown side by side; "" = its own
    # the races it runs in (keys of RACES), at most one family of each kind in a race: the two GRU conventions
    # race as PyTorch's alone
    races: tuple = tuple(RACES)
    bundled: str = ""  # the bundled character model that shows the cell at work

    def __post_init__(self):
        unknown = sorted(set(self.races) - set(RACES))
        if unknown:
            raise ValueError(f"{self.id}: unknown race {unknown[0]!r}; the races are {', '.join(RACES)}")

    @functools.cached_property  # parsed once: the step-through reads it at every step
    def equations(self):
        return tuple(parsed(line) for line in self.latex)

    @functools.cached_property
    def gates(self):
        """The gates its equations compute, the per-unit values a σ line writes ("r", "z"): () for the vanilla
        RNN, which has none. What a page may tell a student to watch move."""
        return tuple(name for e in self.equations if not e.updates_state and r"\sigma" in e.latex for name in e.writes)

    @property
    def gates_read_state(self):
        return self.reference.gates_read_state

    @functools.cached_property
    def convention(self):
        """One line of plain text: the name, then how the state is updated."""
        updates = [plain(e.latex) for e in self.equations if e.updates_state]
        return f"{self.name}: " + ", ".join(updates)


_GRU_KEEPS = "of its old state and takes the rest from its candidate"
_SCAN_LIKE = "has gates that read only the current symbol, which looks to them like any other"

FAMILIES = {
    f.id: f
    for f in (
        CellFamily(
            "rnn",
            "vanilla RNN",
            "no gates",
            "#7f7f7f",
            "The plainest recurrence: one matrix remembers, and no gate protects the memory: every step squashes "
            "the whole state through tanh.",
            (r"h_t = \tanh(W_{xh} x_t + W_{hh} h_{t-1} + b_h)",),
            cells.RNNLayer,
            kernels.FastRNNLayer,
            fused=nn.RNN,
            fast_autocasts=True,
            forgets_a_symbol_because="rewrites its whole state at every step, so the symbol fades under the ones "
            "after it",
            saved_per_unit=3,
            bundled="char-rnn_latest",
        ),
        CellFamily(
            "gru_seed",
            "GRU (z overwrites)",
            "the convention of Scribe-α",
            "#1f77b4",
            "The GRU of Scribe-α, the bundled subword model, and of the Character GRU (z overwrites). The update "
            "gate z says how much to **overwrite**: z → 0 keeps the memory. The reset gate acts *before* U_h, "
            "inside the matrix product; the candidate h̃ is the gate the Gates page calls n.",
            (
                r"r_t = \sigma(W_r x_t + U_r h_{t-1} + b_r)",
                r"z_t = \sigma(W_z x_t + U_z h_{t-1} + b_z)",
                r"\tilde h_t = \tanh\big(W_h x_t + U_h (r_t \odot h_{t-1}) + b_h\big)",
                r"h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t",
            ),
            cells.SeedGRULayer,
            kernels.FastSeedGRULayer,
            fast_autocasts=True,
            no_fused_because="PyTorch's built-in GRU computes the other convention (z keeps), not this cell's "
            "(z overwrites)",
            keep=lambda trace: 1 - trace["z"],
            keep_label="1 - z",
            keep_bias=lambda layer: -layer.bias.chunk(3)[1],  # keep = 1 - sigmoid(b_z) = sigmoid(-b_z)
            besides_keeping=_GRU_KEEPS,
            saved_per_unit=7,
            kind="gru",
            races=(),  # its kind races as the GRU in PyTorch's convention
            bundled="char-gru-seed_latest",
        ),
        CellFamily(
            "gru_torch",
            "GRU (z keeps)",
            "PyTorch's convention",
            "#17becf",
            "PyTorch's own GRU, the Character GRU (z keeps) and the GRU of the Ablation page's gate-bias study "
            "(1024-step pixel sequences). Here z says how much to **keep**: z → 1 keeps the memory, so that "
            "study's bias +1 means *remember more*. The reset gate multiplies (W_hn h + b_hn) *after* the matrix "
            "product.",
            (
                r"r_t = \sigma(W_{ir} x_t + b_{ir} + W_{hr} h_{t-1} + b_{hr})",
                r"z_t = \sigma(W_{iz} x_t + b_{iz} + W_{hz} h_{t-1} + b_{hz})",
                r"n_t = \tanh\big(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})\big)",
                r"h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}",
            ),
            cells.TorchGRULayer,
            kernels.FastTorchGRULayer,
            fused=nn.GRU,
            keep=lambda trace: trace["z"],
            keep_label="z",
            keep_bias=lambda layer: layer.bias.chunk(3)[1] + layer.bias_hh.chunk(3)[1],  # b_iz + b_hz
            besides_keeping=_GRU_KEEPS,
            saved_per_unit=9,
            kind="gru",
            bundled="char-gru-torch_latest",
        ),
        CellFamily(
            "lstm",
            "LSTM",
            "the standard LSTM",
            "#d62728",
            "The standard LSTM, the cell of the Character LSTM and of the large character LSTM preset for a GPU: "
            "a separate cell state c_t, which the forget gate f **keeps** (its bias starts at 1); f = 1 holds it "
            "untouched, which no GRU can.",
            (
                r"i_t = \sigma(W_i x_t + U_i h_{t-1} + b_i)",
                r"f_t = \sigma(W_f x_t + U_f h_{t-1} + b_f)",
                r"g_t = \tanh(W_g x_t + U_g h_{t-1} + b_g)",
                r"o_t = \sigma(W_o x_t + U_o h_{t-1} + b_o)",
                r"c_t = f_t \odot c_{t-1} + i_t \odot g_t",
                r"h_t = o_t \odot \tanh(c_t)",
            ),
            cells.LSTMLayer,
            kernels.FastLSTMLayer,
            fused=nn.LSTM,
            keep=lambda trace: trace["f"],
            keep_label="f (cell state c)",
            keep_bias=lambda layer: layer.bias.chunk(4)[1],  # b_f
            memory="c",
            besides_keeping="of its cell state c and adds i_t ⊙ g_t on top, a separate gate's share of its candidate",
            saved_per_unit=20,
            bundled="char-lstm_latest",
        ),
        CellFamily(
            "scan",
            "selective scan",
            "Mamba-style",
            "#2ca02c",
            "A Mamba-style selective recurrence, trained on character n-grams: the gates depend on the input "
            "only, never on h, so the recurrence is linear and runs as a parallel associative scan. A **keeps**, "
            "B writes; the gate is a small network (H → 4H → 2H) of the input e_t.",
            (
                r"[A_t, B_t] = \sigma\big(\mathrm{gate}(e_t)\big)",
                r"h_t = A_t \odot h_{t-1} + B_t \odot e_t",
            ),
            cells.ScanLayer,
            cells.ScanLayer,  # one form serves both: its gates read no state, so no recurrent matmul is left
            no_fused_because="PyTorch has no built-in selective scan",
            keep=lambda trace: trace["A"],
            keep_label="A",
            besides_keeping="of its old state and adds B_t ⊙ e_t on top, a separate gate's share of its input",
            forgets_a_symbol_because=_SCAN_LIKE,
            saved_per_unit=22,
            bundled="char-scan_latest",
        ),
        CellFamily(
            "min_gru",
            "minGRU",
            "a GRU whose gates read only the input",
            "#9467bd",
            "A GRU stripped to what a scan can compute: **z overwrites**, as in Scribe-α's GRU, but z and the "
            "candidate read the input only, never h, so a whole text trains as one parallel scan.",
            (
                r"z_t = \sigma(W_z x_t + b_z)",
                r"\tilde h_t = W_h x_t + b_h",
                r"h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t",
            ),
            cells.MinGRULayer,
            kernels.FastMinGRULayer,
            candidate="linear candidate",
            no_fused_because="PyTorch has no built-in minGRU",
            keep=lambda trace: 1 - trace["z"],
            keep_label="1 - z",
            keep_bias=lambda layer: -layer.bias.chunk(2)[0],  # keep = 1 - sigmoid(b_z) = sigmoid(-b_z)
            besides_keeping=_GRU_KEEPS,
            forgets_a_symbol_because=_SCAN_LIKE,
            # at the parameter count of the page's model a minimal cell is 4-5 times as wide as the GRU (no U), and
            # its training step needs 5-6 times the memory: a text race with it does not fit a session's share of
            # a 1 GB server (620 MB against 512 MB at the page's defaults, BENCHMARKS.md)
            races=("memory",),
            saved_per_unit=15,
            bundled="char-min-gru_latest",
        ),
        CellFamily(
            "min_lstm",
            "minLSTM",
            "an LSTM whose gates read only the input",
            "#e377c2",
            "An LSTM stripped to what a scan can compute: **f keeps**, shared with i so the two add up to 1, "
            "and every gate reads the input only, so a whole text trains as one parallel scan.",
            (
                r"f_t = \sigma(W_f x_t + b_f)",
                r"i_t = \sigma(W_i x_t + b_i)",
                r"\tilde h_t = W_h x_t + b_h",
                r"h_t = (f_t \odot h_{t-1} + i_t \odot \tilde h_t) / (f_t + i_t)",
            ),
            cells.MinLSTMLayer,
            kernels.FastMinLSTMLayer,
            candidate="linear candidate",
            no_fused_because="PyTorch has no built-in minLSTM",
            keep=lambda trace: trace["f"] / (trace["f"] + trace["i"]),
            keep_label="f / (f + i)",
            besides_keeping="of its old state and takes the rest from its candidate, the input gate's share",
            forgets_a_symbol_because=_SCAN_LIKE,
            # at the parameter count of the page's model a minimal cell is 4-5 times as wide as the GRU (no U), and
            # its training step needs 5-6 times the memory: a text race with it does not fit a session's share of
            # a 1 GB server (620 MB against 512 MB at the page's defaults, BENCHMARKS.md)
            races=("memory",),
            saved_per_unit=19,
        ),
    )
}
# the reference form of every family: the registry the models, tests and tools index by id
CELLS = {f.id: f.reference for f in FAMILIES.values()}


def name(cell):
    """What a student reads for a cell id; an id no family has (an old file's) reads as itself."""
    return FAMILIES[cell].name if cell in FAMILIES else cell


def keeps_with_gates(cell):
    """True for a cell whose gates read its state (the GRUs, the LSTM): it can shut them on what it holds
    and keep it. The RNN has no gate; the scans' gates (selective scan, minGRU, minLSTM) read only the input."""
    f = FAMILIES.get(cell)
    return f is not None and f.keep is not None and f.gates_read_state


def racers(race):
    """The runners of `race` (a key of RACES): the families whose record says they run in it, in FAMILIES' order."""
    if race not in RACES:
        raise ValueError(f"unknown race {race!r}; the races are {', '.join(RACES)}")
    return tuple(f.id for f in FAMILIES.values() if race in f.races)


def text_racers():
    """The runners of the Train page's text race."""
    return racers("text")


def kinds():
    """The families grouped by kind, in FAMILIES' order: {kind: (family, ...)}; families of one kind
    (the two GRU conventions) share a group, every other family has its own."""
    groups = {}
    for f in FAMILIES.values():
        groups.setdefault(f.kind or f.id, []).append(f)
    return {kind: tuple(members) for kind, members in groups.items()}
