"""One prediction at a time: the influence of earlier tokens, and next-token bars as you type."""

import numpy as np
import pytest
import torch

from lab.data import CharTokenizer
from lab.instruments.prediction import TypingReader, input_influence, next_tokens
from lab.nets.models import LMConfig, ScanMarkovConfig, build_model

TEXT = "ROMEO:\nBut, soft! what light through yonder window breaks?\n"


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT + "[]")


def copy_model(vocab_size, k):
    """A vanilla RNN wired as a shift register that predicts the token read k steps back.

    Embedding: the one-hot of the token, times 3. The hidden state is k blocks of V units: block 0
    takes the token just read, block j the block j-1 of the step before, so at step t block j holds
    the token of step t-j (through tanh, which keeps its sign and its largest coordinate). The head
    reads block k-1, the token of step t-k+1, which is k steps before the token it predicts, t+1."""
    V = vocab_size
    model = build_model(LMConfig(cell="rnn", backend="reference", vocab_size=V, embed_dim=V, hidden_size=k * V))
    layer = model.rnn.layers[0]
    with torch.no_grad():
        model.embedding.weight.copy_(3 * torch.eye(V))
        layer.weight_ih.zero_()
        layer.weight_ih[:V] = torch.eye(V)
        layer.weight_hh.zero_()
        for j in range(1, k):
            layer.weight_hh[j * V : (j + 1) * V, (j - 1) * V : j * V] = 3 * torch.eye(V)
        layer.bias.zero_()
        model.head.weight.zero_()
        model.head.weight[:, (k - 1) * V :] = 10 * torch.eye(V)
        model.head.bias.zero_()
    return model


@pytest.mark.parametrize("k", [1, 3, 7])
def test_influence_peaks_k_steps_back_for_a_model_that_copies_from_k_back(tok, k):
    model = copy_model(tok.vocab_size, k)
    ids = tok.encode(TEXT)
    target = 40
    influence = input_influence(model, ids, target)
    assert influence.target == target and influence.token_id == ids[target] and influence.norms.shape == (target,)
    assert target - int(np.argmax(influence.norms)) == k  # the distance back from the predicted token
    assert influence.shares.max() == 1.0
    predicted = model(torch.tensor([ids[:target]]))[0][0, -1].argmax().item()
    assert predicted == ids[target - k]  # it does copy


def test_influence_leaves_the_shared_model_alone_and_checks_the_target(tok):
    torch.manual_seed(0)
    model = build_model(LMConfig(cell="lstm", vocab_size=tok.vocab_size, embed_dim=8, hidden_size=16)).train()
    ids = tok.encode(TEXT)
    influence = input_influence(model, ids, 10)
    assert 0 < influence.probability < 1 and np.isfinite(influence.norms).all()
    assert model.training and all(p.grad is None for p in model.parameters())
    model(torch.tensor([ids]))[0].sum().backward()  # a hook left on the embedding would cut its gradient
    assert model.embedding.weight.grad is not None
    for bad in (0, len(ids)):
        with pytest.raises(ValueError, match="target"):
            input_influence(model, ids, bad)
    scan = build_model(ScanMarkovConfig(vocab_size=tok.vocab_size, embed_dim=8, gate_hidden=16, decoder_hidden=16))
    assert input_influence(scan, ids, 12).norms.shape == (12,)


@pytest.mark.parametrize("cell", ["gru_torch", "lstm"])
def test_typing_reader_carries_the_state_and_equals_reading_afresh(tok, cell):
    torch.manual_seed(0)
    model = build_model(LMConfig(cell=cell, vocab_size=tok.vocab_size, embed_dim=8, hidden_size=16))
    reader = TypingReader(model, tok)
    reader.read("ROMEO:\nBut, soft")
    assert reader.new_tokens == len("ROMEO:\nBut, soft")
    probs = reader.read("ROMEO:\nBut, soft!")
    assert reader.new_tokens == 1  # only the new character, from the carried state
    fresh = TypingReader(model, tok).read("ROMEO:\nBut, soft!")
    torch.testing.assert_close(probs, fresh)
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-5)
    reader.read("ROMEO:\nBut, soft!")
    assert reader.new_tokens == 0
    torch.testing.assert_close(reader.read("ROMEO:\nBut"), TypingReader(model, tok).read("ROMEO:\nBut"))
    assert reader.new_tokens == len("ROMEO:\nBut")  # an edit: read again from the start
    reader.read("")
    assert reader.ids == tok.encode("\n")  # the sampler's start
    with pytest.raises(ValueError, match="☃"):
        reader.read("snow ☃")


@pytest.mark.parametrize("cell", ["gru_torch", "lstm"])
def test_a_reader_started_from_anothers_reading_goes_on_as_that_reader_would(tok, cell):
    """Every student opening the Sample page starts from a reading made once (ui.shared.cached_calls): a reader
    started there reads on from the carried state, equal to one that read it all, and leaves the first unchanged."""
    torch.manual_seed(0)
    model = build_model(LMConfig(cell=cell, vocab_size=tok.vocab_size, embed_dim=8, hidden_size=16))
    first = TypingReader(model, tok)
    before = first.read("ROMEO:\nBut").clone()
    second = TypingReader(model, tok, start=first.reading())
    assert second.new_tokens == len("ROMEO:\nBut") and second.ids == first.ids
    probs = second.read("ROMEO:\nBut, soft")
    assert second.new_tokens == len(", soft")  # on from the carried state, not from the start
    torch.testing.assert_close(probs, TypingReader(model, tok).read("ROMEO:\nBut, soft"))
    assert first.ids == tok.encode("ROMEO:\nBut") and torch.equal(first.read("ROMEO:\nBut"), before)


def test_next_tokens_are_the_most_likely(tok):
    probs = torch.zeros(tok.vocab_size)
    probs[tok.encode("a")[0]], probs[tok.encode("\n")[0]], probs[tok.encode("b")[0]] = 0.5, 0.3, 0.2
    top = next_tokens(probs, tok, k=2)
    assert list(top.columns) == ["token_id", "piece", "text", "probability"]
    assert list(top.text) == ["a", "\n"] and list(top.probability) == pytest.approx([0.5, 0.3])
    assert len(next_tokens(probs, tok, k=1000)) == tok.vocab_size
