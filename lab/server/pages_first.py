"""Pages first: a run steps aside while the server draws a page.

The training process runs at the lowest priority (lab.server.priority), and priority decides who runs, not how
fast: on a 2-core host a run's steps still cost a page drawn at that moment 1.07-1.3x (its cores' shared caches
and memory, or two hyperthreads of one core: BENCHMARKS.md, "A class of 30 on two cores"). So the server counts
the page parts it is drawing (ui.shared.boundary.page_part) in memory its training processes share, and before
each step a run waits while that count is above zero.

Stepping aside leaves a core idle: the server draws a page on one core (its interpreter runs one thread at a time),
and the run had trained on the other. So only what someone waits for counts: a page opened, a setting changed, a
button pressed; not a live chart's timer, nor a page redrawing itself (ui.shared.boundary.redraw_by_itself). A run
waits at most PAUSE_SECONDS at a time, long enough for a page, then steps for at least STEP_SECONDS before it waits
again: a class pressing one button together costs the runs at most a quarter of their pace for as long, never stops
them (a page's forecast of a run counts it: aside_share). A page that waits for a run (its first steps) is not
drawing meanwhile (waiting_for_runs): the run would otherwise wait for the page that waits for it. The server's own
work that nobody waits for, a live view's timer redrawing it, waits for those pages too (after_the_pages): its
interpreter runs one thread at a time.

    with drawing_a_page():       # the server, around a page's script
        with waiting_for_runs():     # around a wait for a run's first steps
            ...
    after_the_pages()            # the server, before a live view's timer redraws it
    step_aside()                 # a run, before each step (lab.server.capacity.TurnTaker)
"""

import collections
import contextlib
import multiprocessing
import threading
import time

PAUSE_SECONDS = 0.15  # the longest a run waits for the pages at once: a page's script takes ~20-150 ms
STEP_SECONDS = 0.45  # then it steps at least this long before waiting again: three quarters of its pace kept
POLL_SECONDS = 0.002  # how often a waiting run looks again
_count, _lock = None, threading.Lock()  # the pages being drawn, in memory shared with the training processes
_drawing = threading.local()  # the page parts this thread (a session's script) is inside: whether each is counted
TIMER_WAIT_SECONDS = 0.3  # the longest a live view's timer redraw waits for a page someone waits for
TIMER_POLL_SECONDS = 0.01
SHARE_SECONDS = 30.0  # drawing_share's window: a class opening its pages, or pressing one button, takes about so long
_drawn = collections.deque()  # (start, end) of the recent spans during which a page was drawn, oldest first
_drawing_since = None  # when the count last rose from zero (None: no page is drawn now)
_clock = time.monotonic


def shared_count():
    """The count of pages being drawn, in shared memory: made on first use in the server, handed to each training
    process as it is started (lab.server.workers), set there by use_count."""
    global _count
    with _lock:
        if _count is None:
            _count = multiprocessing.get_context("spawn").RawValue("i", 0)
        return _count


def use_count(count):
    """In a training process: the server's count of the pages it is drawing."""
    global _count
    _count = count


@contextlib.contextmanager
def drawing_a_page(awaited=True):
    """The server draws a page part meanwhile: runs step aside until it is drawn (or PAUSE_SECONDS), where someone
    waits for it (`awaited`). A part drawn within another is awaited as that one is."""
    parts = _parts()
    counted = parts[-1] if parts else awaited
    parts.append(counted)
    _add(counted)
    try:
        yield
    finally:
        parts.pop()
        _add(-counted)


@contextlib.contextmanager
def waiting_for_runs():
    """This page's thread waits for a run meanwhile: it draws nothing, and the runs do not step aside for it."""
    counted = sum(_parts())
    _add(-counted)
    try:
        yield
    finally:
        _add(counted)


def after_the_pages(max_seconds=TIMER_WAIT_SECONDS):
    """In the server, before a redraw nobody waits for (a live view's timer), outside any page part: wait while a
    page someone waits for is drawn, at most `max_seconds`, so that its script has the server's interpreter to
    itself. Thirty live charts on timers redraw in cohorts, and a visit that met one waited for all of them."""
    if _parts():  # within a page being drawn: that page's own drawing
        return
    deadline = _clock() + max_seconds
    while shared_count().value > 0 and _clock() < deadline:
        time.sleep(TIMER_POLL_SECONDS)


def _parts():
    if not hasattr(_drawing, "parts"):
        _drawing.parts = []
    return _drawing.parts


def _add(pages):
    global _drawing_since
    if not pages:
        return
    count = shared_count()
    with _lock:  # the server's page threads share one count: += is a read and a write
        was = count.value
        count.value += pages
        if was <= 0 < count.value:
            _drawing_since = _clock()
        elif count.value <= 0 < was and _drawing_since is not None:
            _drawn.append((_drawing_since, _clock()))
            _drawing_since = None


def drawing_share(seconds=SHARE_SECONDS):
    """The share of the last `seconds` during which the server drew a page someone waited for."""
    now = _clock()
    with _lock:
        while _drawn and _drawn[0][1] < now - seconds:
            _drawn.popleft()
        spans = [*_drawn, *([(_drawing_since, now)] if _drawing_since is not None else [])]
    return min(1.0, sum(end - max(start, now - seconds) for start, end in spans) / seconds)


def aside_share(seconds=SHARE_SECONDS):
    """The share of their time the runs have lately stepped aside for the pages, at most (a forecast's discount):
    the pages' share of the last `seconds`, up to PAUSE_SECONDS in every PAUSE_SECONDS + STEP_SECONDS."""
    return min(drawing_share(seconds), PAUSE_SECONDS / (PAUSE_SECONDS + STEP_SECONDS))


class StepAside:
    """Before a step: wait while `count.value` > 0, at most `pause_seconds`; after a wait that long, step without
    waiting for `step_seconds`. Shared by the runs of one process (their threads)."""

    def __init__(
        self, count, pause_seconds=PAUSE_SECONDS, step_seconds=STEP_SECONDS, clock=time.monotonic, sleep=time.sleep
    ):
        self.count, self.pause_seconds, self.step_seconds = count, pause_seconds, step_seconds
        self.clock, self.sleep = clock, sleep
        self.free_until = float("-inf")  # no waiting before this time: the run's turn after a long wait

    def __call__(self):
        started = self.clock()
        while self.count.value > 0:
            now = self.clock()
            if now < self.free_until:  # within a turn after a long wait (this run's, or another's of its process)
                return
            if now - started >= self.pause_seconds:
                self.free_until = now + self.step_seconds
                return
            self.sleep(POLL_SECONDS)


_step_aside = None


def step_aside():
    """Wait while the server draws a page (StepAside over this process's shared count)."""
    global _step_aside
    if _step_aside is None or _step_aside.count is not _count:
        _step_aside = StepAside(shared_count())
    _step_aside()
