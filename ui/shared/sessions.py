"""Each browser's session on the server: its space (a folder of checkpoints under a key kept in a
cookie, lab.server.spaces), its training jobs (stopped when its last tab closes: every page sends a
heartbeat), and what the server process does once (cap torch's threads, start the reaper of
unattended jobs and old files, log the jobs)."""

import contextlib
import functools
import logging
import math
import re
import sys
import threading
import time

import streamlit as st

from lab.errors import LabError
from lab.server import jobs, ray_runs, shutdown, workers
from lab.server.spaces import (
    identity_space_key,
    is_space_key,
    mark_seen,
    new_space_key,
    reserve_room,
    space_dir,
    sweep,
)
from lab.settings import server_settings, unknown_variables
from lab.training.process import configure_cpu
from ui.shared import boundary
from ui.shared.plain_text import plain
from ui.shared.sign_in import identity

SPACE_COOKIE = "rnnlab_space"  # the browser keeps its session's key, so a reload finds the same files


# How long a thread that serves pages waits for a training thread to hand over the interpreter before it
# asks for it (Python's default: 5 ms). Each message to a browser goes through the event loop, which gives
# the interpreter up for every write to a socket and must then get it back: with five runs training, a
# static page took 3-4 s to arrive instead of 0.9 s, in such waits
PAGE_WAIT_SECONDS = 0.0005


def refuse_bad_settings():
    """On every page, before anything else: a server setting out of its bounds (lab.settings) is all the
    page shows, in one line, and the server's log says it once; nothing of the app runs on such settings.
    (`streamlit run serve.py` stops with the same line before it opens.)"""
    try:
        server_settings()
    except LabError as error:
        _log_once(str(error))
        st.error(f"This server's settings need fixing by whoever runs it: {plain(error)}")
        st.stop()


@functools.cache  # once per process and message: every page of every session would say it again
def _log_once(line):
    print(line, file=sys.stderr, flush=True)


def users_root():
    """The folder of every session's space: RNNLAB_USER_DIR."""
    return server_settings().user_dir


def keep_seconds():
    """How long a session's files are kept after it was last seen: RNNLAB_KEEP_HOURS."""
    return 3600 * server_settings().keep_hours


@st.cache_resource
def start_server_process():
    """Once per server process: cap torch's threads, name in the log the RNNLAB_ variables that are no
    setting (lab.settings), start the reaper of unattended jobs."""
    threads = configure_cpu()
    for name in unknown_variables():
        print(
            f"{name} is not a setting of this server, and is ignored (the README's table lists the settings)",
            file=sys.stderr,
        )
    sys.setswitchinterval(PAGE_WAIT_SECONDS)
    _log_jobs_to_the_server_log()
    # the registry is made here, on the script thread, and handed over: the reaper thread has no
    # script context in which to call a cached function
    start_until_the_end(_reap_unattended_jobs, "rnnlab-reaper", job_registry())
    if server_settings().ray_address:  # the warm actors (RNNLAB_RAY_WARM_ACTORS) start with the server
        start_until_the_end(_start_warm_actors, "rnnlab-warm-actors")
    return threads


def start_until_the_end(target, name, *args):
    """Start a thread of the server's own that returns once the server begins to end (shutdown.ENDING),
    and is joined then, before the interpreter tears down (lab.server.shutdown)."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    shutdown.join_at_exit(thread)


def _start_warm_actors():
    try:
        ray_runs.start_warm_actors(server_settings().ray_address)
    except Exception:  # a bad setting or an unreachable cluster: runs get actors of their own, as without
        ray_runs.log.exception("starting the warm Ray actors failed")


SERVER_LOG_FORMAT = logging.Formatter(
    "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"
)
SERVER_LOG = logging.StreamHandler()  # the server's log: the teacher reads it beside Streamlit's own lines
SERVER_LOG.setFormatter(SERVER_LOG_FORMAT)


def to_the_server_log(log):
    """`log` (a logging.Logger) says its INFO lines in the server's log; returns it."""
    log.setLevel(logging.INFO)
    log.addHandler(SERVER_LOG)
    return log


def _log_jobs_to_the_server_log():
    """lab.server.jobs says when each run starts training and ends, lab.server.workers when a training
    process ends, lab.server.ray_runs when the warm Ray actors are ready, lab.server.shutdown what did not
    end in time as the server ended; on a class server the teacher reads it in the server's log (Community Cloud:
    "Manage app"), beside Streamlit's own lines (the warm-up, ui.app.warm_up, says when the server is prepared)."""
    for log in (jobs.log, workers.log, ray_runs.log, shutdown.log, boundary.log):
        to_the_server_log(log)


# per-session training jobs, kept alive by the page's heartbeat

HEARTBEAT_SECONDS = 5.0  # how often every open page tells the server it is still there


def train_in_process():
    """Whether the runs train in the server's niced training process (lab.server.workers), not in its own
    threads: unless RNNLAB_TRAINING_PROCESSES is 0. Runs in threads share the pages' interpreter, and five
    of them made pages take up to 3x their idle time where the same runs in a training process took up
    to 2x (BENCHMARKS-HISTORY.md, one screen, two seconds)."""
    return server_settings().training_processes > 0


@st.cache_resource
def job_registry():
    """session key -> {"jobs": [TrainingJob, ...], "seen": monotonic time of its last heartbeat}."""
    return {"lock": threading.Lock(), "sessions": {}}


