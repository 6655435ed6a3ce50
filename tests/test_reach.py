"""How far a change travels (lab.instruments.reach) and the Memory page's first view that draws it."""

import math

import numpy as np
import pytest
import torch

from lab.data import CharTokenizer
from lab.errors import LabError
from lab.instruments.reach import change_reach
from lab.lessons.memory import reach_sentence
from lab.nets.models import LMConfig, build_model, recurrent_layers
from lab.training.checkpoints import load_checkpoint
from ui.memory.defaults import REACH_LAG, REACH_MODELS, TEXT
from ui.shared.memory_charts import reach_figure

SHORT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


def small_lm(tokenizer, cell, seed=0, backend="fast"):
    torch.manual_seed(seed)
    config = LMConfig(cell=cell, backend=backend, vocab_size=tokenizer.vocab_size, embed_dim=8, hidden_size=16)
    return build_model(config).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return CharTokenizer.from_text(SHORT)


def test_a_state_without_recurrence_keeps_nothing_of_a_change(tokenizer):
    """A vanilla RNN whose state does not feed itself (W_hh = 0) reads each token afresh: a change is gone
    one step later, whatever the text."""
    model = small_lm(tokenizer, "rnn")
    with torch.no_grad():
        recurrent_layers(model)[0].weight_hh.zero_()
    reach = change_reach(model, tokenizer, SHORT)
    assert np.all(reach.kept == 0) and reach.last_above(0.0) == 0


def test_a_state_that_only_keeps_carries_a_change_undiminished(tokenizer):
    """A scan whose keep factor A is 1 and write factor B is 0 after the change holds the change exactly:
    h_{t+k} - h'_{t+k} = h_t - h'_t. Forced here by a huge A bias and B cut off after the first step."""
    model = small_lm(tokenizer, "scan", backend="reference")
    layer = recurrent_layers(model)[0]
    H = layer.hidden_size
    with torch.no_grad():
        layer.gate[2].weight.zero_()
        layer.gate[2].bias[:H] = 40.0  # A = sigmoid(40) = 1 in float32
        layer.gate[2].bias[H:] = 0.0  # B = 1/2: the change is written once, then later tokens add the same to both
    reach = change_reach(model, tokenizer, SHORT, max_lag=20)
    assert np.allclose(reach.kept, 1.0, atol=1e-4)
    assert reach.last_above(0.5) == 20 == len(reach.lags)


@pytest.mark.parametrize("max_lag", [1, 5, 200])
def test_reach_measures_min_of_the_lag_asked_and_the_text(tokenizer, max_lag):
    reach = change_reach(small_lm(tokenizer, "gru_torch"), tokenizer, SHORT, max_lag=max_lag)
    K = min(max_lag, len(SHORT) - 2)
    assert list(reach.lags) == list(range(1, K + 1)) and reach.kept.shape == (K,)
    assert np.all(np.isfinite(reach.kept)) and np.all(reach.kept >= 0)
    assert reach.at(K) == pytest.approx(reach.kept[-1]) and reach.at(K + 1) is None


def test_reach_refuses_a_text_too_short(tokenizer):
    with pytest.raises(LabError, match="at least 3 tokens"):
        change_reach(small_lm(tokenizer, "lstm"), tokenizer, "To")


def bundled_reaches():
    curves = []
    for name in REACH_MODELS:
        checkpoint = load_checkpoint(f"checkpoints/{name}.safetensors")
        reach = change_reach(checkpoint.model, checkpoint.tokenizer, TEXT, max_lag=REACH_LAG)
        curves.append((name.removesuffix("_latest"), checkpoint.model.config.cell, reach))
    return curves


@pytest.fixture(scope="module")
def bundled():
    return bundled_reaches()


