"""The Gates page on too little text (issue 43, item 4): a correlation over two tokens is ±1 for every
unit that moves, so the gallery and the span's units state the |r| chance alone reaches at this length
(lab.instruments.units.chance_correlation) and call nothing under it a finding; and a span or a
predicted token, positions in the text they were chosen on, go back to their defaults when the text
changes."""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import betainc, betainccinv
from streamlit.testing.v1 import AppTest

from lab.instruments.units import (
    SIGNIFICANCE,
    STRONG_CORRELATION,
    _chance_of_at_least,
    chance_correlation,
    pearson,
    tokens_needed,
)

ROOT = Path(__file__).resolve().parent.parent
APP, GATES = str(ROOT / "app.py"), "pages/3_Gates.py"
OTHER_TEXT = "MACBETH:\nSo foul and fair a day I have not seen.\n\nBANQUO:\nHow far is't call'd to Forres?\n"


@pytest.mark.parametrize("df", [1, 2, 3, 8, 31, 200, 1999])
@pytest.mark.parametrize("r", [0.05, 0.3, 0.5, 0.8, 0.99])
def test_the_chance_of_a_correlation_is_the_exact_null_distribution(r, df):
    """P(|r| >= r) for independent normal samples: r^2 ~ Beta(1/2, df/2), so the tail is I_{1-r^2}(df/2, 1/2)."""
    assert _chance_of_at_least(r, df) == pytest.approx(betainc(df / 2, 0.5, 1 - r * r), rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("n_tokens", [3, 4, 10, 86, 500])
@pytest.mark.parametrize("n_compared", [1, 100, 50_000])
def test_the_chance_level_is_the_bonferroni_quantile_of_r(n_tokens, n_compared):
    exact = math.sqrt(betainccinv(0.5, (n_tokens - 2) / 2, SIGNIFICANCE / n_compared))
    assert chance_correlation(n_tokens, n_compared) == pytest.approx(exact, abs=1e-9)


def test_over_two_tokens_every_correlation_is_one_and_the_bar_is_one():
    values = np.random.default_rng(0).normal(size=(2, 50))  # 50 units over two tokens
    assert np.allclose(np.abs(pearson(values, [0.0, 1.0])), 1.0)
    assert chance_correlation(2, 50) == chance_correlation(1, 50) == 1.0


@given(n_compared=st.integers(1, 500_000))
@settings(max_examples=30, deadline=None)
def test_tokens_needed_is_the_shortest_text_on_which_a_strong_unit_stands_out(n_compared):
    needed = tokens_needed(n_compared)
    assert chance_correlation(needed, n_compared) <= STRONG_CORRELATION < chance_correlation(needed - 1, n_compared)


@given(n=st.integers(3, 3000), more=st.integers(1, 500), m=st.integers(1, 10**6), times=st.integers(2, 100))
@settings(max_examples=60, deadline=None)
def test_the_bar_falls_with_more_tokens_and_rises_with_more_correlations_compared(n, more, m, times):
    bar = chance_correlation(n, m)
    assert 0 < bar <= 1
    assert chance_correlation(n + more, m) <= bar <= chance_correlation(n, m * times)


# ---------------------------------------------------------------------------
# the page


def gates(**state):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(GATES)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def said(elements):
    return re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in elements))


def cards(at):
    """The gallery's captions: "r = +0.72 · `g` unit 18 of layer 1 · ..." (layers numbered from 1)."""
    return [c.value for c in at.caption if c.value.startswith("r = ")]


def test_on_two_characters_the_gallery_states_the_threshold_and_calls_nothing_a_finding():
    at = gates(gates_text="ab", gates_cards=6)
    warning = said(at.warning)
    match = re.search(
        r"With 2 characters, a correlation cannot single out a unit: among the ([\d,]+) correlations compared, "
        r"chance alone reaches \|r\| = 1\.00\. Type at least ([\d,]+) characters",
        warning,
    )
    assert match, warning
    compared = int(match[1].replace(",", ""))
    assert int(match[2].replace(",", "")) == tokens_needed(compared)
    shown = cards(at)
    assert shown and all(abs(float(c.split()[2])) == 1.0 for c in shown)  # the ±1.00 the issue saw
    assert all("within chance: a finding needs |r| above 1.00" in c for c in shown), shown
    assert "single out" in said(at.warning)  # the span's units say the same
    assert len(at.warning) == 2


def test_on_a_long_enough_text_each_card_is_a_finding_exactly_when_its_r_passes_the_stated_bar():
    at = gates(gates_cards=12)  # the default passage: Hamlet meets the Ghost
    stated = re.search(r"compared at up to \|r\| = (\d\.\d\d)", " ".join(c.value for c in at.caption))
    assert stated and not at.warning, said(at.warning)
    bar = float(stated[1])
    shown = cards(at)
    assert len(shown) >= 6  # one per feature that varies on the passage
    assert any("within chance" not in c for c in shown)  # a real passage has findings
    for caption in shown:  # the claim on each card follows from the two numbers printed
        r = abs(float(caption.split()[2]))
        assert ("within chance" in caption) == (r <= bar), (r, bar, caption)


def test_the_span_and_the_predicted_character_go_back_to_their_defaults_when_the_text_changes():
    at = gates()
    text = at.session_state["gates_text"]
    at.select_slider(key="gates_span").set_range(40, 60).run()
    assert at.select_slider(key="gates_span").value == (40, 60)
    # the passage's last selection, made in the old text ("Angels"), must not land on the new one
    start = text.index("Angels")
    at.session_state["gates_span_text"] = {"span": {"start": start, "end": start + 6, "n": 1}}
    at.run()
    at.text_area(key="gates_text").set_value(OTHER_TEXT).run()
    assert not at.exception, [e.value for e in at.exception]
    first, last = at.select_slider(key="gates_span").value
    assert (first, last) == (0, OTHER_TEXT.index("\n") - 1)  # the new text's first line, not 40-60
    heading = next(m.value for m in at.markdown if m.value.startswith("**The units that fire on"))
    assert "MACBETH" in heading
    at.radio(key="gates_section").set_value("prediction").run()
    at.select_slider(key="gates_predict").set_value(5).run()
    at.text_area(key="gates_text").set_value(text).run()
    # no "]" before the end would put it elsewhere: the default for the text read now, the first "]"
    assert at.select_slider(key="gates_predict").value == text.index("]")


def test_a_link_with_a_text_and_its_span_keeps_both():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(GATES)
    at.query_params.update({"text": OTHER_TEXT, "span": "9-11"})
    at.run()
    assert not at.exception and at.select_slider(key="gates_span").value == (9, 11)
