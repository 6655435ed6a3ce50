"""The Train page's corpus: the named corpora and an upload, read and tokenized into a task that is
cached and shared read-only by every session (each run gets a copy), with what went wrong said
plainly (an offline download is not tried again on every rerun) and a line on what the task holds.
"""

import hashlib

import streamlit as st

from lab.data import read_text, split_text
from lab.schema import printable_part
from lab.training.presets import PRESETS
from lab.training.tasks import TASKS, corpus_split
from lab.words import count
from ui.shared.model_names import PRESET_TITLES, TOKENIZER_LABELS
from ui.shared.plain_text import said, user_errors


@st.cache_resource(max_entries=2, show_spinner=False)
def corpus_text(source):
    """(training text, validation text) of a named corpus."""
    return corpus_split(source)


@st.cache_resource(max_entries=4, show_spinner=False)
def lm_task(corpus_key, tokenizer, vocab_size, _split, kind="lm"):
    """One task per (corpus, tokenizer, kind: windows or n-gram samples), shared read-only by every
    session (each run gets a copy). Few entries: a 20 MB upload makes 160 MB of token ids."""
    options = {"vocab_size": vocab_size, "model_type": "bpe"} if tokenizer == "sentencepiece" else {}
    return TASKS[kind].from_split(*_split, tokenizer, **options)


def load_task(values, upload):
    """The settings' corpus as a tokenized task -> (task or None, the corpus's label for the run's
    checkpoint), with a message in place of a task that cannot be made."""
    task, corpus_label = None, values["corpus"]
    if values["corpus"] == "upload":
        if upload is None:
            st.info("Upload a .txt file to train on it.")
        else:
            with user_errors("Reading your corpus"):
                data = upload.getvalue()
                text = read_text(data)
                corpus_label = f"upload:{printable_part(upload.name)}"
                with st.spinner("Tokenizing…"):
                    task = lm_task(
                        f"upload:{hashlib.sha256(data).hexdigest()}",
                        values["tokenizer"],
                        values["vocab"],
                        split_text(text),
                        PRESETS[values["preset"]].task,
                    )
    else:
        failed = st.session_state.get("train_corpus_error")
        if not (failed and failed[0] == values["corpus"]):
            spinner = (
                "Downloading Tiny Shakespeare…" if values["corpus"] == "tiny-shakespeare" else "Loading the corpus…"
            )
            try:
                with st.spinner(spinner):
                    text = corpus_text(values["corpus"])
            except (ValueError, OSError) as e:  # DataError: offline, or a corrupt download
                # kept, so that a failed download is not tried again on every rerun
                failed = st.session_state.train_corpus_error = (
                    values["corpus"],
                    f"Getting the corpus did not work: {said(e)}",
                )
        if failed and failed[0] == values["corpus"]:
            st.error(failed[1])
            if st.button("Try the download again", key="train_retry"):
                del st.session_state.train_corpus_error
                st.rerun()
        else:
            with st.spinner("Tokenizing…"), user_errors("Tokenizing the corpus"):
                task = lm_task(
                    values["corpus"], values["tokenizer"], values["vocab"], text, PRESETS[values["preset"]].task
                )
    return task, corpus_label


def describe_task(values, task, ngram):
    """What the model trains on: the n-gram samples of seed 004's preset, and the task's tokens."""
    if ngram:
        st.caption(
            "This preset trains on mixed 2–5-gram samples: a context of 1 to 4 characters "
            "and the character after it, from every place in the text. The preset "
            f"{PRESET_TITLES['scan-markov-windows']} is the lab's own variant: 16-character windows, "
            "every position predicting."
        )
    if task is not None:
        tokens = TOKENIZER_LABELS[values["tokenizer"]]
        st.caption(
            f"{count(len(task.train_ids) + len(task.val_ids), 'token')} ({tokens}, vocabulary "
            f"{task.vocab_size:,}, {task.chars_per_token:.2f} characters per token): "
            f"{len(task.train_ids):,} to train on, {len(task.val_ids):,} to validate"
            f"{' (four whole plays it never trains on)' if values['corpus'] == 'bundled' else ' (the last 10%)'}."
        )