def test_the_bundled_gated_cells_carry_a_change_further_than_the_vanilla_rnn(bundled):
    """The lesson of the Memory page's first view, on its own text and models: the vanilla RNN lets a
    change fade soonest, and the sentence beside the chart says so from the same numbers."""
    travels = {name: reach.last_above(0.01) for name, _, reach in bundled}
    rnn = travels.pop("char-rnn")
    assert all(k > rnn for k in travels.values()), (rnn, travels)
    sentence = reach_sentence(bundled)
    assert sentence.startswith(f"Change one token: the **char-rnn** keeps more than 1% of it for {rnn} characters")
    furthest = max(travels, key=travels.get)
    assert f"the **{furthest}**" in sentence


def test_the_reach_chart_has_a_line_per_model_and_its_guides_where_their_labels_say(bundled):
    figure = reach_figure(bundled)
    assert [t.name for t in figure.data] == [name for name, _, _ in bundled]
    assert len({t.line.color for t in figure.data}) == len(bundled)  # a colour per cell
    assert [(s.x0, s.x1) for s in figure.layout.shapes] == [(10, 10), (100, 100)]  # a linear axis: data values
    assert [(a.x, a.text) for a in figure.layout.annotations] == [(10, "10 characters"), (100, "100 characters")]
    assert figure.layout.xaxis.title.text == "k: characters after the change"  # character models: k counts those


def test_the_unit_spread_charts_guides_sit_at_their_labels_on_its_log_axis():
    """On a log axis plotly places a shape at its data value and an annotation at its log10: "10 tokens"
    is drawn at k = 10, not at k = 1."""
    from lab.instruments.memory import retention
    from ui.shared.memory_charts import memory_spread_figure

    checkpoint = load_checkpoint("checkpoints/char-gru-torch_latest.safetensors")
    r = retention(checkpoint.model, tokenizer=checkpoint.tokenizer, text=TEXT, max_lag=128)
    figure = memory_spread_figure([("gru", "gru_torch", r)])
    assert figure.layout.xaxis.type == "log"
    assert [s.x0 for s in figure.layout.shapes] == [10, 100]
    assert [(a.x, a.text) for a in figure.layout.annotations] == [(math.log10(10), "10 tokens"), (2.0, "100 tokens")]


def test_the_sentence_holds_when_every_model_forgets_alike(tokenizer):
    model = small_lm(tokenizer, "rnn")
    with torch.no_grad():
        recurrent_layers(model)[0].weight_hh.zero_()
    reach = change_reach(model, tokenizer, SHORT)
    sentence = reach_sentence([("a", "rnn", reach), ("b", "rnn", reach)])
    assert sentence == (
        "Change one token: every model here keeps less than 1% of it one character later: on this measure they "
        "are level."
    )


def test_the_reach_charts_axis_names_what_k_counts_and_says_so_where_models_mix_units():
    """Issue 51: the axis counted a subword model's tokens and a character model's on one k without saying
    so. Each reach records its tokenizer's unit; the axis, the guides and the hover read it."""
    from lab.instruments.reach import ChangeReach

    def reach(unit):
        return ChangeReach(np.arange(1, 121), np.full(120, 0.5), 16, unit)

    chars = reach_figure([("a", "lstm", reach("character"))])
    assert chars.layout.xaxis.title.text == "k: characters after the change"
    assert "characters" in chars.data[0].hovertemplate
    subwords = reach_figure([("s", "gru_seed", reach("subword"))])
    assert subwords.layout.xaxis.title.text == "k: subwords after the change"
    assert [a.text for a in subwords.layout.annotations] == ["10 subwords", "100 subwords"]
    mixed = reach_figure([("a", "lstm", reach("character")), ("s", "gru_seed", reach("subword"))])
    assert mixed.layout.xaxis.title.text == (
        "k: tokens after the change (each model's own: a character for a character model and a subword for a "
        "subword model)"
    )


def test_a_reach_records_its_tokenizers_unit(tokenizer):
    assert change_reach(small_lm(tokenizer, "rnn"), tokenizer, SHORT, max_lag=5).unit == "character"
