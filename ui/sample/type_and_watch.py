"""The Sample page's last tab: the next character as you type (ui.sample.typing_box), the state carried
from key press to key press (lab.instruments.prediction.TypingReader), with each layer's keep gate."""

import streamlit as st

from lab.instruments.prediction import TypingReader, next_tokens
from lab.instruments.sampling import MAX_PROMPT_CHARS
from lab.words import count, layer_name
from ui.sample.settings import mirror
from ui.sample.typing_box import bars_data, proposed_text, typing_box
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_reading, checkpoint_key, reference_model
from ui.shared.plain_text import user_errors


@fragment
def typing(checkpoint):
    """The next character as you type, the state carried: each key press reruns this part only."""
    proposal, n = proposed_text("sample_typing_box"), None
    if proposal is not None:
        if proposal[1] != st.session_state.get("_sample_typing_applied"):
            st.session_state._sample_typing_applied = proposal[1]  # each key press once
            st.session_state.sample_typed = proposal[0][:MAX_PROMPT_CHARS]
        if st.session_state.sample_typed == proposal[0]:
            n = proposal[1]
    typed = st.session_state.sample_typed
    reader_key, started = checkpoint_key(checkpoint), None
    if st.session_state.get("sample_typing_reader", (None,))[0] != reader_key:  # one reader per session and model
        model = reference_model(*reader_key)  # shared by every session: a reader holds only its state
        try:
            started = cached_reading(*reader_key, typed)  # where every student who opens the page starts
        except ValueError:  # a text it cannot read: this reader's own read says so below
            pass
        st.session_state.sample_typing_reader = (reader_key, TypingReader(model, checkpoint.tokenizer, start=started))
    reader = st.session_state.sample_typing_reader[1]
    probs = None
    with user_errors("Reading"):
        probs = reader.probs if started else reader.read(typed)  # started: `typed` is read already
    bars = [] if probs is None else bars_data(next_tokens(probs, checkpoint.tokenizer, k=5))
    if probs is None:
        note = "Nothing read: take out the characters named above to see what comes next."
    elif reader.new_tokens == len(reader.ids):
        note = f"Read all {count(len(reader.ids), 'token')} from the zero state: a new text, or an edit before its end."
    else:
        note = (
            f"Read {count(reader.new_tokens, 'new token')} from the carried state "
            f"({len(reader.ids)} read since the start): one step per new {checkpoint.tokenizer.unit}, however long "
            "the text."
        )
    typing_box(
        typed,
        n=n,
        bars=bars,
        keep=keep_rows(reader) if probs is not None else [],
        note=note,
        max_chars=MAX_PROMPT_CHARS,
        key="sample_typing_box",
        label="Your text: the likeliest next tokens follow each key press",
    )
    st.caption(
        "Green: the likeliest next tokens after your text (click one to type it). Blue: how much of its memory "
        f"each layer keeps at the last {checkpoint.tokenizer.unit} it read, averaged over its units."
    )
    mirror()


def keep_rows(reader):
    """Each recurrent layer's keep gate at the last token read, as the typing box's blue bars."""
    return [
        {"label": f"{layer_name(l)} keeps", "value": keep}
        if keep is not None
        else {
            "label": f"{layer_name(l)}: no keep gate (a vanilla RNN overwrites its state at every step)",
            "value": None,
        }
        for l, keep in enumerate(reader.keep)
    ]
