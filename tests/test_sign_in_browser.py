"""Sign-in and the class board as a class uses them: `streamlit run serve.py` with an [auth] section that
points to a real OpenID Connect provider started here (oidc-provider-mock), driven by Debian's chromium
through the whole redirect flow.

Two students sign in, train and show their runs; the teacher (one of RNNLAB_TEACHER_EMAILS) sees both on
the Class page, a run its student did not show never appears, and a student gets no teacher's view. An
identity cookie Streamlit did not sign, or signed too long ago, is no sign-in. Signing out keeps the
files: the same person signing in from another device finds them; a copy of the cookie taken before the
sign-out signs nobody in after it. Signing in on a page comes back to that page, its settings kept. Screenshots of
the board at a laptop's 1366x768 and a projector's 1920x1080, and of a page after signing in, go to
test-artifacts/screenshots/.

The server's secrets are the offline rehearsal's (scripts/rehearse_sign_in.py), so the secrets the README's
rehearsal writes are the ones a real sign-in is tested with.

One server, one provider and one browser for the module (they are slow to start on 2 cores).
"""

import json
import re
import time
from pathlib import Path

import pytest
from helpers import chromium, need_browser, wait_for_widgets

from benchmarks.app import CHROMIUM, ROOT, SCRIPT_DONE, AppServer, free_port, open_page
from lab.server.spaces import identity_space_key
from scripts.rehearse_sign_in import secrets_text

