"""A start that speaks (issue 51): `streamlit run serve.py` printed its address 50 s before it answered on a busy
host, and a teacher who opened it at once waited on a blank page. Now the server answers from the start: until
its preparation is done (ui.app.warm_up.prepare_server), a page's address shows how far it has got, kept up to
date, and opens the page once ready; the health check says 503 with the same line meanwhile
(ui.app.preparing.WhilePreparing).

First the middleware alone, on a preparation driven by hand; then a real server in Chromium: a page opened the
moment the server starts shows the notice with its progress (a screenshot at a laptop's 1366x768 goes to
test-artifacts/screenshots/), never a refused connection once the server listens nor a blank page, and the same
tab opens the page with its settings once the server is ready, without the visitor doing anything.
"""

import asyncio
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

from helpers import chromium, need_browser

from benchmarks.app import CHROMIUM, LAPTOP, ROOT, SCRIPT_DONE, AppServer
from ui.app.preparing import PARTS, RELOAD_SECONDS, Progress, WhilePreparing, is_page

SHOTS = ROOT / "test-artifacts" / "screenshots"


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def ask(app, path, method="GET"):
    """(status, headers, body) of one HTTP request through an ASGI app."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "headers": []}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body.decode()


async def streamlit(scope, receive, send):
    """Stands for the app behind the middleware: it answers every request it is given with "the app"."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"the app"})


def test_until_prepared_a_page_shows_how_far_the_preparation_has_got_and_the_health_check_waits():
    clock = Clock()
    progress = Progress(clock=clock)
    app = WhilePreparing(streamlit, progress)
    status, headers, body = ask(app, "/Train")
    assert status == 200 and headers[b"content-type"].startswith(b"text/html")
    assert f"The lab is preparing: {PARTS[0]}… 0 of {len(PARTS)} parts ready (0 s so far)" in body.replace(
        "&#x27;", "'"
    )
    # it follows the health check, and opens the same address once that says "ok" (no JavaScript: it reloads)
    assert 'fetch("/_stcore/health"' in body and "window.location.reload()" in body
    assert f'<noscript><meta http-equiv="refresh" content="{RELOAD_SECONDS}"></noscript>' in body
    with progress.part(PARTS[0]):
        pass
    clock.now += 41
    with progress.part(PARTS[1]):
        status, _, body = ask(app, "/")
        assert f"{PARTS[1]}… 1 of {len(PARTS)} parts ready (41 s so far)" in body
        status, headers, line = ask(app, "/_stcore/health")
        assert status == 503 and line == progress.line() and headers[b"retry-after"] == str(RELOAD_SECONDS).encode()
    assert ask(app, "/Train", "HEAD")[2] == ""  # a HEAD gets the headers alone
    for path in ("/static/js/main.js", "/_stcore/host-config", "/favicon.png", "/oauth2callback", "/auth/login"):
        assert ask(app, path)[2] == "the app", path  # what is not a page's address goes through
    for part in PARTS[2:]:
        with progress.part(part):
            pass
    assert f"{len(PARTS)} of {len(PARTS)} parts ready" in progress.line()
    progress.finish()
    assert ask(app, "/Train")[2] == ask(app, "/_stcore/health")[2] == "the app"  # ready: everything goes through


def test_a_pages_address_is_told_from_files_and_endpoints():
    assert is_page("/") and is_page("/Train") and is_page("/Lessons")
    assert not any(map(is_page, ["/_stcore/stream", "/static/css/x.css", "/media/a.png", "/app/static/f", "/x.js"]))


def _first_answer(url, deadline):
    """The first HTTP answer of `url`: (seconds waited, status, body); a refused connection is retried (the
    server is not listening yet), every answer is returned."""
    start = time.monotonic()
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return time.monotonic() - start, response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return time.monotonic() - start, error.code, error.read().decode()
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


def test_a_real_server_answers_at_once_with_its_progress_and_the_same_tab_opens_the_page_when_ready(tmp_path):
    if not Path(CHROMIUM).exists():
        need_browser(f"{CHROMIUM} is not installed")
    with chromium() as browser:
        page = browser.new_context(viewport=LAPTOP).new_page()
        server = AppServer(tmp_path / "user_checkpoints")
        try:
            _, status, body = _first_answer(f"{server.url}/Sample?seed=7", time.monotonic() + 120)
            # the first answer is the notice: the server answers before its preparation is done
            assert status == 200 and "The lab is preparing" in body, body[:500]
            assert re.search(rf"\d of {len(PARTS)} parts ready", body)
            _, status, line = _first_answer(f"{server.url}/_stcore/health", time.monotonic() + 10)
            assert (status, line) == (200, "ok") or (status == 503 and "parts ready" in line)  # (ready in between)
            page.goto(f"{server.url}/Sample?seed=7")
            notice = page.locator("#preparing")
            if notice.count():  # still preparing: what the visitor sees
                assert "parts ready" in notice.inner_text()
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "Preparing-laptop.png"))
            # nothing to do but wait: the same tab reloads itself into the page, its settings kept
            page.wait_for_selector(SCRIPT_DONE, timeout=300_000)
            page.wait_for_selector('[data-testid="stMain"] h1:has-text("Sample")', timeout=120_000)
            assert page.url.endswith("/Sample?seed=7")
            assert _first_answer(f"{server.url}/_stcore/health", time.monotonic() + 10)[1:] == (200, "ok")
            assert "prepared for the first visitors" in server.output(None)
        finally:
            page.context.close()
            server.stop()
