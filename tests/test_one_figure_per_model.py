"""One model, one set of figures (issue 51, item 4): where two pages show a bundled model's size or validation
loss they read it from one place (lab.nets.cost for parameters, lab.lessons.models.validation_figure for the
loss of the weights the file holds); a published seed figure is shown beside the bundled file's own, each row
saying which it is; and where the bundled models are compared, why a bigger one can do worse is said from
their figures, only while they show it."""

import dataclasses
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.instruments.race import short_count, validation_figure
from lab.lessons.models import ModelFigures, bigger_does_worse
from lab.nets.cost import parameter_count
from lab.nets.models import config_from_dict
from lab.training.checkpoints import BUNDLED_DIR, list_checkpoints, read_info
from ui.checkpoints.listing import final_metrics
from ui.shared.model_names import info_title, option_title

APP = str(Path(__file__).resolve().parent.parent / "app.py")
LEVIATHAN = "leviathan-lstm_latest"


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path / "user_checkpoints"))


def page(path, **query):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    at.switch_page(path)
    return at.run()


def shown(at):
    """Every text the page shows: Markdown, captions and the tables' cells."""
    parts = [str(e.value) for e in [*at.markdown, *at.caption]]
    parts += [str(cell) for t in at.table for cell in t.value.to_numpy().ravel()]
    return re.sub(r"\\(.)", r"\1", " ".join(parts))


def bundled():
    return list_checkpoints(BUNDLED_DIR)


def test_the_validation_figure_is_the_held_weights_one_as_the_checkpoints_page_reads_it():
    """Leviathan stopped early and keeps its best evaluation's weights: 1.411, where its history ends at
    1.426. The Checkpoints page read the first, Sample the second; both now read validation_figure."""
    for info in bundled():
        assert validation_figure(info.metrics) == pytest.approx(final_metrics(info)), info.name
    leviathan = read_info(BUNDLED_DIR / f"{LEVIATHAN}.safetensors", bundled=True)
    assert f"{validation_figure(leviathan.metrics):.3f}" == "1.411"
    assert f"{leviathan.metrics['history'][-1]['val_nats_per_char']:.3f}" == "1.426"  # the figure no page shows


def test_sample_shows_leviathans_validation_and_size_as_the_checkpoints_page_does():
    at = page("pages/2_Sample.py", model=LEVIATHAN, tokens="5")
    assert not at.exception, [e.value for e in at.exception]
    info = read_info(BUNDLED_DIR / f"{LEVIATHAN}.safetensors", bundled=True)
    text = shown(at)
    assert f"validation {validation_figure(info.metrics):.3f} nats/char" in text and "1.426" not in text
    size = short_count(parameter_count(config_from_dict(info.config)))
    assert f"{size} parameters" in text and size in option_title(info)  # the picker's figure too


def test_the_anchors_say_which_leviathan_figure_is_published_and_which_is_the_bundled_files():
    at = page("pages/5_Checkpoints.py")
    assert not at.exception, [e.value for e in at.exception]
    (anchors,) = [t.value for t in at.table if "anchor" in t.value.columns]
    rows = dict(zip(anchors["anchor"], anchors["result"]))
    published = [a for a in rows if a.startswith("Leviathan as originally published")]
    here = [a for a in rows if a.startswith("Leviathan as bundled here")]
    assert len(published) == len(here) == 1
    assert "24.2M" in published[0] and "65 characters" in published[0] and "(published)" in rows[published[0]]
    info = read_info(BUNDLED_DIR / f"{LEVIATHAN}.safetensors", bundled=True)
    assert short_count(parameter_count(config_from_dict(info.config))) in here[0]  # 24.3M, the file's
    assert f"{validation_figure(info.metrics):.3f}" in rows[here[0]]
    text = shown(at)
    assert "Bigger is not always better" in text and "over-fitting" in text  # the bundled figures show it


def figures(title, parameters, val, train, later_val=None):
    return ModelFigures(title, parameters, val, train, 100, 10.0, 1_000_000, later_val or val, 100)


@pytest.mark.parametrize(
    "big, small, said",
    [
        ((20e6, 1.41, 1.07), (5e6, 1.39, 1.24), True),  # the bundled case: worse held out, a wider gap
        ((20e6, 1.38, 1.07), (5e6, 1.39, 1.24), False),  # the bigger one does better: nothing to explain
        ((20e6, 1.41, 1.30), (5e6, 1.39, 1.24), False),  # worse, but not a wider gap: not over-fitting
    ],
)
def test_bigger_does_worse_is_said_only_while_the_figures_show_it(big, small, said):
    models = [figures("Big", int(big[0]), *big[1:]), figures("Small", int(small[0]), *small[1:])]
    sentence = bigger_does_worse(models)
    assert bool(sentence) == said
    if said:
        gap = big[1] - big[2]
        assert f"{big[1]:.3f} nats/char against the Small's {small[1]:.3f}" in sentence
        assert f"{gap:.3f} below its held-out loss" in sentence and "over-fitting" in sentence
        assert "rose" not in sentence  # its held-out loss never rose after the weights it keeps
        risen = bigger_does_worse([dataclasses.replace(models[0], later_val=1.5, later_step=200), models[1]])
        assert "rose to 1.500 by step 200" in risen


def test_the_bundled_models_figures_behind_the_sentence_are_their_files():
    models = [ModelFigures.of(info_title(i), i) for i in bundled()]
    leviathan = next(m for m in models if m is not None and m.title == "Leviathan")
    assert leviathan.val == pytest.approx(
        validation_figure(read_info(BUNDLED_DIR / f"{LEVIATHAN}.safetensors").metrics)
    )
    assert all(m is None or m.parameters > 0 for m in models)
    sentence = bigger_does_worse(models)
    assert sentence.startswith("**Bigger is not always better.** Leviathan has 24.3M parameters")
