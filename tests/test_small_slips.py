"""The small slips of issue 51 (item 9), each fixed as the class it belongs to: one rounding for one number
(toy tasks' chance), layers numbered from 1 wherever a student reads them, a model's tokens named by its
tokenizer (a subword model's are not "characters"), Home's promise about the lessons, the Ablation page's setup
in plain words, and every chart's legend clear of its x axis's title. The lessons' sentences (lesson 1's gates
and layer, lesson 5's R² and g^k, the memory race's standings) are checked in tests/test_lesson_claims.py and
tests/test_memory_race.py."""

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from lab.instruments.reach import ChangeReach
from lab.lessons.toys import chance_words, toy_sentences
from lab.training.checkpoints import BUNDLED_DIR
from ui.shared.chart_style import LEGEND_ABOVE, LEGEND_BELOW
from ui.shared.memory_charts import analytic_figure, gradient_figure, probe_figure, reach_figure
from ui.shared.toy_results import RESULTS, shipped_results

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path / "user_checkpoints"))


def page(path=None, **query):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    if path:
        at.switch_page(path)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at):
    return re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in [*at.markdown, *at.caption, *at.info]))


# ---------------------------------------------------------------------------
# lesson 10: one rounding for one number


def test_the_toy_chart_says_chance_as_the_sentence_beside_it_does_at_every_task_and_distance():
    """Issue 51: lesson 10's chart said "chance 0.40" (the highest chance over every distance, two decimals)
    where its text said 39% (the chance at the chosen distance, a whole percent). The chart now draws chance
    where it was measured, at each distance, and labels the chosen one as the sentence says it."""
    results = shipped_results(BUNDLED_DIR / RESULTS)
    for task, rows in results.groupby("task"):
        for distance in sorted(rows["distance"].unique()):
            figure = probe_figure(rows, marked=int(distance))
            (label,) = [a.text for a in figure.layout.annotations if a.text.startswith("chance")]
            chance = rows.loc[rows["distance"] == distance, "chance"].iloc[0]
            assert label == f"chance {chance_words(chance)}"
            assert f"(chance: {chance_words(chance)}," in toy_sentences(rows, int(distance), str)
            (line,) = [t for t in figure.data if t.name and t.name.startswith("chance")]
            assert list(line.y) == list(rows.groupby("distance")["chance"].max().sort_index())


# ---------------------------------------------------------------------------
# layers, from 1


def test_no_page_or_lesson_writes_a_layers_index_from_0():
    """Issue 51: Gates numbered layers from 0 and Sample from 1. Every sentence and label now says a layer
    through lab.words.layer_name (from 1); a raw index in an f-string ("layer {layer}") is the slip."""
    raw = re.compile(r"""[Ll]ayer \{(?!layer_name|numbered_layer)[^}]*\}""")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in ("ui", "pages", "lab/lessons")
        for path in (ROOT / folder).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if raw.search(line) and "+ 1}" not in line
    ]
    assert not found, found


def test_a_table_of_lab_numbers_its_layers_from_1():
    def script():
        import pandas as pd

        from ui.shared.common import show_table

        show_table(pd.DataFrame({"layer": [0, 1], "units": [8, 8]}), {"layer": "layer"}, {})

    at = AppTest.from_function(script).run()
    assert list(at.table[0].value["layer"]) == [1, 2]


# ---------------------------------------------------------------------------
# a model's tokens in its tokenizer's words


def test_sample_calls_a_subword_models_tokens_subwords():
    """Issue 51: Sample called Scribe's subword tokens "characters"."""
    at = page("pages/2_Sample.py", model="scribe-alpha_latest", tokens="5")
    assert at.select_slider(key="sample_influence_token").label == "The generated subword"
    said = texts(at)
    assert "Each earlier subword is coloured" in said and "at the last subword it read" in said
    assert "earlier character" not in said and "generated character" not in said


# ---------------------------------------------------------------------------
# Home and the Ablation page


def test_home_promises_nothing_of_the_lessons_length_it_does_not_measure():
    """Issue 51: Home promised lessons of "one screen each", which several are not."""
    said = texts(page())
    assert "one screen each" not in said and "each on a page of its own" in said
    promises = [  # the same promise wherever a student reads it (the Lessons page's help too)
        f"{path.relative_to(ROOT)}:{n}"
        for path in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui" / "lessons").glob("*.py")]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"one screen each|each on one screen", line)
    ]
    assert not promises, promises


def test_the_ablation_setup_says_how_its_model_runs_in_words_without_nested_parentheses():
    """Issue 51: "101,732 parameters (computed fused (PyTorch's built-in))"."""
    said = texts(page("pages/6_Ablation.py", section="study"))
    (setup,) = [s for s in said.split("**") if "AdamW step" in s]
    assert "run by PyTorch's built-in layer" in setup or "run by the lab's" in setup, setup
    assert not re.search(r"\([^()]*\(", setup), setup  # no parenthesis inside another
    assert "computed fused" not in setup


# ---------------------------------------------------------------------------
# legends clear of the x axis's title


def legend_is_clear(legend):
    """Above the plot, anchored by its bottom; or well under it, anchored by its top (never a bottom-anchored
    legend at y < 0, whose rows grow up over the axis's title)."""
    return (legend.y >= 1 and legend.yanchor == "bottom") or (legend.y <= -0.3 and legend.yanchor == "top")


def test_every_chart_of_the_memory_pages_and_lessons_keeps_its_legend_clear_of_its_axis_title():
    """Issue 51: the "longer runs" chart's legend overlapped its axis title (y = -0.2, anchored by its bottom)."""
    rows = shipped_results(BUNDLED_DIR / RESULTS)
    reach = ChangeReach(np.arange(1, 21), np.full(20, 0.5), 16, "character")
    figures = {
        "longer runs (probe)": probe_figure(rows[rows["task"] == "recall"]),
        "reach": reach_figure([("a", "lstm", reach)]),
        "analytic": analytic_figure(0.9, [0.5, 0.99], 128),
        "gradient": gradient_figure([("a", "rnn", np.linspace(1, 0.01, 30))], "trained"),
    }
    for name, figure in figures.items():
        assert legend_is_clear(figure.layout.legend), (name, figure.layout.legend)
    assert legend_is_clear(SimpleNamespace(**LEGEND_ABOVE)) and legend_is_clear(SimpleNamespace(**LEGEND_BELOW))


def test_no_chart_in_the_app_anchors_a_bottom_legend_by_its_bottom():
    """The class: a `legend=dict(...)` with a negative y and no yanchor="top" anywhere the pages draw charts."""
    found = []
    for path in [*(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").rglob("*.py")]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"legend=dict\([^)]*\by=-", line) and 'yanchor="top"' not in line:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, found
