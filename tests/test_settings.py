"""lab.settings: every RNNLAB_ variable declared once, with its bounds; a value out of them is refused in one
line that names the variable and what it may be, by the model, by `streamlit run serve.py` before it opens,
and by every page under `streamlit run app.py` before it draws anything."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.errors import LabError
from lab.settings import (
    EMAIL,
    RAY_ADDRESS,
    TEACHER_KEY,
    ServerSettings,
    allowed,
    bounds,
    server_settings,
    settings_table,
    unknown_variables,
    variable,
)

ROOT = Path(__file__).resolve().parent.parent
FIELDS = list(ServerSettings.model_fields)
VARIABLES = {variable(name): name for name in FIELDS}
# the classes of bad value a teacher's typo or a hostile tester gives, each for a setting it is bad for
BAD = [
    ("RNNLAB_KEEP_HOURS", "-5"),
    ("RNNLAB_KEEP_HOURS", "0"),
    ("RNNLAB_KEEP_HOURS", "0.5"),  # under the floor: a sweep would delete spaces seen half an hour ago
    ("RNNLAB_KEEP_HOURS", "nan"),
    ("RNNLAB_KEEP_HOURS", "1e308"),  # hours to seconds would be infinite
    ("RNNLAB_SESSION_SHARE", "nan"),
    ("RNNLAB_SESSION_SHARE", "0"),
    ("RNNLAB_SESSION_SHARE", "1.5"),
    ("RNNLAB_TRAINING_BUDGET_MB", "-1"),
    ("RNNLAB_TRAINING_BUDGET_MB", "inf"),
    ("RNNLAB_TRAINING_PROCESSES", "abc"),
    ("RNNLAB_TRAINING_PROCESSES", "2.5"),
    ("RNNLAB_TRAINING_PROCESSES", "-1"),
    ("RNNLAB_TRAINING_PROCESSES", "9" * 5000),
    ("RNNLAB_SESSION_RUNS", ""),
    ("RNNLAB_UNATTENDED_SECONDS", "1"),  # under a heartbeat: an open page's runs would stop
    ("RNNLAB_MAX_PARAMS", "1e400"),
    ("RNNLAB_USER_DIR", ""),
    ("RNNLAB_CACHE", __file__),  # a file, not a folder
    ("RNNLAB_RAY_ADDRESS", "not an address"),
    ("RNNLAB_REQUIRE_SIGN_IN", "maybe"),
    ("RNNLAB_TEACHER_EMAILS", ""),
    ("RNNLAB_TEACHER_EMAILS", "teacher@school.org, not an address"),
    ("RNNLAB_TEACHER_EMAILS", '["teacher@school.org"]'),  # a list is written with commas, not as JSON
    ("RNNLAB_TEACHER_KEY", "short"),  # a key a class could guess
    ("RNNLAB_TEACHER_KEY", "a key with spaces in it"),
]


def unset_all(monkeypatch):
    for name in list(os.environ):
        if name.upper().startswith("RNNLAB_"):
            monkeypatch.delenv(name)


def test_an_empty_environment_gives_every_declared_default(monkeypatch):
    unset_all(monkeypatch)
    read = server_settings()
    assert {name: getattr(read, name) for name in FIELDS} == {
        name: field.default for name, field in ServerSettings.model_fields.items()
    }
    assert (read.keep_hours, read.training_processes, read.session_share, read.ray_address) == (48, 1, 0.5, None)


def test_a_value_within_its_bounds_is_read_and_a_changed_environment_is_read_again(monkeypatch):
    monkeypatch.setenv("RNNLAB_KEEP_HOURS", "2.5")
    monkeypatch.setenv("RNNLAB_TRAINING_PROCESSES", "0")
    assert (server_settings().keep_hours, server_settings().training_processes) == (2.5, 0)
    monkeypatch.setenv("RNNLAB_KEEP_HOURS", "8760")
    assert server_settings().keep_hours == 8760


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_value_is_refused_in_one_line_naming_the_variable_and_what_it_may_be(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(LabError) as refused:
        server_settings()
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{name}: ") and f" is not {allowed(VARIABLES[name])}" in line
    assert len(line) < 200  # a huge value is cut short in the line


FOLDERS = [name for name in FIELDS if "folder" in allowed(name)]
WRITTEN = [name for name in FOLDERS if "can write" in allowed(name)]  # the sessions', the cache, the rescue


def folder_refusals(tmp_path):
    """(a folder setting's value, why it is refused): a name no file system holds, a value no stat survives,
    a folder under a regular file, and (where the system has one) a place nobody can make a folder in."""
    (tmp_path / "a-file").write_text("not a folder")
    refusals = [
        (str(tmp_path / ("n" * 300)), "one of its names is 300 bytes long, more than 255"),
        ("/" + "x" * 99_999, "100,000 characters long"),
        (str(tmp_path / "a-file" / "runs"), "a part of it is a file, not a folder"),
        (str(tmp_path / "a-file"), "a file"),
    ]
    return refusals


@pytest.mark.parametrize("name", FOLDERS)
def test_a_folder_setting_is_refused_for_its_length_or_a_file_in_its_way_in_one_line_naming_it(
    monkeypatch, tmp_path, name
):
    """Before the server opens: a folder's name too long for the file system (a stat of 100,000 characters
    raised, a traceback instead of the line), or a file where the folder or one above it would be."""
    for value, why in folder_refusals(tmp_path):
        monkeypatch.setenv(variable(name), value)
        with pytest.raises(LabError) as refused:
            server_settings()
        shown = repr(value if len(value) <= 40 else value[:40] + "...")  # a long value cut short
        assert str(refused.value) == f"{variable(name)}: {shown} is not {allowed(name)}: {why}"
    monkeypatch.setenv(variable(name), str(tmp_path / "new" / "folder"))  # a folder not made yet is fine
    assert getattr(server_settings(), name) == tmp_path / "new" / "folder"
    assert not (tmp_path / "new").exists() and [p.name for p in tmp_path.iterdir()] == ["a-file"]  # nothing left


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc on this system")
@pytest.mark.parametrize("name", WRITTEN)
def test_a_folder_the_server_writes_in_is_refused_where_it_cannot_write(monkeypatch, name):
    """/proc takes no new folder, even from root (whom access() tells it may write there): tried, not asked."""
    monkeypatch.setenv(variable(name), "/proc/rnnlab")
    with pytest.raises(LabError) as refused:
        server_settings()
    assert (
        str(refused.value) == f"{variable(name)}: '/proc/rnnlab' is not {allowed(name)}: the server cannot write there"
    )


def test_two_bad_values_are_both_named_in_the_one_line(monkeypatch):
    monkeypatch.setenv("RNNLAB_KEEP_HOURS", "-5")
    monkeypatch.setenv("RNNLAB_SESSION_SHARE", "nan")
    with pytest.raises(LabError, match=r"^RNNLAB_KEEP_HOURS: '-5' .*; RNNLAB_SESSION_SHARE: 'nan' is not a number"):
        server_settings()


def test_a_misspelt_variable_is_named_as_no_setting_and_a_declared_one_is_not(monkeypatch):
    unset_all(monkeypatch)
    monkeypatch.setenv("RNNLAB_KEEP_HOURS", "24")
    monkeypatch.setenv("RNNLAB_" + "KEEP_HOUR", "-5")  # a typo: nothing reads it, the log says so
    assert unknown_variables() == ["RNNLAB_" + "KEEP_HOUR"] and server_settings().keep_hours == 24


def test_the_teachers_emails_are_a_comma_separated_list_read_without_case(monkeypatch):
    monkeypatch.setenv("RNNLAB_TEACHER_EMAILS", " Ada@School.org,grace@school.org ")
    monkeypatch.setenv("RNNLAB_REQUIRE_SIGN_IN", "true")
    read = server_settings()
    assert (read.teacher_emails, read.require_sign_in) == (("ada@school.org", "grace@school.org"), True)


def test_the_unattended_time_is_bounded_above_the_heartbeat_of_an_open_page():
    from ui.shared.sessions import HEARTBEAT_SECONDS

    assert bounds("unattended_seconds")[0] > HEARTBEAT_SECONDS


def within_bounds(name, value):
    """Whether a read value is one its field allows."""
    annotation = ServerSettings.model_fields[name].annotation
    if annotation in (int, float):
        low, above, high = bounds(name)
        return (
            isinstance(value, annotation) and math.isfinite(value) and (value > low if above else value >= low)
        ) and (value <= high)
    if name == "ray_address":
        return value is None or RAY_ADDRESS.fullmatch(value) is not None
    if name == "require_sign_in":
        return isinstance(value, bool)
    if name == "teacher_emails":
        return isinstance(value, tuple) and all(EMAIL.fullmatch(email) and email == email.lower() for email in value)
    if name == "teacher_key":
        return value is None or TEACHER_KEY.fullmatch(value) is not None
    return isinstance(value, Path) and str(value) not in ("", ".") and not value.is_file()


# any text the environment can hold (no NUL; lone surrogates only as os.environ decodes odd bytes), and
# text that looks like a number, which is where the bounds are tested
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)
NUMBERS = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["", " ", "nan", "-inf", "1e400", "1_000", " 8 ", "0x10", "1e3", "+5", "٣"]),
)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FIELDS), value=st.one_of(TEXT, NUMBERS))
def test_any_value_of_any_setting_is_read_within_its_bounds_or_refused_in_one_line_naming_it(name, value):
    environment = {k: v for k, v in os.environ.items() if not k.upper().startswith("RNNLAB_")}
    with mock.patch.dict(os.environ, {**environment, variable(name): value}, clear=True):
        try:
            read = getattr(server_settings(), name)
        except LabError as refused:
            line = str(refused)
            assert "\n" not in line and line.startswith(f"{variable(name)}: ") and allowed(name) in line
        else:
            assert within_bounds(name, read), (name, value, read)


def test_the_readme_table_of_settings_is_the_models():
    """Every variable the model declares is in the README's table, with its default, its bounds and what it
    does, as the model says (`python -m lab.settings` prints the table), and no other."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert settings_table() in readme
    rows = re.findall(r"^\| `(RNNLAB_\w+)` \|", readme, flags=re.MULTILINE)
    assert rows == list(VARIABLES)


