"""The checkpoint picker every model page opens with: the bundled checkpoints and this session's, a
selectbox whose value is a checkpoint's listed name (so that a link can carry it), and the loaded
checkpoint shared read-only by every session.

A student's file is listed as "yours: NAME" and a bundled one by its plain name, so that a run or an
upload a student names like a bundled model ("char-lstm") is listed beside it, never hidden by it.

The loaded checkpoints, and the copies the pages make of their models (ui.shared.cached_calls), are charged
to the server's training budget while they are kept (lab.server.capacity.KeptModels): within a quarter of
it, the least recently used dropped first, so that students opening large uploads at once cannot grow the
server past what its budget admits."""

import functools
from pathlib import Path

import streamlit as st

from lab.nets.cost import loaded_model_mb
from lab.nets.models import config_from_dict
from lab.server.capacity import CapacityError, kept_models
from lab.training.checkpoints import CheckpointError, list_checkpoints, load_checkpoint, read_info
from ui.shared.model_names import YOURS, model_title, option_title
from ui.shared.plain_text import plain, said
from ui.shared.sessions import user_dir

# YOURS, what a student's file is listed under before its name: a saved name never holds ":" or " "
# (lab.training.checkpoints.sanitize_name), so no bundled name can take this form
DELETED = "_deleted_checkpoints"  # session key: the listed names this session deleted (forget_deleted)
TEXT_FAMILIES = ("lm", "scan_markov")  # the families the Sample and Gates pages read
# what a page says when it has no checkpoint to offer: plain words, no command (the bundled files are
# the server's, so a student can only add one of their own)
NO_CHECKPOINTS = (
    "No models to show yet: this copy of the lab has no bundled models (whoever runs the server can "
    "rebuild them) and you have saved none. Train one on the Train page, or upload one on the Checkpoints page."
)


def cached_checkpoint(path, mtime):
    """A loaded checkpoint, shared read-only across sessions and charged to the server's budget while kept;
    `mtime` invalidates on rewrite. CapacityError (a LabError) when the server keeps no room for it."""
    checkpoint = _loaded_checkpoint(path, mtime)
    kept_models().use((path, mtime))  # the least recently used are dropped first
    return checkpoint


def _let_go(value):
    kept_models().released(value)  # (not kept_models().released itself: that would read the settings at import)


@st.cache_resource(max_entries=16, show_spinner="Loading checkpoint…", on_release=_let_go)
def _loaded_checkpoint(path, mtime):
    models, key = kept_models(), (path, mtime)
    models.keep(key, loaded_model_mb(config_from_dict(read_info(path).config)), f"the model in {Path(path).name}")
    try:
        checkpoint = load_checkpoint(path)
    except BaseException:
        models.forget(key)
        raise
    models.kept(key, checkpoint, functools.partial(_loaded_checkpoint.clear, path, mtime))
    return checkpoint


cached_checkpoint.clear = _loaded_checkpoint.clear  # every loaded checkpoint dropped, each charge given back


def kept_copy(path, mtime, name, make):
    """`make(model)` of a loaded checkpoint's model (its int8 sampler, its reference twin), made once and kept
    with it, its MB charged with it where it is a copy, not the model itself."""
    checkpoint = cached_checkpoint(path, mtime)

    def made():
        model = make(checkpoint.model)
        return model, 0.0 if model is checkpoint.model else loaded_model_mb(checkpoint.config)

    return kept_models().copy((path, mtime), name, made)


def yours(name):
    """How the pickers list a student's file of this name."""
    return f"{YOURS}{name}"


def listed_name(info):
    """What every picker calls a checkpoint (and a link carries): a bundled one by its name, a
    student's as "yours: NAME"."""
    return info.name if info.bundled else yours(info.name)


def offered(info, families):
    """Whether a page that reads these families (None: all) lists this checkpoint: a text family only
    with the tokenizer that reads text into it."""
    return families is None or info.family in families and (info.has_tokenizer or info.family == "classifier")


def reads_text(info):
    """Whether the text pages (Sample, Gates, Memory) list this checkpoint."""
    return offered(info, TEXT_FAMILIES)


def checkpoint_infos(families=None):
    """Bundled and this session's checkpoints that a page reading these families lists."""
    return [info for info in list_checkpoints(user_dir(), include_versions=False) if offered(info, families)]


def by_listed_name(infos):
    """{listed name: CheckpointInfo}, in the order of `infos`."""
    return {listed_name(info): info for info in infos}


def resolve_listed(name, listed):
    """The listed name a stored or linked `name` stands for: itself, or a student's file called `name`
    without "yours: " (a link made before files were listed so) when no bundled one has that name;
    else None."""
    if name in listed:
        return name
    return yours(name) if name and yours(name) in listed else None


def forget_deleted(names):
    """Note that the student just deleted these listed names: a page still holding one (in its URL or
    its session) then shows another model without a notice, since the delete's own confirmation says
    what happened. A stale link opened in another session has no such note, and is told."""
    st.session_state.setdefault(DELETED, set()).update(names)


def choose_checkpoint(key, label, infos, default_name=None):
    """A selectbox over `infos` whose value is the checkpoint's listed name (so a link can carry it),
    each shown by its name for students (ui.shared.model_names) -> the chosen CheckpointInfo. A name that is
    not here is replaced: silently when this session deleted it, else (a link to someone else's model,
    a file deleted in another tab) with a warning."""
    listed = by_listed_name(infos)
    wanted = st.session_state.get(key)
    found = resolve_listed(wanted, listed)
    if found is None:
        found = default_name if default_name in listed else next(iter(listed))
        if wanted and wanted not in st.session_state.get(DELETED, ()):
            st.warning(
                f"There is no model called “{plain(model_title(wanted))}” here (it was deleted, or saved in "
                f"another browser), so this page shows {plain(model_title(found))}."
            )
    st.session_state[key] = found
    return listed[st.selectbox(label, list(listed), key=key, format_func=lambda name: option_title(listed[name]))]


def checkpoint_picker(key, label="Checkpoint", families=TEXT_FAMILIES, default_name=None):
    """A selectbox over bundled and this session's checkpoints -> the loaded Checkpoint, or None (with a message)."""
    infos = checkpoint_infos(families)
    if not infos:
        st.warning(NO_CHECKPOINTS)
        return None
    info = choose_checkpoint(key, label, infos, default_name)
    try:
        return cached_checkpoint(str(info.path), info.path.stat().st_mtime)
    except (CheckpointError, CapacityError, OSError) as e:
        st.error(f"Could not load {plain(model_title(listed_name(info)))}: {said(e)}")
        return None
