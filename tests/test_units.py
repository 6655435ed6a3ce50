"""What units track: correlations (exact over chunks), the gallery, span selection and unit orders,
checked on a model with one unit wired to the inside of [stage directions]."""

import numpy as np
import pytest
import torch

from lab.data import CharTokenizer, load_bundled_corpus
from lab.instruments.features import FEATURES
from lab.instruments.introspect import GateTrace, trace_text
from lab.instruments.units import (
    TABLE_COLUMNS,
    UNIT_ORDERS,
    pearson,
    span_units,
    strongest_per_feature,
    top_units,
    unit_correlations,
    unit_correlations_over,
    unit_gallery,
    unit_order,
)
from lab.nets.models import LMConfig, build_model

CORPUS = load_bundled_corpus()
TEXT = CORPUS[20000:21500]  # Hamlet, with stage directions in brackets
PLANTED = 5  # the unit wired to track the brackets
H = 16


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(CORPUS)


def bracket_lstm(tok, unit=PLANTED):
    """A random reference LSTM whose `unit` holds c = 1 from "[" to "]" and 0 elsewhere.

    Embedding dimension 0 is 1 for "[" only and dimension 1 for "]" only. On either bracket the
    unit's input gate opens (i = σ(20) ≈ 1) and its forget gate shuts (f ≈ 0), writing g = tanh(20) = 1
    on "[" and g = tanh(0) = 0 on "]"; on any other character i = 0 and f = 1 keep c as it is."""
    torch.manual_seed(0)
    model = build_model(
        LMConfig(cell="lstm", backend="reference", vocab_size=tok.vocab_size, embed_dim=8, hidden_size=H)
    )
    layer = model.rnn.layers[0]
    i, f, g, o = (block * H + unit for block in range(4))  # weights stack [i; f; g; o] (lab.nets.cells)
    with torch.no_grad():
        model.embedding.weight[:, :2] = 0
        model.embedding.weight[tok.encode("[")[0], 0] = 1
        model.embedding.weight[tok.encode("]")[0], 1] = 1
        for row in (i, f, g, o):
            layer.weight_ih[row] = 0
            layer.weight_hh[row] = 0
        layer.weight_ih[i, :2], layer.bias[i] = 40, -20
        layer.weight_ih[f, :2], layer.bias[f] = -40, 20
        layer.weight_ih[g, 0], layer.bias[g] = 20, 0
        layer.bias[o] = 20
    return model


def test_pearson_matches_numpy_and_gives_zero_for_a_constant_column():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3)) + 100  # far from 0: the running sums must stay exact
    x[:, 2] = 7.0
    y = x[:, 0] * 0.5 + rng.normal(size=50)
    r = pearson(x, y)
    assert r[0] == pytest.approx(np.corrcoef(x[:, 0], y)[0, 1], abs=1e-12)
    assert r[1] == pytest.approx(np.corrcoef(x[:, 1], y)[0, 1], abs=1e-12)
    assert r[2] == 0.0


def test_the_planted_unit_tracks_the_brackets(tok):
    trace = trace_text(bracket_lstm(tok), tok, TEXT)
    inside = FEATURES["in_brackets"].per_char(TEXT)
    np.testing.assert_allclose(trace.gate(0, "c")[:, PLANTED], inside, atol=1e-3)


def test_the_gallery_ranks_the_planted_unit_first(tok):
    table = unit_correlations(trace_text(bracket_lstm(tok), tok, TEXT))
    assert list(table.columns) == TABLE_COLUMNS
    assert "in_quotes" not in set(table.feature)  # constant on this text: no correlation to rank
    gallery = unit_gallery(table, k=4)
    assert len(gallery) == 4 and gallery.feature.is_unique
    assert gallery.abs_correlation.is_monotonic_decreasing
    first = gallery.iloc[0]
    assert (first.feature, first.layer, first.unit) == ("in_brackets", 0, PLANTED) and first.gate in ("c", "h")
    assert first.correlation > 0.99
    assert len({(r.layer, r.gate, r.unit) for r in gallery.itertuples()}) == 4  # no unit twice
    best = strongest_per_feature(table)
    assert best.feature.is_unique and best.iloc[0].feature == "in_brackets"


