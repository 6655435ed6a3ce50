"""AppTest for the Sample, Gates and Memory pages: they render, their main interaction
works, and bad input gives an error element instead of a traceback.

Kept small for 2 CPU cores: 40-token generations, short texts, a 50-step probe.

Long (over 400 lines) because the three pages share one tiny-model fixture and helpers; each test is
a few lines.
"""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from helpers import join_warm_up
from streamlit.testing.v1 import AppTest

from ui.sample import typing_box

ROOT = Path(__file__).resolve().parent.parent


APP = str(ROOT / "app.py")
SAMPLE, GATES, MEMORY = "pages/2_Sample.py", "pages/3_Gates.py", "pages/4_Memory.py"
# the bundled models these pages open on; tests/conftest.py fails the tests when one is missing
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan", "scan-markov", "scribe-alpha"]
SHORT_TEXT = "Ham:\nTo be, or not to be,--that is the question:--\n[Enter Ghost.]\nWhether 'tis nobler\n"


def page(name, **state):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(name)
    for key, value in state.items():
        at.session_state[key] = value
    return at


def no_exception(at):
    assert not at.exception, [e.value for e in at.exception]


def errors(at):
    return " ".join(e.value for e in at.error)


def chart_keys(at):
    return [c.proto.id for c in at.get("plotly_chart")]


def coloured_texts(at):
    """The token-coloured text boxes (st.html) as their HTML."""
    return [h.proto.body for h in at.get("html") if "white-space: pre-wrap" in h.proto.body]


def probability_texts(at):
    """The boxes coloured by the probability of each generated token."""
    return [box for box in coloured_texts(at) if '<span title="p = ' in box]


def gallery_cards(at):
    """The gallery's cards (compact coloured boxes) as their HTML."""
    return [box for box in coloured_texts(at) if "max-height: 11rem" in box]


def heatmap_units(at):
    """The unit labels of the heatmap, top to bottom."""
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith("gates_heatmap"))
    return json.loads(chart.proto.spec)["data"][0]["y"]


def test_sample_fills_every_strategy_and_both_state_modes():
    at = page(SAMPLE, sample_tokens=40).run()
    no_exception(at)
    assert not at.error
    boxes = probability_texts(at)
    assert len(boxes) == 6  # greedy, temperature, top-k, top-p, then stateful and stateless
    for title in ("Greedy", "Temperature", "Top-k", "Top-p (nucleus)"):
        assert title in [h.value for h in at.subheader]
    markdown = " ".join(m.value for m in at.markdown)
    assert "Repetition report" in markdown and "Stateful" in markdown and "Stateless" in markdown
    assert "(stateless)" in markdown
    assert len(at.metric) == 12  # entropy and p(chosen) per box

    # the same seed gives the same text; another seed another sample
    at.run()
    assert probability_texts(at) == boxes
    at.number_input(key="sample_seed").set_value(1).run()
    no_exception(at)
    assert probability_texts(at)[1] != boxes[1]  # temperature sampling changed
    assert probability_texts(at)[0] == boxes[0]  # greedy did not


def test_sample_traces_a_generated_character_back_to_what_drove_it():
    at = page(SAMPLE, sample_tokens=40, sample_influence_token=30).run()
    no_exception(at)
    framed = [box for box in coloured_texts(at) if "outline: 2px solid" in box]
    assert len(framed) == 1
    assert framed[0].count("influence ") == len("ROMEO:\n") + 29  # the prompt and the 29 characters before it
    at.selectbox(key="sample_influence_strategy").set_value("greedy")
    at.select_slider(key="sample_influence_token").set_value(5).run()
    no_exception(at)
    assert [box for box in coloured_texts(at) if "outline: 2px solid" in box][0].count("influence ") == 7 + 4


def typing_shown(at):
    """What the Sample page's typing box was given to draw: its text, bars, keep gates and note."""
    (component,) = [c for c in at.get("bidi_component") if c.proto.component_name.endswith(typing_box.NAME)]
    return json.loads(component.proto.mixed.json or component.proto.json)


