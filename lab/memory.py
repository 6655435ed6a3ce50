"""How long a recurrent model remembers: gate retention and gradients through time.

Glossary: T time, H hidden units, K lags.

Two views of memory (seed 002):

* Retention. Every gated cell has a keep factor a_t in [0, 1] per unit that
  multiplies the old memory: h_t = a_t * h_{t-1} + (new stuff). Along that
  path, what was in memory at step t survives to step t+k scaled by
  a_{t+1} * ... * a_{t+k}. A constant gate g gives g**k, so even seed 002's
  nearly shut update gate z = 0.00001 (keep 0.99999) leaves 0.99999**100 = 0.999
  after 100 steps, and less and less after that: the GRU cannot hold a memory
  untouched, the LSTM's f = 1 can. The keep factor of each cell is in the
  registry KEEP_GATES. The vanilla RNN has none: its memory is only visible
  through gradients.
* Gradients through time. ||dL_T / dh_t|| says how strongly the loss at the
  last step still depends on the hidden output t steps back (the vanishing
  gradient problem, seed 001 A.1 and A.4). It works for every cell.
"""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lab.cells import sigmoid_time_constant
from lab.introspect import GateTrace, encode_text, evaluating, trace_text
from lab.models import recurrent_layers, to_reference

MAX_GRADIENT_TOKENS = 1000  # one forward call per token, then one backward pass

# keep factor a_t (T, H) of a layer's trace: the factor multiplying the old memory
KEEP_GATES = {
    "gru_seed": lambda tr: 1 - tr["z"],  # h = (1-z)*h + z*n: z overwrites (seed 001 A.2)
    "gru_torch": lambda tr: tr["z"],  # h = (1-z)*n + z*h: z keeps (torch.nn.GRU)
    "lstm": lambda tr: tr["f"],  # c = f*c + i*g: the cell state's retention (seed 002)
    "scan": lambda tr: tr["A"],  # h = A*h + B*e (seed 004)
}
KEEP_GATE_LABELS = {"gru_seed": "1 - z", "gru_torch": "z", "lstm": "f (cell state c)", "scan": "A"}


@dataclass
class Retention:
    """Measured retention of one layer, averaged over start positions."""

    lags: np.ndarray  # (K,) 1..K
    per_unit: np.ndarray  # (K, H) mean over t of prod_{s=t+1}^{t+k} a_s
    median: np.ndarray  # (K,) median over units: one curve per layer
    cell: str
    keep_gate: str  # which factor was multiplied, e.g. "1 - z"


def keep_factor(trace, layer=0):
    """The keep factor a_t (T, H) of one traced layer; ValueError for the vanilla RNN."""
    gates, cell = trace.gates(layer), trace.cells[layer]
    if cell not in KEEP_GATES:
        raise ValueError(f"cell: the {cell!r} layer has no keep gate (cells with one: {sorted(KEEP_GATES)}); "
                         "the vanilla RNN's memory is measured by gradient_through_time")
    return KEEP_GATES[cell](gates).astype(np.float64)


def retention(source, layer=0, *, tokenizer=None, text=None, max_lag=64):
    """Retention after lag k, for k = 1..K with K = min(max_lag, T-1).

    source: a GateTrace, or a model (then pass tokenizer and text, traced with
    lab.introspect.trace_text). per_unit[k-1, j] is the mean over every start t
    of the product a_{t+1} * ... * a_{t+k} of unit j's keep factor: the share of
    what unit j held at step t that is still there at t+k along the keep path
    (for the LSTM, of the cell state c).
    """
    if not isinstance(source, GateTrace):
        if tokenizer is None or text is None:
            raise ValueError("retention: pass a GateTrace, or a model with tokenizer= and text=")
        source = trace_text(source, tokenizer, text)
    a = keep_factor(source, layer)  # (T, H)
    T, H = a.shape
    if T < 2:
        raise ValueError("text: retention needs at least 2 tokens")
    K = min(max_lag, T - 1)
    per_unit = np.empty((K, H))
    window = np.ones_like(a)
    for k in range(1, K + 1):
        window = window[:-1] * a[k:]  # (T-k, H): row t is prod a[t+1 .. t+k]
        per_unit[k - 1] = window.mean(0)
    cell = source.cells[layer]
    return Retention(lags=np.arange(1, K + 1), per_unit=per_unit, median=np.median(per_unit, 1), cell=cell,
                     keep_gate=KEEP_GATE_LABELS[cell])


