"""The class board: the runs students chose to show their class, on one chart a teacher projects.

A student turns "show on the class board" on with a display name they pick; each run they start while
it is on is posted, and only those: a run started with it off never appears, and turning it off takes
their runs off the board, which keeps a student's MAX_RUNS_PER_STUDENT most recent runs (a post past them
drops their oldest). The teacher may hide a run, and opens the board (read-only) to the class.

All of it lives in one SQLite database in the user directory (`BoardStore`): the choices, each run's
facts and its losses, written while it trains (lab.server.board_losses.BoardRecorder), so that every
session, every server process on that directory and a server restarted (Community Cloud restarts a
sleeping app) show the same board, curves included. WAL mode, one connection per thread and each write
one short transaction: a reader never waits for a writer, and writers take turns, across processes too.

    store = BoardStore(user_dir)
    store.set_student(owner_id(key), "Ada", on=True)     # LabError for a name that is not one
    run_id = store.post(owner_id(key), run_facts(job, title))  # None unless that student's switch is on
    store.add_points({run_id: [(elapsed, nats, steps)]})       # the run ids still on the board
    board, curves = store.snapshot()                     # the runs shown and their Curves, at one moment
"""

import contextlib
import hashlib
import itertools
import logging
import re
import secrets
import sqlite3
import threading
import time
import unicodedata
from pathlib import Path

import pydantic

from lab.errors import LabError
from lab.server.board_losses import Curve

log = logging.getLogger(__name__)
BOARD_FILE = ".class-board.sqlite"  # in the user directory, beside the spaces (and its -wal and -shm files)
# the choices as the board kept them before it kept losses, and that file's lock: read in once, then removed
JSON_BOARD_FILE, JSON_BOARD_LOCK = ".class-board.json", ".class-board.lock"
MAX_RUNS_PER_STUDENT = 10  # a student's most recent runs on the board: 30 students' make 300 lines on a chart
BUSY_SECONDS = 10.0  # how long a write waits for another's to end (another server process's)
MAX_NAME = 24  # characters of a display name: a leaderboard's row on a projector
# a letter or digit first (never "=", "+", "-" or "@", which a spreadsheet opening the CSV would run as a
# formula), then letters, digits, spaces, dots, hyphens, apostrophes and underscores: no markup of any kind
DISPLAY_NAME = re.compile(rf"[^\W_][\w .'-]{{0,{MAX_NAME - 1}}}")


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
    runs: dict[str, Run] = {}  # in the order they were posted


