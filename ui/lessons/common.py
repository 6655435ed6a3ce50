"""What every lesson shares: the bundled models and texts, what the lessons build on, and
the parts of a lesson's screen (what it builds on, the models it uses, what to notice, check
yourself, the link to the full page).

A lesson whose bundled model is missing says so and stops (`bundled`); the other lessons still
work. Files shipped beside the models are found through `shipped`, so that a test can point
MODELS_DIR elsewhere.
"""

import streamlit as st

from lab.instruments.memory import state_reset_curve
from lab.training.checkpoints import BUNDLED_DIR, CheckpointError
from lab.words import listing
from ui.shared.checkpoint_picker import cached_checkpoint
from ui.shared.common import page_link
from ui.shared.model_names import bundled_title, what_it_is
from ui.shared.plain_text import plain, said

MODELS_DIR = BUNDLED_DIR  # where the lessons find their models (a test points it elsewhere)
PASSAGE = (
    "Ham:\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"
    "And by opposing end them?--To die,--to sleep,--\nNo more; and by a sleep to say we end\n"
    "The heartache, and the thousand natural shocks\nThat flesh is heir to,--'tis a consummation\n"
)
PROMPT = "ROMEO:\n"
CHAR_MODELS = [
    "char-gru-torch_latest",
    "char-gru-seed_latest",
    "char-lstm_latest",
    "char-rnn_latest",
    "char-scan_latest",
]
SUBWORD_MODEL = "scribe-alpha_latest"
# what a lesson builds on, in plain words: the models and ideas it uses (never a document students cannot open)
BACKGROUND = {
    "scribe": "**Scribe-α**, the bundled subword model: a GRU that reads common pieces of words instead of "
    "single characters",
    "equations": "**the cell equations**: every cell's equations as this lab implements them, on the Home page",
    "gate_bias": "**the gate-bias study** of the Ablation page: a GRU reading small images one pixel per step, "
    "trained with and without its gate biases",
    "scan": "**a Mamba-style selective scan**: a recurrence whose gates read only the input, the scan cell of this lab",
}


# ---------------------------------------------------------------------------
# the parts every lesson has


def bundled(name):
    """The bundled checkpoint `name`, or None after a message saying what is missing and how to get it."""
    path = shipped(f"{name}.safetensors")
    if not path.is_file():
        st.warning(
            f"This lesson needs the bundled model **{plain(bundled_title(name))}**, which is missing from this "
            "installation: ask whoever runs this lab to rebuild the bundled models (or choose another model "
            "above, if there is a choice).",
            icon="📦",
        )
        return None
    try:
        return cached_checkpoint(str(path), path.stat().st_mtime)
    except (CheckpointError, OSError) as e:
        st.error(f"Could not load the bundled model {plain(bundled_title(name))}: {said(e)}")
        return None


def shipped(relative):
    """The path of a file shipped beside the bundled models (it may be missing)."""
    return MODELS_DIR / relative


def background(*keys):
    st.caption("Builds on " + "; ".join(BACKGROUND[k] for k in keys) + ".")


def model_words(name, checkpoint):
    """A bundled model named as every page names it, and what it is, from its own file (ui.shared.model_names)."""
    return f"**{plain(bundled_title(name))}** ({what_it_is(checkpoint.config, checkpoint.tokenizer.kind, None)})"


def uses(*named, untrained=False):
    """The models a lesson's figures come from, named and described: (name, checkpoint) pairs; untrained:
    the figures come from fresh copies of them, their weights at initialisation."""
    models = listing(model_words(n, c) for n, c in named)
    texts = {c.metrics.get("corpus") for _, c in named}
    trained = (
        f", {({1: '', 2: 'both '}).get(len(named), 'all ')}trained on the Shakespeare plays that come with this lab"
        if texts == {"bundled"}
        else ""
    )
    st.caption(
        f"The figures above come from fresh, untrained copies of {models}: the same models before training."
        if untrained
        else f"The figures above come from {models}{trained}."
    )


def notice(markdown):
    st.markdown("#### What to notice\n" + markdown)


def check_yourself(question, answer):
    st.markdown(f"#### Check yourself\n{question}")
    with st.expander("Show the answer"):
        st.markdown(answer)


def open_full_page(page, label, **settings):
    """A link to the instrument page with this lesson's settings in its URL."""
    page_link(page, label=label, query_params={k: str(v) for k, v in settings.items()})


def model_choice(key, names, default, label="Model"):
    if st.session_state.get(key) not in names:
        st.session_state[key] = default
    return st.selectbox(label, names, key=key, format_func=bundled_title)


@st.cache_data(max_entries=32, show_spinner="Reading the text with the state reset every k tokens…")
def cached_reset_curve(path, mtime, text, resets=None):
    """lab.instruments.memory.state_reset_curve of a checkpoint (resets: a tuple, or None for 1, 2, 4, ..., full)."""
    checkpoint = cached_checkpoint(path, mtime)
    return state_reset_curve(checkpoint.model, checkpoint.tokenizer, text, None if resets is None else list(resets))
