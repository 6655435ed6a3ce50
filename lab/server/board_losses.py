"""The class board's losses: written from each live run's events into the board's store as they come
(`BoardRecorder`), read back as one `Curve` per run, and compared at equal time (`leaderboard`): on a shared
server a run's loss after 60 s is what a student can hold against another's after 60 s, whatever their steps.

A run's steps are stored thinned (`PointMaker`): each point is the mean loss of the steps of one stretch of
its training, at least MIN_POINT_SECONDS long and at most about POINT_FRACTION of the time trained by then,
so a run of an hour keeps about 600 points, not 90,000, and the leaderboard's window (the last tenth of the
time compared at, at least a second) still spans four points or more.

    recorder = BoardRecorder(store)       # one per store: a thread of its own while it follows any run
    recorder.follow(run_id, job)          # its losses into the store until it ends; then the job is let go
    board, curves = store.snapshot()      # lab.server.board: the runs shown, each with its Curve
    leaderboard(curves, at_seconds=60.0)  # run ids, lowest loss first
"""

import bisect
import logging
import math
import threading
import time

import numpy as np

from lab.server import shutdown

log = logging.getLogger(__name__)
WINDOW_FRACTION, MIN_WINDOW = 0.1, 1.0  # a loss at t: the mean over the last tenth of t (at least a second)
POINT_FRACTION, MIN_POINT_SECONDS = 0.01, 0.25  # a stored point's stretch of training (see above)
RECORD_SECONDS = 1.0  # how often the live runs' new points are written: well within a board's redraw
ENDED = ("finished", "stopped", "failed")  # a job's final statuses (lab.server.jobs.BackgroundJob)


class Curve:
    """One run's training loss in nats per character against its elapsed seconds: each point the mean loss
    of `steps` steps, the last of them at `elapsed`."""

    def __init__(self, elapsed=(), nats=(), steps=None):
        self.elapsed, self.nats = list(elapsed), list(nats)
        self.steps = list(steps) if steps is not None else [1] * len(self.elapsed)

    def reached(self):
        """The seconds it has trained (0 before its first step)."""
        return self.elapsed[-1] if self.elapsed else 0.0

    def loss_at(self, seconds):
        """Its loss at `seconds` of training: the mean over the steps of the last tenth of that time (at
        least a second), which the batches' noise does not decide; None before it got there."""
        if not self.elapsed or self.reached() < seconds:
            return None
        start = bisect.bisect_right(self.elapsed, seconds - max(WINDOW_FRACTION * seconds, MIN_WINDOW))
        end = bisect.bisect_right(self.elapsed, seconds)
        start = min(start, max(end - 1, 0))  # a window between two points: the point before it
        steps = self.steps[start:end]
        if not steps:
            return None
        return sum(n * s for n, s in zip(self.nats[start:end], steps)) / sum(steps)

    def final_loss(self):
        return self.loss_at(self.reached())

    def points(self, n=150):
        """At most `n` (seconds, loss) points for a chart: the mean of each of `n` equal stretches of time."""
        if len(self.elapsed) <= n:
            return list(self.elapsed), list(self.nats)
        elapsed, nats, steps = np.asarray(self.elapsed), np.asarray(self.nats), np.asarray(self.steps)
        span = self.reached() or 1.0
        stretch = np.minimum((n * elapsed / span).astype(int), n - 1)
        counts = np.bincount(stretch, weights=steps, minlength=n)
        sums = np.bincount(stretch, weights=nats * steps, minlength=n)
        kept = np.flatnonzero(counts)
        return ((kept + 0.5) * span / n).tolist(), (sums[kept] / counts[kept]).tolist()


def equal_time(curves):
    """The seconds every run has trained (the least any has reached), where all can be compared; None
    before any has a step."""
    reached = [curve.reached() for curve in curves if curve.elapsed]
    return min(reached) if reached else None