def press_keys(at, text, n):
    """What the typing box sends on a key press: the whole text, and a number new for each press."""
    at.session_state["sample_typing_box"] = {"typed": {"text": text, "n": n}}
    return at.run()


def test_sample_next_character_bars_follow_every_key_press_with_the_state_carried():
    at = page(SAMPLE, sample_tokens=20).run()
    no_exception(at)
    shown = typing_shown(at)
    typed = shown["text"]
    assert typed == at.session_state["sample_typed"] and shown["n"] is None  # the page's own text
    assert f"Read all {len(typed)} tokens from the zero state" in shown["note"]
    bars = shown["bars"]
    assert len(bars) == 5 and [b["p"] for b in bars] == sorted((b["p"] for b in bars), reverse=True)
    press_keys(at, typed + bars[0]["text"], 1)  # one key: the likeliest next character
    no_exception(at)
    shown = typing_shown(at)
    assert shown["text"] == typed + bars[0]["text"] and shown["n"] == 1
    assert "Read 1 new token from the carried state" in shown["note"]
    assert shown["bars"] != bars
    assert at.query_params["typed"] in (shown["text"], [shown["text"]])  # the link keeps it
    keep = shown["keep"]  # the default model's two GRU layers, each keeping a share of its memory
    assert len(keep) == 2 and all(0 < k["value"] < 1 for k in keep)
    press_keys(at, "ROMEO", 2)  # an edit, not an extension: read again
    assert "Read all 5 tokens from the zero state" in typing_shown(at)["note"]
    press_keys(at, "ROMEO", 2)  # the same press again changes nothing
    assert at.session_state["sample_typed"] == "ROMEO"
    press_keys(at, "snow ☃", 3)
    no_exception(at)
    assert "☃" in errors(at) and typing_shown(at)["bars"] == []


def test_sample_typing_box_shows_a_vanilla_rnn_has_no_keep_gate():
    at = page(SAMPLE, sample_tokens=20, sample_checkpoint="char-rnn_latest").run()
    no_exception(at)
    (layer,) = typing_shown(at)["keep"]
    assert layer["value"] is None and "no keep gate" in layer["label"]


def test_sample_names_unknown_prompt_characters():
    at = page(SAMPLE, sample_tokens=40, sample_prompt="Snow ☃ man").run()
    no_exception(at)
    assert "☃" in errors(at)
    assert not coloured_texts(at)


def test_sample_rejects_invalid_query_parameters():
    at = page(SAMPLE, sample_tokens=40)
    at.query_params["top_k"] = "0"
    at.query_params["temperature"] = "hot"
    at.run()
    no_exception(at)
    warnings = re.sub(r"\\(.)", r"\1", " ".join(w.value for w in at.warning))  # as shown: escapes read
    assert "top_k=0" in warnings and "temperature=hot" in warnings
    assert len(probability_texts(at)) == 6  # the defaults were used instead
    assert at.number_input(key="sample_top_k_k").value == 20


def test_gates_draws_one_heatmap_when_asked_and_shows_a_unit_and_the_code():
    at = page(GATES).run()
    no_exception(at)
    assert not at.error
    first_card = at.button(key="gates_gallery_0")
    assert first_card.label == "Study this unit"
    assert not chart_keys(at) and not at.latex  # the first section: the gallery and the span, no heatmap
    at.radio(key="gates_section").set_value("gates").run()
    no_exception(at)
    assert not any("gates_heatmap" in k for k in chart_keys(at))  # drawn only when asked for
    assert at.latex  # the cell's equations
    at.selectbox(key="gates_heatmap_gate").set_value("c")
    at.toggle(key="gates_heatmap_shown").set_value(True).run()
    no_exception(at)
    assert len(heatmap_units(at)) == 32  # one gate, a few dozen units at a time
    show = [b for b in at.button if b.key.startswith("gates_show_")]
    assert len(show) == 5
    unit = int(show[1].label.split()[-1])
    show[1].click().run()
    no_exception(at)
    assert at.radio(key="gates_section").value == "unit"  # the button opens the section that shows it
    assert at.number_input(key="gates_unit").value == unit and at.session_state["gates_unit_gate"] == "c"
    at.radio(key="gates_section").set_value("gates").run()
    at.toggle(key="gates_show_code").set_value(True).run()
    assert any("class LSTMLayer" in c.value for c in at.code)
    at.toggle(key="gates_saturation_shown").set_value(True).run()
    no_exception(at)
    assert {f"gates_hist_{g}" for g in "ifo"} <= {k.split("-")[-1] for k in chart_keys(at)}


