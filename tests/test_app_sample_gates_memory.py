"""AppTest for the Sample, Gates and Memory pages: they render, their main interaction
works, and bad input gives an error element instead of a traceback.

Kept small for 2 CPU cores: 40-token generations, short texts, a 50-step probe.
"""
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


APP = str(ROOT / "app.py")
SAMPLE, GATES, MEMORY = "pages/2_Sample.py", "pages/3_Gates.py", "pages/4_Memory.py"
# the bundled models these pages open on; tests/conftest.py fails the tests when one is missing
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan"]
SHORT_TEXT = "Ham.\nTo be, or not to be,--that is the question:--\n[Enter Ghost.]\nWhether 'tis nobler\n"



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


def test_sample_fills_every_strategy_and_both_state_modes():
    at = page(SAMPLE, sample_tokens=40).run()
    no_exception(at)
    assert not at.error
    boxes = coloured_texts(at)
    assert len(boxes) == 6  # greedy, temperature, top-k, top-p, then stateful and stateless
    assert all("<span title=\"p = " in box for box in boxes)
    for title in ("Greedy", "Temperature", "Top-k", "Top-p (nucleus)"):
        assert title in [h.value for h in at.subheader]
    markdown = " ".join(m.value for m in at.markdown)
    assert "Repetition report" in markdown and "Stateful" in markdown and "Stateless" in markdown
    assert "(stateless)" in markdown
    assert len(at.metric) == 12  # entropy and p(chosen) per box

    # the same seed gives the same text; another seed another sample
    at.run()
    assert coloured_texts(at) == boxes
    at.number_input(key="sample_seed").set_value(1).run()
    no_exception(at)
    assert coloured_texts(at)[1] != boxes[1]  # temperature sampling changed
    assert coloured_texts(at)[0] == boxes[0]  # greedy did not


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
    warnings = " ".join(w.value for w in at.warning)
    assert "top_k=0" in warnings and "temperature=hot" in warnings
    assert len(coloured_texts(at)) == 6  # the defaults were used instead
    assert at.number_input(key="sample_top_k_k").value == 20


def test_gates_draws_a_heatmap_per_gate_and_shows_a_unit_and_the_code():
    at = page(GATES).run()
    no_exception(at)
    assert not at.error
    keys = chart_keys(at)
    for gate in "ifgoch":  # the default checkpoint is the LSTM
        assert any(k.endswith(f"gates_heatmap_{gate}") for k in keys), gate
    assert at.latex  # the cell's equations
    show = [b for b in at.button if b.label.startswith("Show unit")]
    assert len(show) == 5
    assert at.number_input(key="gates_unit").value == int(show[0].label.split()[-1])  # the best unit first
    unit = int(show[1].label.split()[-1])
    show[1].click().run()
    no_exception(at)
    assert at.number_input(key="gates_unit").value == unit
    at.toggle(key="gates_show_code").set_value(True).run()
    assert any("class LSTMLayer" in c.value for c in at.code)


def test_gates_empty_text_is_an_error():
    at = page(GATES, gates_text="").run()
    no_exception(at)
    assert "empty" in errors(at)
    assert not chart_keys(at)


def test_memory_draws_decay_and_gradient_charts_and_runs_a_live_probe():
    at = page(MEMORY, memory_text=SHORT_TEXT, memory_grad_steps=30, memory_max_lag=16).run()
    no_exception(at)
    assert not at.error
    keys = chart_keys(at)
    for key in ("memory_decay_chart", "memory_gk_chart", "memory_grad_trained", "memory_grad_fresh"):
        assert any(k.endswith(key) for k in keys), key
    assert at.dataframe  # the bias -> half-life table

    at.multiselect(key="memory_checkpoints").set_value(["char-rnn_latest"]).run()
    assert any("no keep gate" in i.value for i in at.info)

    at.text_input(key="memory_biases").set_value("1, two").run()
    assert "Biases" in errors(at)

    at.radio(key="memory_probe_task").set_value("brackets")
    at.selectbox(key="memory_probe_cell").set_value("scan")
    at.multiselect(key="memory_probe_distances").set_value([2])
    at.slider(key="memory_probe_steps").set_value(50)
    at.button(key="memory_probe_run").click().run()
    no_exception(at)
    live = at.session_state["memory_probe_live"]
    assert list(live["distance"]) == [2] and list(live["task"]) == ["brackets"] and 0 <= live["accuracy"].iloc[0] <= 1
    assert any(k.endswith("memory_probe_chart") for k in chart_keys(at))
    assert at.query_params["probe_task"] == "brackets"


@pytest.mark.parametrize("page_path, query, expected", [
    (SAMPLE, {"model": "char-lstm_latest", "prompt": "JULIET.\n", "tokens": "20", "top_p": "0.5"},
     {"sample_checkpoint": "char-lstm_latest", "sample_prompt": "JULIET.\n", "sample_tokens": 20,
      "sample_top_p_p": 0.5}),
    (GATES, {"model": "char-gru-seed_latest", "text": "Ham.\nTo be, or not to be", "unit": "7", "gate": "z"},
     {"gates_checkpoint": "char-gru-seed_latest", "gates_text": "Ham.\nTo be, or not to be", "gates_unit": 7,
      "gates_unit_gate": "z"}),
    (MEMORY, {"text": SHORT_TEXT, "lag": "16", "steps": "30", "g": "0.999"},
     {"memory_text": SHORT_TEXT, "memory_max_lag": 16, "memory_grad_steps": 30, "memory_g": 0.999}),
    ("pages/5_Checkpoints.py", {"model": "char-rnn_latest"}, {"ckpt_choice": "char-rnn_latest"}),
    ("pages/6_Ablation.py", {"epochs": "2", "size": "16"}, {"ablation_epochs": 2, "ablation_size": 16}),
])
def test_every_page_restores_its_settings_from_a_link_and_keeps_them_in_the_url(page_path, query, expected):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page_path)
    at.query_params.update(query)
    at.run()
    no_exception(at)
    assert not at.warning, [w.value for w in at.warning]
    for key, value in expected.items():
        assert at.session_state[key] == value, key
    assert {k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k]
            for k in query} == query  # the URL still carries what the link asked for


@pytest.mark.parametrize("page_path, query", [(SAMPLE, {"model": "someone-elses_latest", "tokens": "-3"}),
                                              (GATES, {"layer": "9", "unit": "99999", "feature": "nope"}),
                                              (MEMORY, {"lag": "1000", "g": "x"})])
def test_a_bad_link_is_ignored_with_a_warning(page_path, query):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page_path)
    at.query_params.update(query)
    at.run()
    no_exception(at)
    assert at.warning
