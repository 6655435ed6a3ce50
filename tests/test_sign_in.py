"""Signing out revokes the person's identity cookies on this server: Streamlit's sign-out deletes the cookie
from the browser that signed out only, and a copy of it taken before (another tab's, a hostile student's
who read it off the teacher's laptop) stayed a teacher for 30 days. The server now keeps, per person, the
latest time of issue it refuses (lab.server.spaces.sign_out), and a cookie issued by then is no sign-in.

Without a browser: lab.server.spaces' rule, then the pages through AppTest, whose `user` is what a
verified cookie gives st.user (tests/test_sign_in_browser.py runs the whole redirect flow in Chromium).

Signing in brings the student back to the page where they pressed "Sign in", with its settings: Streamlit brings
every sign-in back to Home, and Home's frame goes on to that page (ui.shared.sign_in.take_return). And the
rehearsal a teacher runs offline (scripts/rehearse_sign_in.py) writes the secrets st.login needs, its way back
at the server's own port."""

import re
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import ui.shared.sessions
from lab.server.spaces import CLOCK_SKEW_SECONDS, SIGNED_OUT_NAME, new_space_key, sign_out, signed_out, sweep
from scripts import rehearse_sign_in
from ui.shared.sign_in import RETURN_SECONDS, remember_return, take_return

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


AUTH = {
    "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
    "cookie_secret": "a-cookie-secret-for-this-test-only",
    "client_id": "rnnlab-test",
    "client_secret": "rnnlab-test-secret",
    "server_metadata_url": f"{ISSUER}/.well-known/openid-configuration",
}


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


# ---------------------------------------------------------------------------
# back to the page where "Sign in" was pressed


def test_a_sign_in_returns_once_to_where_it_was_pressed_for_an_identity_issued_after_the_press():
    now = 1_000_000.0
    remember_return("browser-a", "Train", {"hidden": "24"}, now=now)
    assert take_return("browser-b", now + 5, now=now + 10) is None  # another browser pressed nothing
    assert take_return("browser-a", now - 3600, now=now + 10) is None  # an identity from before the press
    assert take_return("browser-a", now + 5, now=now + 10) == ("Train", {"hidden": "24"})
    assert take_return("browser-a", now + 5, now=now + 11) is None  # once
    remember_return("browser-a", "Sample", {}, now=now)
    assert take_return("browser-a", now + RETURN_SECONDS + 5, now=now + RETURN_SECONDS + 10) is None  # too late
    remember_return("", "Train", {}, now=now)  # a browser without a key (no cookie) is not remembered
    assert take_return("", now + 5, now=now + 10) is None
    remember_return("browser-c", "Train", {"typed": "x" * 5000}, now=now)  # a long query: the page alone
    assert take_return("browser-c", now + 1, now=now + 2) == ("Train", {})


def signed_in(at, email="ada@school.test"):
    at.user = {
        "is_logged_in": True,
        "iss": ISSUER,
        "sub": email,
        "email": email,
        "email_verified": True,
        "name": "Ada",
        "iat": int(time.time()) + 1,
    }
    return at


def test_signing_in_on_the_train_page_comes_back_to_it_with_its_settings(class_server, monkeypatch):
    train = AppTest.from_file(APP, default_timeout=120)
    train.secrets["auth"] = dict(AUTH)
    train.user = {"is_logged_in": False}
    train.query_params["hidden"] = "24"
    train.switch_page("pages/1_Train.py").run()
    assert not train.exception and train.session_state["train_hidden"] == 24
    # st.login sends the browser to the provider (AppTest's secrets do not reach its check of them: it is noted)
    logins = []
    monkeypatch.setattr(st, "login", lambda *provider: logins.append(provider))
    train.button(key="signin_sidebar_default").click().run()
    assert not train.exception and logins == [()]
    browser = train.session_state["_rnnlab_session_key"]  # what the browser's space cookie holds

    # the provider sends the browser back to the app's root, Home, with a new session that is signed in
    monkeypatch.setattr(ui.shared.sessions, "space_cookie", lambda: browser)
    back = signed_in(AppTest.from_file(APP, default_timeout=120))
    back.secrets["auth"] = dict(AUTH)
    back.run()
    assert not back.exception
    assert back.session_state["train_hidden"] == 24 and back.query_params == {"hidden": "24"}  # Train, as it was
    assert any("Train" in str(t.value) for t in back.title)
    home = signed_in(AppTest.from_file(APP, default_timeout=120))  # once: Home later stays Home
    home.secrets["auth"] = dict(AUTH)
    home.run()
    assert not home.exception and "train_hidden" not in home.session_state
    assert any("RNN Lab" in str(t.value) for t in home.title)


# ---------------------------------------------------------------------------
# the offline rehearsal


@pytest.mark.parametrize("port", [8501, 8502])
def test_the_rehearsal_writes_the_secrets_st_login_needs_with_the_way_back_at_the_servers_port(tmp_path, port, capsys):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's: Streamlit reads the secrets with it
    secrets = tmp_path / "rehearsal-secrets.toml"
    assert rehearse_sign_in.main(["--port", str(port), "--secrets", str(secrets), "--provider-port", "9411"]) == 0
    written = tomllib.loads(secrets.read_text(encoding="utf-8"))
    auth = written["auth"]
    # what Streamlit's st.login reads (streamlit.auth_util.validate_auth_credentials): its way back, a cookie
    # secret, and the provider's client and metadata
    assert auth["redirect_uri"] == f"http://localhost:{port}/oauth2callback"
    assert len(auth["cookie_secret"]) >= 32
    assert {"client_id", "client_secret"} <= set(auth)
    assert auth["server_metadata_url"] == "http://localhost:9411/.well-known/openid-configuration"
    assert written["RNNLAB_TEACHER_EMAILS"] == rehearse_sign_in.TEACHER
    printed = capsys.readouterr().out
    assert "oidc-provider-mock --port 9411" in printed and rehearse_sign_in.TEACHER in printed
    assert f"streamlit run serve.py --server.port {port} --secrets.files {secrets}" in printed
    again = tmp_path / "again.toml"  # a fresh cookie secret each time
    rehearse_sign_in.main(["--port", str(port), "--secrets", str(again)])
    assert tomllib.loads(again.read_text(encoding="utf-8"))["auth"]["cookie_secret"] != auth["cookie_secret"]


def test_the_rehearsal_never_overwrites_the_apps_own_secrets(tmp_path):
    own = tmp_path / "secrets.toml"
    own.write_text("[auth]\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        rehearse_sign_in.main(["--port", "8502", "--secrets", str(own)])
    assert own.read_text(encoding="utf-8") == "[auth]\n"


def test_the_readmes_rehearsal_is_the_scripts():
    """The README gives the two commands and the secrets for any port: they are what the script writes and prints."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("**Sign-in without a provider") :]
    blocks = re.findall(r"```(bash|toml)\n(.*?)```", section, flags=re.S)
    (_, script), (_, started), (_, toml) = blocks[:3]
    assert script.strip() == "python -m scripts.rehearse_sign_in --port 8502"
    assert started.strip().splitlines() == list(rehearse_sign_in.commands(8502, rehearse_sign_in.DEFAULT_SECRETS))
    written = rehearse_sign_in.secrets_text("PORT", cookie_secret="A-NEW-RANDOM-TEXT")
    assert [line for line in written.splitlines() if not line.startswith("#")] == toml.strip().splitlines()
