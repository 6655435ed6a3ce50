"""The Sample page's settings (their bounds and URL form) and its top row: the model, the prompt, the
length and the random seed, which rerun the whole page; what the model is, and whether it reads the
prompt (the page stops there when it cannot)."""

import dataclasses
import math

import streamlit as st

from lab.instruments.race import validation_figure
from lab.instruments.sampling import MAX_PROMPT_CHARS, default_strategy, encode_prompt
from ui.sample.views import DEFAULTS, SAMPLING, strategy_config
from ui.shared.checkpoint_picker import checkpoint_picker
from ui.shared.coloured_text import prob_legend_html
from ui.shared.links import Field, mirror_to_url
from ui.shared.model_names import describe_checkpoint, model_title
from ui.shared.plain_text import plain, user_errors


def declared(name, label=None):
    """The Field of a SamplingConfig setting: its bounds (the page's range), kind and help as declared there;
    `label` for one of the page's several settings made from one declaration (each column's temperature)."""
    field = Field.declared(SAMPLING[name])
    return field if label is None else dataclasses.replace(field, label=label)


STRATEGY = Field("choice", "Strategy", choices=SAMPLING["strategy"].choices)
# the page's settings as they appear in a link: ?model=...&prompt=...&temperature=...; every bound and kind of a
# sampling setting is SamplingConfig's declaration (lab.instruments.sampling)
SETTINGS = {
    "model": (Field("text", "Model"), "sample_checkpoint"),
    "prompt": (Field("text", "Prompt", high=MAX_PROMPT_CHARS), "sample_prompt"),
    "tokens": (declared("max_new_tokens"), "sample_tokens"),
    "seed": (declared("seed"), "sample_seed"),
    "temperature": (declared("temperature"), "sample_temperature_T"),
    "top_k": (declared("top_k"), "sample_top_k_k"),
    "top_k_temperature": (declared("temperature", "Top-k temperature"), "sample_top_k_T"),
    "top_p": (declared("top_p"), "sample_top_p_p"),
    "top_p_temperature": (declared("temperature", "Top-p temperature"), "sample_top_p_T"),
    "stateless": (dataclasses.replace(STRATEGY, label="Stateless strategy"), "sample_state_strategy"),
    "drove": (
        dataclasses.replace(STRATEGY, label="Strategy of the prediction traced back"),
        "sample_influence_strategy",
    ),
    "drove_token": (declared("max_new_tokens", "Generated token traced back"), "sample_influence_token"),
    "typed": (Field("text", "Typed text", high=MAX_PROMPT_CHARS), "sample_typed"),
}


def number_box(container, name, label=None, **options):
    """The number box of the setting `name` in `container`: its bounds and help are its Field's (the declared
    ones), its label the Field's unless the page's layout names it shorter (a column's "T")."""
    field, key = SETTINGS[name]
    return container.number_input(
        label or field.label, field.low, field.high, key=key, **{"help": field.help, **options}
    )


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
    number_box(top[2], "tokens", step=50)
    number_box(top[3], "seed", step=1)
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
