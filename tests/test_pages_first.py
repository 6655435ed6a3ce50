"""A run steps aside while the server draws a page (lab.server.pages_first): the count of pages drawn, shared with
the training process; a run's wait before its step, capped; every page part counted while it is drawn."""

import collections
import threading
import time
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.server import capacity, pages_first
from lab.server.pages_first import (
    PAUSE_SECONDS,
    STEP_SECONDS,
    StepAside,
    drawing_a_page,
    shared_count,
    waiting_for_runs,
)
from lab.server.workers import run_in_process
from ui.shared import boundary


class FakeClock:
    """A clock that moves only when the run sleeps; the pages end at `pages_end` (None: never)."""

    def __init__(self, count, pages_end=None):
        self.now, self.count, self.pages_end = 0.0, count, pages_end

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        if self.pages_end is not None and self.now >= self.pages_end:
            self.count.value = 0


def stepping(pages_end, count=1):
    shared = types.SimpleNamespace(value=count)
    clock = FakeClock(shared, pages_end)
    return StepAside(shared, clock=clock, sleep=clock.sleep), clock, shared


def test_a_run_steps_at_once_when_no_page_is_drawn():
    step_aside, clock, _ = stepping(None, count=0)
    step_aside()
    assert clock.now == 0.0


@given(st.floats(0.001, PAUSE_SECONDS * 0.9))
def test_a_run_waits_until_the_page_is_drawn(page_seconds):
    step_aside, clock, shared = stepping(page_seconds)
    step_aside()
    assert shared.value == 0
    assert page_seconds <= clock.now < page_seconds + 2 * pages_first.POLL_SECONDS


@given(st.integers(1, 80))
def test_a_run_waits_at_most_the_pause_then_steps_a_while_before_waiting_again(steps):
    step_aside, clock, shared = stepping(None)  # a class drawing pages without a break
    step_aside()
    assert PAUSE_SECONDS <= clock.now < PAUSE_SECONDS + 2 * pages_first.POLL_SECONDS
    waited_until = clock.now
    for _ in range(steps):  # steps of 20 ms each: none waits until STEP_SECONDS have passed, then one waits
        clock.now += 0.02
        before = clock.now
        step_aside()
        if before < waited_until + STEP_SECONDS:
            assert clock.now == before
        else:
            assert clock.now - before >= PAUSE_SECONDS
            waited_until = clock.now
    assert shared.value == 1


def test_every_page_part_is_counted_while_it_is_drawn_even_one_that_fails():
    before = shared_count().value
    with boundary.page_part():
        assert shared_count().value == before + 1
        with boundary.page_part():  # a fragment drawn within a page's body
            assert shared_count().value == before + 2
        raise ValueError("the page failed")
    assert shared_count().value == before


def test_a_run_waiting_steps_once_another_run_of_its_process_has_waited_out_a_pause():
    step_aside, clock, _ = stepping(None)
    real_sleep = clock.sleep

    def the_other_run_waited(seconds):  # a few polls in, another thread's pause ends: it opens a window
        real_sleep(seconds)
        if clock.now >= 0.01 and step_aside.free_until == float("-inf"):
            step_aside.free_until = clock.now + STEP_SECONDS

    step_aside.sleep = the_other_run_waited
    step_aside()
    assert 0.01 <= clock.now < 0.01 + 2 * pages_first.POLL_SECONDS


def test_a_part_within_another_is_awaited_as_that_one_is():
    before = shared_count().value
    with drawing_a_page(awaited=False):
        with drawing_a_page(awaited=True):  # a fragment's first drawing, in a page's redraw of itself
            assert shared_count().value == before
    with drawing_a_page(awaited=True), drawing_a_page(awaited=False):  # a live view drawn as its page opens
        assert shared_count().value == before + 2
    assert shared_count().value == before


def test_a_page_redrawing_itself_is_not_awaited_but_its_next_run_is(monkeypatch):
    class Rerun(Exception):
        pass

    def rerun():
        raise Rerun

    monkeypatch.setattr(boundary.st, "rerun", rerun)
    before = shared_count().value
    with pytest.raises(Rerun):
        boundary.redraw_by_itself()  # a live view whose run ended
    with boundary.page_part():  # the page's next run: its own redraw
        assert shared_count().value == before
    with boundary.page_part():  # the run after it: someone's
        assert shared_count().value == before + 1


def test_a_page_waiting_for_a_runs_first_steps_is_not_drawing_meanwhile():
    before = shared_count().value
    with boundary.page_part(), boundary.page_part():  # a fragment within a page's body: this thread is two deep
        with waiting_for_runs():
            assert shared_count().value == before
        assert shared_count().value == before + 2
    assert shared_count().value == before


