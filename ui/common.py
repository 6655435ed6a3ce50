"""Streamlit helpers shared by every page (kept out of `lab/`, which never imports Streamlit).

Pages stay thin: widgets -> config -> `lab` call -> chart. This module holds
what several pages need: page setup, the checkpoint picker with a cached
loader, clear errors instead of tracebacks, per-session training jobs (stopped
when their browser tab closes), and the published anchors shown beside results.
"""
import contextlib
import os
import threading
import time
from pathlib import Path

import streamlit as st

from lab.checkpoints import CheckpointError, list_checkpoints, load_checkpoint
from lab.data import DataError
from lab.train import configure_cpu

ROOT = Path(__file__).resolve().parent.parent  # the repository: app.py, pages/, checkpoints/
USER_DIR = Path(os.environ.get("RNNLAB_USER_DIR", ROOT / "user_checkpoints"))

# Published numbers a student can hold a result against (cited where shown).
ANCHORS = {
    "nanogpt_cpu": ("nanoGPT char-level Tiny Shakespeare, CPU config (~3 min)", "val loss ≈ 1.88 nats/char"),
    "nanogpt_gpu": ("nanoGPT char-level Tiny Shakespeare, 6-layer transformer on a GPU", "val loss ≈ 1.47 nats/char"),
    "leviathan": ("Seed 002 Leviathan-LSTM (24M params, 6 short epochs on a GPU)", "val loss 1.50 nats/char"),
    "uniform_char": ("Uniform guess over ~65 characters", "ln 65 ≈ 4.17 nats/char"),
    "scifar_lstm": ("Sequential CIFAR-10, LSTM (S4 paper, Table)", "63.0% accuracy"),
    "scifar_urgru": ("Sequential CIFAR-10, UR-GRU (S4 paper, Table)", "74.4% accuracy"),
    "lra_image_transformer": ("Long Range Arena, grayscale Image task, Transformer", "42.4% accuracy"),
    "lra_image_s4": ("Long Range Arena, grayscale Image task, S4", "88.7% accuracy"),
}


def setup_page(title, icon="🧠"):
    """Page config, a capped thread count, and the session's job reaper."""
    _route_through_app()
    st.set_page_config(page_title=f"{title} · RNN Lab", page_icon=icon, layout="wide")
    _process_setup()


def _route_through_app():
    """Send a session through app.py's st.navigation when Streamlit's pages/ router ran the page.

    Until a script calls st.navigation, Streamlit takes a pages/ folder beside the entry point for
    its old multipage layout: on a fresh server a direct link (/Sample) runs the page on its own,
    under an automatic sidebar with an extra "app" entry, and keeps doing so until someone opens
    "/". st.navigation switches that router off for the whole server; doing it here, then
    rerunning, runs app.py instead, which routes to the same page (its URL is the same). Only on a
    session's first run, a page load, so that no widget event is lost to the rerun."""
    from streamlit.runtime.pages_manager import PagesManager  # the flag st.navigation clears; no public API

    first_run = "_rnnlab_routed" not in st.session_state
    st.session_state["_rnnlab_routed"] = True
    if first_run and getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


@st.cache_resource
def _process_setup():
    """Once per server process: cap torch's threads and start the reaper of orphaned jobs."""
    threads = configure_cpu()
    # the registry is made here, on the script thread, and handed over: the reaper thread has no
    # script context in which to call a cached function
    threading.Thread(target=_reap_jobs_of_closed_sessions, args=(_job_registry(),), name="rnnlab-reaper",
                     daemon=True).start()
    from streamlit.runtime import Runtime

    if Runtime.exists():  # a real server, not AppTest (a process exiting mid-warm-up would abort in torch)
        threading.Thread(target=_warm_up_training, name="rnnlab-warm-up", daemon=True).start()
    return threads


def _warm_up_training():
    """Two steps of a tiny model, in the background at server start: PyTorch initialises autograd,
    the optimiser and its kernels lazily (about a second on a busy CPU), which the first Start
    on the Train page would otherwise wait for before its first loss point."""
    from lab.models import LMConfig, build_model
    from lab.train import LMTask, TrainConfig, train

    task = LMTask.from_text("to be or not to be " * 20, "char")
    train(build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=4, hidden_size=8)), task,
          TrainConfig(max_steps=2, batch_size=2, block_size=8, eval_windows=2))


def show_anchors(*keys):
    """A small table of published results relevant to the page."""
    with st.expander("Published anchors: how good is good?", expanded=False):
        st.table([{"reference": ANCHORS[k][0], "result": ANCHORS[k][1]} for k in keys])


@contextlib.contextmanager
def user_errors(what="That"):
    """Show bad input (ValueError and friends) as a clear st.error, never a traceback."""
    try:
        yield
    except (CheckpointError, DataError, ValueError) as e:
        st.error(f"{what} did not work: {e}")
    except OSError as e:
        st.error(f"{what} did not work: a file problem: {e}")


# ---------------------------------------------------------------------------
# pages

