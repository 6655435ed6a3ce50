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
