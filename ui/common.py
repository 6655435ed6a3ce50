"""Streamlit helpers shared by every page (kept out of `lab/`, which never imports Streamlit).

Pages stay thin: widgets -> config -> `lab` call -> chart. This module holds
what several pages need: page setup, the checkpoint picker with a cached
loader, clear errors instead of tracebacks, per-session training jobs (stopped
when their browser tab closes), and the published anchors shown beside results.
"""

import contextlib
import functools
import logging
import math
import os
import re
import threading
import time
from pathlib import Path

import streamlit as st

from lab.data import DataError
from lab.server.spaces import check_room, is_space_key, mark_seen, new_space_key, space_dir, sweep
from lab.training.checkpoints import CheckpointError, list_checkpoints, load_checkpoint
from lab.training.train import configure_cpu
from ui.coloured_text import visible_piece

ROOT = Path(__file__).resolve().parent.parent  # the repository: app.py, pages/, checkpoints/
USER_DIR = Path(os.environ.get("RNNLAB_USER_DIR", ROOT / "user_checkpoints"))  # one folder per session inside
KEEP_SECONDS = 3600 * float(os.environ.get("RNNLAB_KEEP_HOURS", "48"))  # a session's files, after it was last seen
USER_DIR_MAX_BYTES = 2**20 * float(os.environ.get("RNNLAB_USER_DIR_MAX_MB", "500"))  # all sessions' files together
SPACE_MAX_BYTES = 2**20 * float(os.environ.get("RNNLAB_SPACE_MAX_MB", "100"))  # one session's files
SPACE_COOKIE = "rnnlab_space"  # the browser keeps its session's key, so a reload finds the same files
ARM_COLORS = {"baseline": "#1f77b4", "ablated": "#d62728", "chrono": "#2ca02c"}  # the gate-bias study's arms

# Published numbers a student can hold a result against (cited where shown).
ANCHORS = {
    "nanogpt_cpu": ("nanoGPT char-level Tiny Shakespeare, CPU config (~3 min)", "val loss ≈ 1.88 nats/char"),
    "nanogpt_gpu": ("nanoGPT char-level Tiny Shakespeare, 6-layer transformer on a GPU", "val loss ≈ 1.47 nats/char"),
    "leviathan": (
        "Leviathan-LSTM: a 24M-parameter 3-layer character LSTM trained on a GPU (6 short epochs)",
        "val loss 1.50 nats/char",
    ),
    "uniform_char": ("Uniform guess over ~65 characters", "ln 65 ≈ 4.17 nats/char"),
    "scifar_lstm": ("Sequential CIFAR-10, LSTM (S4 paper, Table)", "63.0% accuracy"),
    "scifar_urgru": ("Sequential CIFAR-10, UR-GRU (S4 paper, Table)", "74.4% accuracy"),
    "lra_image_transformer": ("Long Range Arena, grayscale Image task, Transformer", "42.4% accuracy"),
    "lra_image_s4": ("Long Range Arena, grayscale Image task, S4", "88.7% accuracy"),
}

# lab.training.presets' keys (kept as widget values and in links) -> what a student reads in a list of presets
PRESET_LABELS = {
    "scribe-alpha": "Scribe, small: subword GRU, 2 layers of 256",
    "scribe-beta": "Scribe, medium: subword GRU, 3 layers of 512",
    "scribe-gamma": "Scribe, large: subword GRU, 4 layers of 768",
    "astra-alpha": "Astra, small: character GRU, 1 layer of 256 (a minute on a CPU)",
    "astra-beta": "Astra, medium: character GRU, 2 layers of 384 (minutes on a CPU)",
    "astra-gamma": "Astra, large: character GRU, 3 layers of 512 (for a GPU)",
    "leviathan-lstm": "Leviathan: character LSTM, 3 layers of 1024 (24M parameters, for a GPU)",
    "seq-cifar-gru": "Pixel-by-pixel image GRU (the Ablation page's model)",
    "scan-markov": "Selective scan on 1 to 4 characters of context",
    "scan-markov-windows": "Selective scan on 16-character windows",
}
# lab.training.presets' descriptions that name a design document, said in plain words instead
PRESET_DESCRIPTIONS = {
    "leviathan-lstm": "Leviathan-LSTM: 3-layer character LSTM, E=768, H=1024 (24M parameters; GPU-sized)",
    "seq-cifar-gru": "The Ablation page's GRU: reads an image one pixel per step; 1 layer, H=181, 10 classes",
    "scan-markov": "Mamba-style selective scan: a gated linear recurrence over 1-4 characters of context (~340K "
    "parameters), trained on mixed 2-5-gram samples",
    "scan-markov-windows": "The lab's own variant of scan-markov: the same model trained on 16-character windows, "
    "every position predicting the next (2- to 17-grams at once)",
}


