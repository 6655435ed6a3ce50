"""Each cell family as the pages show it, read from its record (lab.nets.families): its name, its colour
on every chart, its note and its equations as one LaTeX block; and each backend (lab.nets.backends) in
plain words."""

from lab.nets.families import FAMILIES
from lab.nets.families import name as cell_label

OTHER_COLOUR = "#444444"  # a cell no family has (an old file's)

# lab.nets.backends.BACKENDS' keys (kept as the widgets' values and in links) -> what a student reads
BACKEND_LABELS = {
    "reference": "step by step, as the equations read",
    "fast": "fast (the same equations, optimised)",
    "fused": "fused (PyTorch's built-in)",
}


# the same backends inside a sentence: what a model "runs on" ("101,732 parameters, run by PyTorch's built-in
# layer"), never a label in parentheses nested in another's
BACKEND_WORDS = {
    "reference": "the lab's step-by-step code, as the equations read",
    "fast": "the lab's fast code, the same equations optimised",
    "fused": "PyTorch's built-in layer",
}


def backend_label(backend):
    return BACKEND_LABELS.get(backend, backend)


def run_by(backend):
    """A backend inside a sentence: "run by PyTorch's built-in layer"."""
    return f"run by {BACKEND_WORDS.get(backend, backend)}"


def cell_colour(cell):
    return FAMILIES[cell].colour if cell in FAMILIES else OTHER_COLOUR


def cell_note(cell):
    return FAMILIES[cell].note


def cell_choice(cell):
    """A cell in the Train page's list: its name and where its convention comes from."""
    return f"{cell_label(cell)} · {FAMILIES[cell].origin}"


def with_cell_labels(frame):
    """A table of lab's (a DataFrame with a "cell" column of lab's names) with its cells named as the
    pages name them."""
    return frame.assign(cell=frame["cell"].map(cell_label))


def checkpoint_cell(checkpoint):
    return checkpoint.config.cell


def equations_latex(cell):
    """One aligned LaTeX block of a cell's equations (for st.latex)."""
    lines = [equation.replace(" = ", " &= ", 1) for equation in FAMILIES[cell].latex]
    return r"\begin{aligned}" + r"\\".join(lines) + r"\end{aligned}"
