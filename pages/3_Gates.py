"""Gates: what the units learned, text first, in four sections, one on the screen at a time (chosen at
the top, kept in the link): a gallery of the units that track a feature of the text, with a span you
select and the units that fire on it; one unit colouring the text; which earlier characters drove a
prediction; one gate of one layer as a heatmap, its saturation, the cell's equations and code, each
drawn when asked for. Only the section shown is computed and drawn.

Each part is a fragment of its own module (ui.gates.units, ui.gates.span, ui.gates.prediction,
ui.gates.heatmap; what they share is ui.gates.settings): moving its slider reruns that part only. A
button that shows a unit in another part reruns the page (its callback has set the unit first)."""

import streamlit as st

from ui.app.frame import setup_page
from ui.gates.heatmap import layer_details
from ui.gates.prediction import drivers
from ui.gates.settings import (
    DEFAULTS,
    SECTIONS,
    SETTINGS,
    TEXT_MAX_CHARS,
    TEXTS,
    forget_positions_in_another_text,
    mirror,
    use_preset,
)
from ui.gates.span import span_finder
from ui.gates.units import gallery, one_unit
from ui.shared.boundary import page_part
from ui.shared.cached_calls import cached_trace, checkpoint_key
from ui.shared.checkpoint_picker import checkpoint_picker
from ui.shared.common import section_choice, show_anchors
from ui.shared.links import restore_from_url
from ui.shared.model_names import describe_checkpoint, model_title
from ui.shared.plain_text import plain, user_errors

setup_page("Gates")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("🔬 Gates")
    st.caption(
        "The model reads your text once, from the zero state. Below: the units that learned something you "
        "can name, the units behind any stretch of text you select, and what every gate does at every step."
    )
    linked = restore_from_url(SETTINGS, DEFAULTS)

    top = st.columns([1.2, 1.4, 1])
    with top[0]:
        checkpoint = checkpoint_picker("gates_checkpoint", default_name=DEFAULTS["model"])
    with top[1]:
        st.selectbox("Example text", list(TEXTS), key="gates_preset", on_change=use_preset)
    with top[2].expander("✏️ Your own text"):
        text = st.text_area(
            "Text to read", key="gates_text", height=150, max_chars=TEXT_MAX_CHARS, help="Up to 2,000 tokens."
        )
    if checkpoint is None:
        mirror()  # the choices so far are kept for the next visit, as on every run that gets further
        st.stop()
    st.caption(plain(describe_checkpoint(model_title(st.session_state.gates_checkpoint), checkpoint)))

    trace = None
    key = checkpoint_key(checkpoint)
    with user_errors("Tracing"):
        trace = cached_trace(*key, text)
    if trace is None:  # a text the model cannot read: the student changes the text or the model
        mirror()
        st.stop()
    forget_positions_in_another_text(trace.token_texts, linked)
    n_layers = len(trace.layers)
    for layer_key in ("gates_layer", "gates_heatmap_layer"):  # a model with fewer layers than the last one, or a link's
        if st.session_state.get(layer_key, 0) >= n_layers:
            st.session_state[layer_key] = 0

    section = section_choice(SECTIONS, "gates_section")
    if section == "learned":
        gallery(trace, key, text)
        span_finder(trace)
    elif section == "unit":
        one_unit(trace, key, text)
    elif section == "prediction":
        drivers(trace, key, checkpoint.tokenizer.unit)
    else:
        layer_details(trace, key, text)
    show_anchors("uniform_char", "leviathan")
    mirror()