def preset_label(name):
    """A preset's key ("astra-alpha") -> its plain label for a list of choices."""
    return PRESET_LABELS.get(name, name)


def preset_description(name):
    """A preset's description in plain words."""
    from lab.training.presets import PRESETS

    return PRESET_DESCRIPTIONS.get(name, PRESETS[name].description)


def plain_convention(text):
    """A lab cell's convention line (or a model summary holding it) as a student reads it: lab names the
    z-overwrites GRU after the document it came from, the page after the models that use it."""
    return text.replace("GRU, seed convention", "GRU, the Scribe models' convention")


def study_conclusion(results):
    """lab.experiments.ablation.conclusion as a student reads it: "the seeds" are the random seeds."""
    from lab.experiments.ablation import conclusion

    return re.sub(r"\bthe (?=seeds\b)", "the random ", conclusion(results))


PAGES = {  # name -> (script, icon), in the sidebar's order: "/" is app.py, the rest Streamlit's pages/ router serves
    "Home": ("app.py", "🏠"),
    "Lessons": ("pages/7_Lessons.py", "🎓"),  # second: where a new student starts
    "Train": ("pages/1_Train.py", "🏋️"),
    "Sample": ("pages/2_Sample.py", "💬"),
    "Gates": ("pages/3_Gates.py", "🔬"),
    "Memory": ("pages/4_Memory.py", "🧠"),
    "Checkpoints": ("pages/5_Checkpoints.py", "📦"),
    "Ablation": ("pages/6_Ablation.py", "⚖️"),
}


# the words every page leans on, one click away in the sidebar of every page
GLOSSARY = {
    "token": "One unit of text the model reads and predicts: a character, or for a subword model a common "
    "piece of a word (“▁the”, “ing”). The model sees only their numbers.",
    "embedding": "The vector of numbers a model learns for each token: the first layer turns token number "
    "i into row i of a table, and the network reads that row.",
    "softmax": "Turns the model's scores for every possible next token into probabilities that add up to 1: "
    "exp(score) divided by the sum of all of them.",
    "entropy": "How unsure a probability distribution is, in nats: 0 when one token is certain, ln V when "
    "all V tokens are equally likely.",
    "epoch": "One pass over the whole training text (or the training images).",
    "state": "The vector h_t (and the LSTM's cell state c_t) a recurrent network carries from one step "
    "to the next: its only memory of what it has read.",
    "gate": "A vector of numbers in (0, 1), σ of a weighted sum, that multiplies another vector element by "
    "element: how much of each unit to let through, keep or overwrite.",
    "BPTT": "Backpropagation through time: the chain rule applied backwards along the unrolled steps. "
    "The gradient reaching a step far back is a product of one factor per step in between.",
    "nats/char": "The loss, −ln P(next token), summed over a text and divided by its characters. ln 65 ≈ 4.17 "
    "is a uniform guess over 65 characters; lower is better, and it compares character and "
    "subword models fairly.",
    "convention": "Which way a GRU's update gate z points. In one convention z overwrites "
    "(h = (1−z)·h + z·h̃: the gru_seed cell and the Scribe models). In PyTorch's, z keeps "
    "(h = (1−z)·n + z·h: the gru_torch cell). Same name, opposite meaning.",
    "chrono initialisation": "Tallec & Ollivier (2018): start the keep-gate biases at log U[1, T−1], so the "
    "units begin with memories spread from 1 to T steps long.",
    "random seed": "The number that starts a random generator: the same random seed gives the same sample "
    "or the same initial weights again.",
}


