"""A passage the student selects a span of with the mouse, for the Gates page's "which units fire on it?".

Why it exists: a student looking for the units behind "the stage direction" should point at the stage
direction, not translate it into two character positions on a slider. Streamlit has no widget that
returns a text selection, so this is a custom component (Streamlit's components v2, its HTML, CSS and
JavaScript inline, no build step; the JavaScript in span_select.js beside this file): the passage as
text the student drags the mouse over (a native selection; or Shift and the arrow keys once the text
has the focus), the chosen span highlighted.

The component sends character offsets into the passage, characters as Python counts them; `token_span`
turns them into the tokens they cover. The page keeps the chosen span itself (a session-state key that
the URL mirrors and a slider sets as well): `span_select` only proposes a new span and draws the
chosen one. AppTest cannot drive a custom component, but it can set the component's state, which
`span_select` reads like a selection made in a browser.
"""

from bisect import bisect_left, bisect_right
from itertools import accumulate
from pathlib import Path

import streamlit as st

from ui.shared.coloured_text import visible_piece

NAME = "rnnlab_span_select"
PASSAGE_FIELD = "tokens"  # the field of the data that carries the passage (the JavaScript reads data.tokens)
_JS = Path(__file__).with_name("span_select.js").read_text(encoding="utf-8")
# the look of ui.shared.coloured_text's boxes; the chosen span in its SPAN_COLOUR. The styles are not
# isolated (a selection inside a shadow root cannot be read the same way in every browser), hence
# the class on every rule.
_CSS = """
.rnnlab-span-text {
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9rem;
  line-height: 1.7; white-space: pre-wrap; word-break: break-word; padding: 0.6rem 0.7rem;
  border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; background: #fff; color: #111;
  cursor: text; user-select: text; -webkit-user-select: text;
}
.rnnlab-span-text:focus-visible { outline: 2px solid rgba(255, 160, 0, 0.9); outline-offset: 1px; }
.rnnlab-span-text span.chosen { background-color: rgba(255, 193, 7, 0.55); border-radius: 2px; }
.rnnlab-span-text span.newline::before { content: "\\21B5"; opacity: 0.45; }
.rnnlab-span-text ::selection { background-color: rgba(25, 118, 210, 0.35); }
"""


def token_span(token_texts, start, end):
    """Character offsets start..end-1 into the passage "".join(token_texts) -> (first, last): the
    tokens they cover, inclusive; whitespace at either edge left out unless the selection is only
    whitespace; None for an empty selection. Offsets count characters as Python does (an emoji is
    one), and a newline is one character like any other."""
    text = "".join(token_texts)
    start, end = max(0, int(start)), min(len(text), int(end))
    if end <= start:
        return None
    selected = text[start:end]
    if selected.strip():
        start += len(selected) - len(selected.lstrip())
        end -= len(selected) - len(selected.rstrip())
    ends = list(accumulate(len(t) for t in token_texts))  # token t covers ends[t] - len(t) .. ends[t] - 1
    return bisect_right(ends, start), bisect_left(ends, end)


def span_text(token_texts, first, last, longest=48):
    """Tokens first..last as a student reads them in a sentence: newlines and tabs made visible, a
    long span shortened in its middle."""
    text = "".join(token_texts[first : last + 1]).replace("\n", "↵").replace("\t", "⇥")
    if len(text) > longest:
        text = f"{text[: longest * 2 // 3]}…{text[-(longest // 3) :]}"
    return text or visible_piece("")


def _proposed(key):
    """The span the component holds (its last selection) as (start, end, n), or None."""
    state = st.session_state.get(key)
    span = state.get("span") if isinstance(state, dict) else None
    try:
        return int(span["start"]), int(span["end"]), span.get("n")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def drop_selection(key):
    """Count the passage's last selection as used without applying it: it was made in a text that has
    changed since, where its character offsets mean other characters."""
    st.session_state[f"_{key}_applied"] = _proposed(key)


def span_select(token_texts, span, *, key, label):
    """Draw the passage `token_texts` (a list of token texts) with its tokens span[0]..span[1]
    highlighted, and -> (first, last): the span the student has just selected in it, else `span`.
    Call it before any widget bound to the chosen span, and keep what it returns. `label` names the
    text for a screen reader."""
    proposed = _proposed(key)
    applied = f"_{key}_applied"
    if proposed is not None and proposed != st.session_state.get(applied):
        st.session_state[applied] = proposed  # each selection once: a slider may move the span later
        span = token_span(token_texts, *proposed[:2]) or span
    first, last = span
    # registered at every mount, not once at import: a test's AppTest starts a runtime of its own, and
    # Streamlit before 1.67 looks components up in the running one only (the same definition again is
    # no change)
    component = st.components.v2.component(NAME, css=_CSS, js=_JS, isolate_styles=False)
    component(
        key=key,
        data={PASSAGE_FIELD: list(token_texts), "start": int(first), "end": int(last) + 1, "label": label},
        on_span_change=lambda: None,  # the state is read above, at the start of the next run
    )
    return int(first), int(last)
