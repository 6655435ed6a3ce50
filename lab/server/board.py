"""The class board: the runs students chose to show their class, on one chart a teacher projects.

A student turns "show on the class board" on with a display name they pick; each run they start while
it is on is posted, and only those: a run started with it off never appears, and turning it off takes
their runs off the board. The teacher may hide a run, and opens the board (read-only) to the class.
These choices live in one small file under the user directory (`BoardStore`), so that every session of
the server, and a server restarted, sees the same board; writes are atomic, under a file lock.

The losses are not stored: each run's `Curve` reads them from its job's events, as the Train page does.
Runs are compared at equal time (`leaderboard`): on a shared server a run's loss after 60 s is what a
student can hold against another's after 60 s, whatever their steps.

    store = BoardStore(user_dir)
    store.set_student(owner_id(key), "Ada", on=True)     # LabError for a name that is not one
    run_id = store.post(owner_id(key), run_facts(job, title))  # None unless that student's switch is on
    curve = Curve(); curve.extend(job.events(curve.cursor), job.task.chars_per_token)
    leaderboard({run_id: curve}, at_seconds=60.0)       # run ids, lowest loss first
"""

import bisect
import hashlib
import math
import os
import re
import secrets
import time
import unicodedata
from pathlib import Path

import numpy as np
import pydantic
from filelock import FileLock

from lab.errors import LabError

BOARD_FILE, BOARD_LOCK = ".class-board.json", ".class-board.lock"  # in the user directory, beside the spaces
MAX_NAME = 24  # characters of a display name: a leaderboard's row on a projector
# a letter or digit first (never "=", "+", "-" or "@", which a spreadsheet opening the CSV would run as a
# formula), then letters, digits, spaces, dots, hyphens, apostrophes and underscores: no markup of any kind
DISPLAY_NAME = re.compile(rf"[^\W_][\w .'-]{{0,{MAX_NAME - 1}}}")
WINDOW_FRACTION, MIN_WINDOW = 0.1, 1.0  # a loss at t: the mean over the last tenth of t (at least a second)


class Student(pydantic.BaseModel):
    name: str
    on: bool  # the switch: runs started while it is on are posted


class Run(pydantic.BaseModel):
    owner: str  # owner_id of the student who started it
    run: str  # the run's own name (its checkpoint's)
    title: str  # its model in words: "GRU · 256 units", as the pages name it
    cell: str  # lab.nets.cells' key
    hidden: int  # the hidden size (a scan model's width)
    layers: int
    lr: float
    params: int
    posted: float  # time.time() when it was started
    hidden_by_teacher: bool = False


class Board(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    open: bool = False  # the class may see it (read-only)
    students: dict[str, Student] = {}
    runs: dict[str, Run] = {}


def owner_id(space_key):
    """What the board's file calls a student: a digest of their space key, never the key itself, which
    opens their folder."""
    return hashlib.sha256(b"class board\n" + space_key.encode()).hexdigest()[:24]


def check_display_name(text):
    """A display name as typed -> the name shown (NFC, spaces collapsed), or LabError in one line."""
    name = " ".join(unicodedata.normalize("NFC", str(text)).split())
    if DISPLAY_NAME.fullmatch(name) is None:
        shown = repr(name if len(name) <= 30 else name[:30] + "...")
        raise LabError(
            f"name on the board: {shown} is not 1 to {MAX_NAME} letters, digits, spaces, dots, hyphens or "
            "apostrophes, starting with a letter or digit"
        )
    return name


def run_facts(job, title):
    """What the board shows of a lab.server.jobs.TrainingJob: its model in words (`title`, as the pages
    name it), its cell, size and learning rate."""
    from lab.nets.cost import parameter_count

    model, config = job.model.config, job.config
    return {
        "run": job.name,
        "title": title,
        "cell": model.cell,
        "hidden": getattr(model, "hidden_size", model.embed_dim),  # the scan models: their width
        "layers": getattr(model, "num_layers", 1),
        "lr": config.lr,
        "params": parameter_count(model),
    }


class BoardStore:
    """The board's choices in `root`/.class-board.json, shared by every session and process."""

    def __init__(self, root):
        self.root = Path(root)
        self.path = self.root / BOARD_FILE

    def read(self):
        """The board as it is now (a Board; empty before anything was chosen)."""
        try:
            return Board.model_validate_json(self.path.read_bytes())
        except FileNotFoundError:
            return Board()

    def _change(self, change):
        """Read, `change(board)` in place, write whole (a temporary file renamed over the old), all under
        the lock: two sessions' changes at once both land. -> what `change` returned."""
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(self.root / BOARD_LOCK):
            board = self.read()
            result = change(board)
            tmp = self.root / f"{BOARD_FILE}.{secrets.token_hex(6)}.tmp"
            tmp.write_text(board.model_dump_json(), encoding="utf-8")
            os.replace(tmp, self.path)
        return result

    def student(self, owner):
        """A student's (name, on): ("", False) before they chose."""
        student = self.read().students.get(owner)
        return (student.name, student.on) if student else ("", False)

    def set_student(self, owner, name, on):
        """Turn a student's switch on (with a display name, checked: LabError) or off, which takes their
        runs off the board. -> the name kept."""
        name = check_display_name(name) if on else str(name)[: MAX_NAME * 2]

        def change(board):
            board.students[owner] = Student(name=name, on=on)
            if not on:
                board.runs = {key: run for key, run in board.runs.items() if run.owner != owner}

        self._change(change)
        return name

    def post(self, owner, facts):
        """Post a run just started (`run_facts`) if its student's switch is on -> its run id, else None."""

        def change(board):
            student = board.students.get(owner)
            if student is None or not student.on:
                return None
            run_id = secrets.token_hex(8)
            board.runs[run_id] = Run(owner=owner, posted=time.time(), **facts)
            return run_id

        return self._change(change)

    def hide(self, run_id, hidden=True):
        """The teacher hides a run from the board (or shows it again); a run no longer there is ignored."""

        def change(board):
            if run_id in board.runs:
                board.runs[run_id].hidden_by_teacher = hidden

        self._change(change)

    def set_open(self, is_open):
        """Open the board to the class (read-only) or close it."""

        def change(board):
            board.open = is_open

        self._change(change)


class Curve:
    """One run's training loss in nats per character against its elapsed seconds, read from its job's
    events as they come (`extend(job.events(curve.cursor), chars_per_token)`)."""

    def __init__(self):
        self.cursor = 0  # events read so far
        self.elapsed, self.nats = [], []

    def extend(self, events, chars_per_token):
        self.cursor += len(events)
        for event in events:
            if event["type"] == "step" and math.isfinite(event["train_loss"]):
                self.elapsed.append(event["elapsed"])
                self.nats.append(event["train_loss"] / chars_per_token)
        return self

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
        window = self.nats[start:end] or self.nats[max(end - 1, 0) : end]
        return sum(window) / len(window) if window else None

    def final_loss(self):
        return self.loss_at(self.reached())

    def points(self, n=150):
        """At most `n` (seconds, loss) points for a chart: the mean of each of `n` equal stretches of time."""
        if len(self.elapsed) <= n:
            return list(self.elapsed), list(self.nats)
        elapsed, nats = np.asarray(self.elapsed), np.asarray(self.nats)
        span = self.reached() or 1.0
        stretch = np.minimum((n * elapsed / span).astype(int), n - 1)
        counts = np.bincount(stretch, minlength=n)
        sums = np.bincount(stretch, weights=nats, minlength=n)
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
