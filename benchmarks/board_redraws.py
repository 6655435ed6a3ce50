"""The Class page's redraws, timed inside the app server (for benchmarks.class_of_30).

benchmarks.class_of_30 starts the server with a folder on its PYTHONPATH whose sitecustomize.py imports
this module, and names a file in CLASS_BOARD_REDRAWS. As the server imports ui.class_board.board, `live_board`
(what the Class page's fragment reruns every BOARD_REFRESH_SECONDS) is wrapped, and each redraw that
ends appends one JSON line to that file: the seconds of CPU its script thread used (time.thread_time: this
redraw's own, from the board's store to the figures serialised for the browser, whatever the server's other
threads and its training process do meanwhile), its wall seconds (those plus its waits for the cores and the
interpreter), the runs the board shows and their loss points (read from its store after the timing). A page
that finds the redraw another page made (ui.class_board.board.SharedRedraw) records its own share only. Only
the websocket's sending of the message, on the server's event loop, is not counted. Where the variable is
not set (every other Python process that finds this folder on its path) nothing is wrapped.
"""

import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time

LOG_VARIABLE = "CLASS_BOARD_REDRAWS"
TARGET = "ui.class_board.board"


def timed(live_board, store, log):
    @functools.wraps(live_board)
    def redraw(*args, **kwargs):
        cpu, wall = time.thread_time(), time.perf_counter()
        live_board(*args, **kwargs)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        curves = store().snapshot()[1]
        points = sum(len(curve.elapsed) for curve in curves.values())
        record = {"at": time.time(), "cpu": cpu, "wall": wall, "runs": len(curves), "points": points}
        with open(log, "a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")

    return redraw


class WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds ui.class_board.board as Python would, and wraps its `live_board` once the module has run."""

    def __init__(self, log):
        self.log = log

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)  # once, and not for the search below
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.live_board = timed(module.live_board, module.store, self.log)

        spec.loader.exec_module = exec_module
        return spec


def read(log):
    """The redraws recorded in `log` so far: a list of their records, oldest first."""
    try:
        with open(log, encoding="utf-8") as file:
            return [json.loads(line) for line in file if line.endswith("\n")]  # a line being written: next time
    except FileNotFoundError:
        return []


if os.environ.get(LOG_VARIABLE):
    sys.meta_path.insert(0, WrapOnImport(os.environ[LOG_VARIABLE]))
