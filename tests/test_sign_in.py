"""Signing out revokes the person's identity cookies on this server: Streamlit's sign-out deletes the cookie
from the browser that signed out only, and a copy of it taken before (another tab's, a hostile student's
who read it off the teacher's laptop) stayed a teacher for 30 days. The server now keeps, per person, the
latest time of issue it refuses (lab.server.spaces.sign_out), and a cookie issued by then is no sign-in.

Without a browser: lab.server.spaces' rule, then the pages through AppTest, whose `user` is what a
verified cookie gives st.user (tests/test_sign_in_browser.py runs the whole redirect flow in Chromium)."""

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.server.spaces import CLOCK_SKEW_SECONDS, SIGNED_OUT_NAME, new_space_key, sign_out, signed_out, sweep

ISSUER = "https://accounts.school.test"
TEACHER = "teacher@school.test"
APP = str(Path(__file__).resolve().parent.parent / "app.py")
CLASS = "pages/8_Class.py"


def test_a_sign_out_refuses_the_cookies_issued_before_it_and_no_later_one(tmp_path):
    now = 1_000_000.0
    issued = now - 3600  # the laptop's cookie, an hour old
    assert not signed_out(tmp_path, ISSUER, "t", issued)  # nobody signed out yet
    sign_out(tmp_path, ISSUER, "t", issued, now=now)
    assert signed_out(tmp_path, ISSUER, "t", issued)  # the cookie that signed out, and any copy of it
    assert signed_out(tmp_path, ISSUER, "t", now - 2 * CLOCK_SKEW_SECONDS)  # another device's, older
    assert not signed_out(tmp_path, ISSUER, "t", now + 5)  # the next sign-in's
    assert not signed_out(tmp_path, ISSUER, "someone else", issued)  # one person's sign-out, nobody else's
    assert not signed_out(tmp_path, "https://other.provider.test", "t", issued)
    assert signed_out(tmp_path, ISSUER, "t", None) and signed_out(tmp_path, ISSUER, "t", "not a time")


def test_a_cookie_issued_after_an_earlier_sign_out_is_revoked_by_the_next_and_times_only_grow(tmp_path):
    sign_out(tmp_path, ISSUER, "t", 100.0, now=200.0)
    assert not signed_out(tmp_path, ISSUER, "t", 300.0)
    sign_out(tmp_path, ISSUER, "t", 300.0, now=400.0)  # signed in again at 300, out at 400
    assert signed_out(tmp_path, ISSUER, "t", 300.0)
    sign_out(tmp_path, ISSUER, "t", 50.0, now=120.0)  # a late, older sign-out revokes no less
    assert signed_out(tmp_path, ISSUER, "t", 300.0)


@pytest.mark.parametrize("issued", [float("inf"), float("nan"), 10**12])
def test_a_time_of_issue_from_the_future_does_not_lock_the_person_out(tmp_path, issued):
    sign_out(tmp_path, ISSUER, "t", issued, now=1000.0)
    assert not signed_out(tmp_path, ISSUER, "t", 1005.0)  # a real sign-in after it still signs in


def test_the_record_is_kept_where_every_server_process_reads_it_and_no_sweep_deletes_it(tmp_path):
    """In the user directory, beside the spaces' secret, named by a MAC: not a student's name or email."""
    sign_out(tmp_path, ISSUER, TEACHER, 10.0, now=100.0)
    (record,) = (tmp_path / SIGNED_OUT_NAME).iterdir()
    assert TEACHER not in record.name and "teacher" not in record.read_text()
    new_space_key(tmp_path)
    sweep(tmp_path, keep_seconds=0, now=10**10)
    assert record.is_file() and signed_out(tmp_path, ISSUER, TEACHER, 10.0)


# ---------------------------------------------------------------------------
# through the pages


@pytest.fixture
def class_server(tmp_path, monkeypatch):
    """A server whose teacher signs in with TEACHER; sign-in set up in the app's secrets."""
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path / "user_checkpoints"))
    monkeypatch.setenv("RNNLAB_TEACHER_EMAILS", TEACHER)
    return tmp_path


def browser_with(cookie):
    """A browser session whose identity cookie Streamlit verified to these claims, on the Class page."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {
        "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
        "cookie_secret": "a-cookie-secret-for-this-test-only",
        "client_id": "rnnlab-test",
        "client_secret": "rnnlab-test-secret",
        "server_metadata_url": f"{ISSUER}/.well-known/openid-configuration",
    }
    at.user = dict(cookie)
    at.switch_page(CLASS)
    return at.run()


def teachers_view(at):
    """Whether the page shows the teacher's controls (the Class page's board switch)."""
    assert not at.exception, at.exception
    return "class_open" in {w.key for kind in ("toggle", "checkbox", "button") for w in at.get(kind)}


def signed_in_as(at):
    return " ".join(str(c.value) for c in at.sidebar.caption)


def test_a_teachers_cookie_copied_before_sign_out_opens_no_teachers_view_after_it(class_server):
    cookie = {
        "is_logged_in": True,
        "iss": ISSUER,
        "sub": "teacher-1",
        "email": TEACHER,
        "email_verified": True,
        "name": "Teacher",
        "iat": int(time.time()) - 600,  # signed in ten minutes ago
    }
    laptop = browser_with(cookie)
    assert teachers_view(laptop) and "Signed in as Teacher" in signed_in_as(laptop)
    copied = dict(cookie)  # what a student read off the laptop
    before = browser_with(copied)
    assert teachers_view(before)  # a copy is as good as the original, until the sign-out

    laptop.button(key="signin_out").click().run()
    assert not laptop.exception
    after = browser_with(copied)
    assert not teachers_view(after)
    assert "Signed in as" not in signed_in_as(after) and "Sign in to keep your files" in signed_in_as(after)

    again = browser_with({**cookie, "iat": int(time.time()) + 1})  # the teacher signs in again: a new cookie
    assert teachers_view(again) and "Signed in as Teacher" in signed_in_as(again)
