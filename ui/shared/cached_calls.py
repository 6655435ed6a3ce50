"""The heavy `lab` calls of the Sample, Gates and Memory pages and the lessons, cached: `st.cache_data`
(or `st.cache_resource` for what is shared read-only) keyed on hashable values (checkpoint path, its
mtime, the text, the settings), plain results out. The loaded model itself comes from
`ui.shared.checkpoint_picker.cached_checkpoint` (one shared copy per process), and the copies made of it
from `kept_copy`, kept and charged to the server's budget with it.

Glossary: T time (tokens), H hidden units, K lags.
"""

import copy
from pathlib import Path

import streamlit as st

from lab.data import load_bundled_corpus
from lab.instruments.features import feature_values
from lab.instruments.introspect import trace_text
from lab.instruments.memory import MAX_RETENTION_LAG, gradient_through_time, retention
from lab.instruments.prediction import TypingReader, input_influence
from lab.instruments.reach import change_reach
from lab.instruments.sampling import SamplingConfig, generate
from lab.instruments.units import unit_correlations, unit_order
from lab.nets.models import build_model, for_sampling, to_reference
from ui.shared.checkpoint_picker import cached_checkpoint, kept_copy
from ui.shared.coloured_text import prob_html, token_texts


def checkpoint_key(checkpoint):
    """(path, mtime): the hashable identity of a checkpoint (loaded, or its CheckpointInfo) for st.cache_data."""
    path = Path(checkpoint.path)
    return str(path), path.stat().st_mtime


def cached_generation(path, mtime, prompt, config):
    """lab.instruments.sampling.generate of a checkpoint for one SamplingConfig, cached across sessions."""
    return _generation(path, mtime, prompt, tuple(vars(config).items()))


# one shared Generation per (model, prompt, settings), never written into: a copy out of st.cache_data for each
# of a visit's six samples was redone by every student opening the Sample page
@st.cache_resource(max_entries=128, show_spinner="Generating…")
def _generation(path, mtime, prompt, config_items):
    """The config as a tuple of (field, value) pairs, which Streamlit hashes field by field: changing one
    strategy's settings regenerates that strategy only."""
    checkpoint = cached_checkpoint(path, mtime)
    return generate(sampling_model(path, mtime), checkpoint.tokenizer, prompt, SamplingConfig(**dict(config_items)))


def cached_generation_html(path, mtime, prompt, config):
    """The generation of cached_generation as the Sample page draws it, each token on its probability's colour."""
    return _generation_html(path, mtime, prompt, tuple(vars(config).items()))


@st.cache_resource(max_entries=128, show_spinner=False)
def _generation_html(path, mtime, prompt, config_items):
    generation = _generation(path, mtime, prompt, config_items)
    tokens = token_texts(cached_checkpoint(path, mtime).tokenizer, generation.token_ids)
    return prob_html(prompt, tokens, generation.probs)


@st.cache_resource(max_entries=32, show_spinner=False)
def cached_reading(path, mtime, text):
    """A TypingReader's `reading()` of a checkpoint after `text` (ValueError: characters the model cannot read),
    shared read-only: every student who opens the Sample page starts from the same text, and reading it one step at
    a time was most of the page's first visit. The model is not kept with it."""
    reader = TypingReader(reference_model(path, mtime), cached_checkpoint(path, mtime).tokenizer)
    reader.read(text)
    return reader.reading()


def sampling_model(path, mtime):
    """A checkpoint's model as it samples fastest on this CPU (lab.nets.models.for_sampling: the largest with
    int8 weights), made once while the checkpoint is kept loaded (and charged with it:
    ui.shared.checkpoint_picker.kept_copy) and shared by every session's generation."""
    return kept_copy(path, mtime, "sampling", for_sampling)


def reference_model(path, mtime):
    """A checkpoint's model computed by the reference cells (lab.nets.models.to_reference), made once while
    the checkpoint is kept loaded: tracing a fast or fused model would otherwise copy it and rebuild its layers
    every time."""
    return kept_copy(path, mtime, "reference", to_reference)


