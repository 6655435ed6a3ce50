"""Gate traces: shapes, ranges, errors, summaries, and a long text read in chunks."""

import numpy as np
import pytest
import torch

from lab.data import CharTokenizer, load_bundled_corpus
from lab.instruments.introspect import SIGMOID_GATES, gate_kind, gate_summary, trace_chunks, trace_text
from lab.nets.backends import FUSED_MODULES
from lab.nets.families import CELLS
from lab.nets.models import LMConfig, ScanMarkovConfig, build_model

TEXT = load_bundled_corpus()[20000:26000]
SAMPLE = "[Exit.]\n\n\nScene III. A room in Polonius's house.\n\n[Enter Laertes and Ophelia.]\n\nLaer.\nMy"
RANGES = {"sigmoid gate": (0.0, 1.0), "tanh candidate": (-1.0, 1.0)}


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT)


def small_lm(vocab_size, cell, backend="fast", layers=2):
    torch.manual_seed(0)
    return build_model(
        LMConfig(cell=cell, backend=backend, vocab_size=vocab_size, embed_dim=8, hidden_size=12, num_layers=layers)
    )


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_trace_shapes_and_gate_ranges(tok, cell):
    trace = trace_text(small_lm(tok.vocab_size, cell), tok, SAMPLE)
    T = len(SAMPLE)
    assert trace.text == SAMPLE and trace.pieces == list(SAMPLE) and len(trace.token_ids) == T
    assert trace.cells == [cell, cell] and len(trace.layers) == 2 and len(trace.conventions) == 2
    for gates, names in zip(trace.layers, trace.gate_names):
        assert tuple(gates) == names == CELLS[cell].gate_names
        for name, values in gates.items():
            assert values.shape == (T, 12) and values.dtype == np.float32
            low, high = RANGES.get(gate_kind(cell, name), (-np.inf, np.inf))
            assert low <= values.min() and values.max() <= high, name


@pytest.mark.parametrize(
    "backend, cell", [("fused", cell) for cell in sorted(FUSED_MODULES)] + [("fast", cell) for cell in sorted(CELLS)]
)
def test_fast_and_fused_models_are_traced_through_their_reference_twin(tok, backend, cell):
    model = small_lm(tok.vocab_size, cell, backend=backend)
    trace = trace_text(model, tok, SAMPLE)
    with torch.no_grad():
        out, _ = model.rnn(model.embedding(torch.tensor([tok.encode(SAMPLE)])))  # (1, T, H), the model's own backend
    np.testing.assert_allclose(trace.layers[-1]["h"], out[0].numpy(), atol=1e-5)
    assert tuple(trace.layers[-1]) == CELLS[cell].gate_names


def test_scan_markov_trace(tok):
    model = build_model(ScanMarkovConfig(vocab_size=tok.vocab_size, embed_dim=8, gate_hidden=16, decoder_hidden=16))
    trace = trace_text(model, tok, SAMPLE)
    assert trace.cells == ["scan"] and set(trace.layers[0]) == {"A", "B", "h"}
    assert trace.layers[0]["A"].shape == (len(SAMPLE), 8)


def test_trace_errors_and_training_mode(tok):
    model = small_lm(tok.vocab_size, "lstm").train()
    with pytest.raises(ValueError, match="empty"):
        trace_text(model, tok, "")
    with pytest.raises(ValueError, match="'€'"):
        trace_text(model, tok, "Laer. €")
    with pytest.raises(ValueError, match="limit of 10"):
        trace_text(model, tok, SAMPLE, max_tokens=10)
    trace_text(model, tok, SAMPLE)
    assert model.training
    trace = trace_text(model, tok, SAMPLE)
    with pytest.raises(ValueError, match="layers 0..1"):
        trace.gate(2, "h")
    with pytest.raises(ValueError, match="'f'"):
        trace.gate(0, "z")


def test_gate_summary_rows_and_saturation(tok):
    trace = trace_text(small_lm(tok.vocab_size, "gru_seed"), tok, SAMPLE)
    summary = gate_summary(trace)
    assert list(summary.gate) == ["r", "z", "n", "h"] * 2 and list(summary.layer) == [0] * 4 + [1] * 4
    sigmoid = summary.gate.isin(SIGMOID_GATES)
    assert summary.saturation[sigmoid].between(0, 1).all() and summary.saturation[~sigmoid].isna().all()
    z = trace.layers[0]["z"]
    assert summary.iloc[1]["mean"] == pytest.approx(z.mean()) and summary.iloc[1]["std"] == pytest.approx(z.std())


def test_a_long_text_read_in_chunks_carries_the_state(tok):
    model = small_lm(tok.vocab_size, "lstm")
    whole = trace_text(model, tok, SAMPLE)
    chunks = list(trace_chunks(model, tok, SAMPLE, chunk_tokens=30))
    assert [len(c.token_ids) for c in chunks] == [30, 30, len(SAMPLE) - 60]
    assert "".join(c.text for c in chunks) == SAMPLE
    for gate in whole.gate_names[1]:
        np.testing.assert_allclose(
            np.concatenate([c.layers[1][gate] for c in chunks]), whole.layers[1][gate], atol=1e-5
        )