RUN_FIELDS = tuple(Run.model_fields)
SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL", bool: "INTEGER"}
SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS board (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    is_open INTEGER NOT NULL DEFAULT 0,
    choices INTEGER NOT NULL DEFAULT 0,  -- counts the writes of everything but losses
    losses INTEGER NOT NULL DEFAULT 0    -- counts the writes of losses
);
INSERT OR IGNORE INTO board (one) VALUES (1);
CREATE TABLE IF NOT EXISTS students (owner TEXT PRIMARY KEY, name TEXT NOT NULL, shown INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    key INTEGER PRIMARY KEY,  -- what its points name it by: a number reads three times faster than its id
    id TEXT NOT NULL UNIQUE,
    {", ".join(f"{name} {SQL_TYPES[field.annotation]} NOT NULL" for name, field in Run.model_fields.items())}
);
CREATE TABLE IF NOT EXISTS points (
    run_key INTEGER NOT NULL REFERENCES runs (key) ON DELETE CASCADE,
    elapsed REAL NOT NULL,
    nats REAL NOT NULL,
    steps INTEGER NOT NULL
);
-- every column: a snapshot reads the index alone, each run's points in order
CREATE INDEX IF NOT EXISTS points_of_run ON points (run_key, elapsed, nats, steps);
COMMIT;
"""


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
    """The board in `root`/BOARD_FILE, shared by every session, thread and process."""

    def __init__(self, root):
        self.root = Path(root)
        self.path = self.root / BOARD_FILE
        self._connections = threading.local()  # a thread's own, closed when the thread ends and drops it
        self._made = False  # this store has made sure of the file's tables

    def _connection(self):
        """This thread's connection (a sqlite3 connection is not shared between threads)."""
        db = getattr(self._connections, "db", None)
        if db is None:
            self.root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)  # transactions as written
            db.execute("PRAGMA synchronous = NORMAL")  # in WAL mode a power cut may lose the last writes, not the file
            db.execute("PRAGMA foreign_keys = ON")  # a run's points go with it
            self._connections.db = db
            if not self._made:
                try:
                    db.execute("PRAGMA journal_mode = WAL")  # kept in the file: readers and a writer at once
                    db.executescript(SCHEMA)
                    self._read_json_board()
                except BaseException:  # the next call tries again, on a connection of its own
                    del self._connections.db
                    db.close()
                    raise
                self._made = True
        return db

    @contextlib.contextmanager
    def _reading(self):
        """One consistent view of the board, however many queries read it."""
        db = self._connection()
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("COMMIT")

    @contextlib.contextmanager
    def _writing(self, counter="choices"):
        """One write, all or nothing, counted in the board's `counter` if it changed anything (see `marks`)."""
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")  # the write lock first: two writers never both read, then both write
        changes = db.total_changes
        try:
            yield db
            if db.total_changes != changes:
                db.execute(f"UPDATE board SET {counter} = {counter} + 1")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _read_json_board(self):
        """Move the choices the board kept in JSON_BOARD_FILE (no losses) into the database, once."""
        path = self.root / JSON_BOARD_FILE
        try:
            old = Board.model_validate_json(path.read_bytes())
        except FileNotFoundError:  # none, or another thread read it in
            return
        except pydantic.ValidationError:  # left where it is, for a person to read
            log.warning("the class board's %s is not one: not read in", path, exc_info=True)
            return
        with self._writing() as db:
            db.execute("UPDATE board SET is_open = ?", (old.open,))
            for owner, student in old.students.items():
                db.execute("INSERT OR IGNORE INTO students VALUES (?, ?, ?)", (owner, student.name, student.on))
            for run_id, run in old.runs.items():
                self._insert_run(db, run_id, run)
        path.unlink(missing_ok=True)
        (self.root / JSON_BOARD_LOCK).unlink(missing_ok=True)

    @staticmethod
    def _insert_run(db, run_id, run):
        columns = ", ".join(RUN_FIELDS)
        values = [getattr(run, name) for name in RUN_FIELDS]
        db.execute(f"INSERT OR IGNORE INTO runs (id, {columns}) VALUES (?{', ?' * len(values)})", (run_id, *values))

    @staticmethod
    def _board(db):
        is_open = db.execute("SELECT is_open FROM board").fetchone()[0]
        students = {
            owner: Student(name=name, on=shown)
            for owner, name, shown in db.execute("SELECT owner, name, shown FROM students")
        }
        rows = db.execute(f"SELECT id, {', '.join(RUN_FIELDS)} FROM runs ORDER BY posted, key")
        runs = {row[0]: Run(**dict(zip(RUN_FIELDS, row[1:]))) for row in rows}
        return Board(open=is_open, students=students, runs=runs)

    def read(self):
        """The board as it is now (a Board; empty before anything was chosen), without its losses."""
        with self._reading() as db:
            return self._board(db)

    def snapshot(self):
        """The board and the losses of the runs it shows (those the teacher has not hidden), read at one
        moment -> (Board, {run id: Curve}), the runs in the order they were posted."""
        with self._reading() as db:
            board, ids = self._board(db), dict(db.execute("SELECT key, id FROM runs"))
            rows = db.execute("SELECT run_key, elapsed, nats, steps FROM points ORDER BY run_key, elapsed").fetchall()
        read = {ids[key]: list(zip(*points))[1:] for key, points in itertools.groupby(rows, lambda row: row[0])}
        shown = [run_id for run_id, run in board.runs.items() if not run.hidden_by_teacher]
        return board, {run_id: Curve(*read[run_id]) if run_id in read else Curve() for run_id in shown}

    def marks(self):
        """(choices, losses): how many writes the board has had of each kind. A drawing made at the same
        marks is of the board as it is."""
        with self._reading() as db:
            return db.execute("SELECT choices, losses FROM board").fetchone()

    def student(self, owner):
        """A student's (name, on): ("", False) before they chose."""
        with self._reading() as db:
            row = db.execute("SELECT name, shown FROM students WHERE owner = ?", (owner,)).fetchone()
        return (row[0], bool(row[1])) if row else ("", False)

    def set_student(self, owner, name, on):
        """Turn a student's switch on (with a display name, checked: LabError) or off, which takes their
        runs off the board. -> the name kept."""
        name = check_display_name(name) if on else str(name)[: MAX_NAME * 2]
        with self._writing() as db:
            db.execute("INSERT OR REPLACE INTO students VALUES (?, ?, ?)", (owner, name, on))
            if not on:
                db.execute("DELETE FROM runs WHERE owner = ?", (owner,))
        return name

    def post(self, owner, facts):
        """Post a run just started (`run_facts`) if its student's switch is on -> its run id, else None.
        Their runs past the MAX_RUNS_PER_STUDENT most recent leave the board, losses and all."""
        run_id = secrets.token_hex(8)
        with self._writing() as db:
            row = db.execute("SELECT shown FROM students WHERE owner = ?", (owner,)).fetchone()
            if not (row and row[0]):
                return None
            self._insert_run(db, run_id, Run(owner=owner, posted=time.time(), **facts))
            db.execute(
                "DELETE FROM runs WHERE owner = ? AND key NOT IN "
                "(SELECT key FROM runs WHERE owner = ? ORDER BY posted DESC, key DESC LIMIT ?)",
                (owner, owner, MAX_RUNS_PER_STUDENT),
            )
        return run_id

    def add_points(self, points):
        """Append runs' points, {run id: [(elapsed, nats per character, steps)]}, in one transaction ->
        the run ids of those still on the board (a run taken off meanwhile keeps no points)."""
        with self._writing("losses") as db:
            keys = {run_id: db.execute("SELECT key FROM runs WHERE id = ?", (run_id,)).fetchone() for run_id in points}
            kept = {run_id: key[0] for run_id, key in keys.items() if key is not None}
            db.executemany(
                "INSERT INTO points VALUES (?, ?, ?, ?)",
                [(key, *point) for run_id, key in kept.items() for point in points[run_id]],
            )
        return set(kept)

    def hide(self, run_id, hidden=True):
        """The teacher hides a run from the board (or shows it again); a run no longer there is ignored."""
        with self._writing() as db:
            db.execute("UPDATE runs SET hidden_by_teacher = ? WHERE id = ?", (hidden, run_id))

    def set_open(self, is_open):
        """Open the board to the class (read-only) or close it."""
        with self._writing() as db:
            db.execute("UPDATE board SET is_open = ?", (is_open,))
