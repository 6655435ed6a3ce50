"""The class board keeps curves, not jobs, and keeps them on disk (issue 50, item 5): a run's losses are in
the store while it trains (lab.server.board_losses.BoardRecorder), a new store on the same folder (a
restarted server) shows the same runs and points, a student's posts are bounded, the board lets go of a
job once its run ends, and one redraw serves every Class page open (ui.class_board.board.SharedRedraw). And
the arithmetic of the leaderboard at equal time, on the thinned points the store keeps."""

import contextlib
import gc
import json
import math
import sqlite3
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import ui.class_board.board as class_board
from lab.server.board import BOARD_FILE, JSON_BOARD_FILE, MAX_RUNS_PER_STUDENT, BoardStore, owner_id
from lab.server.board_losses import BoardRecorder, Curve, PointMaker, equal_time, leaderboard
from ui.class_board.board import FRESH_SECONDS, SharedRedraw

FACTS = {
    "run": "r",
    "title": "GRU · 16 units",
    "cell": "gru_torch",
    "hidden": 16,
    "layers": 1,
    "lr": 3e-3,
    "params": 900,
}
ROOT = Path(__file__).resolve().parent.parent
NEVER = 3600.0  # a recorder's interval where the test makes each pass itself


class FakeJob:
    """A run as the board sees a TrainingJob: its status, its event log, its task; and a model it must not keep."""

    def __init__(self):
        self.status, self.task, self.model = "running", SimpleNamespace(chars_per_token=1.0), torch.nn.Linear(64, 64)
        self._events = []

    def train(self, seconds, loss=2.0, per_second=20):
        """More steps, `per_second` a second, up to `seconds` of training."""
        start = self._events[-1]["elapsed"] if self._events else 0.0
        n = round((seconds - start) * per_second)
        self._events += [
            {"type": "step", "elapsed": start + (i + 1) / per_second, "train_loss": loss} for i in range(n)
        ]

    def events(self, since=0, settled=False):
        return self._events[since:]

    def wait(self, timeout=None):
        return self.status


def steps(pairs):
    """(elapsed, loss per token) pairs -> training step events."""
    return [{"type": "step", "step": i, "elapsed": t, "train_loss": loss} for i, (t, loss) in enumerate(pairs)]


def curve(pairs):
    """(elapsed, nats per character) pairs, one step each -> their Curve."""
    return Curve(*zip(*pairs)) if pairs else Curve()


def posted(store, who="Ada", n=1):
    owner = owner_id(f"{who}-key")
    store.set_student(owner, who, on=True)
    return [store.post(owner, {**FACTS, "run": f"{who}-{i}"}) for i in range(n)]


def curves_of(store):
    return {run_id: (c.elapsed, c.nats, c.steps) for run_id, c in store.snapshot()[1].items()}


def test_a_runs_points_are_in_the_store_while_it_trains_and_all_of_them_once_it_ends(tmp_path):
    store = BoardStore(tmp_path)
    recorder, job, (run_id,) = BoardRecorder(store, every=NEVER), FakeJob(), posted(store)
    recorder.follow(run_id, job)
    job.train(10.0)
    recorder.record()
    (live,) = BoardStore(tmp_path).snapshot()[1].values()  # another session, or another server process
    assert job.status == "running" and 0 < len(live.elapsed) < 200 and live.reached() > 9.0
    job.train(12.0)
    job.status = "finished"
    recorder.record()
    (ended,) = BoardStore(tmp_path).snapshot()[1].values()
    assert ended.reached() == pytest.approx(12.0) and sum(ended.steps) == 240  # every step, thinned into points
    assert ended.final_loss() == pytest.approx(2.0)


def test_a_restarted_server_shows_the_same_board_curves_included(tmp_path):
    store = BoardStore(tmp_path)
    recorder, runs = BoardRecorder(store, every=NEVER), posted(store, n=3) + posted(store, "Bob")
    for n, run_id in enumerate(runs):
        job = FakeJob()
        job.train(5.0 + n, loss=3.0 - n)
        job.status = "finished"
        recorder.follow(run_id, job)
    recorder.record()
    store.hide(runs[1])
    store.set_open(True)
    before, curves = store.read(), curves_of(store)
    again = BoardStore(tmp_path)  # the server restarted: nothing in memory, one folder
    assert again.read() == before and curves_of(again) == curves and set(curves) == set(runs) - {runs[1]}
    assert all(len(elapsed) > 10 for elapsed, _, _ in curves.values())