def test_gates_one_unit_opens_on_the_gallerys_first_unit_and_a_card_opens_its_own():
    at = page(GATES, gates_section="unit").run()  # a first visit straight to the section
    no_exception(at)
    from lab.instruments.units import unit_gallery
    from ui.app.warm_up import bundled_keys
    from ui.gates.settings import DEFAULTS
    from ui.shared.cached_calls import cached_unit_correlations

    first = unit_gallery(cached_unit_correlations(*bundled_keys()[DEFAULTS["model"]], DEFAULTS["text"]), 1).iloc[0]
    assert (at.session_state["gates_unit_gate"], at.number_input(key="gates_unit").value) == (first.gate, first.unit)
    assert any(k.endswith("gates_unit_chart") for k in chart_keys(at))
    at.radio(key="gates_section").set_value("learned").run()
    card = at.button(key="gates_gallery_2")
    card.click().run()
    no_exception(at)
    assert at.radio(key="gates_section").value == "unit" and at.query_params["section"] in ("unit", ["unit"])


@pytest.mark.parametrize(
    "model",
    [
        "char-rnn_latest",
        "char-gru-seed_latest",
        "char-gru-torch_latest",
        "char-lstm_latest",
        "char-scan_latest",
        "scan-markov_latest",
        "scribe-alpha_latest",
    ],
)
def test_gates_opens_on_a_gallery_of_units_for_every_bundled_family(model):
    at = page(GATES, gates_checkpoint=model, gates_cards=4).run()
    no_exception(at)
    assert not at.error, errors(at)
    assert len(gallery_cards(at)) == 4  # four cards; the chosen unit is a section of its own
    captions = [c.value for c in at.caption if c.value.startswith("r = ")]  # "r = -0.72 · `g` unit 18 of layer 1 · ..."
    assert len(captions) == 4
    strengths = [abs(float(c.split()[2])) for c in captions]
    assert strengths == sorted(strengths, reverse=True) and strengths[0] > 0.3

    def shown():
        return at.session_state["gates_layer"], at.session_state["gates_unit_gate"], at.session_state["gates_unit"]

    def card_unit(caption):  # the caption counts layers from 1, as students do; the page's state from 0
        layer = int(caption.split(" layer ")[1][0]) - 1
        return layer, caption.split("`")[1], int(caption.split(" unit ")[1].split()[0])

    at.radio(key="gates_section").set_value("unit").run()
    no_exception(at)
    assert shown() == card_unit(captions[0])  # "One unit" opens on the gallery's first unit
    at.radio(key="gates_section").set_value("learned").run()
    at.button(key="gates_gallery_2").click().run()  # and any card's button shows its unit there
    no_exception(at)
    assert shown() == card_unit(captions[2])


def span_shown(at):
    """The passage the student selects in (its tokens, and the highlighted span as tokens start..end-1),
    and the heading over the units that fire on the span."""
    (component,) = at.get("bidi_component")  # Streamlit's tests see no more of a custom component
    data = json.loads(component.proto.mixed.json or component.proto.json)
    heading = next(m.value for m in at.markdown if m.value.startswith("**The units that fire on"))
    return data, heading


