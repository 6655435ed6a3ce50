"""The step-through view's numbers are the cell's own: for every cell family the new state at
step t is the state the model's forward pass returns after t tokens (on the backend it trains
with, not only the reference cells), the gates are the trace's, the state a step starts from is
the one the step before left, and the operands shown reproduce the result by the cell's
docstring equation."""

import numpy as np
import pytest
import torch

from lab.data import CharTokenizer
from lab.instruments.introspect import trace_text
from lab.instruments.stepping import step_through
from lab.nets.backends import FUSED_MODULES
from lab.nets.families import CELLS
from lab.nets.models import LMConfig, ScanMarkovConfig, build_model
from lab.training.checkpoints import BUNDLED_DIR, load_checkpoint

TEXT = "To be, or not to be,\nthat is the question"
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT)


def state_after(model, tok, text, t, layer):
    """The model's own forward over the first t tokens -> (h, c or None) of one layer, numpy."""
    if t == 0:
        return None
    ids = torch.tensor([tok.encode(text)[:t]])
    with torch.no_grad():
        model.eval()
        state = model(ids)[2]
    state = state[0] if isinstance(model.config, ScanMarkovConfig) else state[layer]  # ScanMarkov: (h, position)
    h, c = state if isinstance(state, tuple) else (state, None)
    return h[0].numpy(), None if c is None else c[0].numpy()


def equation_holds(step):
    """The docstring's last equations, recomputed from the operands the step shows."""
    v = step.values
    if step.cell == "gru_seed":
        np.testing.assert_allclose((1 - v["z"]) * v["h_prev"] + v["z"] * v["n"], v["h"], **TOL)
    elif step.cell == "gru_torch":
        np.testing.assert_allclose((1 - v["z"]) * v["n"] + v["z"] * v["h_prev"], v["h"], **TOL)
    elif step.cell == "lstm":
        np.testing.assert_allclose(v["f"] * v["c_prev"] + v["i"] * v["g"], v["c"], **TOL)
        np.testing.assert_allclose(v["o"] * np.tanh(v["c"]), v["h"], **TOL)
    elif step.cell == "scan":
        np.testing.assert_allclose(v["A"] * v["h_prev"] + v["B"] * v["e"], v["h"], **TOL)


def check_every_step(model, tok, text, layer, steps):
    stepped = step_through(model, tok, text, layer=layer)
    trace = trace_text(model, tok, text)
    for t in steps:
        step = stepped.step(t)
        h, c = state_after(model, tok, text, t, layer)
        np.testing.assert_allclose(step.values["h"], h, **TOL)  # the new state is the model's after t tokens
        if c is not None:
            np.testing.assert_allclose(step.values["c"], c, **TOL)
        before = state_after(model, tok, text, t - 1, layer)
        expected_prev = np.zeros_like(h) if before is None else before[0]
        np.testing.assert_allclose(step.values["h_prev"], expected_prev, **TOL)
        if c is not None:
            np.testing.assert_allclose(step.values["c_prev"], np.zeros_like(c) if before is None else before[1], **TOL)
        for gate in trace.gate_names[layer]:  # every gate is the trace's at that step
            np.testing.assert_array_equal(step.values[gate], trace.gate(layer, gate)[t - 1])
        assert step.token == text[t - 1]
        equation_holds(step)
        shown = {name for e in step.equations for name in e.reads + e.writes}
        assert shown <= set(step.values) and set(trace.gate_names[layer]) <= shown


