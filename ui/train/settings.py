"""The Train page's settings: what each one is (with its URL form), the values a preset stands for,
the lab configs they make, and their life on the page (read from a link, kept in the session,
written back into the URL).

Settings live in one flat dict of plain values, keyed by the short names used
in the URL (`?preset=astra-beta&hidden=128&seconds=30`). Only values that
differ from the chosen preset's defaults are written to the URL, so a link
stays short and still opens with the same settings.
"""

import dataclasses

import streamlit as st

from lab.data import TOKENIZERS, SentencePieceTokenizer
from lab.nets.backends import BACKENDS, FUSED_MODULES, default_backend, default_scan_mode
from lab.nets.families import CELLS, FAMILIES
from lab.training.presets import PRESETS
from lab.training.train import TrainConfig, resolve_device
from lab.words import listing
from ui.cell_labels import cell_label
from ui.shared.links import MODEL, TRAINING, Field, parse_query, url_values
from ui.shared.plain_text import plain

DEFAULT_PRESET = "astra-alpha"
CORPUS_CHOICES = {
    "bundled": "Bundled Shakespeare (35 plays, 4.6 MB, offline)",
    "tiny-shakespeare": "Tiny Shakespeare (download, 1.1 MB)",
    "upload": "Upload a .txt file",
}
# presets that train on text (the sequence classifier has its own page)
TEXT_PRESETS = [name for name, p in PRESETS.items() if p.model.family in ("lm", "scan_markov")]


FIELDS = {
    "preset": Field("choice", "Preset (model family)", choices=tuple(TEXT_PRESETS)),
    "cell": Field("choice", "Cell", choices=tuple(CELLS)),
    "backend": Field("choice", "Backend", choices=tuple(BACKENDS)),
    **{url: Field.declared(s) for url, s in MODEL.items()},
    "corpus": Field("choice", "Corpus", choices=tuple(CORPUS_CHOICES)),
    "tokenizer": Field("choice", "Tokenizer", choices=tuple(TOKENIZERS)),
    "vocab": Field("int", "SentencePiece vocabulary size", SentencePieceTokenizer.MIN_VOCAB, 16000),
    **{s.names.url: Field.declared(s) for s in TRAINING.values()},
    "name": Field("text", "Run name (checkpoint name)"),
    "x": Field("choice", "Chart x axis", choices=("elapsed", "step")),
}


def key(name):
    """The widget key of a setting (prefixed by page)."""
    return f"train_{name}"


def number_input(container, name, **options):
    """A number box in `container` for the setting `name`, with its label, bounds and widget key."""
    field = FIELDS[name]
    return container.number_input(field.label, field.low, field.high, key=key(name), **{"help": field.help, **options})


def preset_values(name):
    """The settings a preset stands for (model, tokenizer and training recipe)."""
    preset = PRESETS[name]
    model, recipe = preset.model, preset.train_config()
    return {
        "preset": name,
        "cell": model.cell,
        "backend": default_backend(model.cell, resolve_device()),
        "emb": model.embed_dim,
        "hidden": getattr(model, "hidden_size", model.embed_dim),
        "layers": getattr(model, "num_layers", 1),
        "dropout": float(model.dropout),
        "tokenizer": preset.tokenizer or "char",
        "vocab": preset.tokenizer_options.get("vocab_size", 1000),
        **url_values(recipe, ("lr", "wd", "batch", "block", "smoothing", "clip", "seed")),
    }


def default_values(preset=DEFAULT_PRESET):
    return {
        **preset_values(preset),
        "corpus": "bundled",
        "seconds": 60,
        "stateful": False,
        "eval_every": TrainConfig().eval_interval,
        "name": "",
        "x": "elapsed",
    }


def values_from_query(query):
    """URL query -> (complete settings, warnings). Unknown keys and bad values are ignored with a
    warning each; the preset is applied first, then the other values override it."""
    parsed, warnings = parse_query(query, FIELDS)
    values = default_values(parsed.get("preset", DEFAULT_PRESET))
    values.update(parsed)
    return values, warnings


