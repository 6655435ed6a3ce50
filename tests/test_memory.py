"""Memory: measured retention against g**k, time constants, gradients through time (the toy-task
probe is tests/test_probe.py)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lab.data import CharTokenizer, load_bundled_corpus
from lab.instruments.introspect import gate_summary, trace_text
from lab.instruments.memory import (
    bias_time_constants,
    constant_gate_retention,
    gradient_through_time,
    memory_spread,
    retention,
)
from lab.instruments.units import top_units
from lab.nets.families import CELLS, FAMILIES
from lab.nets.models import LMConfig, ScanMarkovConfig, build_model, recurrent_layers

TEXT = load_bundled_corpus()[20000:26000]
WITH_KEEP_GATES = [f.id for f in FAMILIES.values() if f.keep]


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT)


def small_lm(vocab_size, cell, backend="fast", layers=1, seed=0):
    torch.manual_seed(seed)
    return build_model(
        LMConfig(cell=cell, backend=backend, vocab_size=vocab_size, embed_dim=8, hidden_size=16, num_layers=layers)
    )


def _hold_keep_gate(layer, cell, bias):
    """Zero every weight feeding the keep gate and set its bias, so the gate is constant."""
    H = layer.hidden_size
    with torch.no_grad():
        if cell == "scan":
            layer.gate[2].weight.zero_()
            layer.gate[2].bias[:H] = bias  # A = sigmoid(bias)
        elif cell == "min_lstm":  # keep f / (f + i) = sigmoid(b) / (sigmoid(b) + sigmoid(-b)) = sigmoid(b)
            layer.weight_ih.zero_()
            layer.bias[:H], layer.bias[H : 2 * H] = bias, -bias
        elif cell == "min_gru":  # z is the first block
            layer.weight_ih.zero_()
            layer.bias[:H] = bias
        else:
            layer.weight_ih.zero_()
            layer.weight_hh.zero_()
            layer.bias[H : 2 * H] = bias  # z (GRUs) or f (LSTM): the second gate block


@pytest.mark.parametrize("cell", WITH_KEEP_GATES)
def test_a_constant_keep_gate_retains_g_to_the_k(tok, cell):
    model = small_lm(tok.vocab_size, cell)
    # keep factor sigmoid(2) = 0.88 everywhere; the seeds' GRU keeps 1 - z = sigmoid(-b_z), so b_z = -2
    _hold_keep_gate(recurrent_layers(model)[0], cell, -2.0 if FAMILIES[cell].keep_label == "1 - z" else 2.0)
    g = 1 / (1 + math.exp(-2.0))
    r = retention(model, tokenizer=tok, text=TEXT[:80], max_lag=30)
    expected = constant_gate_retention(g, np.arange(1, 31))  # (K,)
    assert r.per_unit.shape == (30, 16) and r.cell == cell and r.keep_gate == FAMILIES[cell].keep_label
    np.testing.assert_allclose(r.per_unit, np.repeat(expected[:, None], 16, 1), rtol=1e-5)
    np.testing.assert_allclose(r.median, expected, rtol=1e-5)


def test_each_units_half_life_and_the_spread_of_memories(tok):
    """Units held at different constant keep factors g: unit j's half-life is the first k with g_j^k <= 1/2."""
    model = small_lm(tok.vocab_size, "lstm")
    layer = recurrent_layers(model)[0]
    _hold_keep_gate(layer, "lstm", 0.0)
    biases = torch.linspace(-1.0, 7.0, 16)  # keep factors from 0.27 to 0.999
    with torch.no_grad():
        layer.bias[16:32] = biases
    g = torch.sigmoid(biases).double().numpy()
    r = retention(model, tokenizer=tok, text=TEXT[:300], max_lag=120)
    lags = np.arange(1, 121)
    kept = g[None, :] ** lags[:, None]  # (K, H)
    expected = np.where((kept <= 0.5).any(0), lags[(kept <= 0.5).argmax(0)], np.inf)
    np.testing.assert_array_equal(r.unit_half_lives, expected)
    assert np.isinf(r.unit_half_lives[-1]) and r.unit_half_lives[0] == 1  # 0.999^120 = 0.89; 0.27 < 1/2
    assert r.share_longer_than(10) == pytest.approx(np.mean(g**10 > 0.5))
    assert r.share_longer_than(121) is None  # not measured
    assert list(r.longest_units(2)) == [15, 14]
    short = r.up_to(30)
    assert len(short.lags) == 30 and np.array_equal(short.per_unit, r.per_unit[:30])
    spread = memory_spread([("held", 0, r), ("held, 30 lags", 0, short)])
    assert spread["longer_than_10"].tolist() == [r.share_longer_than(10)] * 2
    assert spread["longer_than_100"].iloc[0] == r.share_longer_than(100) and np.isnan(spread["longer_than_100"].iloc[1])
    assert spread["median_half_life"].iloc[0] == np.median(expected) and spread["lags"].tolist() == [120, 30]
    assert spread["lag_limit"].tolist() == [120, 30]  # both as many lags as asked for: the text was long enough
    cut = retention(model, tokenizer=tok, text=TEXT[:50], max_lag=120).up_to(64)
    assert (cut.limit, len(cut.lags)) == (64, 49)  # fewer lags than asked for: the text was too short