def leaderboard(curves, at_seconds):
    """`curves` (run id -> Curve) -> [(run id, loss at `at_seconds` or None)], lowest loss first, the
    runs that have not trained that long last."""
    losses = [(run_id, curve.loss_at(at_seconds)) for run_id, curve in curves.items()]
    return sorted(losses, key=lambda pair: (pair[1] is None, pair[1] if pair[1] is not None else 0.0))


class PointMaker:
    """A live run's events -> the points the board stores, (elapsed, nats per character, steps), each the
    mean of the steps since the point before it, closed once its stretch is long enough."""

    def __init__(self, chars_per_token):
        self.chars_per_token = chars_per_token
        self.cursor = 0  # the job's events read so far
        self._since, self._last, self._sum, self._steps = 0.0, 0.0, 0.0, 0  # the open stretch

    def add(self, events):
        """-> the points these events closed."""
        self.cursor += len(events)
        closed = []
        for event in events:
            if event["type"] != "step" or not math.isfinite(event["train_loss"]):
                continue
            self._last = event["elapsed"]
            self._sum += event["train_loss"] / self.chars_per_token
            self._steps += 1
            if self._last - self._since >= max(MIN_POINT_SECONDS, POINT_FRACTION * self._last):
                closed.append(self._close())
        return closed

    def rest(self):
        """The open stretch's point, however short: the run has ended."""
        return [self._close()] if self._steps else []

    def _close(self):
        point = (self._last, self._sum / self._steps, self._steps)
        self._since, self._sum, self._steps = self._last, 0.0, 0
        return point


class BoardRecorder:
    """Writes each live run's points into the board's store as they come, every RECORD_SECONDS from a thread
    of its own, and lets go of the run's job once it has ended (its last points written) or left the board:
    the board keeps losses, never jobs, which hold their model, their optimizer's moments and their task."""

    def __init__(self, store, every=RECORD_SECONDS):
        self.store, self.every = store, every
        self._live = {}  # run id -> (its job, its PointMaker), while it trains
        self._lock = threading.Lock()  # over _live and _thread
        self._one_pass = threading.Lock()  # a pass at a time: two would read the same events twice
        self._thread = None

    def follow(self, run_id, job):
        """Write the losses of `job` (a lab.server.jobs.TrainingJob, started) to `run_id` until it ends."""
        with self._lock:
            self._live[run_id] = (job, PointMaker(job.task.chars_per_token))
            if self._thread is None:
                stop = threading.Event()
                self._thread = threading.Thread(target=self._loop, args=(stop,), name="class board", daemon=True)
                self._thread.start()
                shutdown.join_at_exit(self._thread, stop.set)

    def following(self):
        """The run ids whose jobs it holds: each one still training."""
        with self._lock:
            return set(self._live)

    def record(self):
        """One pass: every live run's new points into the store in one transaction, and the runs that have
        ended or left the board let go. A failed write loses that pass's points, never a run's job."""
        with self._one_pass:
            with self._lock:
                live = list(self._live.items())
            ended, points = set(), {}
            for run_id, (job, maker) in live:
                if job.status in ENDED:  # read before its events: a job logs its last event before it ends
                    ended.add(run_id)
                points[run_id] = maker.add(job.events(maker.cursor)) + (maker.rest() if run_id in ended else [])
            gone = ended
            try:
                gone = ended | (set(points) - self.store.add_points(points))
            finally:
                with self._lock:
                    for run_id in gone:
                        del self._live[run_id]

    def _loop(self, stop):
        while True:
            ending = stop.wait(self.every)
            if ending:  # the server ends, its runs with it: their last steps first, then their last points
                deadline = time.monotonic() + shutdown.JOIN_SECONDS
                with self._lock:
                    jobs = [job for job, _ in self._live.values()]
                for job in jobs:
                    job.wait(max(0.0, deadline - time.monotonic()))
            try:
                self.record()
            except Exception:  # a full disk, a database locked too long: the runs train on, the next pass writes
                log.exception("the class board could not write its runs' losses")
            with self._lock:
                if ending or not self._live:
                    self._thread = None
                    return