def setup_page(name):
    """Page config, the sidebar naming every page and the glossary, and this session's heartbeat."""
    icon = PAGES[name][1]
    st.set_page_config(page_title=f"{name} · RNN Lab", page_icon=icon, layout="wide")
    _process_setup()
    with st.sidebar:
        for page in PAGES:
            page_link(page)
        with st.expander("📖 Glossary"):
            st.markdown("\n\n".join(f"**{term}**: {meaning}" for term, meaning in GLOSSARY.items()))
        _heartbeat()
        _remember_space_in_a_cookie()


def page_link(name, label=None, help=None, query_params=None):
    """st.page_link to one of PAGES, optionally with settings for its URL (ui.links)."""
    path, icon = PAGES[name]
    st.page_link(path, label=label or name, icon=icon, help=help, query_params=query_params)


@st.cache_resource
def _process_setup():
    """Once per server process: cap torch's threads, start the reaper of unattended jobs, warm up."""
    threads = configure_cpu()
    _log_jobs_to_the_server_log()
    # the registry is made here, on the script thread, and handed over: the reaper thread has no
    # script context in which to call a cached function
    threading.Thread(target=_reap_unattended_jobs, args=(job_registry(),), name="rnnlab-reaper", daemon=True).start()
    # not a daemon: the interpreter waits for its second or so at exit instead of killing it inside torch
    threading.Thread(target=_warm_up_training, name="rnnlab-warm-up").start()
    return threads


SERVER_LOG_FORMAT = logging.Formatter(
    "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"
)