def test_another_server_process_on_the_folder_writes_to_the_same_board(tmp_path):
    store = BoardStore(tmp_path)
    (run_id,) = posted(store)
    assert store.snapshot()[1][run_id].elapsed == []  # this process has its connection open, mid-run
    other = (
        "import sys; from lab.server.board import BoardStore; "
        "BoardStore(sys.argv[1]).add_points({sys.argv[2]: [(1.0, 2.0, 25), (2.0, 1.5, 25)]})"
    )
    subprocess.run([sys.executable, "-c", other, str(tmp_path), run_id], check=True, timeout=120, cwd=ROOT)
    assert store.snapshot()[1][run_id].elapsed == [1.0, 2.0]


def test_a_student_keeps_only_their_most_recent_runs_on_the_board(tmp_path):
    store = BoardStore(tmp_path)
    recorder = BoardRecorder(store, every=NEVER)
    bobs = posted(store, "Bob", n=2)
    adas = posted(store, "Ada", n=MAX_RUNS_PER_STUDENT + 3)
    for run_id in bobs + adas:
        job = FakeJob()
        job.train(1.0)
        recorder.follow(run_id, job)
    recorder.record()
    runs = store.read().runs
    assert list(runs) == bobs + adas[3:]  # Ada's three oldest made room; Bob's stay
    with contextlib.closing(sqlite3.connect(tmp_path / BOARD_FILE)) as db:  # and their losses went with them
        with_points = db.execute("SELECT DISTINCT id FROM points JOIN runs ON run_key = key").fetchall()
        assert {run_id for (run_id,) in with_points} == set(runs) and db.execute(
            "SELECT count(*) FROM runs"
        ).fetchone() == (len(runs),)


def test_the_board_lets_go_of_a_job_once_its_run_ends_or_leaves_the_board(tmp_path):
    store = BoardStore(tmp_path)
    recorder, (ended_id, taken_off_id) = BoardRecorder(store, every=NEVER), posted(store, n=2)
    ended, taken_off = FakeJob(), FakeJob()
    models = [weakref.ref(ended.model), weakref.ref(taken_off.model)]
    recorder.follow(ended_id, ended)
    recorder.follow(taken_off_id, taken_off)
    ended.train(2.0)
    recorder.record()
    assert recorder.following() == {ended_id, taken_off_id}  # both train: both read live
    ended.status = "finished"
    store.hide(taken_off_id)  # hidden: still on the board, still recorded
    recorder.record()
    assert recorder.following() == {taken_off_id}
    store.set_student(owner_id("Ada-key"), "Ada", on=False)  # the student took theirs off
    recorder.record()
    assert recorder.following() == set()
    del ended, taken_off  # what the sessions held
    gc.collect()
    assert [model() for model in models] == [None, None]


def test_the_recorders_thread_writes_as_a_run_trains_and_ends_with_it(tmp_path):
    store = BoardStore(tmp_path)
    recorder, job, (run_id,) = BoardRecorder(store, every=0.01), FakeJob(), posted(store)
    job.train(3.0)
    recorder.follow(run_id, job)
    for _ in range(1000):  # the thread's passes, however slow the machine
        if store.snapshot()[1][run_id].elapsed:
            break
        threading.Event().wait(0.01)
    assert store.snapshot()[1][run_id].reached() > 2.0 and recorder.following() == {run_id}
    job.status = "stopped"
    for _ in range(1000):
        if not recorder.following():
            break
        threading.Event().wait(0.01)
    assert recorder.following() == set() and store.snapshot()[1][run_id].reached() == pytest.approx(3.0)