def session_key():
    """This browser's key: it names the session's folder of files (lab.server.spaces), its jobs, and the
    owner of its runs in the training budget (its share and its cap on runs).

    Signed in (ui.shared.sign_in), the key is the person's: the same in each of their browsers, on any device.
    Else a random key kept in a cookie, so a reload or a reconnect finds the same files and running jobs;
    a browser that refuses the cookie gets a fresh key per visit, and its old files expire."""
    person = identity()
    if person is not None:
        return identity_space_key(users_root(), person.issuer, person.subject)
    if "_rnnlab_session_key" not in st.session_state:
        cookie = space_cookie()
        # a key the server did not issue (a hand-made cookie) is refused: the browser gets a new one
        root = users_root()
        st.session_state._rnnlab_session_key = cookie if is_space_key(root, cookie) else new_space_key(root)
    return st.session_state._rnnlab_session_key


def space_cookie():
    """The space key the browser sent in its cookie ("" when none)."""
    cookie = st.context.cookies.get(SPACE_COOKIE, "")
    return cookie if isinstance(cookie, str) else ""  # a test harness without cookies gives no string


def remember_space_in_a_cookie():
    """Write the space's cookie once per session (each visit, each reload), whether or not the browser
    sent it: its max-age then counts from the last visit, as "kept 48 h after last seen" promises."""
    if identity() is not None:  # a signed-in person's key comes from who they are, not from a cookie
        return
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
    cookie = f"{SPACE_COOKIE}={key}; path=/; max-age={int(keep_seconds())}; SameSite=Lax"
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
    return space_dir(users_root(), session_key(), create=False)


def room_check():
    """What a save into this session's folder reserves its room with: SpaceFullError (a ValueError, one
    line) when the file would pass the session's quota or all sessions' bound (lab.server.spaces.reserve_room)."""
    settings = server_settings()
    return functools.partial(
        reserve_room,
        settings.user_dir,
        user_dir(),
        space_bytes=2**20 * settings.space_max_mb,
        total_bytes=2**20 * settings.user_dir_max_mb,
    )


def _session_entry(registry):
    """This session's entry, created on first use; call with the registry's lock held."""
    return registry["sessions"].setdefault(session_key(), {"jobs": [], "seen": time.monotonic()})


def touch_session():
    """Record that this session is still open: its jobs keep running, its files are kept."""
    registry = job_registry()
    with registry["lock"]:
        _session_entry(registry)["seen"] = time.monotonic()
    mark_seen(users_root(), session_key())


@boundary.fragment(run_every=HEARTBEAT_SECONDS)
def _heartbeat(on_page_drawn):
    touch_session()
    st.session_state._rnnlab_beats = st.session_state.get("_rnnlab_beats", 0) + 1
    if st.session_state._rnnlab_beats == 2:  # the first ran in the page's own script: the page is drawn now
        on_page_drawn()


def session_jobs():
    """This browser session's jobs (oldest first)."""
    registry = job_registry()
    with registry["lock"]:
        return list(_session_entry(registry)["jobs"])


def watching_sessions():
    """How many sessions have a run that has not ended (training, or waiting in the budget's queue): the
    students whose live charts redraw."""
    registry = job_registry()
    with registry["lock"]:
        return sum(any(job.running for job in entry["jobs"]) for entry in registry["sessions"].values())


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
    """Stop the jobs of sessions with no heartbeat for `unattended` seconds (RNNLAB_UNATTENDED_SECONDS: a
    closed tab, a lost laptop; generous, because browsers slow the timers of hidden tabs, Chrome to once a
    minute after five minutes hidden) and forget those sessions.

    A job that has not computed yet (queued, or starved by a busy host) is not stopped: its unattended time
    counts from its first event, so a run whose student left before it could train still gets its time, and
    the session is kept until then.

    Every open page sends a heartbeat (`_heartbeat`, a fragment rerun every HEARTBEAT_SECONDS), so
    a session falls silent when its last tab closes; tests/test_browser.py checks this in a real
    browser. Returns the stopped jobs."""
    now = time.monotonic() if now is None else now
    unattended = server_settings().unattended_seconds if unattended is None else unattended

    def unattended_since(job, seen):
        return max(seen, job.first_event_at) if job.first_event_at is not None else math.inf

    stopped = []
    with registry["lock"]:
        for key, entry in list(registry["sessions"].items()):
            if now - entry["seen"] <= unattended:
                continue
            due = [job for job in entry["jobs"] if now - unattended_since(job, entry["seen"]) > unattended]
            waiting = [job for job in entry["jobs"] if job.running and job not in due]
            stopped += due
            if waiting:
                entry["jobs"] = waiting
            else:
                del registry["sessions"][key]
    for job in stopped:
        job.stop()
    return stopped


def _reap_unattended_jobs(registry, interval=2.0, sweep_every=60.0):
    """Stop unattended jobs every `interval` s; sweep old and excess files every `sweep_every` s. The settings
    are read once, as this thread starts: a server's do not change while it runs."""
    last_sweep, unattended, root, keep = -math.inf, server_settings().unattended_seconds, users_root(), keep_seconds()
    while not shutdown.ENDING.wait(interval):
        stop_unattended_jobs(registry, unattended=unattended)
        if time.monotonic() - last_sweep >= sweep_every:
            last_sweep = time.monotonic()
            with registry["lock"]:  # the spaces of the sessions this server still hears from are in use
                in_use = set(registry["sessions"])
            with contextlib.suppress(OSError):  # a file vanishing mid-sweep is retried next time
                sweep(root, keep, in_use=in_use)


def keep_session_alive(on_page_drawn):
    """On every page: this session's heartbeat (its jobs keep running, its files are kept; at its second
    beat, the page drawn, it calls `on_page_drawn`) and, once per session, the cookie that lets a reload
    find the same space."""
    _heartbeat(on_page_drawn)
    remember_space_in_a_cookie()