SHOTS = ROOT / "test-artifacts" / "screenshots"
VIEWPORT = {"width": 1400, "height": 1600}
TINY = "emb=8&hidden=16&batch=16&block=32&eval_every=10&seconds=3"
COOKIE_SECRET = "a-cookie-secret-for-this-test-only"
TEACHER = "teacher@school.test"
STUDENTS = {"ada@school.test": "Ada L", "bob@school.test": "Bob K"}
STUDENTS_SIGNING_IN_ALONE = "cy@school.test"  # a student of the provider's who trains nothing here
BOARD = '[data-testid="stMain"] table'
# the provider's own library warns of Authlib's modules it still imports: not the app's
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def provider():
    from oidc_provider_mock import User, run_server_in_thread

    users = [
        User(sub=email, claims={"email": email, "email_verified": True, "name": email.split("@")[0].title()})
        for email in [*STUDENTS, STUDENTS_SIGNING_IN_ALONE, TEACHER]
    ]
    with run_server_in_thread(user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("user_checkpoints")


@pytest.fixture(scope="module")
def server(provider, user_dir, tmp_path_factory):
    if not Path(CHROMIUM).exists():
        need_browser(f"{CHROMIUM} is not installed")
    port = free_port()
    secrets = tmp_path_factory.mktemp("secrets") / "secrets.toml"  # a test's own: never the repository's
    provider_port = int(provider.rsplit(":", 1)[1])  # the rehearsal's secrets, at this test's ports and address
    text = secrets_text(port, provider_port, host="127.0.0.1", provider_host="localhost", cookie_secret=COOKIE_SECRET)
    secrets.write_text(text, encoding="utf-8")
    app = AppServer(
        user_dir,
        port=port,
        extra_env={"RNNLAB_TEACHER_EMAILS": TEACHER},
        extra_args=["--secrets.files", str(secrets)],
    )
    try:
        yield app.wait_healthy()
    finally:
        app.stop()


@pytest.fixture(scope="module")
def browser(server):
    with chromium() as browser:
        yield browser


def new_page(browser, viewport=VIEWPORT):
    page = browser.new_context(viewport=viewport).new_page()
    page.set_default_timeout(90_000)
    return page


def sign_in(page, server, email, where="Train"):
    """The whole redirect flow: the sidebar's Sign in on the page `where` (its path and query), the provider's
    page, back to the app: to that page, its settings kept (ui.shared.sign_in)."""
    open_page(page, f"{server.url}/{where}")
    page.locator(".st-key-signin_sidebar_default button").click()
    page.locator(f'button[name="sub"][value="{email}"]').click()  # the provider's page: who signs in
    page.wait_for_url(re.compile(re.escape(f"{server.url}/{where}") + "$"), timeout=120_000)
    page.wait_for_selector(SCRIPT_DONE)
    assert f"Signed in as {email.split('@')[0].title()}" in sidebar(page)


def sidebar(page):
    page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stCaptionContainer"]')
    return page.inner_text('[data-testid="stSidebar"]')


def train(page, server, run_name, shown_as=None, hidden=16):
    """Start one tiny run on Train (shown on the board under `shown_as`, or not) and wait for its end."""
    open_page(page, f"{server.url}/Train?{TINY.replace('hidden=16', f'hidden={hidden}')}&name={run_name}")
    wait_for_widgets(page, timeout_ms=120_000)
    if shown_as:  # the switch sits in Start's row (issue 51): on, it asks for the name the board shows
        page.locator(".st-key-train_board_on label").click()
        page.wait_for_selector(SCRIPT_DONE)
        board_name = page.locator(".st-key-train_board_name input")
        board_name.fill(shown_as)
        board_name.press("Enter")
        page.wait_for_selector(SCRIPT_DONE)
    page.locator(".st-key-train_start button").click()
    # ended and saved (a signed-in student's earlier runs, from any browser of theirs, are listed too)
    page.wait_for_selector(f'[data-testid="stAlertContentSuccess"]:has-text("{run_name}")', timeout=180_000)


def board_text(page):
    page.wait_for_selector(BOARD)
    return page.inner_text(BOARD)


def teachers_controls(page):
    return page.locator(".st-key-class_open, .st-key-class_hidden, .st-key-class_csv").count()


@pytest.fixture(scope="module")
def students(server, browser):
    """Ada and Bob signed in, each in a browser of their own, after their runs: Ada's shown on the board,
    Bob's one shown and one not (a module's: every test here reads them, none trains again)."""
    ada, bob = new_page(browser), new_page(browser)
    try:
        sign_in(ada, server, "ada@school.test")
        sign_in(bob, server, "bob@school.test")
        train(ada, server, "ada-shown", shown_as="Ada L")
        train(bob, server, "bob-private", hidden=24)  # the switch off: never on the board
        train(bob, server, "bob-shown", shown_as="Bob K", hidden=32)
        yield ada, bob
    finally:
        for page in (ada, bob):
            page.context.close()


def test_students_sign_in_train_and_show_their_runs_and_only_the_teacher_controls_the_board(server, browser, students):
    ada, _ = students
    teacher = new_page(browser)
    try:
        sign_in(teacher, server, TEACHER)
        open_page(teacher, f"{server.url}/Class")
        board = board_text(teacher)
        assert "Ada L" in board and "Bob K" in board
        assert board.count("Bob K") == 1 and "24 units" not in board  # bob-private never appears
        assert teachers_controls(teacher) == 3

        open_page(ada, f"{server.url}/Class")  # a student: the board is closed, and no teacher's view
        assert ada.locator(BOARD).count() == 0 and teachers_controls(ada) == 0
        teacher.locator(".st-key-class_open label").click()  # the teacher opens it to the class
        teacher.wait_for_selector(SCRIPT_DONE)
        open_page(ada, f"{server.url}/Class")
        assert "Bob K" in board_text(ada) and teachers_controls(ada) == 0  # read-only
        for size, name in (({"width": 1366, "height": 768}, "laptop"), ({"width": 1920, "height": 1080}, "projector")):
            teacher.set_viewport_size(size)
            teacher.wait_for_timeout(1500)  # the charts redraw at the new width
            # every loss in view: the leaderboard fits the column the board leaves it, with no scroll
            overflow = teacher.eval_on_selector(BOARD, "t => t.parentElement.scrollWidth - t.parentElement.clientWidth")
            assert overflow <= 1, f"at {name} size the leaderboard is {overflow} px wider than its column"
            SHOTS.mkdir(parents=True, exist_ok=True)
            teacher.screenshot(path=str(SHOTS / f"Class-board-{name}.png"))
    finally:
        teacher.context.close()


def menu(page, key, tries=3):
    """The options of the select box `key`, read with its menu open (clicked again when a redraw took the
    click away)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    dropdown = page.locator('[data-testid="stSelectboxVirtualDropdown"]')
    for attempt in range(tries):
        page.locator(f".st-key-{key}").click()
        try:
            dropdown.wait_for(timeout=10_000)
            return dropdown.inner_text()
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise


def identity_cookie(server, claims, days_old=0, secret=COOKIE_SECRET):
    """A `_streamlit_user` cookie as Streamlit writes one (its payload signed by itsdangerous with the
    secrets' cookie_secret), `days_old` days ago."""
    from itsdangerous import TimestampSigner, URLSafeTimedSerializer

    class Then(TimestampSigner):
        def get_timestamp(self):
            return int(time.time() - days_old * 86400)

    payload = json.dumps({**claims, "origin": server.url, "is_logged_in": True, "provider": "default"})
    value = URLSafeTimedSerializer(secret, salt="_streamlit_user", signer=Then).dumps(payload)
    return {"name": "_streamlit_user", "value": value, "url": server.url}


def test_a_forged_or_expired_identity_cookie_is_refused(server, provider, browser):
    claims = {"iss": provider, "sub": TEACHER, "email": TEACHER, "email_verified": True, "name": "Teacher"}
    for cookie, accepted in (
        (identity_cookie(server, claims), True),  # as Streamlit signs one: the way the others are made is right
        (identity_cookie(server, claims, secret="a guess at the secret"), False),  # forged
        (identity_cookie(server, claims, days_old=40), False),  # past Streamlit's 30 days
    ):
        page = new_page(browser)
        try:
            page.context.add_cookies([cookie])
            open_page(page, f"{server.url}/Class")
            assert ("Signed in as Teacher" in sidebar(page)) is accepted
            assert (teachers_controls(page) > 0) is accepted
        finally:
            page.context.close()


def test_signing_out_keeps_the_files_and_another_device_finds_them(server, provider, browser, user_dir, students):
    laptop, _ = students  # Ada, signed in where she trained "ada-shown" (the module's last test: she signs out)
    folder = user_dir / identity_space_key(user_dir, provider, "ada@school.test")
    kept = sorted(p.name for p in folder.glob("ada-shown_*"))
    assert kept
    open_page(laptop, f"{server.url}/Checkpoints")
    copied = [c for c in laptop.context.cookies() if c["name"].startswith("_streamlit_user")]  # read off the laptop
    assert copied
    laptop.locator(".st-key-signin_out button:visible").click()  # (its tooltip's copy of it is hidden)
    laptop.locator("button", has_text="End session").click()  # the provider's own sign-out page
    laptop.wait_for_url(re.compile(re.escape(server.url) + r"/?$"))
    laptop.wait_for_selector(SCRIPT_DONE)
    assert "Sign in to keep your files" in sidebar(laptop)
    assert sorted(p.name for p in folder.glob("ada-shown_*")) == kept
    thief = new_page(browser)  # the cookie copied before the sign-out signs nobody in after it
    try:
        thief.context.add_cookies(copied)
        open_page(thief, f"{server.url}/Checkpoints")
        assert "Sign in to keep your files" in sidebar(thief) and "Signed in as" not in sidebar(thief)
    finally:
        thief.context.close()
    phone = new_page(browser)  # another device: no cookie of the laptop's
    try:
        sign_in(phone, server, "ada@school.test")
        open_page(phone, f"{server.url}/Checkpoints")
        assert "yours: ada-shown" in menu(phone, "ckpt_choice")  # named in words, as every page names it
    finally:
        phone.context.close()


def test_signing_in_on_a_page_comes_back_to_that_page_with_its_settings(server, browser):
    """Streamlit brings a sign-in back to Home: the student lands on the page where they pressed Sign in, with the
    settings its address held (a larger hidden size on Train), seen here at a laptop's 1366x768."""
    page = new_page(browser, viewport={"width": 1366, "height": 768})
    try:
        sign_in(page, server, STUDENTS_SIGNING_IN_ALONE, where="Train?hidden=24")  # (its wait: back on Train?hidden=24)
        wait_for_widgets(page, timeout_ms=120_000)
        assert page.locator(".st-key-train_hidden input").input_value() == "24"
        assert page.locator('[data-testid="stMain"] h1').first.inner_text().endswith("Train")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "Signed-in-back-on-Train-laptop.png"))
        open_page(page, f"{server.url}/")  # Home, later: it stays Home (the way back is taken once)
        assert "/Train" not in page.url
    finally:
        page.context.close()
