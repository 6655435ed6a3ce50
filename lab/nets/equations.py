"""A cell's equations, written once as LaTeX in its family's record (lab.nets.families), read three ways:
as LaTeX on the pages, as plain text in summaries and worked examples, and as the per-unit values each
line writes and reads, for the step-through.

A per-unit value is a letter with the subscript t (or t-1: the value the step starts from, named
`<letter>_prev`); x_t is the input vector, shown whole, so it is never one of them. Weights (W, U) and
biases (b) carry other subscripts and are not values of a step.
"""

import re
from dataclasses import dataclass

# LaTeX symbols whose trace names differ: the seeds write the candidate h~ that the trace calls n
TRACE_NAMES = {r"\tilde h": "n"}
_TERM = re.compile(r"(\\tilde h|[A-Za-z])_(t|\{t-1\})(?![\w{])")
_PLAIN = (
    (r"\big", ""),
    (r"\tilde h", "h̃"),
    (r"\sigma", "σ"),
    (r"\tanh", "tanh"),
    (r"\odot", "⊙"),
    (r"\mathrm{gate}", "gate"),
    ("{t-1}", "{t−1}"),
    (" - ", " − "),
    ("(1 - ", "(1 − "),
)


@dataclass(frozen=True)
class Equation:
    """One line of a cell's equations: the per-unit values it writes and those it reads, in order."""

    latex: str
    writes: tuple
    reads: tuple

    @property
    def updates_state(self):
        """True for the lines that write the state (h, or the LSTM's c) rather than a gate."""
        return set(self.writes) <= {"h", "c"}


def _name(symbol, subscript):
    return TRACE_NAMES.get(symbol, symbol) + ("_prev" if subscript == "{t-1}" else "")


def parsed(latex):
    """Equation for one line of LaTeX, "lhs = rhs"."""
    lhs, rhs = latex.split(" = ", 1)
    writes = tuple(dict.fromkeys(_name(*m) for m in _TERM.findall(lhs)))
    reads = tuple(dict.fromkeys(_name(*m) for m in _TERM.findall(rhs) if m[0] != "x"))
    return Equation(latex, writes, reads)


def plain(latex):
    """The LaTeX of an equation as plain text: σ, tanh, ⊙, h̃, subscripts without braces."""
    text = latex
    for old, new in _PLAIN:
        text = text.replace(old, new)
    return re.sub(r"_\{(\w+)\}", r"_\1", text)


def worked(equation, values):
    """A state-update line with one unit's numbers written in for its per-unit values: "h_t = (1 − 0.2)
    · 0.5 + …". values: name -> a number already formatted. A line that multiplies matrices (the vanilla
    RNN's) keeps its symbols and names the state it started from instead."""
    lhs, rhs = equation.latex.split(" = ", 1)
    if re.search(r"\b[WU]_", rhs):
        before = ", ".join(f"{symbol([equation.latex], name)} = {values[name]}" for name in equation.reads)
        return f"{plain(equation.latex)} = {values[equation.writes[0]]}, from {before}"
    filled = _TERM.sub(lambda m: f"\0{_name(*m.groups())}\0", rhs)
    text = plain(filled).replace("⊙", "·")
    text = re.sub("\0(\\w+)\0", lambda m: values[m.group(1)], text)
    return f"{plain(lhs)} = {text} = {values[equation.writes[0]]}"


def symbol(latex_lines, name):
    """A per-unit value's symbol as these equations write it, in plain text: "h_{t−1}" for h_prev, "h̃_t"
    for the seeds' candidate n."""
    for line in latex_lines:
        for match in _TERM.finditer(line):
            if _name(*match.groups()) == name:
                return plain(match.group(0))
    return plain(f"{name}_t")
