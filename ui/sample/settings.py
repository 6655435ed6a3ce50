"""The Sample page's settings (their bounds and URL form) and its top row: the model, the prompt, the
length and the random seed, which rerun the whole page; what the model is, and whether it reads the
prompt (the page stops there when it cannot)."""

import math

import streamlit as st

from lab.instruments.prediction import MAX_INFLUENCE_TOKENS
from lab.instruments.race import validation_figure
from lab.instruments.sampling import MAX_PROMPT_CHARS, STRATEGIES, default_strategy, encode_prompt
from ui.sample.views import DEFAULTS, strategy_config
from ui.shared.checkpoint_picker import checkpoint_picker
from ui.shared.coloured_text import prob_legend_html
from ui.shared.links import Field, mirror_to_url
from ui.shared.model_names import describe_checkpoint, model_title
from ui.shared.plain_text import plain, user_errors

# Widget bounds; lab.instruments.sampling.SamplingConfig checks the same rules again for any other path in.
BOUNDS = {
    "tokens": (1, MAX_INFLUENCE_TOKENS - MAX_PROMPT_CHARS),
    "seed": (0, 2**31 - 1),
    "temperature": (0.05, 5.0),
    "top_k": (1, 10_000),
    "top_p": (0.01, 1.0),
}
# the page's settings as they appear in a link: ?model=...&prompt=...&temperature=...
SETTINGS = {
    "model": (Field("text", "Model"), "sample_checkpoint"),
    "prompt": (Field("text", "Prompt", high=MAX_PROMPT_CHARS), "sample_prompt"),
    "tokens": (Field("int", "New tokens", *BOUNDS["tokens"]), "sample_tokens"),
    "seed": (Field("int", "Random seed", *BOUNDS["seed"]), "sample_seed"),
    "temperature": (Field("float", "Temperature", *BOUNDS["temperature"]), "sample_temperature_T"),
    "top_k": (Field("int", "Top-k k", *BOUNDS["top_k"]), "sample_top_k_k"),
    "top_k_temperature": (Field("float", "Top-k temperature", *BOUNDS["temperature"]), "sample_top_k_T"),
    "top_p": (Field("float", "Top-p p", *BOUNDS["top_p"]), "sample_top_p_p"),
    "top_p_temperature": (Field("float", "Top-p temperature", *BOUNDS["temperature"]), "sample_top_p_T"),
    "stateless": (Field("choice", "Stateless strategy", choices=tuple(STRATEGIES)), "sample_state_strategy"),
    "drove": (
        Field("choice", "Strategy of the prediction traced back", choices=tuple(STRATEGIES)),
        "sample_influence_strategy",
    ),
    "drove_token": (Field("int", "Generated token traced back", *BOUNDS["tokens"]), "sample_influence_token"),
    "typed": (Field("text", "Typed text", high=MAX_PROMPT_CHARS), "sample_typed"),
}


def mirror():
    """The URL follows the settings: every fragment calls this, since a fragment's rerun skips the
    lines of the page outside it."""
    mirror_to_url(SETTINGS, DEFAULTS)


def sampling_config(strategy, stateful=True):
    """The SamplingConfig of one column's strategy from the widgets' current values."""
    return strategy_config({name: st.session_state.get(key) for name, (_, key) in SETTINGS.items()}, strategy, stateful)


def model_and_prompt():
    """The top row, what the model is, and the prompt checked -> (checkpoint, prompt); the page stops
    without a model, or with a prompt the model cannot read (its unknown characters named)."""
    top = st.columns([1.2, 2, 1, 1])
    with top[0]:
        checkpoint = checkpoint_picker("sample_checkpoint", default_name=DEFAULTS["model"])
    with top[1]:
        prompt = st.text_area(
            "Prompt",
            key="sample_prompt",
            height=68,
            max_chars=MAX_PROMPT_CHARS,
            help="Any text made of characters the model knows; empty starts a new line.",
        )
    with top[2]:
        st.number_input("New tokens", *BOUNDS["tokens"], step=50, key="sample_tokens")
    with top[3]:
        st.number_input(
            "Random seed",
            *BOUNDS["seed"],
            step=1,
            key="sample_seed",
            help="Seeds the sampler's own generator: the same random seed gives the same text.",
        )
    mirror()
    if checkpoint is None:
        st.stop()
    val = validation_figure(checkpoint.metrics)  # the weights it holds: the Checkpoints page's figure too
    st.caption(
        f"{plain(describe_checkpoint(model_title(st.session_state.sample_checkpoint), checkpoint))} "
        f"Vocabulary {checkpoint.tokenizer.vocab_size}"
        + (f" · validation {val:.3f} nats/char (see the anchors above)" if math.isfinite(val) else "")
    )

    if default_strategy(checkpoint.config.family) == "top_p":
        st.info(
            "A selective scan over a short context (like the Four-character scan) generates like this: it "
            "composes the prompt into one latent, character by character, through its gated recurrence; "
            "decodes the latent; picks the next "
            "character with temperature and nucleus sampling (the top-p column, its own default); and "
            "composes that character into the latent before the next one. It was trained on contexts of "
            "1 to 4 characters, so the latent is mostly the last few characters."
        )
    st.html(prob_legend_html())
    prompt_ok = False
    with user_errors("Sampling"):
        encode_prompt(checkpoint.tokenizer, prompt)  # names unknown characters before anything runs
        prompt_ok = True
    if not prompt_ok:
        st.stop()
    return checkpoint, prompt
