"""One prediction at a time: which earlier tokens drove it, and what comes next as you type.

Glossary: T time (tokens), E embedding width, V vocabulary, K shown candidates.

    influence = input_influence(model, tokenizer.encode("[Enter Ghost.]"), target=13)
    influence.norms        # (13,) how strongly each earlier token drove p("]")
    reader = TypingReader(model, tokenizer)
    reader.read("ROMEO.\\nBut, soft")      # reads the text, carrying the state
    reader.read("ROMEO.\\nBut, soft!")     # reads only "!" from the carried state
    next_tokens(reader.probs, tokenizer, k=5)

Influence is the connectivity view of Distill's "Memorization in RNNs" (Madsen
2019): the gradient of the chosen token's log-probability with respect to each
earlier input embedding, its L2 norm per position. A model that copies the token
k steps back has its influence peak k steps back (tests/test_prediction.py).
"""

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lab.errors import LabError
from lab.instruments.sampling import MAX_INFLUENCE_TOKENS, encode_prompt
from lab.nets.families import FAMILIES
from lab.nets.models import evaluating, recurrent_layers, to_reference
from lab.words import count


@dataclass
class Influence:
    """How the tokens before `target` drove the model's probability of the token at `target`."""

    target: int  # index of the predicted token in the token ids
    token_id: int  # the token at `target`
    probability: float  # the model's p(token at target | the tokens before it)
    norms: np.ndarray  # (target,) ||d log p / d e_s||_2 for every earlier position s; index 0 = the first token

    @property
    def shares(self):
        """norms / their largest value: 1 at the most influential earlier token. -> (target,)"""
        top = self.norms.max(initial=0.0)
        return self.norms / top if top > 0 else self.norms


def input_influence(model, token_ids, target):
    """The influence of every token before `target` on the model's probability of token `target`.

    model: a lab text model (RecurrentLM or ScanMarkov, any backend); token_ids: (T,) ints, read
    from the zero state; target: 1 <= target < T (the token predicted from tokens 0..target-1).
    The model reads tokens 0..target-1 once in eval mode; the log-probability of token_ids[target]
    at the last step is differentiated with respect to the embedding e_s of every token read (for
    ScanMarkov the token embedding, before its positional embedding is added). The model runs as a
    private copy, because a hook on its embedding must not touch a model other threads share.
    """
    T = len(token_ids)
    if not 1 <= target < T:
        raise LabError(f"target: must be a token after the first, in 1..{T - 1}, got {target}")
    if target > MAX_INFLUENCE_TOKENS:
        raise LabError(f"target: at most {count(MAX_INFLUENCE_TOKENS, 'token')} before it, got {target}")
    model = copy.deepcopy(model)
    embedded = []

    def capture(module, inputs, output):  # a leaf to differentiate by, in place of the looked-up rows
        leaf = output.detach().requires_grad_()
        embedded.append(leaf)
        return leaf

    idx = torch.tensor([token_ids[:target]], device=next(model.parameters()).device)  # (1, target)
    handle = model.embedding.register_forward_hook(capture)
    try:
        with evaluating(model), torch.enable_grad():
            logits, _, _ = model(idx)  # (1, target, V)
            log_p = torch.log_softmax(logits[0, -1].float(), -1)[token_ids[target]]
            (grad,) = torch.autograd.grad(log_p, embedded[0])  # (1, target, E)
    finally:
        handle.remove()
    return Influence(
        target=target,
        token_id=int(token_ids[target]),
        probability=float(log_p.detach().exp()),
        norms=grad[0].norm(dim=-1).double().cpu().numpy(),
    )


class TypingReader:
    """Reads a text as a student types it, the recurrent state carried: when the new text's tokens
    extend those read before, only the new ones are read, one step each (the stateful sampler's
    O(1) per token, lab.instruments.sampling); any other edit reads the text again from the zero state.
    An empty text reads the sampler's start ("\\n"). The model reads through its reference cells
    (lab.nets.models.to_reference: pass a reference model to share one), so each step's gates are
    recorded on the way.

    probs: (V,) the model's next-token distribution after the text; keep: (L,) for each recurrent layer
    the share of its memory its keep gate holds on to at the last token, averaged over the layer's units
    (its family's keep factor; None for a layer without one, the vanilla RNN's); new_tokens: how
    many tokens the last `read` fed the model; ids: the tokens read so far. `start`: another reader's `reading()`
    of the same model, to go on from where it is (a text many start from, read once).
    """

    def __init__(self, model, tokenizer, start=None):
        self.model, self.tokenizer = to_reference(model), tokenizer
        self.cells = [layer.cell for layer in recurrent_layers(self.model)]
        self.ids, self.state, self.probs, self.keep, self.new_tokens = start or ([], None, None, [], 0)

    def reading(self):
        """Where this reader is: (ids, state, probs, keep, new_tokens), for another reader's `start`. Shared, not
        copied: a read replaces them, never writes into them."""
        return self.ids, self.state, self.probs, self.keep, self.new_tokens

    def read(self, text):
        """Read `text` (ValueError naming characters the vocabulary lacks) -> probs (V,) float tensor."""
        ids = encode_prompt(self.tokenizer, text)
        if self.ids != ids[: len(self.ids)]:
            self.ids, self.state = [], None  # an edit, not an extension: start again
        new = ids[len(self.ids) :]
        self.new_tokens = len(new)
        if new:
            idx = torch.tensor([new], device=next(self.model.parameters()).device)  # (1, new)
            gates = [{} for _ in self.cells]  # (L,) gate name -> (1, new, H)
            with evaluating(self.model), torch.inference_mode():
                logits, _, self.state = self.model(idx, state=self.state, trace=gates)  # (1, new, V)
            self.probs = torch.softmax(logits[0, -1].float().cpu(), -1)  # (V,)
            self.keep = [
                float(FAMILIES[cell].keep(layer)[0, -1].float().mean()) if FAMILIES[cell].keep else None
                for cell, layer in zip(self.cells, gates)
            ]
            self.ids = ids
        return self.probs


def next_tokens(probs, tokenizer, k=5):
    """The k most likely next tokens: DataFrame with token_id, piece (the tokenizer's own, "▁the"),
    text (what it adds, " the") and probability, most likely first."""
    values, indices = torch.topk(probs, min(k, probs.numel()))
    ids = indices.tolist()
    return pd.DataFrame(
        {
            "token_id": ids,
            "piece": [tokenizer.id_to_piece(i) for i in ids],
            "text": [tokenizer.decode([i]) for i in ids],
            "probability": values.tolist(),
        }
    )
