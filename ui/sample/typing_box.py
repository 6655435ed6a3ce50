"""A text box whose next-token bars follow every key press, for the Sample page's "What comes next?".

Why it exists: a student who types "wher" should see "e" rise before pressing anything; Streamlit's text
box sends its text only on Enter or when it loses the focus. So this is a custom component (Streamlit's
components v2, no build step; the JavaScript in typing_box.js beside this file) that sends its text on
every key press and draws, under the box, the bars of the likeliest next tokens and each layer's keep
gate that the page computes from them: drawn in the browser from a few numbers, no chart to build per key.

The page keeps the typed text itself (a session-state key the URL mirrors): `typing_box` only proposes a
new text and draws the answer. AppTest cannot drive a custom component, but it can set the component's
state, which `typing_box` reads like a key press in a browser.
"""

from pathlib import Path

import streamlit as st

from ui.shared.coloured_text import visible_piece

NAME = "rnnlab_typing_box"
# the fields of its data that carry text, the student's and the model's tokens, not the page's words
PASSAGE_FIELDS = ("text", "bars")
_JS = Path(__file__).with_name("typing_box.js").read_text(encoding="utf-8")
_CSS = """
.rnnlab-typing-box {
  width: 100%; box-sizing: border-box; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 1rem; padding: 0.5rem 0.7rem; border: 1px solid rgba(49, 51, 63, 0.3); border-radius: 0.5rem;
  resize: vertical; color: #111; background: #fff;
}
.rnnlab-typing-box:focus { outline: 2px solid rgba(46, 125, 50, 0.7); outline-offset: 1px; }
.rnnlab-typing-bars { display: grid; gap: 0.2rem; margin-top: 0.5rem; transition: opacity 0.15s; }
.rnnlab-typing-bars.stale { opacity: 0.45; }
.rnnlab-typing-bar, .rnnlab-typing-keep-row {
  display: grid; grid-template-columns: 4.5rem 1fr 3.8rem; align-items: center; gap: 0.5rem;
  font: inherit; text-align: left; border: none; background: none; padding: 0.1rem 0; color: inherit;
}
.rnnlab-typing-bar { cursor: pointer; }
.rnnlab-typing-bar:hover .track, .rnnlab-typing-bar:focus-visible .track { outline: 1px solid #2e7d32; }
.rnnlab-typing-bar .label { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 1.05rem; }
.rnnlab-typing .track { height: 1rem; background: rgba(49, 51, 63, 0.08); border-radius: 3px; overflow: hidden; }
.rnnlab-typing-bar .fill { display: block; height: 100%; background: #2e7d32; }
.rnnlab-typing-keep { display: grid; gap: 0.15rem; margin-top: 0.6rem; font-size: 0.9rem; }
.rnnlab-typing-keep-row { grid-template-columns: 9rem 1fr 3.8rem; }
.rnnlab-typing-keep-row .fill { display: block; height: 100%; background: #1565c0; }
.rnnlab-typing .value { font-variant-numeric: tabular-nums; text-align: right; }
.rnnlab-typing-note { margin-top: 0.4rem; font-size: 0.85rem; color: rgba(49, 51, 63, 0.7); }
"""


def proposed_text(key):
    """The text the box last sent, with its number, as (text, n), or None."""
    state = st.session_state.get(key)
    typed = state.get("typed") if isinstance(state, dict) else None
    if not isinstance(typed, dict) or not isinstance(typed.get("text"), str):
        return None
    return typed["text"], typed.get("n")


def bars_data(top):
    """The rows of lab.instruments.prediction.next_tokens as the bars the box draws."""
    return [
        {"label": visible_piece(row.piece), "text": row.text, "p": float(row.probability)} for row in top.itertuples()
    ]


def typing_box(text, *, n, bars, keep, note, max_chars, key, label):
    """Draw the box holding `text` (the page's typed text; `n`: the number of the box's own proposal it
    came from, None when the page set it) with `bars` (bars_data) and `keep` ([{label, value}], value in
    [0, 1] or None) and the sentence `note` under them. `label` names the box for a screen reader."""
    # registered at every mount, as ui.gates.span_select explains
    component = st.components.v2.component(NAME, css=_CSS, js=_JS, isolate_styles=False)
    component(
        key=key,
        data={
            "text": text,
            "n": n,
            "bars": bars,
            "keep": keep,
            "note": note,
            "max_chars": int(max_chars),
            "label": label,
        },
        on_typed_change=lambda: None,  # read at the start of the next run (proposed_text)
    )