PAGES = {  # name -> (script path relative to app.py, icon), in the sidebar's order; app.py runs them
    "Home": ("pages/0_🏠_Home.py", "🏠"),
    "Train": ("pages/1_🏋️_Train.py", "🏋️"),
    "Sample": ("pages/2_💬_Sample.py", "💬"),
    "Gates": ("pages/3_🔬_Gates.py", "🔬"),
    "Memory": ("pages/4_🧠_Memory.py", "🧠"),
    "Checkpoints": ("pages/5_📦_Checkpoints.py", "📦"),
    "Ablation": ("pages/6_⚖️_Ablation.py", "⚖️"),
}


def page_link(name, label=None, help=None):
    """st.page_link to one of PAGES (nothing when a page runs on its own, outside app.py)."""
    from streamlit.errors import StreamlitAPIException

    path, icon = PAGES[name]
    try:
        st.page_link(path, label=label or name, icon=icon, help=help)
    except StreamlitAPIException:  # a page run on its own (not from app.py) knows no other pages
        pass


@st.cache_data(max_entries=256, show_spinner=False)
def parameter_count(config_dict):
    """Trainable parameters of the model a config describes (built on the meta device: no memory)."""
    import torch

    from lab.models import build_model, config_from_dict, count_parameters

    with torch.device("meta"):
        return count_parameters(build_model(config_from_dict(config_dict)))


# ---------------------------------------------------------------------------
# checkpoints


@st.cache_resource(max_entries=16, show_spinner="Loading checkpoint…")
def cached_checkpoint(path, mtime):
    """A loaded checkpoint, shared read-only across sessions; `mtime` invalidates on rewrite."""
    return load_checkpoint(path)


def checkpoint_infos(families=None):
    infos = list_checkpoints(USER_DIR, include_versions=False)
    return [i for i in infos if families is None or i.family in families]


def checkpoint_picker(key, label="Checkpoint", families=("lm", "scan_markov"), default_name=None):
    """A selectbox over bundled and user checkpoints -> the loaded Checkpoint, or None (with a message)."""
    infos = checkpoint_infos(families)
    if not infos:
        st.warning("No checkpoints yet: train one on the Train page, or regenerate the bundled ones "
                   "with `python scripts/build_checkpoints.py`.")
        return None
    names = [f"{i.name}{'' if i.bundled else '  (yours)'}" for i in infos]
    index = next((n for n, i in enumerate(infos) if i.name == default_name), 0)
    choice = st.selectbox(label, range(len(infos)), index=index, format_func=names.__getitem__, key=key)
    info = infos[choice]
    try:
        return cached_checkpoint(str(info.path), info.path.stat().st_mtime)
    except (CheckpointError, OSError) as e:
        st.error(f"Could not load {info.name}: {e}")
        return None


# ---------------------------------------------------------------------------
# per-session training jobs


@st.cache_resource
def _job_registry():
    """session id -> list of that session's TrainingJobs (process-wide, guarded by a lock)."""
    return {"lock": threading.Lock(), "jobs": {}}


def session_id():
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def session_jobs():
    """This browser session's jobs (oldest first)."""
    registry = _job_registry()
    with registry["lock"]:
        return list(registry["jobs"].get(session_id(), []))


def register_job(job):
    registry = _job_registry()
    with registry["lock"]:
        registry["jobs"].setdefault(session_id(), []).append(job)


def forget_jobs(predicate):
    """Drop this session's jobs for which predicate(job) is true (e.g. finished ones) from its list."""
    registry = _job_registry()
    with registry["lock"]:
        jobs = registry["jobs"].get(session_id(), [])
        registry["jobs"][session_id()] = [job for job in jobs if not predicate(job)]


def running_jobs_in_app(kind=object):
    """How many jobs (of class `kind`) of any session are running in this server process."""
    registry = _job_registry()
    with registry["lock"]:
        return sum(isinstance(job, kind) and job.running for jobs in registry["jobs"].values() for job in jobs)


def _reap_jobs_of_closed_sessions(registry, interval=2.0, grace=10.0):
    """Stop the training of sessions whose browser tab has gone (checked every `interval` s).

    Closing a tab closes its websocket, and Streamlit then drops the session from
    its active sessions (it may keep it aside for a reconnect), so
    `Runtime.is_active_session` turns false; tests/test_browser.py checks this
    end to end in a real browser.
    """
    from streamlit.runtime import Runtime

    gone_since = {}
    while True:
        time.sleep(interval)
        if not Runtime.exists():
            continue
        runtime = Runtime.instance()
        with registry["lock"]:
            sessions = list(registry["jobs"].items())
        for sid, jobs in sessions:
            if runtime.is_active_session(sid):
                gone_since.pop(sid, None)
                continue
            # a reconnecting tab (page reload, flaky network) gets a grace period
            if time.monotonic() - gone_since.setdefault(sid, time.monotonic()) < grace:
                continue
            for job in jobs:
                job.stop()
            with registry["lock"]:
                registry["jobs"].pop(sid, None)
            gone_since.pop(sid, None)
