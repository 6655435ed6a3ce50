"""Streamlit helpers shared by every page (kept out of `lab/`, which never imports Streamlit).

Pages stay thin: widgets -> config -> `lab` call -> chart. This module holds what the pages' frames share
(the page frame itself, its sidebar and glossary, is ui.app.frame's): the pages and their links, the
published anchors shown beside results, the plain words a page uses for lab's presets, and a table with
lab's column names said in plain words. lab's own sentences (a cell's convention, the study's conclusion)
are shown as lab writes them, plain at their source. The other shared parts live in modules of their
own: ui.shared.sessions (each browser's space and jobs), ui.shared.checkpoint_picker (the model pages'
picker), ui.shared.plain_text (text from a file, a link or a user, shown inert), ui.shared.links
(settings in the URL).
"""

import streamlit as st

from lab.instruments.race import validation_figure
from lab.nets.models import config_from_dict
from lab.training.checkpoints import BUNDLED_DIR, read_info
from lab.training.presets import PRESETS
from lab.words import count
from ui.shared.model_names import PRESET_TITLES, bundled_title, what_it_is

ARM_COLORS = {"baseline": "#1f77b4", "ablated": "#d62728", "chrono": "#2ca02c"}  # the gate-bias study's arms

# Published numbers a student can hold a result against (cited where shown).
ANCHORS = {
    "nanogpt_cpu": ("nanoGPT char-level Tiny Shakespeare, CPU config (~3 min)", "val loss ≈ 1.88 nats/char"),
    "nanogpt_gpu": ("nanoGPT char-level Tiny Shakespeare, 6-layer transformer on a GPU", "val loss ≈ 1.47 nats/char"),
    "leviathan": (  # the published figure, not the bundled file's: show_anchors puts the bundled one beside it
        f"Leviathan as originally published: {what_it_is(PRESETS['leviathan-lstm'].model, 'char', None)}, "
        f"counted at Tiny Shakespeare's {count(PRESETS['leviathan-lstm'].model.vocab_size, 'character')}, "
        "on a GPU for 6 "
        "short epochs",
        "val loss 1.50 nats/char on Tiny Shakespeare (published)",
    ),
    "uniform_char": ("Uniform guess over ~65 characters", "ln 65 ≈ 4.17 nats/char"),
    "scifar_lstm": ("Sequential CIFAR-10, LSTM (S4 paper, Table)", "63.0% accuracy"),
    "scifar_urgru": ("Sequential CIFAR-10, UR-GRU (S4 paper, Table)", "74.4% accuracy"),
    "lra_image_transformer": ("Long Range Arena, grayscale Image task, Transformer", "42.4% accuracy"),
    "lra_image_s4": ("Long Range Arena, grayscale Image task, S4", "88.7% accuracy"),
}

# what a preset costs to train, beside its name in the list of presets
PRESET_NOTES = {
    "scribe-alpha": "the small one: minutes on a CPU",
    "scribe-beta": "the middle one: for a GPU",
    "scribe-gamma": "the large one: for a GPU",
    "astra-alpha": "a minute on a CPU",
    "astra-beta": "minutes on a CPU",
    "astra-gamma": "for a GPU",
    "leviathan-lstm": "for a GPU",
    "seq-cifar-gru": "the Ablation page's model",
    "scan-markov": "trained on mixed 2- to 5-character samples",
    "scan-markov-windows": "trained on 16-character windows, every position predicting the next",
}


def preset_words(name, sized=True):
    """What a preset is, from its config, and what it costs ("a character GRU (z keeps) of 269k
    parameters (256 units) · a minute on a CPU"); its kind alone where `sized` is False."""
    preset = PRESETS[name]
    what = what_it_is(preset.model, preset.tokenizer, None, sized)
    return what + (f" · {PRESET_NOTES[name]}" if name in PRESET_NOTES else "")


def preset_label(name):
    """A preset's key ("astra-alpha") -> its name and kind, for the Train page's list of choices: without
    its size, which the settings beside it change (and the corpus's characters), and the line under
    them states at every setting."""
    return f"{PRESET_TITLES[name]}: {preset_words(name, sized=False)}"


