"""benchmarks.class_of_30's wiring at its smallest: its scripted students' runs go through the Train page's job
path (trained by the app server, admitted by its budget) onto the class board, which the teacher's page draws
and whose redraws the server times on those runs' own events. No timing is asserted: the figures are
BENCHMARKS.md's."""

import os

from helpers import need_browser

from benchmarks.app import CHROMIUM
from benchmarks.class_of_30 import CELLS, HIDDEN, class_of


def test_two_students_runs_reach_the_teachers_board_through_the_job_path():
    if not os.path.exists(CHROMIUM):
        need_browser(f"{CHROMIUM} is not installed")
    r = class_of(students=2, seconds=3, repeats=1, together=2, browser_nice=0, watched=["Home"])
    runs = r["board"].runs.values()
    # each student's run, posted by the page under their name with the model their URL asked for
    assert sorted((run.cell, run.hidden) for run in runs) == sorted([(CELLS[0], HIDDEN[0]), (CELLS[1], HIDDEN[0])])
    students = {student.name for student in r["board"].students.values()}
    assert students == {"Student 1", "Student 2"} and len({run.owner for run in runs}) == 2
    assert r["first_steps"] == 2  # both trained on the server, each logging its first step there
    assert "Student 1" in r["shown"] and "Student 2" in r["shown"]  # on the teacher's leaderboard
    # the board's redraws, timed in the server, read both live jobs' own loss points
    assert any(x["runs"] == 2 and x["points"] > 0 and x["cpu"] > 0 for x in r["redraws"])
    assert set(r["idle"]) == set(r["busy"]) == {"Home"}
