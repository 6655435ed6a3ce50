"""The class board without a browser: its store (lab.server.board.BoardStore: opt-ins, posts, hiding,
opening, shared by every session), display names, the names on its chart, a signed-in person's space key
(lab.server.spaces.identity_space_key), and the Class and Train pages in Streamlit's AppTest: a run its
student showed is on the teacher's board with its losses, one they did not never is, and a student gets no
teacher's view. tests/test_board_losses.py: the losses on disk, a student's posts bounded, no job kept, one
redraw for every page, the leaderboard at equal time."""

import threading
from pathlib import Path

import pytest
from helpers import stop_every_sessions_jobs
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from lab.errors import LabError
from lab.server.board import BOARD_FILE, BoardStore, check_display_name, owner_id
from lab.server.capacity import Budget, CapacityError
from lab.server.spaces import identity_space_key, is_space_key, new_space_key, space_dir
from ui.class_board.charts import NAME_BOX, NAMED_AT_MOST, spaced_names
from ui.shared.board import recorder
from ui.shared.sign_in import identity_from

FACTS = {
    "run": "astra-1",
    "title": "GRU · 64 units",
    "cell": "gru_torch",
    "hidden": 64,
    "layers": 1,
    "lr": 3e-3,
    "params": 20_000,
}
ISSUER = "https://accounts.school.test"


# ---------------------------------------------------------------------------
# display names


@pytest.mark.parametrize(
    "typed", ["Ada", "  Ada   Lovelace ", "Zoë", "O'Neil-2", "李雷", "x" * 24, "A.B", "Ada\nLovelace"]
)
def test_a_display_name_of_letters_digits_and_a_few_marks_is_kept_with_its_spaces_collapsed(typed):
    assert check_display_name(typed) == " ".join(typed.split())


@pytest.mark.parametrize(
    "typed",
    [
        "",
        "   ",
        "x" * 25,  # longer than a leaderboard's row
        "<b>Ada</b>",
        "[Ada](http://evil.test)",
        "**Ada**",
        "=HYPERLINK(1)",  # a formula in the CSV the teacher opens
        "-Ada",
        "@Ada",
        "Ada\u202eevil",  # a direction override
        "Ada\u200b",  # invisible
        "Ada :smile:",
        "$x^2$",
    ],
)
def test_anything_else_is_refused_in_one_line_naming_the_field(typed):
    with pytest.raises(LabError) as refused:
        check_display_name(typed)
    line = str(refused.value)
    assert line.startswith("name on the board: ") and "\n" not in line and len(line) < 200


# ---------------------------------------------------------------------------
# the store


def test_a_run_is_posted_only_while_its_students_switch_is_on_and_turning_it_off_takes_theirs_off(tmp_path):
    store, ada, bob = BoardStore(tmp_path), owner_id("ada-key"), owner_id("bob-key")
    assert store.post(ada, FACTS) is None  # never chose: not posted
    store.set_student(bob, "Bob", on=False)
    assert store.post(bob, FACTS) is None  # chose off
    assert store.set_student(ada, " Ada ", on=True) == "Ada"
    first = store.post(ada, FACTS)
    assert first is not None and set(store.read().runs) == {first}
    assert store.student(ada) == ("Ada", True) and store.student(bob) == ("Bob", False)
    store.set_student(ada, "Ada", on=False)
    assert store.read().runs == {}
    store.set_student(ada, "Ada", on=True)
    assert store.read().runs == {}  # switching on again brings no run started while it was off


def test_a_bad_name_switches_nothing_on(tmp_path):
    store, ada = BoardStore(tmp_path), owner_id("ada-key")
    with pytest.raises(LabError):
        store.set_student(ada, "<script>", on=True)
    assert store.student(ada) == ("", False) and store.post(ada, FACTS) is None