# one shared copy per (model, text), never written into: st.cache_data would copy up to ~50 MB
# out of the cache on every run of every page that shows it
@st.cache_resource(max_entries=8, show_spinner="Tracing the gates…")
def cached_trace(path, mtime, text):
    """lab.instruments.introspect.trace_text of a checkpoint over a text (read-only: shared by every session)."""
    return trace_text(reference_model(path, mtime), cached_checkpoint(path, mtime).tokenizer, text)


@st.cache_data(max_entries=64, show_spinner="Reading a longer passage…")
def cached_passage_unit(path, mtime, first_line, chars, layer, gate, unit):
    """One unit over `chars` characters of the bundled corpus from the line `first_line` on ->
    (token texts (T,), values (T,)): only what the page shows, not the whole trace, is copied
    out of the cache on every run. ValueError when the line is not in the corpus or the model
    cannot read the passage."""
    corpus = load_bundled_corpus()
    start = corpus.find(first_line)
    if start < 0:
        raise ValueError(f"passage: {first_line!r} is not in the bundled corpus")
    trace = cached_trace(path, mtime, corpus[start : start + chars])
    return trace.token_texts, trace.gate(layer, gate)[:, unit]


@st.cache_data(max_entries=16, show_spinner="Finding what the units track…")
def cached_unit_correlations(path, mtime, text):
    """lab.instruments.units.unit_correlations of a checkpoint over a text: every unit against every feature."""
    return unit_correlations(cached_trace(path, mtime, text))


@st.cache_data(max_entries=64, show_spinner="Ordering the units…")
def cached_unit_order(path, mtime, text, layer, gate, order, feature):
    """lab.instruments.units.unit_order of one gate's units; `feature` (None for the other orders) orders them when
    order is "feature"."""
    trace = cached_trace(path, mtime, text)
    signal = None if feature is None else feature_values(trace.token_texts, feature)
    return unit_order(trace.gate(layer, gate), order, signal)


@st.cache_data(max_entries=64, show_spinner="Back-propagating to every earlier character…")
def cached_influence(path, mtime, token_ids, target):
    """lab.instruments.prediction.input_influence of a checkpoint: token_ids a tuple, target an index into it."""
    checkpoint = cached_checkpoint(path, mtime)
    return input_influence(checkpoint.model, list(token_ids), target)


@st.cache_data(max_entries=32, show_spinner="Measuring retention…")
def cached_retention(path, mtime, text):
    """lab.instruments.memory.retention of every layer of a checkpoint, up to MAX_RETENTION_LAG -> list of
    Retention (one per layer); `.up_to(k)` of one is the chart of a shorter lag, without measuring again."""
    trace = cached_trace(path, mtime, text)  # the Memory page colours the text by the same trace
    return [retention(trace, layer, max_lag=MAX_RETENTION_LAG) for layer in range(len(trace.layers))]


@st.cache_data(max_entries=32, show_spinner="Changing a token and following the change…")
def cached_reach(path, mtime, text, max_lag):
    """lab.instruments.reach.change_reach of a checkpoint over a text."""
    checkpoint = cached_checkpoint(path, mtime)
    return change_reach(checkpoint.model, checkpoint.tokenizer, text, max_lag=max_lag)


@st.cache_data(max_entries=32, show_spinner="Back-propagating through time…")
def cached_gradient(path, mtime, text, fresh_seed=None):
    """lab.instruments.memory.gradient_through_time of a checkpoint (fresh_seed None) or of a freshly
    initialised model of the same config (torch seed `fresh_seed`) -> (T,) norms."""
    checkpoint = cached_checkpoint(path, mtime)
    if fresh_seed is None:
        # a private copy: the gradient hooks the model, which other sessions share
        model = copy.deepcopy(checkpoint.model)
    else:
        model = build_model(checkpoint.config, seed=fresh_seed)
    return gradient_through_time(model, text, checkpoint.tokenizer)