PAGES = {  # name -> (script, icon), in the sidebar's order: "/" is app.py, the rest Streamlit's pages/ router serves
    "Home": ("app.py", "🏠"),
    "Lessons": ("pages/7_Lessons.py", "🎓"),  # second: where a new student starts
    "Train": ("pages/1_Train.py", "🏋️"),
    "Sample": ("pages/2_Sample.py", "💬"),
    "Gates": ("pages/3_Gates.py", "🔬"),
    "Memory": ("pages/4_Memory.py", "🧠"),
    "Checkpoints": ("pages/5_Checkpoints.py", "📦"),
    "Ablation": ("pages/6_Ablation.py", "⚖️"),
    "Class": ("pages/8_Class.py", "🧑‍🏫"),  # the class board: last, a teacher's page more than a student's
}


def page_link(name, label=None, help=None, query_params=None):
    """st.page_link to one of PAGES, optionally with settings for its URL (ui.shared.links)."""
    path, icon = PAGES[name]
    st.page_link(path, label=label or name, icon=icon, help=help, query_params=query_params)


def section_choice(sections, key):
    """A page in sections, one on the screen at a time: the choice at the top (`sections`: the URL
    value -> what the choice says; the page keeps `key` in its link), without a label, the options
    saying what they are. Returns the section chosen."""
    return st.radio(
        "Section", list(sections), format_func=sections.get, horizontal=True, key=key, label_visibility="collapsed"
    )


# a published figure of a model this lab also bundles -> the bundled file, whose own figures are shown beside it
BUNDLED_AS_PUBLISHED = {"leviathan": "leviathan-lstm_latest"}


@st.cache_data(show_spinner=False, max_entries=8)
def bundled_anchor(name, mtime):
    """The row of a bundled model beside its published figure, read from its file as every page reads it:
    its size from lab.nets.cost, its validation figure from lab.lessons.models.validation_figure."""
    info = read_info(BUNDLED_DIR / f"{name}.safetensors", bundled=True)
    what = what_it_is(config_from_dict(info.config), info.tokenizer_kind, info.metrics.get("corpus"))
    return (
        f"{bundled_title(name)} as bundled here: {what}",
        f"val loss {validation_figure(info.metrics):.3f} nats/char on the held-out plays (its file)",
    )


def show_anchors(*keys, note=""):
    """A small table of published results relevant to the page; beside a published figure of a model the lab
    bundles, the bundled file's own, each row saying which it is; `note` (Markdown) under it."""
    rows = []
    for k in keys:
        rows.append({"anchor": ANCHORS[k][0], "result": ANCHORS[k][1]})
        path = BUNDLED_DIR / f"{BUNDLED_AS_PUBLISHED.get(k, '')}.safetensors"
        if k in BUNDLED_AS_PUBLISHED and path.is_file():
            anchor, result = bundled_anchor(BUNDLED_AS_PUBLISHED[k], path.stat().st_mtime)
            rows.append({"anchor": anchor, "result": result})
    with st.expander("Published anchors: how good is good?", expanded=False):
        st.table(rows)
        if note:
            st.markdown(note)


def parameter_count(config_dict):
    """Trainable parameters of the model a config describes, by arithmetic (lab.nets.cost): nothing is built."""
    from lab.nets.cost import parameter_count as count
    from lab.nets.models import config_from_dict

    return count(config_from_dict(config_dict))


def show_table(frame, columns, formats):
    """A table of lab's (a DataFrame) with its columns renamed to what a student reads (`columns`: lab's
    name -> the shown one) and formatted (`formats`: lab's name -> a format string such as "{:.3f}"). A
    "layer" column is numbered from 1, as every page names layers (lab.words.layer_name)."""
    if "layer" in frame.columns:
        frame = frame.assign(layer=frame["layer"] + 1)
    shown = frame.rename(columns=columns).style.format({columns.get(name, name): f for name, f in formats.items()})
    # static: a data grid adds 0.21 s to a page opened by its link, a static table 0.09 (BENCHMARKS.md,
    # "One screen, two seconds"), and a few rows need no sorting or scrolling
    st.table(shown, hide_index=True)
