"""Gate traces: what every gate of every layer does while the model reads a text.

Glossary: T time (tokens of the text), H hidden units, L layers, N characters.

    trace = trace_text(model, tokenizer, "Laer.\\nMy necessaries are embark'd")
    trace.layers[0]["z"]              # (T, H) numpy: the update gate at every step
    gate_summary(trace)               # mean, std, saturation per layer and gate
    top_units(trace, "in_brackets")   # the units that best track a feature of the text

The model reads the text once, stateful from the zero state, in eval mode and
without gradients, through its reference cells (`lab.models.to_reference`: the
same function as a fast or fused layer), so every gate comes from lab/cells.py.
Every cell writes the gates its docstring names (lab.cells): rnn {h}; both GRUs
{r, z, n, h}; lstm {i, f, g, o, c, h}; scan {A, B, h}.

Features of the text (registry `FEATURES`) are defined per character, as the
value *after reading* that character, which is what the state at that step can
know. A token takes the value of one of its characters: character classes
(is_vowel, is_space, is_upper, is_newline) use the token's first character,
context features (in_brackets, in_quotes, line_position) its last. For a
character model both are the character itself; for a subword "▁the" the
first character is the space, so is_space marks word starts.
"""
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
import torch

from lab.models import recurrent_layers, to_reference

MAX_TRACE_TOKENS = 2000  # a (T, H) array per gate; 2000 x 1024 x 6 gates is ~50 MB of float32

# sigmoid gates live in (0, 1); saturation (< 0.1 or > 0.9) means a gate is nearly shut or open
SIGMOID_GATES = frozenset({"r", "z", "i", "f", "o", "A", "B"})
GATE_KINDS = {
    **{g: "sigmoid gate" for g in SIGMOID_GATES},
    "n": "tanh candidate",  # GRU's n_t (the seeds' h~_t)
    "g": "tanh candidate",  # LSTM's g_t
    "c": "cell state",  # LSTM's long-term memory, unbounded
    "h": "hidden output",
}
SATURATION = (0.1, 0.9)