def constant_gate_retention(g, lags):
    """A keep gate held at g retains g**k after k steps (seed 002's 0.99999**100). -> (K,)"""
    return np.asarray(g, dtype=np.float64) ** np.asarray(lags, dtype=np.float64)


def bias_time_constants(biases):
    """What a keep-gate bias alone implies (inputs at zero): one row per bias with the
    retention sigmoid(b), time constant 1/(1 - sigmoid(b)) and half-life in steps.

    Pass the bias of the factor that keeps: b_z for gru_torch, b_f for the LSTM,
    and -b_z for gru_seed (its keep factor is 1 - sigmoid(b_z) = sigmoid(-b_z)).
    """
    rows = [dict(zip(("retention", "tau", "half_life"), sigmoid_time_constant(float(b))), bias=float(b))
            for b in biases]
    return pd.DataFrame(rows, columns=["bias", "retention", "tau", "half_life"])


# ---------------------------------------------------------------------------
# gradients through time


def _expose_hidden(hidden):
    """Forward hook for the last recurrent layer, run one step at a time.

    The layer returns out (B, 1, H) and a state that holds h_t again; we make
    both the output and the state come from one tensor h = out[:, -1], so the
    gradient reaching h sums every path from h_t to the loss: through the head
    and through the next steps. The LSTM keeps its cell state c untouched.
    """
    def hook(layer, inputs, output):
        out, state = output
        h = out[:, -1]  # (B, H)
        hidden.append(h)
        return h.unsqueeze(1), ((h, state[1]) if isinstance(state, tuple) else h)
    return hook


def gradient_through_time(model, tokens, tokenizer=None, max_tokens=MAX_GRADIENT_TOKENS):
    """||dL_T / dh_t||_2 for t = 1..T: how much the last prediction depends on step t.

    tokens: LongTensor (1, T+1), or a str encoded with `tokenizer` into T+1 tokens.
    The model reads tokens 1..T from the zero state (eval mode, no dropout) and
    L_T is the cross-entropy of its prediction at step T for token T+1. h_t is
    the last recurrent layer's output at step t (for the LSTM the hidden output
    h_t, not the cell state), and the gradient is the total derivative through
    every path: into the next steps of that layer and, for t = T, into the head.
    Lower layers never depend on h_t, so they add no path. Parameter .grad is
    left untouched (torch.autograd.grad). Works for every cell and backend (it runs
    the reference cells, lab.models.to_reference), at initialisation or after training. Returns an np.ndarray (T,), index 0 = the
    step farthest from the loss.
    """
    if isinstance(tokens, str):
        if tokenizer is None:
            raise ValueError("tokenizer: needed to encode a text")
        tokens = torch.tensor([encode_text(tokenizer, tokens, "text", max_tokens + 1)])
    if tokens.dim() != 2 or tokens.size(0) != 1 or not 2 <= tokens.size(1) <= max_tokens + 1:
        raise ValueError(f"tokens: need shape (1, T+1) with 1 <= T <= {max_tokens}, got {tuple(tokens.shape)}")
    model = to_reference(model)
    tokens = tokens.to(next(model.parameters()).device)
    hidden = []  # h_1 .. h_T, (1, H) each
    handle = recurrent_layers(model)[-1].register_forward_hook(_expose_hidden(hidden))
    try:
        with evaluating(model), torch.enable_grad():
            state = None
            for t in range(tokens.size(1) - 1):  # one step at a time, so every h_t is a tensor of its own
                logits, _, state = model(tokens[:, t:t + 1], state=state)  # (1, 1, V)
            loss = F.cross_entropy(logits[:, -1], tokens[:, -1])
            grads = torch.autograd.grad(loss, hidden)
    finally:
        handle.remove()
    return torch.stack([g.norm() for g in grads]).cpu().numpy()