def test_gates_selecting_a_span_ranks_the_units_that_fire_on_it():
    at = page(GATES).run()
    no_exception(at)
    span = at.select_slider(key="gates_span")
    text = at.session_state["gates_text"]
    assert span.value == (text.index("["), text.index("]") - 1)  # the first stage direction, inside
    data, heading = span_shown(at)
    assert "".join(data["tokens"]) == text and (data["start"], data["end"]) == (text.index("["), text.index("]"))
    assert heading == "**The units that fire on “\\[Enter Ghost\\.”**"
    ranked = at.table[0].value
    assert list(ranked.columns[:4]) == ["layer", "gate", "unit", "correlation r"] and len(ranked) == 5
    assert ranked["|r|"].is_monotonic_decreasing
    span.set_range(0, 3).run()  # "Hor:" instead, with the slider
    no_exception(at)
    assert (span_shown(at)[0]["start"], span_shown(at)[0]["end"]) == (0, 4)
    ranked = at.table[0].value
    first = ranked.iloc[0]
    at.button(key="gates_span_show_0").click().run()
    no_exception(at)
    assert (at.session_state["gates_unit_gate"], at.session_state["gates_unit"]) == (first.gate, first.unit)
    assert at.query_params["span"] in ("0-3", ["0-3"])


def test_gates_selecting_text_with_the_mouse_shows_the_units_for_that_span():
    """What the passage sends when the student selects in it (character offsets, here "Angels" with
    the space after it) chooses the span: highlighted, named over the units, ranked anew, in the URL."""
    at = page(GATES).run()
    no_exception(at)
    text = at.session_state["gates_text"]
    before = at.table[0].value
    start = text.index("Angels")
    at.session_state["gates_span_text"] = {"span": {"start": start, "end": start + len("Angels "), "n": 1}}
    at.run()
    no_exception(at)
    data, heading = span_shown(at)
    assert (data["start"], data["end"]) == (start, start + len("Angels"))  # the space at its edge left out
    assert heading == "**The units that fire on “Angels”**"
    assert at.select_slider(key="gates_span").value == (start, start + 5)
    assert not at.table[0].value.equals(before)
    assert at.query_params["span"] in (f"{start}-{start + 5}", [f"{start}-{start + 5}"])
    at.select_slider(key="gates_span").set_range(0, 3).run()  # the slider still moves the span afterwards
    no_exception(at)
    assert span_shown(at)[1] == "**The units that fire on “Hor\\:”**"


@pytest.mark.parametrize(
    "tokens, start, end, expected",
    [
        (list("ab\ncd"), 1, 4, (1, 3)),  # a newline is one character
        (["To", " be", ",", "\n", "or"], 2, 5, (1, 1)),  # within a token: the whole token; spaces at the edges out
        (list("🙂 ab"), 2, 4, (2, 3)),  # an emoji is one character, not two
        (["Ham", ":", "\n"], 3, 3, None),  # nothing selected
        (list("a  b"), 1, 3, (1, 2)),  # only spaces: kept
        (list("ab"), -4, 99, (0, 1)),  # clamped to the text
    ],
)
def test_gates_a_selection_in_characters_covers_the_tokens_it_touches(tokens, start, end, expected):
    from ui.gates.span_select import token_span

    assert token_span(tokens, start, end) == expected


def test_gates_influence_view_frames_the_prediction_and_colours_what_came_before():
    at = page(GATES, gates_section="prediction").run()
    no_exception(at)
    text = at.session_state["gates_text"]
    assert at.select_slider(key="gates_predict").value == text.index("]")  # the first "]"

    def framed():
        return [box for box in coloured_texts(at) if "outline: 2px solid" in box]

    assert len(framed()) == 1 and "predicted: p = " in framed()[0]
    before = framed()[0]
    assert before.count("influence ") == text.index("]")  # every earlier character has its influence
    at.select_slider(key="gates_predict").set_value(10).run()
    no_exception(at)
    assert framed()[0] != before and framed()[0].count("influence ") == 10
    assert any("probability of" in c.value for c in at.caption)