def test_hiding_and_opening_are_kept_in_the_store_every_session_reads(tmp_path):
    store, ada = BoardStore(tmp_path), owner_id("ada-key")
    store.set_student(ada, "Ada", on=True)
    run_id = store.post(ada, FACTS)
    assert not store.read().open
    store.set_open(True)
    store.hide(run_id)
    store.hide("no-such-run")  # a run taken off meanwhile: nothing happens
    again = BoardStore(tmp_path).read()  # another session, or the server restarted
    assert again.open and again.runs[run_id].hidden_by_teacher
    store.hide(run_id, hidden=False)
    assert not BoardStore(tmp_path).read().runs[run_id].hidden_by_teacher


def test_the_file_names_no_space_key(tmp_path):
    key = new_space_key(tmp_path)
    store = BoardStore(tmp_path)
    store.set_student(owner_id(key), "Ada", on=True)
    store.post(owner_id(key), FACTS)
    written = b"".join(path.read_bytes() for path in tmp_path.glob(f"{BOARD_FILE}*"))  # the database and its log
    assert owner_id(key).encode() in written and key.encode() not in written
    assert owner_id(key) != owner_id(new_space_key(tmp_path))


def test_many_sessions_posting_at_once_all_land(tmp_path):
    store = BoardStore(tmp_path)
    owners = [owner_id(f"key-{n}") for n in range(12)]
    for n, owner in enumerate(owners):
        store.set_student(owner, f"Student {n}", on=True)
    posted = []
    threads = [threading.Thread(target=lambda o=o: posted.append(store.post(o, FACTS))) for o in owners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert None not in posted and set(store.read().runs) == set(posted) and len(posted) == 12


# ---------------------------------------------------------------------------
# the chart's names (the leaderboard's arithmetic: tests/test_board_losses.py)


@given(st.lists(st.tuples(st.floats(0, 300), st.floats(0, 5)), max_size=40), st.floats(1, 300), st.floats(0.1, 5))
def test_names_on_the_chart_go_to_the_best_runs_and_never_overlap(ends, x_span, y_span):
    ends = {f"run {i}": end for i, end in enumerate(ends)}  # best first
    named = spaced_names(ends, x_span, y_span)
    width, height = NAME_BOX[0] * x_span, NAME_BOX[1] * y_span
    assert len(named) <= NAMED_AT_MOST and (not ends or named[0] == "run 0")
    for i, a in enumerate(named):
        for b in named[i + 1 :]:  # no two names' boxes overlap
            assert abs(ends[a][0] - ends[b][0]) >= width or abs(ends[a][1] - ends[b][1]) >= height
    for run in set(ends) - set(named):  # a run left unnamed was crowded out by a better one, or the cap
        better = [r for r in named if list(ends).index(r) < list(ends).index(run)]
        crowded = any(
            abs(ends[r][0] - ends[run][0]) < width and abs(ends[r][1] - ends[run][1]) < height for r in better
        )
        assert crowded or len(better) == NAMED_AT_MOST


# ---------------------------------------------------------------------------
# one identity, one space, one share


def test_a_signed_in_persons_key_is_theirs_on_every_device_and_nobody_elses(tmp_path):
    ada = identity_space_key(tmp_path, ISSUER, "ada-sub")
    assert ada == identity_space_key(tmp_path, ISSUER, "ada-sub")  # another browser, another device
    assert is_space_key(tmp_path, ada) and space_dir(tmp_path, ada).is_dir()
    others = {
        identity_space_key(tmp_path, ISSUER, "bob-sub"),
        identity_space_key(tmp_path, "https://other.test", "ada-sub"),  # another provider's ada-sub
        identity_space_key(tmp_path / "elsewhere", ISSUER, "ada-sub"),  # another server's secret
    }
    assert ada not in others and len(others) == 3


def test_two_browsers_of_one_person_share_one_share_and_one_cap():
    budget = Budget(capacity=100, owner_share=0.5, owner_jobs=2)
    person = "ada"  # what ui.shared.sessions.session_key gives both of their browsers
    budget.request(30, person)  # first browser
    with pytest.raises(CapacityError):
        budget.request_all([10, 10], person, ["a", "b"])  # second browser: past the cap of 2
    second = budget.request(30, person)
    assert not second.admitted  # 60 MB would pass the person's 50 MB share: it waits


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({}, None),
        ({"is_logged_in": False, "sub": "x", "iss": ISSUER}, None),
        ({"is_logged_in": True, "iss": ISSUER}, None),  # no subject: nobody in particular
        ({"is_logged_in": True, "iss": ISSUER, "sub": "s", "email": "Ada@School.test"}, "ada@school.test"),
        ({"is_logged_in": True, "iss": ISSUER, "sub": "s", "email": "a@s.test", "email_verified": False}, ""),
    ],
)
def test_the_identity_is_read_from_the_providers_claims(claims, expected):
    person = identity_from(claims)
    if expected is None:
        assert person is None
    else:
        assert (person.issuer, person.subject, person.email) == (ISSUER, "s", expected)