def test_correlations_over_chunks_equal_one_trace(tok):
    model = bracket_lstm(tok)
    whole = unit_correlations(trace_text(model, tok, TEXT))
    chunked = unit_correlations_over(model, tok, TEXT, chunk_tokens=300)
    assert list(chunked.columns) == TABLE_COLUMNS and len(chunked) == len(whole)
    np.testing.assert_allclose(chunked.correlation, whole.correlation, atol=1e-6)


def test_span_selection_finds_the_planted_unit(tok):
    trace = trace_text(bracket_lstm(tok), tok, TEXT)
    start = TEXT.index("[")
    end = TEXT.index("]", start)  # the span "[Enter ...." without its "]", where c holds 1
    found = span_units(trace, start, end, k=3)
    assert list(found.columns) == [
        "layer",
        "gate",
        "unit",
        "correlation",
        "abs_correlation",
        "mean_inside",
        "mean_outside",
    ]
    assert found.unit.iloc[0] == PLANTED and found.gate.iloc[0] in ("c", "h")
    assert found.mean_inside.iloc[0] > found.mean_outside.iloc[0]
    for bad in ((5, 5), (-1, 4), (0, len(trace.token_ids)), (3, len(trace.token_ids) + 1)):
        with pytest.raises(ValueError, match="span"):
            span_units(trace, *bad)


def _synthetic_trace(tokens, units):
    """A one-layer trace of the given token texts whose 'h' is the given (T, H) array."""
    return GateTrace(
        token_ids=list(range(len(tokens))),
        pieces=list(tokens),
        token_texts=list(tokens),
        layers=[{"h": units}],
        cells=["rnn"],
        gate_names=[("h",)],
        conventions=["test"],
    )


def test_top_units_find_a_planted_unit():
    text = "[Enter Ghost.]\nHam. Speak; I am bound to hear.\n[Exit Ghost.]"
    inside = FEATURES["in_brackets"].per_char(text)
    rng = np.random.default_rng(0)
    units = rng.normal(size=(len(text), 6))
    units[:, 4] = -inside + 0.01 * rng.normal(size=len(text))  # unit 4 is off inside brackets
    top = top_units(_synthetic_trace(text, units), "in_brackets", k=3)
    assert list(top.columns) == ["unit", "correlation", "abs_correlation"] and len(top) == 3
    assert top.unit.iloc[0] == 4 and top.correlation.iloc[0] < -0.99
    assert top.abs_correlation.is_monotonic_decreasing


def test_top_units_refuse_a_constant_feature():
    trace = _synthetic_trace("no quotes here", np.random.default_rng(0).normal(size=(14, 3)))
    with pytest.raises(ValueError, match="constant"):
        top_units(trace, "in_quotes")


def test_unit_orders(tok):
    trace = trace_text(bracket_lstm(tok), tok, TEXT)
    c = trace.gate(0, "c")
    inside = FEATURES["in_brackets"].per_char(TEXT)
    for order in UNIT_ORDERS:
        assert sorted(unit_order(c, order, inside)) == list(range(H)), order
    np.testing.assert_array_equal(unit_order(c, "index"), np.arange(H))
    assert unit_order(c, "feature", inside)[0] == PLANTED
    assert unit_order(c, "feature", -inside)[0] == PLANTED  # against the feature counts as much as with it
    # two copies of one unit and its negation: the copies sit side by side
    twins = np.concatenate([c[:, :3], c[:, :1] + 1e-3, -c[:, :1]], 1)  # (T, 5): unit 3 copies unit 0
    order = list(unit_order(twins, "similarity"))
    assert abs(order.index(0) - order.index(3)) == 1
    assert list(unit_order(c[:, :1], "similarity")) == [0]
    with pytest.raises(ValueError, match="constant"):
        unit_order(c, "feature", np.zeros(len(TEXT)))
    with pytest.raises(ValueError, match="similarity"):
        unit_order(c, "alphabetical")
