"""Each cell of lab.nets.cells as the pages show it: its name, its colour on every chart, a note on its
convention and its equations as one LaTeX block; and each backend (lab.nets.backends) in plain words."""

from lab.nets.cells import CELLS

# one colour per cell family, the same on every chart
CELL_COLOURS = {"rnn": "#7f7f7f", "gru_seed": "#1f77b4", "gru_torch": "#17becf", "lstm": "#d62728", "scan": "#2ca02c"}
CELL_NAMES = {
    "rnn": "vanilla RNN",
    "gru_seed": "GRU (z overwrites)",
    "gru_torch": "GRU (z keeps)",
    "lstm": "LSTM",
    "scan": "selective scan",
}
CELL_NOTES = {
    "rnn": "No gate: every step squashes the whole state through tanh.",
    "gru_seed": "The convention of Scribe-α and the Character GRU (z overwrites): **z overwrites**, z → 0 keeps "
    "the memory; the reset gate acts before U_h. The candidate h̃ is the trace's gate n.",
    "gru_torch": "PyTorch's convention (its built-in GRU, and the Ablation page's study): **z keeps**, z → 1 keeps "
    "the memory; the reset gate multiplies W_hn h + b_hn.",
    "lstm": "The standard LSTM: **f keeps** the cell state c; f = 1 holds it untouched, which no GRU can.",
    "scan": "A Mamba-style selective scan: the gates read the input only, never h, so the recurrence is an "
    "associative scan; **A keeps**.",
}

# lab.nets.backends.BACKENDS' keys (kept as the widgets' values and in links) -> what a student reads
BACKEND_LABELS = {
    "reference": "step by step, as the equations read",
    "fast": "fast (the same equations, optimised)",
    "fused": "fused (PyTorch's built-in)",
}


def backend_label(backend):
    return BACKEND_LABELS.get(backend, backend)


def cell_label(cell):
    return CELL_NAMES.get(cell, cell)


def with_cell_labels(frame):
    """A table of lab's (a DataFrame with a "cell" column of lab's names) with its cells named as the
    pages name them."""
    return frame.assign(cell=frame["cell"].map(cell_label))


def checkpoint_cell(checkpoint):
    return checkpoint.config.cell


def equations_latex(cell):
    """One aligned LaTeX block of a cell's equations (for st.latex)."""
    lines = [equation.replace(" = ", " &= ", 1) for equation in CELLS[cell].equations]
    return r"\begin{aligned}" + r"\\".join(lines) + r"\end{aligned}"