def _log_jobs_to_the_server_log():
    """lab.server.jobs says when each run starts training and ends; on a class server the teacher reads
    it in the server's log (Community Cloud: "Manage app"), beside Streamlit's own lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(SERVER_LOG_FORMAT)
    jobs_log = logging.getLogger("lab.server.jobs")
    jobs_log.setLevel(logging.INFO)
    jobs_log.addHandler(handler)


def _warm_up_training():
    """Two steps of a tiny model, in the background at server start: PyTorch initialises autograd,
    the optimiser and its kernels lazily (about a second on a busy CPU), which the first Start
    on the Train page would otherwise wait for before its first loss point."""
    from lab.nets.models import LMConfig, build_model
    from lab.training.tasks import LMTask
    from lab.training.train import TrainConfig, train

    task = LMTask.from_text("to be or not to be " * 20, "char")
    train(
        build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=4, hidden_size=8)),
        task,
        TrainConfig(max_steps=2, batch_size=2, block_size=8, eval_windows=2),
    )


def show_anchors(*keys):
    """A small table of published results relevant to the page."""
    with st.expander("Published anchors: how good is good?", expanded=False):
        st.table([{"reference": ANCHORS[k][0], "result": ANCHORS[k][1]} for k in keys])


# Every ASCII punctuation character: Markdown lets a backslash escape each one, and escaped, none can
# start a link, an image, HTML, emphasis, code, a :colour[...] directive, :emoji:, $LaTeX$ or, since
# "www\." and "http\:\/\/" are no longer what GitHub's autolinks look for, a bare URL or address
_MARKDOWN_SYNTAX = re.compile(r"([!-/:-@\[-`{-~])")


# what the renderer turns into a link by itself, escaped or not (GitHub's autolinks): a URL's scheme,
# "www." and an address's "@". An invisible word joiner after its first character breaks each.
_AUTOLINK_STARTS = re.compile(r"(?i)(?<=h)(?=ttps?\\?:)|(?<=f)(?=tp\\?:)|(?<=w)(?=ww\\?\.)|(?<=@)")
WORD_JOINER = "\u2060"


def plain(text):
    """`text` (from a file, a link or a user) made inert inside Markdown: every punctuation character
    is backslash-escaped and every autolink broken, so it renders as the characters it is, never as a
    link, an image or HTML."""
    escaped = _MARKDOWN_SYNTAX.sub(r"\\\1", str(text)).replace("\n", "  \n")
    return _AUTOLINK_STARTS.sub(WORD_JOINER, escaped)


def piece_label(piece):
    """A token as a widget label (Markdown): whitespace made visible, nothing in it live."""
    return plain(visible_piece(piece))


@contextlib.contextmanager
def user_errors(what="That"):
    """Show bad input (ValueError and friends) as a clear st.error, never a traceback."""
    try:
        yield
    except (CheckpointError, DataError, ValueError) as e:
        st.error(f"{what} did not work: {plain(e)}")
    except OSError as e:
        st.error(f"{what} did not work: a file problem: {plain(e)}")


def parameter_count(config_dict):
    """Trainable parameters of the model a config describes, by arithmetic (lab.nets.cost): nothing is built."""
    from lab.nets.cost import parameter_count as count
    from lab.nets.models import config_from_dict

    return count(config_from_dict(config_dict))


# ---------------------------------------------------------------------------
# checkpoints


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
        st.error(f"Could not load {plain(info.name)}: {plain(e)}")
        return None


# ---------------------------------------------------------------------------
# per-session training jobs, kept alive by the page's heartbeat

HEARTBEAT_SECONDS = 5.0  # how often every open page tells the server it is still there
# a job whose session sent no heartbeat for this long is stopped: a closed tab, a lost laptop. Generous,
# because browsers slow the timers of hidden tabs (Chrome: to once a minute after five minutes hidden)
UNATTENDED_SECONDS = float(os.environ.get("RNNLAB_UNATTENDED_SECONDS", "150"))
# 1: each run trains in a niced process of its own (lab.server.workers). Off by default: with ten runs at
# once each process held ~400 MB where threads hold ~60 MB, and a run's first point came later
# (BENCHMARKS.md, the classroom runs), which a 1-2.7 GB host cannot afford
TRAIN_IN_PROCESS = os.environ.get("RNNLAB_TRAIN_IN_PROCESS", "0") != "0"


@st.cache_resource
def job_registry():
    """session key -> {"jobs": [TrainingJob, ...], "seen": monotonic time of its last heartbeat}."""
    return {"lock": threading.Lock(), "sessions": {}}


def session_key():
    """This browser's random key: it names the session's folder of files (lab.server.spaces) and its jobs.

    Kept in a cookie, so a reload or a reconnect finds the same files and running jobs; a
    browser that refuses the cookie gets a fresh key per visit, and its old files expire."""
    if "_rnnlab_session_key" not in st.session_state:
        cookie = space_cookie()
        # a key the server did not issue (a hand-made cookie) is refused: the browser gets a new one
        st.session_state._rnnlab_session_key = cookie if is_space_key(USER_DIR, cookie) else new_space_key(USER_DIR)
    return st.session_state._rnnlab_session_key


def space_cookie():
    """The space key the browser sent in its cookie ("" when none)."""
    cookie = st.context.cookies.get(SPACE_COOKIE, "")
    return cookie if isinstance(cookie, str) else ""  # a test harness without cookies gives no string


def _remember_space_in_a_cookie():
    """Write the space's cookie once per session (each visit, each reload), whether or not the browser
    sent it: its max-age then counts from the last visit, as "kept 48 h after last seen" promises."""
    key = session_key()
    if not st.session_state.get("_rnnlab_cookie_sent"):
        st.session_state._rnnlab_cookie_sent = True  # once per session: the script is ours, the key is ours
        st.html(space_cookie_script(key, space_cookie()), unsafe_allow_javascript=True)


def space_cookie_script(key, sent):
    """The browser side of one space per browser. `sent`: the cookie this session's first request
    carried. If the browser's cookie has changed since (another tab of a first visit got its key
    first), this tab reloads to share that space; else it writes `key`, with a fresh max-age, and
    checks a second later that no other tab overwrote it (then it reloads to share theirs). A tab
    reloads so at most once (sessionStorage), so an odd cookie can never make it loop."""
    cookie = f"{SPACE_COOKIE}={key}; path=/; max-age={int(KEEP_SECONDS)}; SameSite=Lax"
    sent = sent if re.fullmatch(r"[A-Za-z0-9_-]{0,64}", sent or "") else ""  # the browser's: never raw into a script
    return (
        f"<script>(() => {{const read = () => (document.cookie.split('; ').find("
        f"c => c.startsWith('{SPACE_COOKIE}=')) || '').slice({len(SPACE_COOKIE) + 1});"
        f"const adopt = () => {{ if (sessionStorage.getItem('{SPACE_COOKIE}_adopted')) return false;"
        f"sessionStorage.setItem('{SPACE_COOKIE}_adopted', '1'); window.location.reload(); return true; }};"
        f"const now = read();"
        f"if (now && now !== '{sent}' && now !== '{key}' && adopt()) return;"
        f"document.cookie = '{cookie}';"
        f"setTimeout(() => {{ const later = read(); if (later && later !== '{key}') adopt(); }}, 1000);"
        f"}})();</script>"
    )


def user_dir():
    """This session's folder of checkpoints (made by the first save)."""
    return space_dir(USER_DIR, session_key(), create=False)


