"""The Class page's redraw with a class's runs on the board: how much server time one redraw computes, and
what each further page open on the board adds while they share it.

    python -m benchmarks.class_board [--students 30] [--runs-each 1] [--steps 3000] [--repeats 5]

Posts `--runs-each` runs for each of `--students` students to a board in a temporary user directory, each
with the points of `--steps` training steps (3,000: two minutes at 25 steps a second) written as the
board's recorder writes them (lab.server.board_losses.PointMaker), and times what the Class page's fragment
computes every BOARD_REFRESH_SECONDS when the redraw is made (ui.class_board.board.SharedRedraw): the
board and its losses read from the store, the leaderboard table, the chart, the leaderboard's HTML and the
what-made-the-difference figure, and the figures' JSON as st.plotly_chart sends it. Each later redraw
comes after 50 more steps per run. A page that finds the redraw made costs the store's marks and the
figures' JSON only ("each further page"). No browser and no Streamlit script run: the board's own code.
"""

import argparse
import statistics
import tempfile
import time

import plotly.io

from lab.server.board import BoardStore, owner_id
from lab.server.board_losses import PointMaker
from ui.class_board.board import FRESH_SECONDS, SharedRedraw

CELLS = ("rnn", "gru_torch", "lstm", "scan")
STEPS_PER_SECOND = 25


class Clock:
    """The shared redraw's clock, moved on by hand: every redraw timed here is one that is made."""

    now = 0.0

    def __call__(self):
        return self.now


def steps(seed, start, n):
    """`n` training steps from step `start`, a loss curve of its own per `seed`."""
    return [
        {
            "type": "step",
            "elapsed": step / STEPS_PER_SECOND,
            "train_loss": 4.2 * (1 + step) ** (-0.05 - 0.01 * (seed % 5)),
        }
        for step in range(start, start + n)
    ]


def page(shared, at_seconds=0):
    """One page's share of a redraw -> its seconds: the redraw (made or found) and its figures sent."""
    start = time.perf_counter()
    drawn = shared.get(at_seconds)
    for figure in (drawn.chart, drawn.difference):
        plotly.io.to_json(figure.to_dict(), validate=False)  # what st.plotly_chart does: a copy, then its JSON
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--runs-each", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    store, clock = BoardStore(tempfile.mkdtemp(prefix="rnnlab-board-")), Clock()
    shared = SharedRedraw(store, clock=clock)
    makers = {}
    for n in range(args.students):
        owner = owner_id(f"student-{n}")
        store.set_student(owner, f"Student {n}", on=True)
        for k in range(args.runs_each):
            seed, cell = n + k, CELLS[(n + k) % len(CELLS)]
            facts = {"run": f"run-{n}-{k}", "title": f"{cell} · 64 units", "cell": cell, "hidden": 32 * (1 + seed % 8)}
            run_id = store.post(owner, {**facts, "layers": 1, "lr": 1e-3 * (1 + seed % 5), "params": 10_000 * (1 + n)})
            makers[run_id] = (seed, PointMaker(chars_per_token=1.0))
    store.add_points({run_id: maker.add(steps(seed, 0, args.steps)) for run_id, (seed, maker) in makers.items()})
    first = page(shared)
    made, further = [], []
    for _ in range(args.repeats):
        points = {run_id: maker.add(steps(seed, maker.cursor, 50)) for run_id, (seed, maker) in makers.items()}
        store.add_points(points)  # two seconds at 25 steps a second
        clock.now += FRESH_SECONDS
        made.append(page(shared))
        further.append(page(shared))
    runs, stored = len(makers), sum(len(curve.elapsed) for curve in store.snapshot()[1].values())
    later = f"later redraws (median of {args.repeats})"
    print(f"| runs | steps each | points stored | first redraw | {later} | each further page |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {runs} | {args.steps:,} | {stored:,} | {first:.2f} s | {statistics.median(made):.3f} s "
        f"| {statistics.median(further):.3f} s |"
    )


if __name__ == "__main__":
    main()
