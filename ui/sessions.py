"""Each browser's session on the server: its space (a folder of checkpoints under a key kept in a
cookie, lab.server.spaces), its training jobs (stopped when its last tab closes: every page sends a
heartbeat), and what the server process does once (cap torch's threads, start the reaper of
unattended jobs and old files, log the jobs, warm up once a first page is drawn: ui.warm_up)."""

import contextlib
import functools
import logging
import math
import os
import re
import sys
import threading
import time
from pathlib import Path

import streamlit as st

from lab.server import jobs, ray_runs, workers
from lab.server.capacity import setting
from lab.server.spaces import is_space_key, mark_seen, new_space_key, reserve_room, space_dir, sweep
from lab.training.train import configure_cpu

ROOT = Path(__file__).resolve().parent.parent  # the repository: app.py, pages/, checkpoints/
USER_DIR = Path(os.environ.get("RNNLAB_USER_DIR", ROOT / "user_checkpoints"))  # one folder per session inside
KEEP_SECONDS = 3600 * setting("RNNLAB_KEEP_HOURS", "48", float)  # a session's files, after it was last seen
USER_DIR_MAX_BYTES = 2**20 * setting("RNNLAB_USER_DIR_MAX_MB", "500", float)  # all sessions' files together
SPACE_MAX_BYTES = 2**20 * setting("RNNLAB_SPACE_MAX_MB", "100", float)  # one session's files
SPACE_COOKIE = "rnnlab_space"  # the browser keeps its session's key, so a reload finds the same files


# How long a thread that serves pages waits for a training thread to hand over the interpreter before it
# asks for it (Python's default: 5 ms). Each message to a browser goes through the event loop, which gives
# the interpreter up for every write to a socket and must then get it back: with five runs training, a
# static page took 3-4 s to arrive instead of 0.9 s, in such waits
PAGE_WAIT_SECONDS = 0.0005


@st.cache_resource
def start_server_process():
    """Once per server process: cap torch's threads, start the reaper of unattended jobs."""
    threads = configure_cpu()
    sys.setswitchinterval(PAGE_WAIT_SECONDS)
    _log_jobs_to_the_server_log()
    # the registry is made here, on the script thread, and handed over: the reaper thread has no
    # script context in which to call a cached function
    threading.Thread(target=_reap_unattended_jobs, args=(job_registry(),), name="rnnlab-reaper", daemon=True).start()
    if ray_runs.RAY_ADDRESS:  # the warm actors (RNNLAB_RAY_WARM_ACTORS) start with the server, before the class
        threading.Thread(target=_start_warm_actors, name="rnnlab-warm-actors", daemon=True).start()
    return threads


def _start_warm_actors():
    try:
        ray_runs.start_warm_actors(ray_runs.RAY_ADDRESS)
    except Exception:  # a bad setting or an unreachable cluster: runs get actors of their own, as without
        ray_runs.log.exception("starting the warm Ray actors failed")


@st.cache_resource
def start_warm_up():
    """Once per server process, after a first page was drawn (at a session's second heartbeat): the
    warm-up (ui.warm_up) imports PyTorch's compiler stack (about 2 CPU-seconds, the optimiser pulls it
    in), which run beside the first visit's own imports slowed that page by as much, through the
    interpreter's lock."""
    from ui.warm_up import THREAD_NAME, warm_up

    # not a daemon: the interpreter waits for its few seconds at exit instead of killing it inside torch
    threading.Thread(target=warm_up, name=THREAD_NAME).start()


SERVER_LOG_FORMAT = logging.Formatter(
    "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"
)


def _log_jobs_to_the_server_log():
    """lab.server.jobs says when each run starts training and ends, lab.server.ray_runs when the warm Ray
    actors are ready; on a class server the teacher reads it in the server's log (Community Cloud:
    "Manage app"), beside Streamlit's own lines; ui.warm_up when the server is prepared."""
    from ui.warm_up import log as warm_up_log

    handler = logging.StreamHandler()
    handler.setFormatter(SERVER_LOG_FORMAT)
    for log in (jobs.log, ray_runs.log, warm_up_log):
        log.setLevel(logging.INFO)
        log.addHandler(handler)


# per-session training jobs, kept alive by the page's heartbeat

HEARTBEAT_SECONDS = 5.0  # how often every open page tells the server it is still there
# a job whose session sent no heartbeat for this long is stopped: a closed tab, a lost laptop. Generous,
# because browsers slow the timers of hidden tabs (Chrome: to once a minute after five minutes hidden)
UNATTENDED_SECONDS = setting("RNNLAB_UNATTENDED_SECONDS", "150", float)
# the runs train in the server's niced training process (lab.server.workers), not in its own threads,
# unless RNNLAB_TRAINING_PROCESSES is 0: runs in threads share the pages' interpreter, and five of them
# made pages take up to 3x their idle time where the same runs in a training process took up to 2x
# (BENCHMARKS.md, one screen, two seconds)
TRAIN_IN_PROCESS = workers.TRAINING_PROCESSES > 0


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
    """What a save into this session's folder reserves its room with: SpaceFullError (a ValueError, one
    line) when the file would pass the session's quota or all sessions' bound (lab.server.spaces.reserve_room)."""
    return functools.partial(
        reserve_room, USER_DIR, user_dir(), space_bytes=SPACE_MAX_BYTES, total_bytes=USER_DIR_MAX_BYTES
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
    st.session_state._rnnlab_beats = st.session_state.get("_rnnlab_beats", 0) + 1
    if st.session_state._rnnlab_beats == 2:  # the first ran in the page's own script: the page is drawn now
        start_warm_up()


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


def keep_session_alive():
    """On every page: this session's heartbeat (its jobs keep running, its files are kept) and, once
    per session, the cookie that lets a reload find the same space."""
    _heartbeat()
    _remember_space_in_a_cookie()