def room_check():
    """What a save into this session's folder calls first: SpaceFullError (a ValueError, one line) when
    the file would pass the session's quota or all sessions' bound (lab.server.spaces.check_room)."""
    return functools.partial(
        check_room, USER_DIR, user_dir(), space_bytes=SPACE_MAX_BYTES, total_bytes=USER_DIR_MAX_BYTES
    )


def _session_entry(registry):
    """This session's entry, created on first use; call with the registry's lock held."""
    return registry["sessions"].setdefault(session_key(), {"jobs": [], "seen": time.monotonic()})


def touch_session():
    """Record that this session is still open: its jobs keep running, its files are kept."""
    registry = job_registry()
    with registry["lock"]:
        _session_entry(registry)["seen"] = time.monotonic()
    mark_seen(USER_DIR, session_key())


@st.fragment(run_every=HEARTBEAT_SECONDS)
def _heartbeat():
    touch_session()


def session_jobs():
    """This browser session's jobs (oldest first)."""
    registry = job_registry()
    with registry["lock"]:
        return list(_session_entry(registry)["jobs"])


def register_job(job):
    registry = job_registry()
    with registry["lock"]:
        entry = _session_entry(registry)
        entry["jobs"].append(job)
        entry["seen"] = time.monotonic()


def forget_jobs(predicate):
    """Drop this session's jobs for which predicate(job) is true (e.g. finished ones) from its list."""
    registry = job_registry()
    with registry["lock"]:
        entry = _session_entry(registry)
        entry["jobs"] = [job for job in entry["jobs"] if not predicate(job)]


def stop_unattended_jobs(registry, now=None, unattended=None):
    """Stop the jobs of sessions with no heartbeat for `unattended` seconds and forget those sessions.

    Every open page sends a heartbeat (`_heartbeat`, a fragment rerun every HEARTBEAT_SECONDS), so
    a session falls silent when its last tab closes; tests/test_browser.py checks this in a real
    browser. Returns the stopped jobs."""
    now = time.monotonic() if now is None else now
    unattended = UNATTENDED_SECONDS if unattended is None else unattended
    with registry["lock"]:
        silent = [key for key, entry in registry["sessions"].items() if now - entry["seen"] > unattended]
        stopped = [job for key in silent for job in registry["sessions"].pop(key)["jobs"]]
    for job in stopped:
        job.stop()
    return stopped


def _reap_unattended_jobs(registry, interval=2.0, sweep_every=60.0):
    """Stop unattended jobs every `interval` s; sweep old and excess files every `sweep_every` s."""
    last_sweep = -math.inf
    while True:
        time.sleep(interval)
        stop_unattended_jobs(registry)
        if time.monotonic() - last_sweep >= sweep_every:
            last_sweep = time.monotonic()
            with contextlib.suppress(OSError):  # a file vanishing mid-sweep is retried next time
                sweep(USER_DIR, KEEP_SECONDS)
