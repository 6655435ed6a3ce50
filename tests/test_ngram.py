"""Seed 004's n-gram training (lab.training.tasks.NgramTask), scoring by context length and the count
baseline (lab.training.ngram)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lab.data import CharTokenizer, load_bundled_corpus
from lab.nets.models import ScanMarkovConfig, build_model
from lab.training.ngram import (
    KneserNey,
    contexts_at,
    kneser_ney_scores,
    model_predictor,
    score_by_order,
    target_positions,
    truncated_scores,
)
from lab.training.tasks import NgramTask
from lab.training.train import TrainConfig, train

HAND = "abcdefghijklmnopqrstuvwxyz" * 4  # every character determines the next: contexts are easy to check


def tiny_markov(vocab_size, max_positions=4):
    torch.manual_seed(0)
    return build_model(
        ScanMarkovConfig(
            vocab_size=vocab_size, embed_dim=16, gate_hidden=32, decoder_hidden=32, max_positions=max_positions
        )
    )


def test_ngram_batches_start_each_context_at_position_0_and_mark_only_its_target():
    task = NgramTask.from_text(HAND * 3, "char")
    x, y, restart = next(task.batches(TrainConfig(batch_size=300), torch.Generator().manual_seed(0)))
    assert restart and x.shape == y.shape == (300, 4)
    decode = task.tokenizer.decode
    lengths = set()
    for xs, ys in zip(x.tolist(), y.tolist()):
        marked = [i for i, v in enumerate(ys) if v != NgramTask.IGNORE]
        assert len(marked) == 1  # one target per sample, under the context's last character
        k = marked[0] + 1
        lengths.add(k)
        context, target = decode(xs[:k]), decode([ys[k - 1]])
        assert (context + target) in HAND  # the context's characters in order, then the next one
    assert lengths == {1, 2, 3, 4}  # n = 2..5


def test_the_loss_is_taken_on_the_real_targets_alone_with_label_smoothing():
    task = NgramTask.from_text(HAND * 3, "char")
    x, y, _ = next(task.batches(TrainConfig(batch_size=64), torch.Generator().manual_seed(1)))
    model = tiny_markov(task.vocab_size)
    logits, loss, _ = model(x, y, label_smoothing=0.1)
    last = (y != NgramTask.IGNORE).int().argmax(1)  # (B,) column of each target
    rows = torch.arange(len(x))
    expected = F.cross_entropy(logits[rows, last], y[rows, last], label_smoothing=0.1)
    assert torch.allclose(loss, expected)
    # the padding after a context changes nothing: the model is causal
    after = torch.arange(4) > last[:, None]  # (B, 4): the columns after each context
    other = torch.where(after, (x + 7) % task.vocab_size, x)
    assert not torch.equal(other, x)
    assert torch.allclose(model(other, y)[0][rows, last], logits[rows, last], atol=1e-6)


def test_score_by_order_reads_the_n_minus_1_characters_before_each_target():
    ids = torch.arange(10)
    positions = target_positions(len(ids))
    assert positions.tolist() == list(range(4, 10))
    assert contexts_at(ids, positions[:2], 3).tolist() == [[1, 2, 3], [2, 3, 4]]
    seen = []

    def predict(contexts):  # certain of the next id: loss 0 and accuracy 1 at every order
        seen.append(contexts.shape[1])
        return torch.log(F.one_hot(contexts[:, -1] + 1, 11).double().clamp(min=1e-300))

    scores = score_by_order(predict, ids)
    assert sorted(set(seen)) == [1, 2, 3, 4]
    assert all(s["accuracy"] == 1.0 and s["loss"] < 1e-9 and s["count"] == 6 for s in scores.values())


def test_a_tiny_ngram_run_lowers_the_loss_at_every_order():
    task = NgramTask.from_text(load_bundled_corpus()[:20_000], "char")
    model = tiny_markov(task.vocab_size)
    config = TrainConfig(batch_size=64, max_steps=60, eval_interval=60, eval_windows=256, lr=1e-2, label_smoothing=0.1)
    before = task.evaluate(model, config, "cpu")
    result = train(model, task, config)
    after = result.history[-1]
    for n in range(2, 6):
        assert after[f"val_loss_n{n}"] < before[f"val_loss_n{n}"] - 0.5
    assert after["val_loss"] == after["val_loss_n5"] and after["val_nats_per_char"] == after["val_loss_n5"]


def test_epochs_are_every_position_at_every_order():
    task = NgramTask.from_text(HAND * 10, "char")
    assert task.items_per_epoch(TrainConfig(batch_size=8)) == 4 * len(task.train_ids) / 8
    assert model_predictor(tiny_markov(task.vocab_size))(torch.zeros(3, 2, dtype=torch.long)).shape == (3, 26)


# ---------------------------------------------------------------------------
# the count baseline


def test_kneser_ney_matches_a_hand_computation():
    """ "aabab", V = 2 (a = 0, b = 1), order 2. Bigrams aa, ab, ba, ab: raw counts aa 1, ab 2, ba 1, so
    n1 = 2, n2 = 1 and D2 = 2 / (2 + 2) = 1/2. Continuation counts N1+(. a) = 2 (aa, ba), N1+(. b) = 1:
    n1 = n2 = 1, D1 = 1/3, P1(a) = (2 - 1/3 + 1/3 * 2 * 1/2) / 3 = 2/3 (the raw unigram would say 3/5).
    P(b | a) = (2 - 1/2 + 1/2 * 2 * P1(b)) / 3 = 11/18; P(a | b) = (1 - 1/2 + 1/2 * 1 * P1(a)) / 1 = 5/6."""
    model = KneserNey([0, 0, 1, 0, 1], vocab_size=2, order=2)
    p = model.probs([[0], [1], [0], [1]], [1, 0, 0, 1])
    assert p.tolist() == pytest.approx([11 / 18, 5 / 6, 7 / 18, 1 / 6])
    # the order-1 model is the raw unigram (no singletons: D = 0)
    assert model.probs(np.zeros((2, 0)), [0, 1]).tolist() == pytest.approx([3 / 5, 2 / 5])


def test_kneser_ney_distributions_sum_to_1_for_seen_and_unseen_contexts():
    ids = CharTokenizer.from_text(HAND).encode(HAND[:60] + "zyx")
    model = KneserNey(ids, vocab_size=26, order=5)
    rng = np.random.default_rng(0)
    for k in range(5):
        contexts = np.concatenate(
            [contexts_at(torch.tensor(ids), torch.arange(4, 30), k).numpy(), rng.integers(0, 26, (20, k))]
        )  # seen contexts, then mostly unseen ones
        probs = model.log_probs(contexts).exp()
        assert torch.allclose(probs.sum(1), torch.ones(len(contexts), dtype=torch.float64))
        assert (probs > 0).all()


def test_kneser_ney_and_truncated_models_are_scored_on_the_split():
    text = load_bundled_corpus()[:30_000]
    counts = kneser_ney_scores(text, orders=range(1, 4))
    assert counts[3]["loss"] < counts[2]["loss"] < counts[1]["loss"]  # more context, better, on held-out text
    assert counts[1]["count"] == counts[3]["count"] == 3000 - 2  # the last 10%, every order the same targets
    tokenizer = CharTokenizer.from_text(text)
    scores = truncated_scores(tiny_markov(tokenizer.vocab_size), tokenizer, text, orders=(2, 3))
    assert scores[2]["count"] == counts[2]["count"] and 0 <= scores[3]["accuracy"] <= 1
