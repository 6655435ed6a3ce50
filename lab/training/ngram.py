"""Character n-grams: scoring any model on contexts of n - 1 characters, and a count-based baseline.

Glossary: N tokens in a text, M scored targets, K context length (n - 1), V vocabulary.

Seed 004's ScanMarkov reads contexts of 1..4 characters and predicts the next
(mixed 2..5-grams). Two questions make its numbers mean something:

    what does a Markov chain of the same order get?     KneserNey, counted on the training split
    what does a recurrent LM get from the same context? model_predictor on a checkpoint: it reads
                                                        the K characters from the zero state

`score_by_order` answers all three the same way: every model is a predictor,
contexts (M, K) -> log-probabilities (M, V), scored on the same targets for
every n (each position with n_max - 1 characters before it), so the figures
for n = 2..5 differ only in how much context the model saw.
"""

import numpy as np
import torch

from lab.data import CharTokenizer, encode_to_tensor, split_train_val
from lab.errors import LabError
from lab.nets.models import evaluating

N_MAX = 5  # seed 004: mixed 2..5-grams, contexts of 1..4 characters


def target_positions(n_tokens, n_max=N_MAX):
    """Every position with n_max - 1 tokens before it: the targets every order is scored on."""
    return torch.arange(n_max - 1, n_tokens)


def contexts_at(ids, positions, k):
    """The k tokens before each position: ids (N,), positions (M,) -> (M, k)."""
    return ids[positions[:, None] - k + torch.arange(k)]


@torch.no_grad()
def score_by_order(predict, ids, orders=range(2, N_MAX + 1), positions=None, batch=4096):
    """Cross-entropy (nats/token) and accuracy of `predict` at each order n, on the same targets.

    predict: contexts (M, n - 1) long -> log-probabilities (M, V); ids: (N,) long tensor;
    positions: which targets (default: target_positions over the whole of ids).
    Returns {n: {"loss": float, "accuracy": float, "count": M}}.
    """
    positions = target_positions(len(ids), max(orders)) if positions is None else positions
    scores = {}
    for n in orders:
        loss, correct = 0.0, 0
        for chunk in positions.split(batch):
            log_probs = predict(contexts_at(ids, chunk, n - 1)).double()  # (m, V)
            targets = ids[chunk].to(log_probs.device)  # (m,)
            loss -= log_probs.gather(1, targets[:, None]).sum().item()
            correct += (log_probs.argmax(1) == targets).sum().item()
        scores[n] = {"loss": loss / len(positions), "accuracy": correct / len(positions), "count": len(positions)}
    return scores


def model_predictor(model, device="cpu"):
    """A lab language model (any family) as a predictor: it reads each context from the zero
    state, so a recurrent LM's memory is cut to the context (a truncated recurrent model)."""

    def predict(contexts):
        logits = model(contexts.to(device))[0][:, -1]  # (M, V): the prediction after the last context token
        return torch.log_softmax(logits.float(), -1)

    return predict


# ---------------------------------------------------------------------------
# the count baseline: a character Markov chain of order n, smoothed


