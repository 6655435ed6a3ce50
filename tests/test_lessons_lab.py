"""The lab functions behind the Lessons page: the state-reset curve, the keep-gate biases a model
learned, the gradient's decay per step, and the two scans raced."""

import math

import numpy as np
import pytest
import torch

from lab.data import CharTokenizer
from lab.instruments.memory import (
    Retention,
    gradient_decay_per_step,
    keep_gate_biases,
    loss_with_state_reset,
    state_reset_curve,
)
from lab.instruments.scans import race_scans
from lab.nets.models import LMConfig, build_model
from lab.training.checkpoints import BUNDLED_DIR, load_checkpoint

TEXT = (
    "Ham.\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"
)


@pytest.fixture(scope="module")
def bundled_gru():
    path = BUNDLED_DIR / "char-gru-torch_latest.safetensors"
    assert path.is_file(), "bundled checkpoint missing (python scripts/build_checkpoints.py)"
    return load_checkpoint(path)


def small_lm(cell, vocab_size, seed=0, **options):
    torch.manual_seed(seed)
    return build_model(LMConfig(cell=cell, vocab_size=vocab_size, embed_dim=8, hidden_size=16, **options))


def loss_read_in_order(model, tokenizer, text, chunk):
    """The text read in consecutive chunks with the state carried from one to the next."""
    ids = torch.tensor([tokenizer.encode(text)])
    state, total = None, 0.0
    with torch.no_grad():
        model.eval()
        for start in range(0, ids.size(1) - 1, chunk):
            x, y = ids[:, start : start + chunk], ids[:, start + 1 : start + chunk + 1]
            x = x[:, : y.size(1)]
            _, loss, state = model(x, y, state)
            total += loss.item() * y.numel()
    return total / (ids.size(1) - 1)


def test_the_bundled_gru_gains_from_its_memory_and_the_full_end_is_the_loss_read_in_order(bundled_gru):
    model, tok = bundled_gru.model, bundled_gru.tokenizer
    curve = state_reset_curve(model, tok, TEXT)
    n = len(TEXT)
    assert curve["reset_every"].tolist() == [1, 2, 4, 8, 16, 32, 64, 128, n - 1]
    assert curve["full"].tolist() == [False] * 8 + [True]
    losses = curve["nats_per_char"].to_numpy()
    assert np.all(np.diff(losses) < 0.03), losses  # monotone within noise: more context never costs much
    assert losses[0] - losses[-1] > 0.5  # and the memory is worth a lot: P(s_t | s_{t-1}) is far worse
    # the full end: the text read in order, in chunks of 7 with the state carried over
    assert losses[-1] == pytest.approx(loss_read_in_order(model, tok, TEXT, 7), abs=1e-4)
    # k = 1: every token predicted from the one before alone, each from the zero state
    ids = torch.tensor(tok.encode(TEXT))
    with torch.no_grad():
        one_step = torch.nn.functional.cross_entropy(model(ids[:-1, None])[0][:, 0], ids[1:]).item()
    assert losses[0] == pytest.approx(one_step, abs=1e-4)


def test_nats_per_char_divides_by_the_texts_characters_per_token():
    tok = CharTokenizer.from_text(TEXT)
    model = small_lm("gru_seed", tok.vocab_size)
    curve = state_reset_curve(model, tok, TEXT, resets=[3, None])
    assert curve["reset_every"].tolist() == [3, len(TEXT) - 1]
    np.testing.assert_allclose(curve["nats_per_char"], curve["nats_per_token"])  # one character per token
    assert curve["nats_per_token"][0] == pytest.approx(loss_with_state_reset(model, tok, TEXT, 3))


def test_a_reset_longer_than_the_text_is_the_full_read_and_bad_input_is_refused():
    tok = CharTokenizer.from_text(TEXT)
    model = small_lm("lstm", tok.vocab_size)
    assert loss_with_state_reset(model, tok, TEXT, 10_000) == pytest.approx(loss_with_state_reset(model, tok, TEXT))
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="reset_every"):
            loss_with_state_reset(model, tok, TEXT, bad)
    with pytest.raises(ValueError, match="2 tokens"):
        loss_with_state_reset(model, tok, "H")
    with pytest.raises(ValueError, match="not in the model's vocabulary"):
        loss_with_state_reset(model, tok, "Snow ☃")


