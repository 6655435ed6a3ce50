"""The Gates page's settings and what its parts share: the example texts, the page's sections, each
setting's URL form and default (ui.shared.links), the mirror every part calls, the button that shows a
unit in "One unit, colouring the text", the choice of a layer or of a token, and the plain names of the
tables of units."""

import streamlit as st

from lab.instruments.features import FEATURES
from lab.instruments.introspect import MAX_TRACE_TOKENS
from lab.instruments.units import (
    SIGNIFICANCE,
    STRONG_CORRELATION,
    UNIT_ORDERS,
    chance_correlation,
    tokens_needed,
)
from lab.words import count, layer_name
from ui.cell_labels import cell_label
from ui.gates.span_select import drop_selection
from ui.shared.links import Field, mirror_to_url
from ui.shared.plain_text import piece_label

TEXTS = {  # passages of the bundled corpus (lab/corpus/): Hamlet trains, Macbeth is held out
    "Hamlet meets the Ghost (a [stage direction])": (
        "Hor:\nLook, my lord, it comes!\n\n[Enter Ghost.]\n\nHam:\nAngels and ministers of grace defend us!--\n"
        "Be thou a spirit of health or goblin damn'd,\nBring with thee airs from heaven or blasts from hell,\n"
    ),
    'Macbeth\'s witch ("quotes" and (parentheses))': (
        "FIRST WITCH:\nA sailor's wife had chestnuts in her lap,\n"
        "And mounch'd, and mounch'd, and mounch'd:--\"Give me,\" quoth I:\n"
        '"Aroint thee, witch!" the rump-fed ronyon cries.\n\nMACBETH:\n'
        "I keep a servant fee'd. I will to-morrow,\n(And betimes I will) to the weird sisters:\n"
    ),
    "To be, or not to be": (
        "Ham:\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
        "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"
    ),
}
TEXT_MAX_CHARS = 4000  # the box and the link alike; the trace itself reads at most MAX_TRACE_TOKENS
MAX_HEATMAP_UNITS = 48  # rows a heatmap can show at once: more would be too thin to read
# lab.instruments.units' column names -> what a student reads in the tables of units
UNIT_COLUMNS = {
    "correlation": "correlation r",
    "abs_correlation": "|r|",
    "mean_inside": "mean on the span",
    "mean_outside": "mean elsewhere",
}
SECTIONS = {  # URL value -> what the choice at the top says; one on the screen at a time
    "learned": "1 · What the units learned",
    "unit": "2 · One unit",
    "prediction": "3 · What drove a prediction",
    "gates": "4 · Every gate, every step",
}
# the page's settings as they appear in a link: ?model=...&text=...&layer=...&unit=...
SETTINGS = {
    "section": (Field("choice", "Section", choices=tuple(SECTIONS)), "gates_section"),
    "model": (Field("text", "Model"), "gates_checkpoint"),
    "text": (Field("text", "Text", high=TEXT_MAX_CHARS), "gates_text"),
    "layer": (Field("int", "Layer", 0, 63), "gates_layer"),
    "cards": (Field("int", "Units in the gallery", 1, 12), "gates_cards"),
    "span": (Field("range", "Span", 0, MAX_TRACE_TOKENS - 1), "gates_span"),
    "gate": (Field("text", "Gate of the unit shown", high=8), "gates_unit_gate"),
    "unit": (Field("int", "Unit", 0, 100_000), "gates_unit"),
    "predict": (Field("int", "Predicted token", 1, MAX_TRACE_TOKENS - 1), "gates_predict"),
    "order": (Field("choice", "Unit order", choices=tuple(UNIT_ORDERS)), "gates_order"),
    "units": (Field("int", "Units shown", 1, MAX_HEATMAP_UNITS), "gates_units"),
    "feature": (Field("choice", "Feature", choices=tuple(FEATURES)), "gates_feature"),
    "heatmap_layer": (Field("int", "Layer of the heatmap", 0, 63), "gates_heatmap_layer"),
    "heatmap_gate": (Field("text", "Gate of the heatmap", high=8), "gates_heatmap_gate"),
}
DEFAULTS = {
    "section": "learned",
    "model": "char-lstm_latest",
    "text": next(iter(TEXTS.values())),
    "layer": 0,
    "cards": 6,
    "span": None,
    "gate": "h",
    "unit": None,
    "predict": None,
    "order": "feature",
    "units": 32,
    "feature": next(iter(FEATURES)),
    "heatmap_layer": 0,
    "heatmap_gate": "h",
}


