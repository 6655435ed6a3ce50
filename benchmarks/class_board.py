"""The Class page's redraw with a class's runs on the board: how much server time one redraw computes.

    python -m benchmarks.class_board [--students 30] [--steps 3000] [--repeats 5]

Posts `--students` runs to a board in a temporary user directory, each a job whose event log holds
`--steps` training steps (3,000: two minutes at 25 steps a second), and times what the Class page's
fragment computes every BOARD_REFRESH_SECONDS: the runs read from their events (ui.class_board.board.shown_runs),
the leaderboard table, the chart, the leaderboard's HTML and what-made-the-difference figure, and the
figures' JSON as st.plotly_chart sends it. The first redraw reads every event; each later one reads the
50 steps per run that came since. No browser and no Streamlit script run: what the board's own code costs.
"""

import argparse
import statistics
import tempfile
import time
from types import SimpleNamespace

from lab.server.board import BoardStore, Curve, owner_id
from ui.class_board import board as class_board
from ui.shared.board import board_runs

CELLS = ("rnn", "gru_torch", "lstm", "scan")


class FakeJob:
    """A run's event log as a TrainingJob keeps it, growing by `more(n)` steps."""

    def __init__(self, seed):
        self.task = SimpleNamespace(chars_per_token=1.0)
        self._events, self.seed = [], seed

    def more(self, n):
        start = len(self._events)
        for step in range(start, start + n):
            loss = 4.2 * (1 + step) ** (-0.05 - 0.01 * (self.seed % 5))
            self._events.append({"type": "step", "step": step, "elapsed": step / 25, "train_loss": loss})

    def events(self, since=0):
        return self._events[since:]


def redraw(store):
    """One redraw's computation -> its seconds."""
    start = time.perf_counter()
    rows, _ = class_board.shown_runs(store.read())
    drawn = class_board.redraw(rows, 0)  # compared where every run has reached, as the page's default
    drawn.chart.to_json(), drawn.difference.to_json(), drawn.table.to_csv(index=False)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    store = BoardStore(tempfile.mkdtemp(prefix="rnnlab-board-"))
    registry = board_runs()
    jobs = []
    for n in range(args.students):
        owner = owner_id(f"student-{n}")
        store.set_student(owner, f"Student {n}", on=True)
        cell = CELLS[n % len(CELLS)]
        facts = {"run": f"run-{n}", "title": f"{cell} · 64 units", "cell": cell, "hidden": 32 * (1 + n % 8)}
        run_id = store.post(owner, {**facts, "layers": 1, "lr": 1e-3 * (1 + n % 5), "params": 10_000 * (1 + n)})
        job = FakeJob(n)
        job.more(args.steps)
        jobs.append(job)
        registry["jobs"][run_id], registry["curves"][run_id] = job, Curve()
    first = redraw(store)
    later = []
    for _ in range(args.repeats):
        for job in jobs:
            job.more(50)  # two seconds at 25 steps a second
        later.append(redraw(store))
    print(f"| students | steps each | first redraw | later redraws (median of {args.repeats}) |")
    print("|---|---|---|---|")
    print(f"| {args.students} | {args.steps:,} | {first:.2f} s | {statistics.median(later):.3f} s |")


if __name__ == "__main__":
    main()