def test_every_rnnlab_variable_the_code_names_is_declared_and_only_lab_settings_reads_one():
    """One environment parser: no other module reads an RNNLAB_ variable from os.environ, and every one the
    app, the lab or the README mentions is a field of the model."""
    sources = [*ROOT.glob("lab/**/*.py"), *ROOT.glob("ui/**/*.py"), *ROOT.glob("pages/*.py")]
    sources += [ROOT / "serve.py", ROOT / "app.py"]
    readers = [
        str(p.relative_to(ROOT))
        for p in sources
        if p.name != "settings.py" and re.search(r"(environ|getenv)\W[^\n]*RNNLAB_", p.read_text(encoding="utf-8"))
    ]
    assert readers == []
    named = set()
    for path in [*sources, ROOT / "README.md"]:
        named |= set(re.findall(r"RNNLAB_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8")))
    assert named - set(VARIABLES) == set()


def serve(env, timeout=120):
    """`streamlit run serve.py` with `env` added; it must end on its own (a bad setting stops it)."""
    return subprocess.run(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", "0", "--server.headless", "true"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(("name", "value"), [("RNNLAB_KEEP_HOURS", "-5"), ("RNNLAB_TRAINING_PROCESSES", "abc")])
def test_serve_py_stops_before_it_opens_with_one_line_and_no_traceback(name, value):
    ended = serve({name: value})
    output = ended.stdout + ended.stderr
    assert ended.returncode == 2 and "Traceback" not in output
    assert ended.stderr.strip().splitlines()[-1] == f"{name}: {value!r} is not {allowed(VARIABLES[name])}"
    assert sum(name in line for line in output.splitlines()) == 1


@pytest.mark.parametrize(
    ("value", "why"),
    [("n" * 300, "one of its names is 300 bytes long, more than 255"), ("/" + "n" * 99_999, "100,000 characters long")],
)
def test_serve_py_stops_with_one_line_on_a_folder_name_too_long(value, why):
    """A folder's name of 300 characters (more than a file system's 255) or a value of 100,000: one line, status 2."""
    ended = serve({"RNNLAB_USER_DIR": value})
    output = ended.stdout + ended.stderr
    assert ended.returncode == 2 and "Traceback" not in output, output[-2000:]
    (line,) = [line for line in output.splitlines() if "RNNLAB_USER_DIR" in line]
    assert line == ended.stderr.strip().splitlines()[-1]
    assert line == f"RNNLAB_USER_DIR: {value[:40] + '...'!r} is not {allowed('user_dir')}: {why}"


PAGES = ["app.py", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("pages/*.py"))]


@pytest.mark.parametrize("page", PAGES)
def test_under_app_py_every_page_shows_only_the_one_line_of_a_bad_setting(monkeypatch, capfd, page):
    """`streamlit run app.py` has no start of its own: every page, before it draws anything, shows the line
    and stops, and the server's log says it once however many pages are opened."""
    from streamlit.testing.v1 import AppTest

    import ui.shared.sessions
    from ui.shared.plain_text import plain

    ui.shared.sessions._log_once.cache_clear()  # as in a fresh server process
    monkeypatch.setenv("RNNLAB_SESSION_SHARE", "nan")
    line = "RNNLAB_SESSION_SHARE: 'nan' is not a number above 0 and at most 1"
    for _ in range(2):
        at = AppTest.from_file(str(ROOT / page), default_timeout=60).run()
        assert not at.exception
        # the line made inert (a value is the operator's text, and may hold Markdown)
        assert [e.value for e in at.error] == [f"This server's settings need fixing by whoever runs it: {plain(line)}"]
        assert not (at.title or at.header or at.markdown or at.button or at.sidebar.children)
    assert capfd.readouterr().err.count(line) == 1