def test_gates_heatmap_units_in_feature_similarity_or_index_order():
    at = page(GATES, gates_section="gates", gates_units=20, gates_heatmap_gate="c", gates_heatmap_shown=True).run()
    no_exception(at)
    by_feature = heatmap_units(at)
    assert len(by_feature) == 20 and by_feature != [f"u{u}" for u in range(20)]
    at.radio(key="gates_order").set_value("index").run()
    assert heatmap_units(at) == [f"u{u}" for u in range(20)]
    at.radio(key="gates_order").set_value("similarity").run()
    no_exception(at)
    assert len(set(heatmap_units(at))) == 20 and heatmap_units(at) != by_feature
    assert at.query_params["order"] in ("similarity", ["similarity"])


def test_gates_empty_text_is_an_error():
    at = page(GATES, gates_text="").run()
    no_exception(at)
    assert "empty" in errors(at)
    assert not chart_keys(at)


MEMORY_SECTION_CHARTS = {  # each section of the Memory page -> the charts it draws, and it alone
    "reach": ["memory_reach_chart"],
    "units": ["memory_spread_chart", "memory_band_chart"],
    "analytic": ["memory_gk_chart"],
    "gradients": ["memory_grad_trained", "memory_grad_fresh"],
    "probe": [],  # the probe's chart comes with its results
}


def drawn_charts(at):
    return sorted(
        key
        for charts in MEMORY_SECTION_CHARTS.values()
        for key in charts
        if any(k.endswith(key) for k in chart_keys(at))
    )


def test_memory_draws_decay_and_gradient_charts_and_runs_a_live_probe():
    at = page(MEMORY, memory_text=SHORT_TEXT, memory_grad_steps=30, memory_max_lag=16).run()
    no_exception(at)
    assert not at.error
    for section, charts in MEMORY_SECTION_CHARTS.items():  # one section on the screen, only its charts drawn
        at.radio(key="memory_section").set_value(section).run()
        no_exception(at)
        assert drawn_charts(at) == sorted(charts), section
        assert at.query_params.get("section") in (None, section, [section])
    at.radio(key="memory_section").set_value("analytic").run()
    assert at.table  # the bias -> half-life table

    at.radio(key="memory_section").set_value("units").run()
    at.multiselect(key="memory_checkpoints").set_value(["char-rnn_latest"]).run()
    assert any("no keep gate" in i.value for i in at.info)

    at.radio(key="memory_section").set_value("analytic").run()
    at.text_input(key="memory_biases").set_value("1, two").run()
    assert "Biases" in errors(at)

    at.radio(key="memory_section").set_value("probe").run()
    at.radio(key="memory_probe_task").set_value("brackets")
    at.selectbox(key="memory_probe_cell").set_value("scan")
    at.multiselect(key="memory_probe_distances").set_value([2])
    at.slider(key="memory_probe_steps").set_value(50)
    at.button(key="memory_probe_run").click().run()
    no_exception(at)
    job = at.session_state["memory_probe_job"]  # a job through the server's budget, not the page's own thread
    assert job.cost_mb > 0 and job.wait(120) == "finished"
    at.run()
    no_exception(at)
    live = at.session_state["memory_probe_live"]
    assert list(live["distance"]) == [2] and list(live["task"]) == ["brackets"] and 0 <= live["accuracy"].iloc[0] <= 1
    assert any(k.endswith("memory_probe_chart") for k in chart_keys(at))
    assert at.table[-1].value["cell"].tolist() == ["selective scan"]  # the live table, in plain words
    assert at.query_params["probe_task"] in ("brackets", ["brackets"])  # a list on Streamlit 1.62


