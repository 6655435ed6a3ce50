"""The Ablation page for a class: its first screen is the question in a student's words, one chart of the
three arms and a sentence a student can repeat (lab.experiments.ablation.answer); the equations and the
statistics wait in an expander. The sentence keeps to the study's own rules at every setting: it never
says more than the statistical conclusion beside it."""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import study_results
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Expander

from lab.experiments.ablation import (
    ARM_WORDS,
    SHIPPED_DIR,
    answer,
    compare_with_baseline,
    conclusion,
    epoch_rows,
    load_results,
    resolution,
)

ROOT = Path(__file__).resolve().parent.parent


def read(text):
    return re.sub(r"\\(.)", r"\1", str(text))  # ui.shared.plain_text.plain's escapes, as a student reads them


def numbers(values):
    """A plotly spec's array: a list, or the typed array plotly writes ({"dtype": "f8", "bdata": ...})."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return values


def inside_expander(node, found=False):
    """(element, whether it sits inside an expander) for every element under `node`."""
    for child in getattr(node, "children", {}).values():
        inner = found or isinstance(child, Expander)
        yield child, inner
        yield from inside_expander(child, inner)


def test_the_first_screen_is_the_question_the_chart_of_the_arms_and_the_answer():
    results = load_results(SHIPPED_DIR)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("pages/6_Ablation.py").run()
    assert not at.exception, [e.value for e in at.exception]
    title, question, chart, sentence, *rest = list(at.main.children.values())
    assert title.type == "title"
    assert read(question.value).startswith("**The question.**") and "1,024 steps" in question.value
    assert "Does starting that gate biased toward remembering help the GRU learn?" in question.value
    assert chart.type == "plotly_chart" and chart.proto.id.endswith("ablation_shipped_answer")
    assert read(sentence.value) == f"**The answer.** {answer(results)}"
    # the chart is the three arms, each named in the words of the sentence, at each epoch's mean over seeds
    lines = [t for t in json.loads(chart.proto.spec)["data"] if t.get("mode") == "lines+markers"]
    assert [t["name"] for t in lines] == [ARM_WORDS[arm] for arm in results["summary"]]
    epochs = pd.DataFrame(epoch_rows(results)).query("step > 0")
    for arm, trace in zip(results["summary"], lines):
        means = epochs[epochs["arm"] == arm].groupby("epoch")["val_accuracy"].mean()
        assert numbers(trace["y"]) == pytest.approx(list(100 * means))
    # the statistics, the equations and the tables only inside an expander
    for element, hidden in inside_expander(at.main):
        text = read(getattr(element, "value", ""))
        if "Welch" in text or "$" in text or element.type in ("table", "latex"):
            assert hidden, text[:120]
    assert any("Welch" in read(m.value) for m in at.markdown)  # there, for whoever opens it


accuracy = st.floats(0.2, 1.0)  # above what guessing reaches over these test images (13.1% at most)
seeds = st.lists(accuracy, min_size=2, max_size=3)


@settings(max_examples=200, deadline=None)
@given(base=seeds, ablated=seeds, chrono=seeds, n_test=st.sampled_from([360, 2000, 10**6]))
def test_the_answer_never_says_more_than_the_statistics(base, ablated, chrono, n_test):
    """At every setting: an arm the test images cannot resolve, or the seeds' luck explains, is never called
    a help; "yes" only when the statistics find the arm that starts more biased toward remembering ahead of
    the baseline (or the one with no biases behind it), "no" only the other way round."""
    study = study_results({"baseline": base, "ablated": ablated, "chrono": chrono}, n_test)
    said, stats = answer(study), conclusion(study)
    means = {arm: s["val_accuracy_mean"] for arm, s in study["summary"].items()}
    real = {}
    for c in compare_with_baseline(study):
        resolved = abs(c["difference"]) >= resolution(n_test, means[c["arm"]], means["baseline"])
        assert (f"{c['arm']} differs from the baseline by more" in stats) == (resolved and c["p"] < 0.05)
        if resolved and c["p"] < 0.05:
            real[c["arm"]] = c["difference"] > 0
    helps = {real.get("chrono"), None if "ablated" not in real else not real["ablated"]} - {None}
    lead = {
        frozenset({True}): "Yes, in this study it helped.",
        frozenset({False}): "No, in this study it hurt.",
        frozenset({True, False}): "This study gives no single answer.",
    }.get(frozenset(helps), "This study cannot tell whether it helps.")
    assert said.startswith(lead), (said, stats)
    assert said.count("more than the luck of the random seeds explains") == len(real)
    for arm in ("ablated", "chrono"):  # each arm's figure, as the chart shows it
        assert f"named {100 * means[arm]:.1f}% of the" in said and f"against {100 * means['baseline']:.1f}%" in said


def test_the_answer_before_anything_is_learned_or_finished():
    assert answer(study_results({"baseline": [0.10, 0.11], "chrono": [0.11, 0.12]}, 360)).startswith(
        "This study cannot tell yet: after 6 epochs no arm names its 360 test images better than guessing"
    )
    none = study_results({"baseline": [0.5]}, 360)
    none["summary"]["baseline"]["val_accuracy_mean"] = None
    assert answer(none) == "No run has finished yet, so this study has no answer yet."
    one_seed = answer(study_results({"baseline": [0.50], "chrono": [0.90]}, 10**6))
    assert one_seed.startswith("This study cannot tell whether it helps.")
    assert "a single random seed on a side cannot tell from luck" in one_seed
