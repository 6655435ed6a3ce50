"""ui.shared.links: what a page reads from its URL is a pydantic model of its fields; a malformed or
out-of-range value is refused with one line naming it, and the page opens with its own value for
that setting while the link's other settings still apply."""

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.shared.links import Field, link_model, parse_query

APP = str(Path(__file__).resolve().parent.parent / "app.py")
FIELDS = {
    "tokens": Field("int", "New tokens", 1, 2000),
    "temperature": Field("float", "Temperature", 0.05, 5.0),
    "strategy": Field("choice", "Strategy", choices=("greedy", "top_k", "top_p")),
    "stateful": Field("bool", "Stateful"),
    "name": Field("text", "Run name", high=8),
    "span": Field("range", "Span", 0, 99),
}


@pytest.mark.parametrize(
    "name, raw, why",
    [
        ("tokens", "0", "greater than or equal to 1"),
        ("tokens", "2001", "less than or equal to 2000"),
        ("tokens", "1.5", "valid integer"),
        ("temperature", "hot", "valid number"),
        ("temperature", "nan", "finite number"),
        ("strategy", "beam", "'greedy', 'top_k' or 'top_p'"),
        ("stateful", "maybe", "valid boolean"),
        ("name", "x" * 9, "at most 8 characters"),
        ("span", "9-3", "starts at 9, after its end 3"),
        ("span", "3", "two integers written a-b"),
        ("span", "3-100", "less than or equal to 99"),
    ],
)
def test_a_bad_value_is_refused_naming_its_field_and_the_others_are_kept(name, raw, why):
    good = {"tokens": "40", "temperature": "0.5", "strategy": "top_p", "stateful": "true", "name": "run", "span": "2-5"}
    values, warnings = parse_query({**good, name: raw}, FIELDS)
    assert len(warnings) == 1 and f"“{name}={raw}”" in warnings[0] and why in warnings[0], warnings
    assert f"{name}: " in warnings[0] or f"{name}.1: " in warnings[0]  # the field, as error_message names it
    assert FIELDS[name].label in warnings[0]
    expected = {"tokens": 40, "temperature": 0.5, "strategy": "top_p", "stateful": True, "name": "run", "span": (2, 5)}
    del expected[name]
    assert values == expected


def test_every_value_a_page_writes_into_its_url_reads_back_the_same():
    values = {"tokens": 2000, "temperature": 0.05, "strategy": "greedy", "stateful": False, "name": "", "span": (0, 99)}
    query = {name: FIELDS[name].format(value) for name, value in values.items()}
    assert parse_query(query, FIELDS) == (values, [])


def test_what_a_page_reads_from_its_url_is_a_pydantic_model_of_its_fields():
    model = link_model(tuple(FIELDS.items()))
    assert set(model.model_fields) == set(FIELDS)
    assert model.model_validate({"tokens": "7"}).tokens == 7


def test_an_unknown_kind_of_setting_is_refused_when_the_page_declares_it():
    with pytest.raises(ValueError, match="unknown kind of setting 'integer'"):
        Field("integer", "Layers")


def test_a_page_opened_by_a_bad_link_says_which_settings_it_ignored_and_opens_with_its_own():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/6_Ablation.py")
    at.query_params.update({"section": "live", "epochs": "99", "batch": "many", "seeds": "2"})
    at.run()
    assert not at.exception
    warnings = [re.sub(r"\\(.)", r"\1", w.value) for w in at.warning]  # as shown: escapes read
    assert len(warnings) == 2, warnings
    assert "epochs=99" in warnings[0] and "Epochs" in warnings[0] and "less than or equal to 20" in warnings[0]
    assert "batch=many" in warnings[1] and "Batch size" in warnings[1] and "valid integer" in warnings[1]
    assert at.session_state["ablation_epochs"] == 6 and at.session_state["ablation_batch"] == 32  # the defaults
    assert at.session_state["ablation_seeds"] == 2  # the link's good setting still applies
    assert at.button(key="FormSubmitter:ablation_live_form-Train both arms")  # the page is there to use


VALUE_WIDGETS = (
    "number_input",
    "slider",
    "select_slider",
    "selectbox",
    "radio",
    "text_input",
    "text_area",
    "checkbox",
    "toggle",
)


def widget_values(at):
    return {w.key: w.value for kind in VALUE_WIDGETS for w in getattr(at, kind) if w.key}


def visit(at, page, query=None):
    """Open `page` as the sidebar's link does: its URL carries no settings."""
    at.switch_page(page)
    at.query_params.clear()
    at.query_params.update(query or {})
    return at.run()


@pytest.mark.parametrize(
    "page, query, key, value",
    [
        ("pages/1_Train.py", {}, "train_hidden", 96),
        ("pages/2_Sample.py", {}, "sample_tokens", 123),
        ("pages/3_Gates.py", {}, "gates_cards", 5),
        ("pages/4_Memory.py", {"section": "units"}, "memory_max_lag", 16),
        ("pages/5_Checkpoints.py", {}, "ckpt_choice", "char-rnn_latest"),
        (
            "pages/6_Ablation.py",
            {"section": "live", "epochs": "2"},
            None,
            None,
        ),  # its settings sit in a form: set by a link
        ("pages/7_Lessons.py", {"lesson": "memory"}, None, None),
    ],
)
def test_a_pages_settings_are_kept_while_the_student_visits_another_page(page, query, key, value):
    """Streamlit forgets the value of a widget a run does not draw: a student who went Home and came back
    found the Sample page at 1 token, temperature 0.05 and an empty prompt (each widget's minimum)."""
    at = visit(AppTest.from_file(APP, default_timeout=120), page, query)
    if key:
        widget = next(w for kind in VALUE_WIDGETS for w in getattr(at, kind) if w.key == key)
        assert widget.value != value
        widget.set_value(value).run()
    before = widget_values(at)
    assert not at.exception and (not key or before[key] == value)
    visit(at, "app.py")
    visit(at, page)
    assert not at.exception, [e.value for e in at.exception]
    assert widget_values(at) == before
