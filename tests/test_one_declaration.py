"""Each TrainConfig field (lab.training.train) and each of the model's sizes and rates (LMConfig, lab.nets.models)
is declared once: the command line's options, the Train page's widgets and the page's URL read its bounds from
there. Every field is walked through all three. So is each SamplingConfig field (lab.instruments.sampling),
through the `sample` command, the Sample page's widgets and its URL: their bounds and defaults had been written
three times, with three limits (the page's seed below 2**31, the sampler's below 2**63)."""

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.__main__ import build_parser, main, sampling_config
from lab.errors import LabError
from lab.instruments.sampling import SamplingConfig
from lab.nets.models import LMConfig
from lab.schema import declared_settings
from lab.train_command import BUDGETS, MODEL_SIZES, train_options
from lab.training.train import TrainConfig
from ui.shared.links import parse_query
from ui.train.settings import FIELDS

ROOT = Path(__file__).resolve().parent.parent

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
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
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


# ---------------------------------------------------------------------------
# sampling: the `sample` command, the Sample page's widgets and its URL, all from SamplingConfig

SAMPLING = declared_settings(SamplingConfig)
SAMPLING_NUMBERS = [s for s in SAMPLING.values() if s.type in (int, float)]
BUNDLED = str(ROOT / "checkpoints" / "char-rnn_latest.safetensors")
NEEDED = ["char-rnn", "char-gru-torch"]  # the sample command's model; the Sample page's (tests/conftest.py)


def _sample_args(*options):
    return build_parser().parse_args(["sample", BUNDLED, *options])


@pytest.mark.parametrize("setting", SAMPLING_NUMBERS, ids=lambda s: s.name)
def test_the_sample_command_takes_each_end_of_a_sampling_field_and_refuses_just_beyond_in_one_line(setting, capsys):
    low, high, below, above = _ends(setting)
    for value in (low, high):
        if value is not None:
            assert getattr(sampling_config(_sample_args(f"--{setting.cli}={value!r}"), "lm"), setting.name) == value
    for value in (below, above):
        if value is not None:
            with pytest.raises(LabError, match=setting.name):
                sampling_config(_sample_args(f"--{setting.cli}={value!r}"), "lm")
    if below is not None:  # the command itself: exit status 2 and one line naming the field
        code = main(["sample", BUNDLED, f"--{setting.cli}={below!r}"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and setting.name in err, err


def test_the_sample_command_offers_every_sampling_field_with_its_declared_default_choices_and_help():
    parser = build_parser()
    sample = parser._subparsers._group_actions[0].choices["sample"]
    options = {a.option_strings[0]: a for a in sample._actions if a.option_strings}
    for setting in SAMPLING.values():
        option = options[f"--{setting.cli}"]
        assert option.help.startswith(setting.description), setting.name
        assert tuple(option.choices or ()) == setting.choices, setting.name
    # no option given: the declared defaults, the strategy the model's seed's
    assert sampling_config(_sample_args(), "lm") == SamplingConfig()
    assert sampling_config(_sample_args(), "scan_markov") == SamplingConfig(strategy="top_p")
    assert sampling_config(_sample_args("--stateless"), "lm") == SamplingConfig(stateful=False)


SAMPLE_PAGE = [s for s in SAMPLING.values() if s.names.url]


def test_the_sample_page_offers_each_declared_setting_within_the_lab_range_and_starts_at_its_default():
    from ui.sample.settings import SETTINGS
    from ui.sample.views import DEFAULTS

    assert {s.name for s in SAMPLE_PAGE} == {"temperature", "top_k", "top_p", "max_new_tokens", "seed"}
    for setting in SAMPLE_PAGE:
        low, high = _page_bounds(setting)
        assert setting.low <= low <= high and (setting.high is None or high <= setting.high), setting.name
        for end in (low, high):  # the config takes the page's ends
            SamplingConfig(**{setting.name: setting.type(end)})
        field, _ = SETTINGS[setting.names.url]
        assert (field.low, field.high) == (low, high) and field.help.startswith(setting.description), setting.name
        assert DEFAULTS[setting.names.url] == setting.default, setting.name
    for strategy in ("stateless", "drove"):  # the strategies a link may name are the declared ones
        assert SETTINGS[strategy][0].choices == SAMPLING["strategy"].choices


def test_the_sample_page_widgets_have_the_declared_bounds():
    from ui.sample.settings import SETTINGS

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.switch_page("pages/2_Sample.py")
    at.session_state["sample_tokens"] = 8  # a short sample: the boxes are what is looked at
    at.run()
    assert not at.exception, at.exception
    boxes = {box.key: box for box in at.number_input}
    fields = {key: field for field, key in SETTINGS.values()}
    assert len(boxes) == 7  # tokens, seed, and each column's temperature, k and p
    for key, box in boxes.items():
        assert (box.min, box.max) == (fields[key].low, fields[key].high), key
        assert box.help == fields[key].help, key
    for setting in SAMPLE_PAGE:
        assert (boxes[SETTINGS[setting.names.url][1]].min, boxes[SETTINGS[setting.names.url][1]].max) == _page_bounds(
            setting
        )


@pytest.mark.parametrize("setting", SAMPLE_PAGE, ids=lambda s: s.name)
def test_a_sample_link_takes_the_page_range_and_refuses_beyond(setting):
    from ui.sample.settings import SETTINGS

    fields = {name: field for name, (field, _) in SETTINGS.items()}
    low, high = _page_bounds(setting)
    url = setting.names.url
    for end in (low, high):
        values, warnings = parse_query({url: fields[url].format(end)}, fields)
        assert values == {url: end} and not warnings
    beyond = high + 1 if isinstance(high, int) else high * 2
    values, warnings = parse_query({url: fields[url].format(beyond)}, fields)
    assert values == {} and len(warnings) == 1 and url in warnings[0]
