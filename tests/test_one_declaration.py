"""Each TrainConfig field (lab.training.train) and each of the model's sizes and rates (LMConfig, lab.nets.models)
is declared once: the command line's options, the Train page's widgets and the page's URL read its bounds from
there. Every field is walked through all three."""

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.__main__ import build_parser, main
from lab.nets.models import LMConfig
from lab.schema import declared_settings
from lab.train_command import BUDGETS, MODEL_SIZES, train_options
from lab.training.train import TrainConfig
from ui.shared.links import parse_query
from ui.train.settings import FIELDS

SETTINGS = declared_settings(TrainConfig)
NUMBERS = [s for s in SETTINGS.values() if s.type in (int, float)]
MODEL_SETTINGS = [declared_settings(LMConfig)[name] for name in MODEL_SIZES]
OWNER = {**{name: TrainConfig for name in SETTINGS}, **{s.name: LMConfig for s in MODEL_SETTINGS}}


def _ends(setting):
    """(least accepted, most accepted, just below, just above) of a numeric setting; None where unbounded."""
    step = (lambda x, to: x + (1 if to > x else -1)) if setting.type is int else math.nextafter
    low = step(setting.low, math.inf) if setting.low_open else setting.low
    high = None if setting.high is None else step(setting.high, -math.inf) if setting.high_open else setting.high
    below = step(low, -math.inf)
    above = None if high is None else step(high, math.inf)
    return low, high, below, above


def _config_from_cli(setting, value):
    args = build_parser().parse_args(["train", f"--{setting.cli}={value!r}"])
    given = {setting.name: getattr(args, setting.cli.replace("-", "_"))} if setting.name in BUDGETS else {}
    return TrainConfig(**{**train_options(args), **given})


@pytest.mark.parametrize("setting", NUMBERS, ids=lambda s: s.name)
def test_the_command_line_takes_each_end_of_a_field(setting):
    low, high, _, _ = _ends(setting)
    for value in (low, high):
        if value is not None:
            assert getattr(_config_from_cli(setting, value), setting.name) == value


@pytest.mark.parametrize("setting", NUMBERS, ids=lambda s: s.name)
def test_the_command_line_refuses_just_beyond_in_one_line(setting, tmp_path, capsys):
    _, _, below, above = _ends(setting)
    for value in (below, above):
        if value is None or setting.name == "max_epochs":  # epochs become steps for a preset with seed epochs
            continue
        budget = [] if setting.name in BUDGETS else ["--steps", "1"]
        code = main(["train", f"--{setting.cli}={value!r}", *budget, "--out", str(tmp_path)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and setting.name in err, (value, err)


@pytest.mark.parametrize("setting", MODEL_SETTINGS, ids=lambda s: s.name)
def test_the_command_line_takes_a_models_size_at_each_end_and_refuses_just_beyond_in_one_line(
    setting, tmp_path, capsys
):
    low, high, below, above = _ends(setting)
    for value in (low, high):
        if value is not None:
            args = build_parser().parse_args(["train", f"--{setting.cli}={value!r}"])
            assert getattr(LMConfig(**{setting.name: getattr(args, setting.name)}), setting.name) == value
    for value in (below, above):
        if value is not None:
            code = main(["train", f"--{setting.cli}={value!r}", "--steps", "1", "--out", str(tmp_path)])
            err = capsys.readouterr().err.strip()
            assert code == 2 and "\n" not in err and setting.name in err, (value, err)


def test_choices_on_the_command_line_are_the_fields():
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    options = {a.option_strings[0]: a for a in train._actions if a.option_strings}
    for setting in SETTINGS.values():
        assert f"--{setting.cli}" in options, setting.name
        if setting.choices:
            assert tuple(options[f"--{setting.cli}"].choices) == setting.choices
    for setting in MODEL_SETTINGS:  # its help is its declaration's
        assert options[f"--{setting.cli}"].help.startswith(setting.description), setting.name


PAGE = [s for s in [*SETTINGS.values(), *MODEL_SETTINGS] if s.names.url]


def _page_bounds(setting):
    page = setting.names.page
    return (page.low, page.high) if page else (setting.low, setting.high)


def test_the_page_range_is_within_the_lab_range():
    for setting in PAGE:
        if setting.type is bool:
            continue
        low, high = _page_bounds(setting)
        assert setting.low <= low <= high and (setting.high is None or high <= setting.high), setting.name
        for end in (low, high):  # the config takes the page's ends
            OWNER[setting.name](**{setting.name: setting.type(end)})


def test_the_train_page_widgets_have_the_declared_bounds():
    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=120)
    at.switch_page("pages/1_Train.py").run()
    boxes = {box.label: box for box in at.number_input}
    for setting in PAGE:
        if setting.type is bool:
            assert setting.names.label in [box.label for box in at.checkbox], setting.name
            continue
        box = boxes[setting.names.label]
        assert (box.min, box.max) == _page_bounds(setting), setting.name
        assert box.help and setting.description[1:] in box.help, setting.name


@pytest.mark.parametrize("setting", [s for s in PAGE if s.type is not bool], ids=lambda s: s.name)
def test_a_link_takes_the_page_range_and_refuses_beyond(setting):
    low, high = _page_bounds(setting)
    url = setting.names.url
    values, warnings = parse_query({url: FIELDS[url].format(low)}, FIELDS)
    assert values == {url: low} and not warnings
    values, warnings = parse_query({url: FIELDS[url].format(high)}, FIELDS)
    assert values == {url: high} and not warnings
    beyond = high + 1 if isinstance(high, int) else high * 2
    values, warnings = parse_query({url: FIELDS[url].format(beyond)}, FIELDS)
    assert values == {} and len(warnings) == 1 and url in warnings[0]