class KneserNey:
    """Interpolated Kneser-Ney n-gram model over token ids (Kneser & Ney 1995; Chen & Goodman 1999, eq. 26),
    one absolute discount per order and level, D = n1 / (n1 + 2 n2) (Ney, Essen & Kneser 1994), where
    n_r counts the m-grams seen exactly r times at that level. A model of order n = K + 1:

        P_m(w | h) = (max(c_m(hw) - D_m, 0) + D_m N1+(h .) P_{m-1}(w | h')) / c_m(h .)    h' = h less its oldest
        P_0(w)     = 1 / V                                                                token; m = 1..n

    c_n is the raw count; below the top order c_m(hw) is the continuation count N1+(. hw), the number
    of distinct tokens seen before hw ("Francisco" is frequent but follows one word only). A context
    never seen (c_m(h .) = 0) leaves P_{m-1} unchanged. Every P_m sums to 1 over w, since
    sum_w max(c - D, 0) = c(h .) - D N1+(h .) when D <= 1.

    m-grams are kept as base-V integers (np.unique tables, looked up with searchsorted), so counting
    a 1 MB corpus to order 5 takes seconds.
    """

    def __init__(self, ids, vocab_size, order=N_MAX):
        ids = np.asarray(ids, dtype=np.int64)
        if vocab_size**order >= 2**62:
            raise LabError(f"order: {vocab_size}^{order} m-grams do not fit in 64-bit codes")
        self.vocab_size, self.order = vocab_size, order
        grams = [None] + [np.unique(self._codes(ids, m), return_counts=True) for m in range(1, order + 1)]
        # continuation counts of m-grams: how many distinct (m+1)-grams end with them
        suffixes = [None] + [np.unique(grams[m + 1][0] % vocab_size**m, return_counts=True) for m in range(1, order)]
        self.levels = {
            (m, m == top): self._level(*(grams[m] if m == top else suffixes[m]))
            for top in range(1, order + 1)
            for m in range(1, top + 1)
        }

    def _codes(self, ids, m):
        """The m-grams of ids (N,) as base-V codes (N - m + 1,)."""
        windows = np.lib.stride_tricks.sliding_window_view(ids, m)  # (N - m + 1, m)
        return windows @ (self.vocab_size ** np.arange(m - 1, -1, -1, dtype=np.int64))

    def _level(self, codes, counts):
        """One order's table: m-gram counts, and per context c(h .), N1+(h .) and the discount."""
        contexts, inverse = np.unique(codes // self.vocab_size, return_inverse=True)
        n1, n2 = (counts == 1).sum(), (counts == 2).sum()
        return {
            "codes": codes,
            "counts": counts,
            "contexts": contexts,
            "totals": np.bincount(inverse, weights=counts),
            "types": np.bincount(inverse),
            "discount": n1 / (n1 + 2 * n2) if n1 + 2 * n2 else 0.5,
        }

    @staticmethod
    def _lookup(keys, values, queries):
        """values[keys == q] for each query, 0 where a query is not among the sorted keys."""
        i = np.searchsorted(keys, queries).clip(max=len(keys) - 1)
        return np.where(keys[i] == queries, values[i], 0)

    def probs(self, contexts, targets):
        """P(target | context) at order K + 1: contexts (M, K), targets (M,) -> (M,) float64."""
        contexts, targets = np.asarray(contexts, dtype=np.int64), np.asarray(targets, dtype=np.int64)
        n = contexts.shape[1] + 1
        if n > self.order:
            raise LabError(f"order: this model counts up to {self.order}-grams, asked for {n}")
        p = np.full(len(targets), 1.0 / self.vocab_size)
        for m in range(1, n + 1):
            level = self.levels[(m, m == n)]
            h = self._codes_of(contexts[:, n - m :])  # (M,) the m - 1 newest context tokens
            total = self._lookup(level["contexts"], level["totals"], h)
            types = self._lookup(level["contexts"], level["types"], h)
            count = self._lookup(level["codes"], level["counts"], h * self.vocab_size + targets)
            D = level["discount"]
            p = np.where(total > 0, (np.maximum(count - D, 0) + D * types * p) / np.maximum(total, 1), p)
        return p

    def _codes_of(self, rows):
        return rows @ (self.vocab_size ** np.arange(rows.shape[1] - 1, -1, -1, dtype=np.int64))

    def log_probs(self, contexts):
        """A predictor for score_by_order: contexts (M, K) -> log P(w | context) for every w, (M, V)."""
        contexts = np.asarray(contexts, dtype=np.int64)
        M, V = len(contexts), self.vocab_size
        p = self.probs(np.repeat(contexts, V, axis=0), np.tile(np.arange(V), M))  # (M * V,)
        return torch.from_numpy(np.log(p.reshape(M, V)))


def split_ids(tokenizer, text, val_fraction=0.1):
    """The lab's split of a text (lab.data.split_train_val: validation = the last val_fraction)."""
    return split_train_val(encode_to_tensor(tokenizer, text), val_fraction)


def kneser_ney_scores(text, orders=range(1, N_MAX + 1), val_fraction=0.1):
    """Markov chains of each order counted on the training split of `text` (characters), scored on
    its validation split: {n: {"loss", "accuracy", "count"}}."""
    tokenizer = CharTokenizer.from_text(text)
    train_ids, val_ids = split_ids(tokenizer, text, val_fraction)
    model = KneserNey(train_ids, tokenizer.vocab_size, max(orders))
    return score_by_order(model.log_probs, val_ids, orders)


def truncated_scores(model, tokenizer, text, orders=range(2, N_MAX + 1), val_fraction=0.1, device="cpu"):
    """A lab language model on the validation split of `text`, its context cut to n - 1 tokens read
    from the zero state: what a recurrent model knows from as much context as a Markov chain of order n."""
    _, val_ids = split_ids(tokenizer, text, val_fraction)
    with evaluating(model):
        return score_by_order(model_predictor(model, device), val_ids, orders)
