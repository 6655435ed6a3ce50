"""Gate traces: what every gate of every layer does while the model reads a text.

Glossary: T time (tokens of the text), H hidden units, L layers.

    trace = trace_text(model, tokenizer, "Laer.\\nMy necessaries are embark'd")
    trace.layers[0]["z"]              # (T, H) numpy: the update gate at every step
    gate_summary(trace)               # mean, std, saturation per layer and gate
    for trace in trace_chunks(model, tokenizer, long_text): ...   # one pass, state carried

The model reads the text once, stateful from the zero state, in eval mode and
without gradients, through its reference cells (`lab.nets.models.to_reference`: the
same function as a fast or fused layer), so every gate comes from lab/nets/cells.py.
Every cell writes the gates its docstring names (lab.nets.cells): rnn {h}; both GRUs
{r, z, n, h}; lstm {i, f, g, o, c, h}; scan {A, B, h}. What the units track is
lab.instruments.units' question; the features of the text it asks about are in lab.instruments.features.
"""

from dataclasses import dataclass, field

import numpy as np
import torch

from lab.errors import LabError
from lab.nets.families import FAMILIES
from lab.nets.models import evaluating, recurrent_layers, to_reference
from lab.words import count

MAX_TRACE_TOKENS = 2000  # a (T, H) array per gate; 2000 x 1024 x 6 gates is ~50 MB of float32

# sigmoid gates live in (0, 1); saturation (< 0.1 or > 0.9) means a gate is nearly shut or open
SIGMOID_GATES = frozenset({"r", "z", "i", "f", "o", "A", "B"})
GATE_KINDS = {
    **{g: "sigmoid gate" for g in SIGMOID_GATES},
    "c": "cell state",  # LSTM's long-term memory, unbounded
    "h": "hidden output",
}
SATURATION = (0.1, 0.9)
CANDIDATES = frozenset({"n", "g"})  # the GRUs' n_t (the seeds' h~_t), the LSTM's g_t: their kind is the family's


def gate_kind(cell, name):
    """What a traced value of a cell is: "sigmoid gate", "tanh candidate", "cell state", ..."""
    return FAMILIES[cell].candidate if name in CANDIDATES else GATE_KINDS[name]


def encode_text(tokenizer, text, what="text", max_tokens=None):
    """Check and encode a text: ValueError naming the empty text, the characters the
    vocabulary cannot represent, or a length over `max_tokens`. Returns list[int] (T,)."""
    if not text:
        raise LabError(f"{what}: is empty; type a few characters")
    missing = tokenizer.unknown(text)
    if missing:
        shown = ", ".join(repr(c) for c in missing)
        are = "is" if len(missing) == 1 else "are"
        raise LabError(f"{what}: {count(len(missing), 'character')} {are} not in the model's vocabulary: {shown}")
    ids = tokenizer.encode(text)
    if max_tokens is not None and len(ids) > max_tokens:
        raise LabError(f"{what}: is {count(len(ids), 'token')} long, more than the limit of {max_tokens:,}")
    return ids


@dataclass
class GateTrace:
    """One pass of a model over a text, batch 1, everything as numpy."""

    token_ids: list  # (T,) ints
    pieces: list  # (T,) tokenizer pieces for display ("▁the" for a subword)
    token_texts: list  # (T,) each token's own text (" the"); their concatenation is the text
    layers: list  # (L,) dicts: gate name -> (T, H) float32 array
    cells: list  # (L,) each layer's family id (lab.nets.families.FAMILIES)
    gate_names: list  # (L,) tuples, the order the cell documents its gates in
    conventions: list  # (L,) one line of equations per layer
    inputs: list = field(default_factory=list)  # (L,) (T, I) arrays: what each layer read (layer 0: embeddings)

    @property
    def text(self):
        return "".join(self.token_texts)

    def gates(self, layer):
        """Gate name -> (T, H) array of one layer; ValueError naming the valid layers."""
        if not 0 <= layer < len(self.layers):
            raise LabError(f"layer: {layer} is out of range; this model has layers 0..{len(self.layers) - 1}")
        return self.layers[layer]

    def gate(self, layer, gate):
        """(T, H) values of one gate; ValueError listing the valid layers or gates."""
        if gate not in self.gates(layer):
            raise LabError(
                f"gate: {gate!r} is not a gate of layer {layer} ({self.cells[layer]}); "
                f"valid gates are {list(self.gate_names[layer])}"
            )
        return self.layers[layer][gate]


