"""What a fresh server computes before its first visitor needs it: PyTorch's lazy set-up of training,
which the first Start would otherwise wait for before its first loss point, and what the Memory,
Sample and Gates pages first show (their default charts, samples and traces: 2-3 CPU-seconds each
that their first visitor would otherwise wait for). The pages' cached calls with the same arguments
then find them; one that comes while they are computed waits for them (Streamlit computes a cached
value once).

`streamlit run serve.py` runs all of it, and imports every page's code, as the server opens (`prepare_server`,
in the thread ui.app.preparing starts: until it is done a visitor sees how far it has got, its parts noted in
ui.app.preparing.PREPARING); under `streamlit run app.py` every page's frame (ui.app.frame) starts the warm-up in
the background once a first page is drawn, at a session's second heartbeat (`start_warm_up`)."""

import functools
import importlib
import logging
import pkgutil
import time

import streamlit as st

import ui
from lab.instruments.sampling import STRATEGIES
from lab.server.shutdown import ENDING
from lab.server.workers import WorkerError, run_in_process
from lab.training.checkpoints import list_checkpoints
from lab.training.process import train_two_tiny_steps
from ui.app.preparing import GATES, MEMORY, PAGES_CODE, PREPARING, SAMPLE, SERVER, THREAD_NAME
from ui.gates.settings import DEFAULTS as GATES_DEFAULTS
from ui.gates.units import PASSAGE
from ui.memory.defaults import GRADIENT_MODELS, GRADIENT_STEPS, REACH_LAG, REACH_MODELS, RETENTION_MODELS, TEXT
from ui.sample.views import DEFAULTS as SAMPLE_DEFAULTS
from ui.sample.views import strategy_config
from ui.shared.cached_calls import (
    cached_generation_html,
    cached_gradient,
    cached_passage_unit,
    cached_reach,
    cached_reading,
    cached_retention,
    cached_unit_correlations,
    checkpoint_key,
)
from ui.shared.sessions import start_server_process, start_until_the_end, to_the_server_log, train_in_process

log = to_the_server_log(logging.getLogger(__name__))  # the teacher reads when the server is prepared


class _NotFromTheWarmUp(logging.Filter):
    """Streamlit warns of a missing script context each time a cached call made outside a page would
    show its spinner: expected here, and not news for the teacher who reads the server's log."""

    def filter(self, record):
        return record.threadName != THREAD_NAME


logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_NotFromTheWarmUp())


def prepare_server():
    """Everything a server does for its first visitors: the server process set up
    (ui.shared.sessions.start_server_process), every page's code imported (PyTorch, pandas and plotly with
    it: 3-4 s), then the warm-up, each part noted in PREPARING as it starts and ends. Run it in a thread named
    THREAD_NAME (ui.app.preparing.start_preparing), for its log filter."""
    start = time.perf_counter()
    with PREPARING.part(SERVER):
        start_server_process()
    log.info("preparing for the first visitors: until it is done, a page's address says how far it has got")
    with PREPARING.part(PAGES_CODE):
        for module in pkgutil.walk_packages(ui.__path__, "ui."):
            importlib.import_module(module.name)
    warm_up()
    log.info(
        "prepared for the first visitors (every page's code imported, first charts computed) in %.1f s",
        time.perf_counter() - start,
    )


@st.cache_resource
def start_warm_up():
    """Once per server process, after a first page was drawn (at a session's second heartbeat): the
    warm-up imports PyTorch's compiler stack (about 2 CPU-seconds, the optimiser pulls it in), which run
    beside the first visit's own imports slowed that page by as much, through the interpreter's lock."""
    start_until_the_end(warm_up, THREAD_NAME)


@functools.cache  # once per process: prepare_server's and a session's heartbeat's both call it
def warm_up():
    """The whole warm-up; run it in a thread named THREAD_NAME. A server that begins to end
    (lab.server.shutdown) stops it after the part it is computing. The training process warms up beside it,
    not before it: the server opens without waiting for work at the lowest priority, which a busy host starves
    (a server still preparing after 400 s, issue 50)."""
    start_until_the_end(_train_two_steps, f"{THREAD_NAME}-training")
    for page, part, page_defaults in (
        ("Memory", MEMORY, memory_page_defaults),
        ("Sample", SAMPLE, sample_page_defaults),
        ("Gates", GATES, gates_page_defaults),
    ):
        if ENDING.is_set():
            return
        try:
            with PREPARING.part(part):
                page_defaults()
        except Exception:  # a missing or unreadable bundled file: the page says so to its visitor
            log.exception("warming up the %s page's defaults failed; the page computes them when visited", page)


def _train_two_steps():
    """Two training steps where the runs train: that starts the training process, if they train in one
    (its imports take a few seconds), and lets PyTorch set up training there."""
    if train_in_process():
        try:
            run_in_process(train_two_tiny_steps, {}, on_event=lambda event: None, stopped=ENDING.is_set)
        except WorkerError:  # the log has its one account already: how the process ended, or the run's traceback
            return
    else:
        train_two_tiny_steps()


def bundled_keys():
    """{name: checkpoint_key} of the bundled models (their latest versions)."""
    return {info.name: checkpoint_key(info) for info in list_checkpoints(include_versions=False)}


def memory_page_defaults():
    """The cached calls the Memory page makes before a student changes anything, with its arguments."""
    keys = bundled_keys()
    for name in REACH_MODELS:
        if name in keys:
            cached_reach(*keys[name], TEXT, REACH_LAG)
    for name in RETENTION_MODELS:
        if name in keys and not ENDING.is_set():  # (each call: seconds the server's end would wait for)
            cached_retention(*keys[name], TEXT)
    for name in GRADIENT_MODELS:
        if name in keys and not ENDING.is_set():
            cached_gradient(*keys[name], TEXT[: GRADIENT_STEPS + 1])
            cached_gradient(*keys[name], TEXT[: GRADIENT_STEPS + 1], fresh_seed=0)


def sample_page_defaults():
    """The Sample page's samples before a student changes anything: each strategy's column, and the
    stateless sample beside its stateful twin, as the page draws them; and its typed text, read."""
    settings = SAMPLE_DEFAULTS
    key = bundled_keys()[settings["model"]]
    configs = [strategy_config(settings, strategy) for strategy in STRATEGIES]
    configs.append(strategy_config(settings, settings["stateless"], stateful=False))
    for config in configs:
        if not ENDING.is_set():  # (each call: seconds the server's end would wait for)
            cached_generation_html(*key, settings["prompt"], config)
    if not ENDING.is_set():
        cached_reading(*key, settings["typed"])


def gates_page_defaults():
    """The Gates page's traces before a student changes anything: its example text (with the units that
    track its features) and the longer passage, from which each unit shown is then a slice."""
    key = bundled_keys()[GATES_DEFAULTS["model"]]
    cached_unit_correlations(*key, GATES_DEFAULTS["text"])
    if not ENDING.is_set():  # (each call: seconds the server's end would wait for)
        cached_passage_unit(*key, *PASSAGE, 0, "h", 0)
