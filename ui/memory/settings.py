"""The Memory page's sections and settings: their URL form and defaults, the mirror every section calls,
the models it lists, and how it names them."""

import streamlit as st

from lab.experiments.probe import TOY_TASKS
from lab.instruments.memory import MAX_RETENTION_LAG
from lab.nets.families import CELLS
from ui.memory.defaults import GRADIENT_STEPS, TEXT
from ui.shared.cached_calls import checkpoint_key
from ui.shared.checkpoint_picker import NO_CHECKPOINTS, by_listed_name, checkpoint_infos
from ui.shared.links import Field, mirror_to_url, restore_from_url
from ui.shared.model_names import model_title

SECTIONS = {  # URL value -> what the choice at the top says
    "reach": "1 · How far a change travels",
    "units": "2 · How long each unit remembers",
    "analytic": "3 · A keep gate held constant",
    "gradients": "4 · Gradients through time",
    "probe": "5 · A task that needs memory",
}

G_VALUES = [0.5, 0.731, 0.9, 0.99, 0.999, 0.9999, 0.99999]
TEXT_MAX_CHARS, BIASES_MAX_CHARS = 4000, 200  # the boxes and the link alike
# the page's settings as they appear in a link: ?text=...&lag=...&g=...&biases=...
SETTINGS = {
    "section": (Field("choice", "Section", choices=tuple(SECTIONS)), "memory_section"),
    "text": (Field("text", "Text", high=TEXT_MAX_CHARS), "memory_text"),
    "lag": (Field("int", "Longest lag", 8, MAX_RETENTION_LAG), "memory_max_lag"),
    "g": (Field("float", "Keep gate g", 0.5, 0.99999), "memory_g"),
    "biases": (Field("text", "Biases", high=BIASES_MAX_CHARS), "memory_biases"),
    "steps": (Field("int", "Steps T", 10, 400), "memory_grad_steps"),
    "probe_task": (Field("choice", "Probe task", choices=tuple(TOY_TASKS)), "memory_probe_task"),
    "probe_cell": (Field("choice", "Probe cell", choices=tuple(CELLS)), "memory_probe_cell"),
}
DEFAULTS = {
    "section": "reach",
    "text": TEXT,
    "lag": 128,
    "g": 0.99,
    "biases": "-1, 0, 1, 2, 4, 6.2",
    "steps": GRADIENT_STEPS,
    "probe_task": "recall",
    "probe_cell": "rnn",
}


def restore_settings():
    """The settings from the link, or the session's own, each made one its widget offers."""
    restore_from_url(SETTINGS, DEFAULTS)
    if st.session_state.memory_g not in G_VALUES:  # the slider offers these values only
        st.session_state.memory_g = min(G_VALUES, key=lambda g: abs(g - st.session_state.memory_g))
    st.session_state.memory_max_lag -= st.session_state.memory_max_lag % 8  # the slider's step
    st.session_state.memory_grad_steps -= st.session_state.memory_grad_steps % 10


def listed_models():
    """The text models a section can read, by listed name (a student's file as "yours: NAME", beside a
    bundled one of that name); a warning when there are none."""
    by_name = by_listed_name(checkpoint_infos(("lm", "scan_markov")))
    if not by_name:
        st.warning(NO_CHECKPOINTS)
    return by_name


def key_of(by_name, name):
    return checkpoint_key(by_name[name])


def mirror():
    """The URL follows the settings: every fragment calls this, since a fragment's rerun skips the
    lines of the page outside it."""
    mirror_to_url(SETTINGS, DEFAULTS)


def model_label(name):
    """A checkpoint's listed name as every page names it (ui.shared.model_names)."""
    return model_title(name)