# ---------------------------------------------------------------------------
# the pages (AppTest: one server process, each AppTest a browser session of its own)

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TINY = {"emb": 8, "hidden": 16, "batch": 8, "block": 16, "eval_every": 5, "seconds": 2}
TEACHER_KEY = "teacher-key-for-tests"


@pytest.fixture
def server_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path))
    monkeypatch.setenv("RNNLAB_TEACHER_KEY", TEACHER_KEY)
    yield tmp_path
    stop_every_sessions_jobs()


def page(name):
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(name)
    return at.run()


def train_one(name, shown_as=None):
    """A student's session on Train: the switch on under `shown_as` (or left off), one tiny run, ended."""
    at = page("pages/1_Train.py")
    for field, value in TINY.items():
        at.number_input(key=f"train_{field}").set_value(value)
    at.text_input(key="train_name").set_value(name)
    if shown_as:
        at.toggle(key="train_board_on").set_value(True).run()  # on: the name box appears under the buttons
        at.text_input(key="train_board_name").set_value(shown_as)
    at.run()
    at.button(key="train_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (log,) = at.session_state["train_logs"].values()
    assert log.job.wait(120) in ("finished", "stopped")
    return at


def board_text(at):
    """The leaderboard's text ("" where none is drawn)."""
    return " ".join(e.proto.body for e in at.get("html") if "<table" in e.proto.body)


def teacher_widgets(at):
    """The teacher's controls a page shows: opening the board, hiding runs, the CSV."""
    controls = [
        w.key for kind in ("toggle", "multiselect") for w in at.get(kind) if w.key in ("class_open", "class_hidden")
    ]
    return controls + list(at.get("download_button"))


def test_the_teacher_sees_a_shown_run_never_one_not_shown_and_a_student_gets_no_teachers_view(server_dir):
    train_one("ada-run", shown_as="Ada L")
    train_one("bob-run")  # Bob's switch stays off
    student = page("pages/8_Class.py")
    assert student.info and not teacher_widgets(student) and not board_text(student)  # closed to the class

    teacher = page("pages/8_Class.py")
    teacher.text_input(key="class_key").input("not-the-key-at-all")
    teacher.button[0].click().run()
    assert teacher.error and not teacher_widgets(teacher) and not board_text(teacher)
    teacher.text_input(key="class_key").input(TEACHER_KEY)
    teacher.button[0].click().run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    board = board_text(teacher)
    assert "Ada L" in board and "Bob" not in board and teacher.get("download_button")
    recorder().record()  # its thread's pass, made now: the runs have ended, their last points are written
    assert recorder().following() == set()  # and the board holds no job
    (curve,) = BoardStore(server_dir).snapshot()[1].values()  # Ada's losses, on disk for a restarted server
    assert curve.reached() > 0
    teacher.toggle(key="class_open").set_value(True).run()

    student.run()  # the board opened: read-only, without the teacher's controls
    assert "Ada L" in board_text(student) and not teacher_widgets(student) and not student.get("download_button")
    (run_id,) = BoardStore(server_dir).read().runs
    teacher.multiselect(key="class_hidden").select(run_id).run()
    assert "Ada L" not in board_text(student.run())