def test_memory_says_what_its_chart_of_unit_memories_shows():
    """The sentence's shares are the chart's: the share of units still keeping more than half after
    10 and 100 tokens, read off the named layer's line; the typical unit's half-life is the table's."""
    at = page(MEMORY, memory_section="units").run()
    no_exception(at)
    said = next(m.value for m in at.markdown if m.value.startswith("**What the chart shows.**"))
    said = re.sub(r"\\(.)", r"\1", said)  # the models' names made inert (ui.shared.plain_text.plain), read
    found = re.search(
        r"a few units: in (.+?), layer (\d+), (\d+) of its (\d+) units \(([\d.]+)%\).* after 10 tokens, "
        r"(\d+) \(([\d.]+)%\) after 100",
        said,
    )
    assert found, said
    name, layer, n10, units, share10, n100, share100 = found.groups()
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith("memory_spread_chart"))
    line = next(t for t in json.loads(chart.proto.spec)["data"] if t["name"].startswith(f"{name} · layer {layer} "))
    share_after = dict(zip(decoded(line["x"]), decoded(line["y"])))
    assert round(100 * share_after[10], 1) == float(share10) and round(share_after[10] * int(units)) == int(n10)
    assert round(100 * share_after[100], 1) == float(share100) and round(share_after[100] * int(units)) == int(n100)
    assert int(n100) > 0  # a trained gated model has units that keep half for over 100 tokens
    assert "The typical unit forgets fast" in said
    coloured = [b for b in coloured_texts(at) if "max-height: 11rem" in b]
    assert len(coloured) == 3  # the three longest-memory units on the text


def decoded(values):
    """A plotly array from a figure's JSON: a list, or numpy's base64 typed array."""
    if isinstance(values, list):
        return [float("nan") if v is None else v for v in values]
    return np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"])).tolist()


@pytest.mark.parametrize(
    "page_path, query, expected",
    [
        (
            SAMPLE,
            {
                "model": "char-lstm_latest",
                "prompt": "JULIET:\n",
                "tokens": "20",
                "top_p": "0.5",
                "drove": "greedy",
                "drove_token": "7",
                "typed": "O Romeo",
            },
            {
                "sample_checkpoint": "char-lstm_latest",
                "sample_prompt": "JULIET:\n",
                "sample_tokens": 20,
                "sample_top_p_p": 0.5,
                "sample_influence_strategy": "greedy",
                "sample_influence_token": 7,
                "sample_typed": "O Romeo",
            },
        ),
        (
            GATES,
            {
                "model": "char-gru-seed_latest",
                "text": SHORT_TEXT,  # long enough for a correlation to single out a unit: no warning
                "unit": "7",
                "gate": "z",
                "span": "5-9",
                "predict": "12",
                "order": "similarity",
                "cards": "3",
            },
            {
                "gates_checkpoint": "char-gru-seed_latest",
                "gates_text": SHORT_TEXT,
                "gates_unit": 7,
                "gates_unit_gate": "z",
                "gates_span": (5, 9),
                "gates_predict": 12,
                "gates_order": "similarity",
                "gates_cards": 3,
            },
        ),
        (
            MEMORY,
            {"text": SHORT_TEXT, "lag": "16", "steps": "30", "g": "0.999"},
            {"memory_text": SHORT_TEXT, "memory_max_lag": 16, "memory_grad_steps": 30, "memory_g": 0.999},
        ),
        ("pages/5_Checkpoints.py", {"model": "char-rnn_latest"}, {"ckpt_choice": "char-rnn_latest"}),
        ("pages/6_Ablation.py", {"epochs": "2", "size": "16"}, {"ablation_epochs": 2, "ablation_size": 16}),
    ],
)
def test_every_page_restores_its_settings_from_a_link_and_keeps_them_in_the_url(page_path, query, expected):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page_path)
    at.query_params.update(query)
    at.run()
    no_exception(at)
    assert not at.warning, [w.value for w in at.warning]
    for key, value in expected.items():
        assert at.session_state[key] == value, key
    assert {
        k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k] for k in query
    } == query  # the URL still carries what the link asked for