def _read_traced(model, ids, state):
    """A reference-cell model reads token ids (T,) from `state` (None: zeros), recording every gate.
    Returns ((L,) dicts gate -> (T, H) float32 numpy, the state after the last token)."""
    trace = [{} for _ in recurrent_layers(model)]
    idx = torch.tensor([ids], device=next(model.parameters()).device)  # (1, T)
    with evaluating(model), torch.no_grad():
        _, _, state = model(idx, state=state, trace=trace)
    return [{g: values[0].float().cpu().numpy() for g, values in tr.items()} for tr in trace], state


def _gate_trace(model, tokenizer, ids, layer_values):
    layers = recurrent_layers(model)
    return GateTrace(
        token_ids=list(ids),
        pieces=[tokenizer.id_to_piece(i) for i in ids],
        token_texts=[tokenizer.decode([i]) for i in ids],
        layers=[{g: values[g] for g in layer.gate_names} for values, layer in zip(layer_values, layers)],
        cells=[layer.cell for layer in layers],
        gate_names=[tuple(layer.gate_names) for layer in layers],
        conventions=[FAMILIES[layer.cell].convention for layer in layers],
        inputs=[values["x"] for values in layer_values],
    )


def trace_text(model, tokenizer, text, max_tokens=MAX_TRACE_TOKENS):
    """Run `model` once over `text` from the zero state and record every gate.

    model: any lab model (RecurrentLM, ScanMarkov); text: str of T tokens
    (1 <= T <= max_tokens). Returns a GateTrace whose gates are (T, H) arrays
    and whose inputs are each layer's (T, I) input.
    """
    ids = encode_text(tokenizer, text, "text", max_tokens)
    model = to_reference(model)
    return _gate_trace(model, tokenizer, ids, _read_traced(model, ids, None)[0])


def trace_chunks(model, tokenizer, text, chunk_tokens=MAX_TRACE_TOKENS):
    """Read a text of any length in one pass from the zero state, the state carried from chunk to
    chunk, and yield a GateTrace of every `chunk_tokens` tokens in turn (the last may be shorter):
    the same gates as one trace of the whole text, without holding all of them at once."""
    ids = encode_text(tokenizer, text, "text")
    model, state = to_reference(model), None
    for start in range(0, len(ids), chunk_tokens):
        chunk = ids[start : start + chunk_tokens]
        layer_values, state = _read_traced(model, chunk, state)
        yield _gate_trace(model, tokenizer, chunk, layer_values)


def gate_summary(trace):
    """One row per layer and gate: mean, std, min, max and, for sigmoid gates, the
    share of saturated values (< 0.1 or > 0.9; NaN for the other kinds)."""
    import pandas as pd  # here, not above: a training process that samples as it trains never builds a table

    rows = []
    for l, (cell, names) in enumerate(zip(trace.cells, trace.gate_names)):
        for name in names:
            v = trace.layers[l][name]  # (T, H)
            saturated = ((v < SATURATION[0]) | (v > SATURATION[1])).mean() if name in SIGMOID_GATES else np.nan
            rows.append(
                {
                    "layer": l,
                    "cell": cell,
                    "gate": name,
                    "kind": gate_kind(cell, name),
                    "mean": float(v.mean()),
                    "std": float(v.std()),
                    "min": float(v.min()),
                    "max": float(v.max()),
                    "saturation": float(saturated),
                }
            )
    return pd.DataFrame(rows)
