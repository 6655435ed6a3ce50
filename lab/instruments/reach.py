"""How far a change travels: one measure of memory that every cell has, the vanilla RNN included.

Glossary: B changed copies of the text, T tokens, H hidden units, K lags.

    reach = change_reach(model, tokenizer, text, max_lag=128)
    reach.kept[9]        # the typical share of a one-character change still in the state 10 steps later

Change one token of a text (at step t) to another and let the model read both versions from the zero
state. The two states differ from step t on; ||h'_{t+k} - h_{t+k}|| / ||h'_t - h_t|| says how much of
the difference the change made at step t still shows k steps later. h is the last recurrent layer's
output, the state every prediction is read from. A model whose state forgets drives the ratio to 0;
one that carries what it read keeps it above 0 for as long as it remembers. Unlike a keep gate's
retention (lab.instruments.memory), this asks nothing of the cell's equations, so the vanilla RNN is
measured the same way as the gated cells. The change is made at `starts` places spread over the text,
each to a token drawn at random, and the median over them is reported: one change can be the odd one out.
"""

from dataclasses import dataclass

import numpy as np
import torch

from lab.errors import LabError
from lab.instruments.introspect import encode_text
from lab.nets.models import evaluating, recurrent_layers

MAX_REACH_TOKENS = 4000


@dataclass
class ChangeReach:
    """What is left of a one-token change after k steps, k = 1..K."""

    lags: np.ndarray  # (K,) 1..K
    kept: np.ndarray  # (K,) the median over the changes of ||Δh_{t+k}|| / ||Δh_t||
    changes: int  # how many changes the median is over
    unit: str = "token"  # what one step k is, the tokenizer's unit ("character", "subword"): k counts them

    def at(self, k):
        """The share kept after k steps, or None when fewer than k steps were measured."""
        return float(self.kept[k - 1]) if 1 <= k <= len(self.lags) else None

    def last_above(self, share):
        """The longest lag at which more than `share` is kept (0 when none): how far the change travels."""
        above = np.nonzero(self.kept > share)[0]
        return int(self.lags[above[-1]]) if len(above) else 0


def _last_layer_outputs(model, ids):
    """The last recurrent layer's output at every step of each row of ids (B, T) -> (B, T, H)."""
    outputs = []
    handle = recurrent_layers(model)[-1].register_forward_hook(lambda layer, inputs, out: outputs.append(out[0]))
    try:
        with evaluating(model), torch.inference_mode():
            model(ids)
    finally:
        handle.remove()
    return outputs[0].float()


def change_reach(model, tokenizer, text, max_lag=128, starts=16, seed=0):
    """How much of a one-token change at step t still shows in the state at t + k, for k = 1..K.

    model: any lab text model (RecurrentLM or ScanMarkov, any backend); text: at least 3 tokens. K is
    min(max_lag, T - 2): each change is made at a step with K steps after it. Returns ChangeReach."""
    ids = encode_text(tokenizer, text, "text", MAX_REACH_TOKENS)
    T = len(ids)
    if T < 3:
        raise LabError("text: measuring how far a change travels needs at least 3 tokens")
    if tokenizer.vocab_size < 2:
        raise LabError("model: a vocabulary of one token leaves nothing to change a token to")
    K = min(max_lag, T - 2)
    rng = np.random.default_rng(seed)
    at = np.unique(np.linspace(0, T - K - 1, starts).astype(int))  # (B,) where each copy is changed
    device = next(model.parameters()).device
    original = torch.tensor([ids], device=device)  # (1, T)
    changed = original.repeat(len(at), 1)  # (B, T)
    for row, t in enumerate(at):
        other = int(rng.integers(tokenizer.vocab_size - 1))
        changed[row, t] = other + (other >= ids[t])  # any token but the one there
    difference = (_last_layer_outputs(model, changed) - _last_layer_outputs(model, original)).norm(dim=-1)  # (B, T)
    ratios = np.stack(
        [
            (difference[row, t + 1 : t + K + 1] / difference[row, t].clamp_min(1e-12)).cpu().numpy()
            for row, t in enumerate(at)
        ]
    )  # (B, K)
    unit = getattr(tokenizer, "unit", "token")
    return ChangeReach(lags=np.arange(1, K + 1), kept=np.median(ratios, 0), changes=len(at), unit=unit)
