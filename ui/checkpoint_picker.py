"""The checkpoint picker every model page opens with: the bundled checkpoints and this session's, a
selectbox whose value is a checkpoint's name (so that a link can carry it), and the loaded checkpoint
shared read-only by every session."""

import streamlit as st

from lab.training.checkpoints import CheckpointError, list_checkpoints, load_checkpoint
from ui.plain_text import plain, said
from ui.sessions import user_dir


@st.cache_resource(max_entries=16, show_spinner="Loading checkpoint…")
def cached_checkpoint(path, mtime):
    """A loaded checkpoint, shared read-only across sessions; `mtime` invalidates on rewrite."""
    return load_checkpoint(path)


def checkpoint_infos(families=None):
    """Bundled and this session's checkpoints of these families; the text pages' families (lm,
    scan_markov) only list files that carry their tokenizer."""
    infos = list_checkpoints(user_dir(), include_versions=False)
    return [
        i for i in infos if families is None or i.family in families and (i.has_tokenizer or i.family == "classifier")
    ]


def choose_checkpoint(key, label, infos, format_func, default_name=None):
    """A selectbox over `infos` whose value is the checkpoint's name (so a link can carry it) -> the
    chosen CheckpointInfo. Bundled first: a bundled name wins over a file of the same name. A name
    that is not here (a deleted file, a link to someone else's model) is replaced, with a warning."""
    by_name = {}
    for info in infos:
        by_name.setdefault(info.name, info)
    if st.session_state.get(key) not in by_name:
        if st.session_state.get(key):
            st.warning(f"There is no checkpoint named {plain(st.session_state[key])} here; showing another one.")
        st.session_state[key] = default_name if default_name in by_name else next(iter(by_name))
    return by_name[st.selectbox(label, list(by_name), key=key, format_func=lambda n: format_func(by_name[n]))]


def checkpoint_picker(key, label="Checkpoint", families=("lm", "scan_markov"), default_name=None):
    """A selectbox over bundled and this session's checkpoints -> the loaded Checkpoint, or None (with a message)."""
    infos = checkpoint_infos(families)
    if not infos:
        st.warning(
            "No checkpoints yet: train one on the Train page, or regenerate the bundled ones "
            "with `python scripts/build_checkpoints.py`."
        )
        return None
    info = choose_checkpoint(key, label, infos, lambda i: i.name if i.bundled else f"{i.name}  (yours)", default_name)
    try:
        return cached_checkpoint(str(info.path), info.path.stat().st_mtime)
    except (CheckpointError, OSError) as e:
        st.error(f"Could not load {plain(info.name)}: {said(e)}")
        return None