def test_one_redraw_serves_every_page_until_the_board_changes(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(class_board, "redraw", lambda rows, at: made.append((len(rows), at)) or f"redraw {len(made)}")
    store, now = BoardStore(tmp_path), [0.0]
    shared = SharedRedraw(store, clock=lambda: now[0])
    assert shared.get(0) is None and made == []  # no run on the board: nothing to draw
    (run_id,) = posted(store)
    pages = [threading.Thread(target=shared.get, args=(0,)) for _ in range(30)]  # thirty Class pages refresh
    for page in pages:
        page.start()
    for page in pages:
        page.join()
    assert made == [(1, 0)]
    store.add_points({run_id: [(1.0, 2.0, 20)]})  # losses came, within the redraw's freshness: the same for all
    assert {shared.get(0) for _ in range(30)} == {"redraw 1"} and len(made) == 1
    now[0] += FRESH_SECONDS
    assert {shared.get(0) for _ in range(30)} == {"redraw 2"}  # older than that: redrawn once, for all
    assert {shared.get(0) for _ in range(30)} == {"redraw 2"}  # nothing came since: kept, however old
    now[0] += 10 * FRESH_SECONDS
    assert shared.get(0) == "redraw 2"
    store.set_open(True)  # a choice: redrawn at once
    assert shared.get(0) == "redraw 3" and shared.get(60) == "redraw 4" and shared.get(60) == "redraw 4"
    assert made == [(1, 0)] * 3 + [(1, 60)]


def test_the_choices_the_board_kept_in_its_json_file_are_read_in_once(tmp_path):
    ada = owner_id("Ada-key")
    old = {
        "open": True,
        "students": {ada: {"name": "Ada", "on": True}},
        "runs": {"abc": {**FACTS, "owner": ada, "posted": 1.0, "hidden_by_teacher": True}},
    }
    (tmp_path / JSON_BOARD_FILE).write_text(json.dumps(old), encoding="utf-8")
    board = BoardStore(tmp_path).read()
    assert board.open and board.students[ada].on and board.runs["abc"].hidden_by_teacher
    assert not (tmp_path / JSON_BOARD_FILE).exists() and BoardStore(tmp_path).read() == board


# ---------------------------------------------------------------------------
# the leaderboard at equal time


def test_a_runs_points_are_its_steps_nats_per_character_read_as_they_come_and_thinned():
    maker = PointMaker(chars_per_token=2.0)
    assert maker.add(steps([(0.1, 4.0), (0.2, 2.0)])) == []  # 0.2 s: its stretch is not long enough yet
    events = steps([(0.1, 4.0), (0.2, 2.0), (0.3, 6.0), (0.4, math.nan), (1.0, 1.0)])
    events.append({"type": "eval", "val_loss": 9.0})
    assert maker.add(events[maker.cursor :]) == [(0.3, 2.0, 3), (1.0, 0.5, 1)]  # the NaN left out
    assert maker.cursor == 6 and maker.rest() == []
    maker.add(steps([(1.1, 3.0)]))
    assert maker.rest() == [(1.1, 1.5, 1)]  # the run ended: its last stretch, however short


def test_a_curve_of_points_weighs_each_by_its_steps():
    thinned = Curve([1.5, 2.0], [3.0, 1.0], steps=[1, 3])  # one step, then three averaging 1.0
    assert thinned.final_loss() == pytest.approx(1.5) and thinned.points(n=1)[1] == [pytest.approx(1.5)]


def test_runs_are_ranked_by_their_loss_at_the_same_time_not_at_their_ends():
    # fast learns quickly but stops at 10 s; slow trains for 100 s and ends lower; late has not reached 10 s
    fast = curve([(t, 3.0 - 0.2 * t) for t in range(1, 11)])
    slow = curve([(t, 3.0 - 0.025 * t) for t in range(1, 101)])
    late = curve([(1, 3.0), (2, 2.9)])
    curves = {"fast": fast, "slow": slow, "late": late}
    assert slow.final_loss() < fast.final_loss()
    ranked = leaderboard(curves, at_seconds=10)
    assert [run for run, _ in ranked] == ["fast", "slow", "late"] and ranked[2][1] is None
    assert ranked[0][1] == pytest.approx(1.0) and ranked[1][1] == pytest.approx(3.0 - 0.25)  # its step at 10 s
    assert slow.final_loss() == pytest.approx(3.0 - 0.025 * 95.5)  # the mean of its last tenth, 91 to 100 s
    assert equal_time(curves.values()) == 2 and equal_time([Curve()]) is None


def test_a_charts_points_are_means_over_equal_stretches_of_time():
    x, y = curve([(t / 100, 1.0 + (t % 2)) for t in range(1, 1001)]).points(n=50)
    assert len(x) == 50 and all(abs(v - 1.5) < 0.1 for v in y) and x == sorted(x)