def test_retention_of_a_trace_is_a_decaying_average(tok):
    trace = trace_text(small_lm(tok.vocab_size, "lstm", layers=2), tok, TEXT[:200])
    r = retention(trace, layer=1, max_lag=500)
    assert len(r.lags) == 199 and r.per_unit.shape == (199, 16)  # lags stop at T - 1
    assert (np.diff(r.per_unit, axis=0) <= 1e-12).all() and (r.per_unit > 0).all()


def test_vanilla_rnn_has_no_keep_gate(tok):
    with pytest.raises(ValueError, match="gradient"):
        retention(small_lm(tok.vocab_size, "rnn"), tokenizer=tok, text=TEXT[:50])
    assert all(bool(f.keep) == bool(f.keep_label) for f in FAMILIES.values())


def test_seed_002_example_and_bias_time_constants():
    assert constant_gate_retention(0.99999, [100])[0] == pytest.approx(0.99900049, abs=1e-8)
    table = bias_time_constants([0.0, 1.0])
    assert isinstance(table, pd.DataFrame) and list(table.columns) == ["bias", "retention", "tau", "half_life"]
    assert table.retention.tolist() == pytest.approx([0.5, 0.7310586])
    assert table.tau.tolist() == pytest.approx([2.0, 1 + math.e])
    assert table.half_life.tolist() == pytest.approx([1.0, math.log(0.5) / math.log(0.7310586)])


def test_vanilla_rnn_gradients_vanish_with_distance(tok):
    for seed in range(3):
        model = small_lm(tok.vocab_size, "rnn", seed=seed)
        norms = gradient_through_time(model, TEXT[:41], tok)  # T = 40 steps
        assert norms.shape == (40,)
        quarter = len(norms) // 4
        assert norms[:quarter].mean() < 0.01 * norms[-quarter:].mean(), seed


def _gradient_by_restarting(model, tokens, t):
    """dL_T/dh_t another way: run up to step t, make the state a leaf, run the rest in one call."""
    with torch.no_grad():
        _, _, state = model(tokens[:, :t])
    last = state[-1]
    h = (last[0] if isinstance(last, tuple) else last).clone().requires_grad_()
    state[-1] = (h, last[1]) if isinstance(last, tuple) else h
    logits, _, _ = model(tokens[:, t:-1], state=state)
    loss = torch.nn.functional.cross_entropy(logits[:, -1], tokens[:, -1])
    return torch.autograd.grad(loss, h)[0].norm().item()


@pytest.mark.parametrize("cell", ["gru_seed", "lstm", "scan"])
def test_gradient_through_time_is_the_total_derivative(tok, cell):
    model = small_lm(tok.vocab_size, cell, layers=2).eval()
    tokens = torch.tensor([tok.encode(TEXT[:25])])  # T = 24
    norms = gradient_through_time(model, tokens)
    for t in (1, 12, 23):  # h_t is the state after reading t tokens: index t - 1
        assert norms[t - 1] == pytest.approx(_gradient_by_restarting(model, tokens, t), rel=1e-4)
    assert all(p.grad is None for p in model.parameters())


def test_gradient_through_time_for_every_family(tok):
    fused = small_lm(tok.vocab_size, "lstm", backend="fused", layers=2).eval()
    norms = gradient_through_time(fused, TEXT[:30], tok)  # run by the reference cells
    tokens = torch.tensor([tok.encode(TEXT[:30])])
    for t in (1, 15, 28):  # the same derivative through torch.nn's own backward pass
        assert norms[t - 1] == pytest.approx(_gradient_by_restarting(fused, tokens, t), rel=1e-4)
    torch.manual_seed(0)
    markov = build_model(
        ScanMarkovConfig(vocab_size=tok.vocab_size, embed_dim=8, gate_hidden=16, decoder_hidden=16)
    ).train()
    norms = gradient_through_time(markov, TEXT[:30], tok)
    assert norms.shape == (29,) and np.isfinite(norms).all() and markov.training
    with pytest.raises(ValueError, match="tokenizer"):
        gradient_through_time(markov, TEXT[:30])
    with pytest.raises(ValueError, match="tokens"):
        gradient_through_time(markov, torch.tensor([[1]]))


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_gate_and_memory_views_work_for_a_one_unit_model(cell):
    """Issue 14: the Gates and Memory pages on a 1-unit model (H = 1, E = 1) and saturated biases."""
    tok = CharTokenizer.from_text(TEXT)
    model = build_model(LMConfig(cell=cell, vocab_size=tok.vocab_size, embed_dim=1, hidden_size=1, num_layers=2))
    trace = trace_text(model, tok, TEXT[:80])
    summary = gate_summary(trace)
    assert set(summary.gate) == set(trace.gate_names[0]) and summary["mean"].notna().all()
    for gate in trace.gate_names[0]:
        assert len(top_units(trace, "is_space", layer=1, gate=gate, k=5)) == 1  # one unit, not five
    if cell in WITH_KEEP_GATES:
        assert retention(trace, 1).per_unit.shape == (64, 1)
    assert gradient_through_time(model, TEXT[:30], tok).shape == (29,)
    table = bias_time_constants([40.0, -1000.0, 0.0])
    assert table.tau.tolist()[2] == 2.0 and table.notna().all().all()