# the settings that point into the text by position (a span, a predicted token): each means the characters
# it was chosen on, so they last only as long as the text, read into the same tokens
POSITIONS = {"span": "gates_span", "predict": "gates_predict"}
SPAN_PASSAGE = "gates_span_text"  # the passage the span is selected in (ui.gates.span_select)


def forget_positions_in_another_text(token_texts, linked):
    """When the text (or the model's tokens of it) changed since the last run, the span and the
    predicted token go back to their defaults for the new text, and the passage's last selection is not
    applied to it: their positions meant the old text's characters. A position a link set together with
    its text (`linked`: the URL names restore_from_url took this run) is kept."""
    tokens = hash(tuple(token_texts))
    if st.session_state.get("_gates_positions_read_on", tokens) != tokens:
        for name, key in POSITIONS.items():
            if name not in linked:
                st.session_state[key] = None
        drop_selection(SPAN_PASSAGE)
    st.session_state._gates_positions_read_on = tokens


def use_preset():
    st.session_state.gates_text = TEXTS[st.session_state.gates_preset]


def show_unit(layer, gate, unit):
    state = st.session_state
    state.gates_layer, state.gates_unit_gate, state.gates_unit = int(layer), gate, int(unit)


def _show_unit_in_its_section(layer, gate, unit):
    show_unit(layer, gate, unit)
    st.session_state.gates_section = "unit"


def show_unit_button(label, key, layer, gate, unit, help=None):
    """A button that shows a unit in "One unit, colouring the text": its callback sets the unit and
    opens that section, and a rerun of the whole page (not only the fragment holding the button)
    draws it there."""
    if st.button(label, key=key, on_click=_show_unit_in_its_section, args=(layer, gate, unit), help=help):
        st.rerun()


def mirror():
    """The URL follows the settings: every fragment calls this, since a fragment's rerun skips the
    page's own last line."""
    mirror_to_url(SETTINGS, DEFAULTS)


def first_token_with(token_texts, char, default, after=-1):
    """The first token after token `after` that holds `char`, else `default`."""
    return next((t for t in range(after + 1, len(token_texts)) if char in token_texts[t]), default)


def choose_layer(column, trace, layer_key, gate_key):
    """A selectbox in `column` over the layers of `trace`, kept under `layer_key` -> (layer, its gates
    {name: (T, H) values}, H); the gate kept under `gate_key` becomes the state h where the layer has
    no gate of that name (another cell, or a link's)."""
    layer = column.selectbox(
        "Layer",
        range(len(trace.layers)),
        key=layer_key,
        format_func=lambda l: f"{layer_name(l)}: {cell_label(trace.cells[l])}",
    )
    gates = trace.gates(layer)
    if st.session_state.get(gate_key) not in trace.gate_names[layer]:
        st.session_state[gate_key] = "h"
    return layer, gates, next(iter(gates.values())).shape[1]


def too_short(trace, to_do):
    """Whether the text is a single token, too short `to_do` in it ("select a span of it"): then says so."""
    if len(trace.token_ids) < 2:
        st.info(f"Type a longer text to {to_do}.")
        return True
    return False


def token_slider(label, trace, options, key, **kwargs):
    """A select_slider over token positions of `trace`, each shown as its position and its piece."""
    return st.select_slider(
        label, options=options, key=key, format_func=lambda t: f"{t}: {piece_label(trace.pieces[t])}", **kwargs
    )


def token_word(trace):
    """What the text's tokens are, in a student's words: characters for a character model."""
    return "character" if all(len(t) == 1 for t in trace.token_texts) else "token"


def chance_bar(trace, n_compared):
    """(|r| a correlation must pass to single out a unit over this text, the sentence that says so, and
    whether the text is too short for any unit that follows a feature with |r| = STRONG_CORRELATION)."""
    n, word = len(trace.token_ids), token_word(trace)
    bar, needed = chance_correlation(n, n_compared), tokens_needed(n_compared)
    if n < needed:
        return (
            bar,
            (
                f"With {count(n, word)}, a correlation cannot single out a unit: among the {n_compared:,} "
                f"correlations compared, chance alone reaches |r| = {bar:.2f}. Type at least {count(needed, word)}: "
                f"then a unit that follows a feature with |r| = {STRONG_CORRELATION} stands out from chance."
            ),
            True,
        )
    return (
        bar,
        (
            f"Over these {count(n, word)}, chance alone puts the strongest of the {n_compared:,} correlations "
            f"compared at up to |r| = {bar:.2f} (once in {round(1 / SIGNIFICANCE)} texts): a unit is a finding "
            "only above it."
        ),
        False,
    )
