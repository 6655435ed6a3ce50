"""How long a recurrent model remembers: gate retention and gradients through time.

Glossary: T time, H hidden units, K lags.

Two views of memory (seed 002):

* Retention. Every gated cell has a keep factor a_t in [0, 1] per unit that
  multiplies the old memory: h_t = a_t * h_{t-1} + (new stuff). Along that
  path, what was in memory at step t survives to step t+k scaled by
  a_{t+1} * ... * a_{t+k}. A constant gate g gives g**k, so even seed 002's
  nearly shut update gate z = 0.00001 (keep 0.99999) leaves 0.99999**100 = 0.999
  after 100 steps, and less and less after that: the GRU cannot hold a memory
  untouched, the LSTM's f = 1 can. The keep factor of each cell is in its
  family's record (lab.nets.families). The vanilla RNN has none: its memory is only visible
  through gradients.
* Gradients through time. ||dL_T / dh_t|| says how strongly the loss at the
  last step still depends on the hidden output t steps back (the vanishing
  gradient problem, seed 001 A.1 and A.4). It works for every cell.

And what the memory is worth: the loss of a text read with the state reset to
zero every k tokens (`state_reset_curve`). Seeds 000 and 001 warn that a reset
collapses the model to P(s_t | s_{t-1}); k = 1 is that collapse, k = T the
model reading the whole text with its state carried.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from lab.data import chars_per_token
from lab.errors import LabError
from lab.instruments.introspect import GateTrace, encode_text, trace_text
from lab.nets.cells import sigmoid_time_constant
from lab.nets.families import FAMILIES
from lab.nets.models import evaluating, recurrent_layers, to_reference

MAX_RETENTION_LAG = 256  # retention is measured once up to this lag; a chart shows any shorter part
MEMORY_SPANS = (10, 100)  # memories a student can picture: a few words, a few lines
MAX_GRADIENT_TOKENS = 1000  # one forward call per token, then one backward pass
MAX_RESET_TOKENS = 20_000  # state_reset_curve's k = 1 point is a batch of T one-token rows


@dataclass
class Retention:
    """Measured retention of one layer, averaged over start positions."""

    lags: np.ndarray  # (K,) 1..K
    per_unit: np.ndarray  # (K, H) mean over t of prod_{s=t+1}^{t+k} a_s
    median: np.ndarray  # (K,) median over units: one curve per layer
    cell: str
    keep_gate: str  # which factor was multiplied, e.g. "1 - z"
    limit: int  # the longest lag asked for: fewer lags than this means the text was too short for more

    @property
    def half_life(self):
        """The first lag at which the median unit keeps half or less, or None when it keeps more
        than half over every lag measured."""
        below = np.flatnonzero(self.median <= 0.5)
        return int(self.lags[below[0]]) if below.size else None

    @property
    def unit_half_lives(self):
        """Each unit's half-life: the first lag at which it keeps half or less -> (H,) float, inf for
        a unit that keeps more than half over every lag measured (its half-life is longer than K)."""
        below = self.per_unit <= 0.5  # (K, H)
        return np.where(below.any(0), self.lags[below.argmax(0)], np.inf)

    def share_longer_than(self, k):
        """The share of units that still keep more than half after k steps, or None when fewer
        than k lags were measured (a short text cannot show it)."""
        return float((self.unit_half_lives > k).mean()) if k <= self.lags[-1] else None

    def up_to(self, max_lag):
        """The same measurement over lags 1..max_lag only (each lag's average does not depend on
        how many lags were measured, so one long measurement serves every shorter one)."""
        K = min(max_lag, len(self.lags))
        limit = min(max_lag, self.limit)
        return Retention(self.lags[:K], self.per_unit[:K], self.median[:K], self.cell, self.keep_gate, limit)

    def longest_units(self, n=3):
        """The n units that remember longest: by half-life, ties (inf among them) broken by what
        they keep at the longest lag -> (n,) unit indices, longest first."""
        return np.lexsort((self.per_unit[-1], self.unit_half_lives))[::-1][:n]


def keep_factor(trace, layer=0):
    """The keep factor a_t (T, H) of one traced layer; ValueError for the vanilla RNN."""
    gates, cell = trace.gates(layer), trace.cells[layer]
    if FAMILIES[cell].keep is None:
        with_one = [f.id for f in FAMILIES.values() if f.keep]
        raise LabError(
            f"cell: the {cell!r} layer has no keep gate (cells with one: {with_one}); "
            "the vanilla RNN's memory is measured by gradient_through_time"
        )
    return FAMILIES[cell].keep(gates).astype(np.float64)


def retention(source, layer=0, *, tokenizer=None, text=None, max_lag=64):
    """Retention after lag k, for k = 1..K with K = min(max_lag, T-1).

    source: a GateTrace, or a model (then pass tokenizer and text, traced with
    lab.instruments.introspect.trace_text). per_unit[k-1, j] is the mean over every start t
    of the product a_{t+1} * ... * a_{t+k} of unit j's keep factor: the share of
    what unit j held at step t that is still there at t+k along the keep path
    (for the LSTM, of the cell state c).
    """
    if not isinstance(source, GateTrace):
        if tokenizer is None or text is None:
            raise LabError("retention: pass a GateTrace, or a model with tokenizer= and text=")
        source = trace_text(source, tokenizer, text)
    a = keep_factor(source, layer)  # (T, H)
    T, H = a.shape
    if T < 2:
        raise LabError("text: retention needs at least 2 tokens")
    K = min(max_lag, T - 1)
    per_unit = np.empty((K, H))
    window = np.ones_like(a)
    for k in range(1, K + 1):
        window = window[:-1] * a[k:]  # (T-k, H): row t is prod a[t+1 .. t+k]
        per_unit[k - 1] = window.mean(0)
    cell = source.cells[layer]
    return Retention(
        lags=np.arange(1, K + 1),
        per_unit=per_unit,
        median=np.median(per_unit, 1),
        cell=cell,
        keep_gate=FAMILIES[cell].keep_label,
        limit=max_lag,
    )


def memory_spread(retentions, spans=MEMORY_SPANS):
    """How the units of each layer spread between short and long memories: one row per
    (name, layer, Retention) of `retentions`, with the layer's units, the lags measured and the longest lag
    asked for (lag_limit: more than the lags measured when the text was too short for more), the median
    unit's half-life (inf: longer than every lag measured), the longest half-life, and for each span k the
    share of units that keep more than half for longer than k steps (column longer_than_k; NaN when fewer
    than k lags were measured). A median alone hides the few long-memory units."""
    rows = []
    for name, layer, r in retentions:
        half_lives = r.unit_half_lives
        row = {
            "name": name,
            "layer": layer,
            "cell": r.cell,
            "units": len(half_lives),
            "lags": len(r.lags),
            "lag_limit": r.limit,
            "median_half_life": float(np.median(half_lives)),
            "longest_half_life": float(half_lives.max()),
        }
        for k in spans:
            share = r.share_longer_than(k)
            row[f"longer_than_{k}"] = np.nan if share is None else share
        rows.append(row)
    columns = ["name", "layer", "cell", "units", "lags", "lag_limit", "median_half_life", "longest_half_life"]
    return pd.DataFrame(rows, columns=columns + [f"longer_than_{k}" for k in spans])


def constant_gate_retention(g, lags):
    """A keep gate held at g retains g**k after k steps (seed 002's 0.99999**100). -> (K,)"""
    return np.asarray(g, dtype=np.float64) ** np.asarray(lags, dtype=np.float64)


def bias_time_constants(biases):
    """What a keep-gate bias alone implies (inputs at zero): one row per bias with the
    retention sigmoid(b), time constant 1/(1 - sigmoid(b)) and half-life in steps.

    Pass the bias of the factor that keeps: b_z for gru_torch, b_f for the LSTM,
    and -b_z for gru_seed (its keep factor is 1 - sigmoid(b_z) = sigmoid(-b_z)).
    """
    rows = [
        dict(zip(("retention", "tau", "half_life"), sigmoid_time_constant(float(b))), bias=float(b)) for b in biases
    ]
    return pd.DataFrame(rows, columns=["bias", "retention", "tau", "half_life"])


def keep_gate_biases(model):
    """What training did to the keep-gate biases: one row per recurrent layer with a keep gate
    (the scan's A has no bias of its own and is left out), with the median, 10th and 90th
    percentiles over units of the keep factor's bias (its family's keep_bias), and what the median alone
    implies with the inputs at zero (bias_time_constants). Compare with the measured retention,
    where the inputs and the state move the gate."""
    rows = []
    for l, layer in enumerate(recurrent_layers(to_reference(model))):
        cell = layer.cell
        if FAMILIES[cell].keep_bias is None:
            continue
        b = FAMILIES[cell].keep_bias(layer).detach().double().cpu().numpy()  # (H,)
        median = float(np.median(b))
        implied = bias_time_constants([median]).iloc[0]
        rows.append(
            {
                "layer": l,
                "cell": cell,
                "keep_gate": FAMILIES[cell].keep_label,
                "bias_median": median,
                "bias_q10": float(np.quantile(b, 0.1)),
                "bias_q90": float(np.quantile(b, 0.9)),
                "retention": implied["retention"],
                "half_life": implied["half_life"],
            }
        )
    return pd.DataFrame(
        rows, columns=["layer", "cell", "keep_gate", "bias_median", "bias_q10", "bias_q90", "retention", "half_life"]
    )


# ---------------------------------------------------------------------------
# what the state is worth


def loss_with_state_reset(model, tokenizer, text, reset_every=None, max_tokens=MAX_RESET_TOKENS):
    """Mean cross-entropy (nats per token) of predicting every token of `text` from the ones before,
    the state reset to zero every `reset_every` tokens (None: never, the text read in one pass).

    The T-1 predictions are cut into rows of k = reset_every inputs, each read from the zero state,
    so k = 1 predicts every token from the previous one alone: seed 000's P(s_t | s_{t-1}). Eval
    mode, no gradients. -> float
    """
    ids = torch.tensor(encode_text(tokenizer, text, "text", max_tokens))  # (T,)
    if len(ids) < 2:
        raise LabError("text: needs at least 2 tokens, one to read and one to predict")
    if reset_every is not None and (not isinstance(reset_every, int) or reset_every < 1):
        raise LabError(f"reset_every: must be a positive integer or None, got {reset_every!r}")
    x, y = ids[:-1], ids[1:]  # (N,) inputs and the tokens they predict
    N = len(x)
    k = N if reset_every is None else min(reset_every, N)
    rows, rest = divmod(N, k)
    device = next(model.parameters()).device
    total = 0.0
    with evaluating(model), torch.no_grad():
        # whole rows as one batch (rows, k), then the short last row (1, rest)
        for xs, ys in (
            (x[: rows * k].view(rows, k), y[: rows * k].view(rows, k)),
            (x[rows * k :].view(1, rest), y[rows * k :].view(1, rest)),
        ):
            if ys.numel():
                _, loss, _ = model(xs.to(device), ys.to(device))
                total += loss.item() * ys.numel()
    return total / N


def state_reset_curve(model, tokenizer, text, resets=None):
    """The loss of `text` read with the state reset every k tokens, for k = 1, 2, 4, ... and then
    never (k = "full"). resets: the k's (ints, and None for never); default the powers of 2
    below the text's length, then None. Returns a DataFrame with one row per k: reset_every
    (int, or the text's length in tokens for never), full (bool), nats_per_token, nats_per_char
    (the per-token loss over the text's characters per token, lab.data.chars_per_token)."""
    n_tokens = len(encode_text(tokenizer, text, "text", MAX_RESET_TOKENS))
    if resets is None:
        resets = [2**i for i in range(max(0, (n_tokens - 2).bit_length()))] + [None]
    per_char = chars_per_token(tokenizer, text)
    rows = []
    for k in resets:
        loss = loss_with_state_reset(model, tokenizer, text, k)
        rows.append(
            {
                "reset_every": n_tokens - 1 if k is None else k,
                "full": k is None,
                "nats_per_token": loss,
                "nats_per_char": loss / per_char,
            }
        )
    return pd.DataFrame(rows)


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
    the reference cells, lab.nets.models.to_reference), at initialisation or after training. Returns an
    np.ndarray (T,), index 0 = the step farthest from the loss.
    """
    if isinstance(tokens, str):
        if tokenizer is None:
            raise LabError("tokenizer: needed to encode a text")
        tokens = torch.tensor([encode_text(tokenizer, tokens, "text", max_tokens + 1)])
    if tokens.dim() != 2 or tokens.size(0) != 1 or not 2 <= tokens.size(1) <= max_tokens + 1:
        raise LabError(f"tokens: need shape (1, T+1) with 1 <= T <= {max_tokens}, got {tuple(tokens.shape)}")
    model = to_reference(model)
    tokens = tokens.to(next(model.parameters()).device)
    hidden = []  # h_1 .. h_T, (1, H) each
    handle = recurrent_layers(model)[-1].register_forward_hook(_expose_hidden(hidden))
    try:
        with evaluating(model), torch.enable_grad():
            state = None
            for t in range(tokens.size(1) - 1):  # one step at a time, so every h_t is a tensor of its own
                logits, _, state = model(tokens[:, t : t + 1], state=state)  # (1, 1, V)
            loss = F.cross_entropy(logits[:, -1], tokens[:, -1])
            grads = torch.autograd.grad(loss, hidden)
    finally:
        handle.remove()
    return torch.stack([g.norm() for g in grads]).cpu().numpy()


@dataclass(frozen=True)
class DecayFit:
    """A gradient's decay per step back, fitted as g**k: g, how well a straight line fits log(norm)
    against the distance (r2, 1 for an exact geometric decay), and the distances the fit read."""

    g: float
    r2: float
    distances: int  # distances 0..distances-1 from the loss were fitted (exact zeros left out)


def gradient_decay_fit(norms, max_distance=None):
    """The factor g by which ||dL_T / dh_t|| shrinks per step back, so that distance k keeps ~g**k:
    exp of the least-squares slope of log(norm) over the distance 0..max_distance from the loss
    (norms as gradient_through_time returns them, farthest step first; exact zeros, float32's
    underflow, are left out), with the fit's R² (how close the curve is to one constant factor per
    step). A vanilla RNN's g sits well below 1; a gated cell's near 1. -> DecayFit"""
    by_distance = np.asarray(norms, dtype=np.float64)[::-1][: None if max_distance is None else max_distance + 1]
    distance = np.flatnonzero(by_distance > 0)
    if distance.size < 2:
        raise LabError("norms: need at least 2 non-zero gradient norms to fit a decay")
    logs = np.log(by_distance[distance])
    slope, intercept = np.polyfit(distance, logs, 1)
    spread = np.sum((logs - logs.mean()) ** 2)
    r2 = 1.0 if spread == 0 else float(1 - np.sum((logs - (slope * distance + intercept)) ** 2) / spread)
    return DecayFit(float(np.exp(slope)), r2, len(by_distance))


def gradient_decay_per_step(norms, max_distance=None):
    """gradient_decay_fit's g alone."""
    return gradient_decay_fit(norms, max_distance).g