@pytest.mark.parametrize(
    "cell, backend", [(cell, "fast") for cell in sorted(CELLS)] + [(cell, "fused") for cell in sorted(FUSED_MODULES)]
)
def test_every_cells_step_is_its_own_forward_pass(cell, backend, tok):
    torch.manual_seed(0)
    model = build_model(
        LMConfig(
            cell=cell,
            backend=backend,
            vocab_size=tok.vocab_size,
            embed_dim=6,
            hidden_size=8,
            num_layers=2,
            keep_bias=0.5,
        )
    )
    for layer in (0, 1):
        check_every_step(model, tok, TEXT, layer, [1, 2, 7, len(TEXT)])
    stepped = step_through(model, tok, TEXT)
    ids = torch.tensor(tok.encode(TEXT))
    with torch.no_grad():
        embedded = model.embedding(ids).numpy()
    np.testing.assert_array_equal(stepped.step(3).x, embedded[2])  # layer 0 reads the token's embedding
    second = step_through(model, tok, TEXT, layer=1)
    np.testing.assert_allclose(second.step(3).x, stepped.step(3).values["h"], **TOL)  # layer 1 reads layer 0's h


def test_the_scan_markov_models_scan_steps_through_too(tok):
    torch.manual_seed(0)
    model = build_model(ScanMarkovConfig(vocab_size=tok.vocab_size, embed_dim=8, gate_hidden=16, decoder_hidden=16))
    check_every_step(model, tok, TEXT, 0, [1, 5, len(TEXT)])


@pytest.mark.parametrize("name", ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan"])
def test_the_bundled_models_step_through_their_own_forward_pass(name):
    """Whatever the bundled weights are (they get retrained), the numbers shown are the model's own."""
    path = BUNDLED_DIR / f"{name}_latest.safetensors"
    assert path.is_file(), "bundled checkpoint missing (python scripts/build_checkpoints.py)"
    checkpoint = load_checkpoint(path, device="cpu")
    check_every_step(checkpoint.model, checkpoint.tokenizer, "To be, or not", 0, [1, 4, 13])


def test_the_two_gru_conventions_keep_by_opposite_letters(tok):
    torch.manual_seed(0)
    steps = {}
    for cell in ("gru_seed", "gru_torch"):
        model = build_model(LMConfig(cell=cell, vocab_size=tok.vocab_size, embed_dim=6, hidden_size=8))
        steps[cell] = step_through(model, tok, TEXT).step(5)
    np.testing.assert_allclose(steps["gru_seed"].keep, 1 - steps["gru_seed"].values["z"])  # z overwrites
    np.testing.assert_allclose(steps["gru_torch"].keep, steps["gru_torch"].values["z"])  # z keeps
    torch.manual_seed(0)
    rnn = build_model(LMConfig(cell="rnn", vocab_size=tok.vocab_size, embed_dim=6, hidden_size=8))
    assert step_through(rnn, tok, TEXT).step(1).keep is None


def test_a_step_table_lists_the_equations_operands_for_the_units_asked(tok):
    torch.manual_seed(0)
    model = build_model(LMConfig(cell="lstm", vocab_size=tok.vocab_size, embed_dim=6, hidden_size=8))
    step = step_through(model, tok, TEXT).step(2)
    cell_state = step.equations[4]
    table = step.table(cell_state, [3, 0])
    assert list(table.columns) == ["unit", "f", "c_prev", "i", "g", "c"] and table["unit"].tolist() == [3, 0]
    np.testing.assert_array_equal(table["c"], step.values["c"][[3, 0]])
    assert [e.writes for e in step.equations] == [("i",), ("f",), ("g",), ("o",), ("c",), ("h",)]


def test_bad_steps_layers_and_texts_are_refused(tok):
    torch.manual_seed(0)
    model = build_model(LMConfig(cell="rnn", vocab_size=tok.vocab_size, embed_dim=6, hidden_size=8))
    stepped = step_through(model, tok, "To be")
    for bad in (0, 6, -1, 2.5):
        with pytest.raises(ValueError, match="steps 1..5"):
            stepped.step(bad)
    with pytest.raises(ValueError, match="layer"):
        step_through(model, tok, "To be", layer=1)
    with pytest.raises(ValueError, match="empty"):
        step_through(model, tok, "")
    with pytest.raises(ValueError, match="vocabulary"):
        step_through(model, tok, "Snow ☃")