def test_a_live_views_timer_redraw_is_not_waited_for_but_a_fragment_someone_changed_is(monkeypatch):
    monkeypatch.setattr(boundary.st, "fragment", lambda body, run_every=None: body)
    before, seen = shared_count().value, []

    def view():
        seen.append(shared_count().value - before)

    boundary.fragment(run_every=2.0)(view)()
    boundary.fragment(view)()
    assert seen == [0, 1] and shared_count().value == before


def test_the_server_counts_pages_drawn_at_once_in_its_threads():
    before, inside, go = shared_count().value, threading.Barrier(8), threading.Event()

    def draw():
        with drawing_a_page():
            inside.wait(10)
            go.wait(10)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for thread in threads:
        thread.start()
    inside_at_once = None
    for _ in range(1000):
        if shared_count().value == before + 8:
            inside_at_once = True
            break
        time.sleep(0.005)
    go.set()
    for thread in threads:
        thread.join(10)
    assert inside_at_once and shared_count().value == before


def test_a_turn_is_taken_only_after_stepping_aside(monkeypatch):
    calls = []
    monkeypatch.setattr(capacity, "step_aside", lambda: calls.append("step aside"))

    class Turns:
        def take(self, stopped, first=False):
            calls.append("take")
            return True

        def give_back(self):
            calls.append("give back")

    taker = capacity.TurnTaker(Turns(), lambda: False)
    assert taker() is False and taker() is False
    assert calls == ["step aside", "take", "give back", "step aside", "take"]


def _see_the_page_then_step(emit, should_stop, entered):
    """In the training process: the server's count as seen there, and how long its next step waited."""
    seen = pages_first.shared_count().value
    entered.set()
    started = time.monotonic()
    should_stop()  # lab.server.capacity.TurnTaker: steps aside, then takes a turn
    return seen, started, time.monotonic()


def test_a_run_in_the_training_process_sees_the_servers_page_and_waits_for_it():
    import multiprocessing

    entered = multiprocessing.Manager().Event()
    result, done = {}, threading.Event()

    def run():
        result["value"] = run_in_process(_see_the_page_then_step, {"entered": entered}, lambda event: None, done.is_set)

    with drawing_a_page():
        thread = threading.Thread(target=run)
        thread.start()
        assert entered.wait(240), "the run never started"
        time.sleep(0.05)
        drawn = time.monotonic()  # the monotonic clock is the machine's: the two processes read the same one
    thread.join(60)
    seen, started, stepped = result["value"]
    assert seen >= 1
    assert stepped >= drawn or stepped - started >= PAUSE_SECONDS  # it waited for the page, or for the pause


def test_the_pages_share_of_the_recent_time_and_the_runs_discount_for_it(monkeypatch):
    clock = types.SimpleNamespace(now=1000.0)
    monkeypatch.setattr(pages_first, "_clock", lambda: clock.now)
    monkeypatch.setattr(pages_first, "_drawn", collections.deque())
    monkeypatch.setattr(pages_first, "_drawing_since", None)
    monkeypatch.setattr(pages_first, "_count", types.SimpleNamespace(value=0))
    for _ in range(3):  # a page drawn for 2 s of every 10
        with drawing_a_page():
            clock.now += 2.0
        clock.now += 8.0
    assert pages_first.drawing_share(30.0) == pytest.approx(0.2)
    with drawing_a_page():  # one being drawn now counts up to now
        clock.now += 6.0
        assert pages_first.drawing_share(30.0) == pytest.approx((2 + 2 + 6) / 30)  # the first span has left
        assert pages_first.aside_share(30.0) == PAUSE_SECONDS / (PAUSE_SECONDS + STEP_SECONDS)  # at most so much
    clock.now += 100.0
    assert pages_first.drawing_share(30.0) == 0.0 and not pages_first._drawn


def test_a_live_views_timer_redraw_waits_for_a_page_someone_waits_for(monkeypatch):
    monkeypatch.setattr(boundary.st, "fragment", lambda body, run_every=None: body)
    drawing, drawn, times = threading.Event(), threading.Event(), {}

    def visit():  # another session's page, opened meanwhile
        with drawing_a_page():
            drawing.set()
            drawn.wait(10)
            time.sleep(0.05)
            times["drawn"] = time.monotonic()

    visitor = threading.Thread(target=visit)
    visitor.start()
    assert drawing.wait(10)
    drawn.set()
    boundary.fragment(run_every=2.0)(lambda: times.setdefault("redrawn", time.monotonic()))()
    visitor.join(10)
    assert times["redrawn"] >= times["drawn"]
    waits = []
    monkeypatch.setattr(pages_first.time, "sleep", waits.append)
    with drawing_a_page():  # a timer's view drawn within its own page: at once
        boundary.fragment(run_every=2.0)(lambda: times.update(within=True))()
    assert times["within"] and waits == []