@contextmanager
def evaluating(model):
    """Eval mode (no dropout) for the block, then the caller's training mode again."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def encode_text(tokenizer, text, what="text", max_tokens=None):
    """Check and encode a text: ValueError naming the empty text, the characters the
    vocabulary cannot represent, or a length over `max_tokens`. Returns list[int] (T,)."""
    if not text:
        raise ValueError(f"{what}: is empty; type a few characters")
    missing = tokenizer.unknown(text)
    if missing:
        shown = ", ".join(repr(c) for c in missing)
        raise ValueError(f"{what}: {len(missing)} characters are not in the model's vocabulary: {shown}")
    ids = tokenizer.encode(text)
    if max_tokens is not None and len(ids) > max_tokens:
        raise ValueError(f"{what}: is {len(ids)} tokens long, more than the limit of {max_tokens}")
    return ids


@dataclass
class GateTrace:
    """One pass of a model over a text, batch 1, everything as numpy."""

    token_ids: list  # (T,) ints
    pieces: list  # (T,) tokenizer pieces for display ("▁the" for a subword)
    token_texts: list  # (T,) each token's own text (" the"); their concatenation is the text
    layers: list  # (L,) dicts: gate name -> (T, H) float32 array
    cells: list  # (L,) cell keys of lab.cells.CELLS
    gate_names: list  # (L,) tuples, the order the cell documents its gates in
    conventions: list  # (L,) one line of equations per layer
    inputs: list = field(default_factory=list)  # (L,) (T, I) arrays: what each layer read (layer 0: embeddings)

    @property
    def text(self):
        return "".join(self.token_texts)

    def gates(self, layer):
        """Gate name -> (T, H) array of one layer; ValueError naming the valid layers."""
        if not 0 <= layer < len(self.layers):
            raise ValueError(f"layer: {layer} is out of range; this model has layers 0..{len(self.layers) - 1}")
        return self.layers[layer]

    def gate(self, layer, gate):
        """(T, H) values of one gate; ValueError listing the valid layers or gates."""
        if gate not in self.gates(layer):
            raise ValueError(f"gate: {gate!r} is not a gate of layer {layer} ({self.cells[layer]}); "
                             f"valid gates are {list(self.gate_names[layer])}")
        return self.layers[layer][gate]


def trace_text(model, tokenizer, text, max_tokens=MAX_TRACE_TOKENS):
    """Run `model` once over `text` from the zero state and record every gate.

    model: any lab model (RecurrentLM, ScanMarkov); text: str of T tokens
    (1 <= T <= max_tokens). Returns a GateTrace whose gates are (T, H) arrays
    and whose inputs are each layer's (T, I) input.
    """
    ids = encode_text(tokenizer, text, "text", max_tokens)
    model = to_reference(model)
    layers = recurrent_layers(model)
    trace = [{} for _ in layers]
    idx = torch.tensor([ids], device=next(model.parameters()).device)  # (1, T)
    with evaluating(model), torch.no_grad():
        model(idx, trace=trace)
    return GateTrace(
        token_ids=ids,
        pieces=[tokenizer.id_to_piece(i) for i in ids],
        token_texts=[tokenizer.decode([i]) for i in ids],
        layers=[{g: tr[g][0].float().cpu().numpy() for g in layer.gate_names} for tr, layer in zip(trace, layers)],
        cells=[layer.cell for layer in layers],
        gate_names=[tuple(layer.gate_names) for layer in layers],
        conventions=[layer.convention for layer in layers],
        inputs=[tr["x"][0].float().cpu().numpy() for tr in trace],
    )


def gate_summary(trace):
    """One row per layer and gate: mean, std, min, max and, for sigmoid gates, the
    share of saturated values (< 0.1 or > 0.9; NaN for the other kinds)."""
    rows = []
    for l, (cell, names) in enumerate(zip(trace.cells, trace.gate_names)):
        for name in names:
            v = trace.layers[l][name]  # (T, H)
            saturated = ((v < SATURATION[0]) | (v > SATURATION[1])).mean() if name in SIGMOID_GATES else np.nan
            rows.append({"layer": l, "cell": cell, "gate": name, "kind": GATE_KINDS[name],
                         "mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()),
                         "max": float(v.max()), "saturation": float(saturated)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------
# per-token features of the text, for finding interpretable units


def _inside(open_char, close_char):
    """1 after reading `open_char` until `close_char` is read (a toggle when they are equal)."""
    def per_char(text):
        inside, values = False, np.zeros(len(text))
        for n, ch in enumerate(text):
            if ch == open_char and not (inside and ch == close_char):
                inside = True
            elif ch == close_char:
                inside = False
            values[n] = inside
        return values
    return per_char


def _line_position(text):
    """Characters read since the last newline (0 right after reading "\\n")."""
    values, position = np.zeros(len(text)), 0
    for n, ch in enumerate(text):
        position = 0 if ch == "\n" else position + 1
        values[n] = position
    return values


def _char_class(test):
    return lambda text: np.array([float(test(ch)) for ch in text])


@dataclass(frozen=True)
class Feature:
    description: str
    per_char: Callable  # text (N chars) -> (N,) float array, the value after reading each character
    anchor: str  # "first" or "last": which character of a token gives the token's value


FEATURES = {
    # The bundled Globe-edition plays put 1,547 stage directions in brackets
    # ("[Enter Ghost.]") and have only 177 double quotes: bracket tracking is
    # this corpus's analogue of Karpathy's quote-detection cell.
    "in_brackets": Feature("inside a [stage direction]", _inside("[", "]"), "last"),
    "in_quotes": Feature('inside "double quotes" (rare in Shakespeare)', _inside('"', '"'), "last"),
    "line_position": Feature("characters since the last newline", _line_position, "last"),
    "is_vowel": Feature("a vowel (aeiou, either case)", _char_class(lambda c: c in "aeiouAEIOU"), "first"),
    "is_space": Feature("a space (for subwords: a word start)", _char_class(lambda c: c == " "), "first"),
    "is_upper": Feature("an upper-case letter", _char_class(str.isupper), "first"),
    "is_newline": Feature("a newline", _char_class(lambda c: c == "\n"), "first"),
}


def feature_values(trace, feature):
    """Per-token values (T,) of a FEATURES entry on the traced text."""
    if feature not in FEATURES:
        raise ValueError(f"feature: unknown feature {feature!r}; valid features are {sorted(FEATURES)}")
    f = FEATURES[feature]
    per_char = f.per_char(trace.text)  # (N,)
    ends = np.cumsum([len(t) for t in trace.token_texts])  # (T,) one past each token's last character
    starts = ends - np.array([len(t) for t in trace.token_texts])
    return per_char[starts if f.anchor == "first" else ends - 1]


def pearson(x, y):
    """Pearson correlation of each column of x (T, H) with y (T,) -> (H,); 0 for a constant column."""
    xc, yc = x - x.mean(0), y - y.mean()
    denom = np.sqrt((xc**2).sum(0) * (yc**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (xc * yc[:, None]).sum(0) / denom, 0.0)


def top_units(trace, feature, layer=0, gate="h", k=5):
    """The k units of one gate whose activation best tracks a feature, by |Pearson r|.

    Returns a DataFrame (k rows): unit, correlation (signed), abs_correlation.
    ValueError when the feature is constant on this text (no correlation exists).
    """
    values = trace.gate(layer, gate).astype(np.float64)  # (T, H)
    y = feature_values(trace, feature)  # (T,)
    if np.ptp(y) == 0:
        raise ValueError(f"feature: {feature!r} ({FEATURES[feature].description}) is constant on this text; "
                         "choose a text where it varies")
    r = pearson(values, y)  # (H,)
    units = np.argsort(-np.abs(r), kind="stable")[:k]
    return pd.DataFrame({"unit": units, "correlation": r[units], "abs_correlation": np.abs(r[units])})