def query_from_values(values):
    """Settings -> URL query: the preset, and every value that differs from the preset's defaults."""
    defaults = default_values(values["preset"])
    query = {"preset": values["preset"]} if values["preset"] != DEFAULT_PRESET else {}
    for name, value in values.items():
        if name != "preset" and value != defaults.get(name):
            query[name] = FIELDS[name].format(value)
    return query


def is_scan_markov(values):
    return PRESETS[values["preset"]].model.family == "scan_markov"


def fused_problem(values):
    """Why the fused backend cannot be used with these settings, or None."""
    if values["backend"] != "fused" or is_scan_markov(values) or values["cell"] in FUSED_MODULES:
        return None
    why = FAMILIES[values["cell"]].no_fused_because
    fused = listing(cell_label(cell) for cell in CELLS if cell in FUSED_MODULES)
    return f"The fused backend exists only for the {fused}: {why}. Choose one of the other two backends for this cell."


def model_config(values, vocab_size):
    """Settings -> the lab model config (ValueError names a bad field)."""
    preset = PRESETS[values["preset"]]
    if is_scan_markov(values):  # seed 004's architecture is fixed but for its width and dropout
        return dataclasses.replace(
            preset.model, vocab_size=vocab_size, embed_dim=values["emb"], dropout=values["dropout"]
        )
    return dataclasses.replace(
        preset.model,
        vocab_size=vocab_size,
        cell=values["cell"],
        backend=values["backend"],
        embed_dim=values["emb"],
        hidden_size=values["hidden"],
        num_layers=values["layers"],
        dropout=values["dropout"],
        scan_mode=default_scan_mode(resolve_device()),
    )  # the scan's faster form here


EVAL_SECONDS = 10.0  # a validation point at least this often, whatever the model's speed


def train_config(values):
    """Settings -> lab.training.train.TrainConfig with a wall-clock budget (ValueError names a bad field)."""
    return TrainConfig(
        **{s.name: s.type(values[url]) for url, s in TRAINING.items()},
        min_lr=min(PRESETS[values["preset"]].train.get("min_lr", 0.0), values["lr"]),
        max_steps=None,
        eval_seconds=EVAL_SECONDS,
    )


def widget_values(saved):
    """The settings as the widgets hold them now (`saved` for a widget not drawn in this run)."""
    return {name: st.session_state.get(key(name), saved[name]) for name in FIELDS}


def default_run_name(values):
    if is_scan_markov(values):
        return f"{values['preset']}-e{values['emb']}"
    return f"{values['cell']}-e{values['emb']}-h{values['hidden']}x{values['layers']}"


def restore_settings():
    """The settings at page load: from the URL on the session's first visit, or when a link within the
    session (a lesson's) brings settings other than those this page last wrote; else the session's own.
    Sets every widget's value (a widget hidden in the last run lost its key) and returns the session's
    settings, which the page updates as the widgets change."""
    query = st.query_params.to_dict()
    linked = query not in ({}, st.session_state.get("_train_query"))
    if "train_settings" not in st.session_state or linked:
        st.session_state.train_settings, warnings = values_from_query(query)
        for warning in warnings:
            st.warning(plain(warning))
    saved = st.session_state.train_settings
    for name in FIELDS:
        if key(name) not in st.session_state or linked:  # first visit, a link, or a widget hidden in the last run
            st.session_state[key(name)] = saved[name]
    return saved


def apply_preset():
    """A new preset fills in its model, tokenizer and recipe; corpus and budget stay."""
    for name, value in preset_values(st.session_state[key("preset")]).items():
        st.session_state[key(name)] = st.session_state.train_settings[name] = value


def mirror_settings(saved):
    """The settings as the widgets hold them now, kept in the session and written into the URL."""
    values = widget_values(saved)
    saved.update(values)
    query = query_from_values(values)
    if st.query_params.to_dict() != query:
        st.query_params.from_dict(query)
    st.session_state._train_query = query
    return values
