"""The Gates page's span section, text first: a span the student selects in the text itself
(ui.gates.span_select) and the units that fire on it (LSTMVis's pattern selection)."""

import streamlit as st

from lab.instruments.units import span_units
from ui.gates.settings import (
    SPAN_PASSAGE,
    UNIT_COLUMNS,
    chance_bar,
    first_token_with,
    mirror,
    show_unit_button,
    token_slider,
    too_short,
)
from ui.gates.span_select import span_select, span_text
from ui.shared.boundary import fragment
from ui.shared.common import show_table
from ui.shared.plain_text import plain, user_errors


def default_span(token_texts):
    """(first, last) token of the first [stage direction], without the "]" that ends it (its inside is
    what a bracket unit tracks), else of the first line; some token always stays outside."""
    start = first_token_with(token_texts, "[", None)
    start, closing = (0, "\n") if start is None else (start, "]")
    end = first_token_with(token_texts, closing, len(token_texts) - 1, after=start)
    return start, max(start, min(end - 1, len(token_texts) - 2))


@fragment
def span_finder(trace):
    """Text first: a span the student selects in the text itself, and the units that fire on it
    (LSTMVis's pattern selection)."""
    st.subheader("🔎 Select some text: which units fire on it?")
    if too_short(trace, "select a span of it"):
        return
    T = len(trace.token_ids)
    span = st.session_state.get("gates_span")
    if span is None or not 0 <= span[0] <= span[1] < T:  # first visit, or a shorter text
        span = default_span(trace.token_texts)
    st.caption(
        "Drag the mouse over a stretch of the text (or click in it, then hold Shift and press the arrow "
        "keys). The highlighted stretch is your span; the units that fire on it are listed below."
    )
    # the component proposes a new span, if the student has just selected one; the slider below may set it too
    chosen = span_select(trace.token_texts, tuple(span), key=SPAN_PASSAGE, label="The text: select a part of it")
    if chosen != tuple(st.session_state.get("gates_span") or ()):
        st.session_state.gates_span = chosen
    # the title of the units found beside the fine adjustment: one row, so the section fits a laptop's screens
    title, adjust = st.columns([3, 2], vertical_alignment="center")
    with adjust.expander("Adjust the span one character at a time"):
        # value= makes it a range slider (Streamlit reads range or single from it); the session state decides the value
        start, last = token_slider(
            "Span of the text (first and last character)",
            trace,
            range(T),
            "gates_span",
            value=st.session_state.gates_span,
        )
    title.markdown(f"**The units that fire on “{plain(span_text(trace.token_texts, start, last))}”**")
    if last - start + 1 == T:  # the slider reaches it; a unit stands out on a span only against the rest
        st.info(
            "This span is the whole text: a unit stands out on a span only against the rest of the text, so "
            "leave some of the text outside it."
        )
        mirror()
        return
    found = None
    with user_errors("Selecting"):
        found = span_units(trace, start, last + 1, k=5)
    if found is not None:
        ranked = (
            "Ranked by the correlation of each unit with your span (1 on it, 0 elsewhere): how far its "
            "value on the span stands out from the rest of the text."
        )
        n_units = sum(trace.gate(l, g).shape[1] for l in range(len(trace.layers)) for g in trace.gate_names[l])
        bar, sentence, too_few = chance_bar(trace, n_units)
        if too_few:
            st.caption(ranked)
            st.warning(sentence)
        else:
            st.caption(f"{ranked} {sentence}")
        if not too_few and not (found["abs_correlation"] > bar).any():
            st.caption(
                f"No unit stands out on this span: the strongest, |r| = {found['abs_correlation'].max():.2f}, "
                "is within chance."
            )
        show_table(
            found,
            UNIT_COLUMNS,
            {
                "correlation": "{:+.3f}",
                "abs_correlation": "{:.3f}",
                "mean_inside": "{:+.3f}",
                "mean_outside": "{:+.3f}",
            },
        )
        for n, (button, row) in enumerate(zip(st.columns(len(found)), found.itertuples())):
            with button:
                show_unit_button(f"Show {row.gate} {row.unit}", f"gates_span_show_{n}", row.layer, row.gate, row.unit)
    mirror()