@pytest.mark.parametrize(
    "page_path, query",
    [
        (SAMPLE, {"model": "someone-elses_latest", "tokens": "-3"}),
        (GATES, {"layer": "9", "unit": "99999", "feature": "nope", "span": "9-3"}),
        (MEMORY, {"lag": "1000", "g": "x"}),
    ],
)
def test_a_bad_link_is_ignored_with_a_warning(page_path, query):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page_path)
    at.query_params.update(query)
    at.run()
    no_exception(at)
    assert at.warning


def count_calls(monkeypatch, names):
    """Count each call ui.shared.cached_calls makes to these lab functions (in the list returned)."""
    import ui.shared.cached_calls

    calls = []
    for name in names:
        real = getattr(ui.shared.cached_calls, name)
        monkeypatch.setattr(
            ui.shared.cached_calls, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k)
        )
    return calls


def test_the_servers_warm_up_starts_the_training_process_the_first_run_will_train_in():
    """A training process starts in a second or two and PyTorch's training set-up takes another there: the
    warm-up does both, not the first student's Start."""
    import multiprocessing

    import ui.app.warm_up

    join_warm_up()
    ui.app.warm_up.warm_up()  # once per server process: a no-op if a session's heartbeat has run it already
    assert [p for p in multiprocessing.active_children() if p.name == "lab-training" and p.is_alive()]


def test_the_servers_warm_up_computes_what_the_memory_page_first_shows(monkeypatch):
    """ui.app.warm_up fills the Memory page's caches with the page's own default arguments: the page's first
    run after it traces nothing and back-propagates nothing."""
    import ui.app.warm_up
    import ui.shared.cached_calls

    join_warm_up()
    calls = count_calls(monkeypatch, ("trace_text", "gradient_through_time", "change_reach"))
    for cached in (
        ui.shared.cached_calls.cached_trace,
        ui.shared.cached_calls.cached_retention,
        ui.shared.cached_calls.cached_gradient,
        ui.shared.cached_calls.cached_reach,
    ):
        cached.clear()
    ui.app.warm_up.memory_page_defaults()
    assert calls.count("trace_text") == 4 and calls.count("gradient_through_time") == 10, calls
    assert calls.count("change_reach") == 5, calls  # one model of each cell
    calls.clear()
    at = page(MEMORY).run()
    no_exception(at)
    assert drawn_charts(at) == sorted(MEMORY_SECTION_CHARTS["reach"])
    at.radio(key="memory_section").set_value("units").run()  # the sections a student opens next
    no_exception(at)
    assert drawn_charts(at) == sorted(MEMORY_SECTION_CHARTS["units"])
    at.radio(key="memory_section").set_value("gradients").run()
    no_exception(at)
    assert drawn_charts(at) == sorted(MEMORY_SECTION_CHARTS["gradients"])
    assert calls == []


def test_the_servers_warm_up_computes_what_the_sample_and_gates_pages_first_show(monkeypatch):
    """ui.app.warm_up samples and traces with the Sample and Gates pages' own defaults: their first runs
    after it generate nothing and trace nothing (a page with other defaults than the warm-up's
    would)."""
    import ui.app.warm_up
    import ui.shared.cached_calls

    join_warm_up()  # one a page's heartbeat started: its calls are not these
    calls = count_calls(monkeypatch, ("generate", "trace_text", "TypingReader"))
    ui.shared.cached_calls.cached_trace.clear()
    st.cache_data.clear()  # the units' correlations, the passage's units
    for cached in ("_generation", "_generation_html", "cached_reading"):  # the samples, the typed text's reading
        getattr(ui.shared.cached_calls, cached).clear()
    ui.app.warm_up.sample_page_defaults()
    assert calls == ["generate"] * 5 + ["TypingReader"], calls  # four columns, the stateless sample, the typed text
    ui.app.warm_up.gates_page_defaults()
    assert calls.count("trace_text") == 2, calls  # the example text and the longer passage
    calls.clear()
    for name in (SAMPLE, GATES):
        at = page(name).run()
        no_exception(at)
        assert coloured_texts(at), name  # the samples and the gallery were drawn, from the caches
    assert calls == []