@pytest.mark.parametrize("cell, bias, expected", [("gru_torch", 1.5, 1.5), ("gru_seed", 1.5, 1.5), ("lstm", 2.0, 2.0)])
def test_keep_gate_biases_reads_the_bias_of_the_factor_that_keeps(cell, bias, expected):
    tok = CharTokenizer.from_text(TEXT)
    model = small_lm(cell, tok.vocab_size, keep_bias=bias, num_layers=2)
    table = keep_gate_biases(model)
    assert table["layer"].tolist() == [0, 1] and set(table["cell"]) == {cell}
    assert table["bias_median"].tolist() == pytest.approx([expected] * 2)
    assert table["retention"].tolist() == pytest.approx([1 / (1 + math.exp(-expected))] * 2)
    # the PyTorch GRU's effective bias is b_iz + b_hz
    if cell == "gru_torch":
        layer = model.rnn.layers[0]
        with torch.no_grad():
            layer.bias_hh[16:32] = 0.5
        assert keep_gate_biases(model)["bias_median"][0] == pytest.approx(expected + 0.5)


def test_keep_gate_biases_leaves_out_cells_without_a_keep_bias(bundled_gru):
    tok = CharTokenizer.from_text(TEXT)
    assert keep_gate_biases(small_lm("rnn", tok.vocab_size)).empty
    assert keep_gate_biases(small_lm("scan", tok.vocab_size)).empty
    trained = keep_gate_biases(bundled_gru.model)
    assert len(trained) == bundled_gru.config.num_layers  # one row per layer
    assert (trained["bias_q10"] <= trained["bias_median"]).all() and (
        trained["bias_median"] <= trained["bias_q90"]
    ).all()


def test_retention_half_life_is_the_first_lag_at_or_below_one_half():
    lags = np.arange(1, 6)
    curve = Retention(lags=lags, per_unit=None, median=0.8**lags, cell="lstm", keep_gate="f", limit=len(lags))
    assert curve.half_life == 4  # 0.8**3 = 0.512, 0.8**4 = 0.41
    assert (
        Retention(lags=lags, per_unit=None, median=0.99**lags, cell="lstm", keep_gate="f", limit=len(lags)).half_life
        is None
    )


def test_gradient_decay_per_step_recovers_a_geometric_decay():
    norms = 0.7 ** np.arange(40)[::-1]  # farthest step first, distance 0 last
    assert gradient_decay_per_step(norms) == pytest.approx(0.7)
    noisy = norms * np.exp(np.random.default_rng(0).normal(0, 0.05, 40))
    assert gradient_decay_per_step(noisy, max_distance=20) == pytest.approx(0.7, rel=0.02)
    with_underflow = np.concatenate([[0.0, 0.0], 0.5 ** np.arange(10)[::-1]])
    assert gradient_decay_per_step(with_underflow) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-zero"):
        gradient_decay_per_step([0.0, 0.0, 1.0])


def test_race_scans_agrees_to_1e5_and_times_both():
    table = race_scans([1, 5, 64], hidden=8, batch=2, repeats=1)
    assert table["T"].tolist() == [1, 5, 64]
    assert (table["max_abs_diff"] < 1e-5).all()
    assert (table[["sequential_ms", "parallel_ms"]] > 0).all().all()
    np.testing.assert_allclose(table["speedup"], table["sequential_ms"] / table["parallel_ms"])
    for bad in ([], [0], [10**6], [2.5]):
        with pytest.raises(ValueError, match="lengths"):
            race_scans(bad)


def test_reproduced_prefix_counts_the_characters_given_back_before_the_first_mistake():
    from lab.instruments.sampling import reproduced_prefix

    assert reproduced_prefix("Shall I compare", "Shall I compare thee") == 15
    assert reproduced_prefix("Shall we dance", "Shall I compare") == 6
    assert reproduced_prefix("xhall", "Shall") == 0
    assert reproduced_prefix("", "Shall") == 0


def test_the_toy_lessons_live_sentence_names_the_cells_off_chance_and_those_at_it():
    import numpy as np
    import pandas as pd

    from lab.lessons.toys import live_toy_sentence

    def rows(accuracies, chance=0.39):
        return pd.DataFrame([{"cell": c, "accuracy": a, "chance": chance} for c, a in accuracies.items()])

    label = str.upper
    assert live_toy_sentence(rows({"gru": 0.8, "rnn": np.nan}), 5, label) == ""  # before every first point
    both = live_toy_sentence(rows({"gru": 0.85, "lstm": 0.6, "rnn": 0.4, "scan": 0.39}), 20, label)
    assert both.startswith("After 20 s, off chance: the GRU 85% and the LSTM 60% right; the RNN 40% and the SCAN 39%")
    assert "still at chance" in both and "chance: 39%" in both
    none = live_toy_sentence(rows({"gru": 0.4, "rnn": 0.39}), 5, label)
    assert none.startswith("After 5 s, no cell answers off chance yet")
