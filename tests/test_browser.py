"""One real-browser journey through the app: `streamlit run serve.py` driven by Debian's chromium.

Every page (Home and whatever pages/ holds) renders without an exception (every lesson, with its
answer revealed, in tests/test_page_heights.py); a lesson's link carries its settings to a full
page visited before; on
Train a tiny model's loss chart gains points after Start, and bad corpus
uploads give an error; on Gates a word the mouse drags over is the span whose units are listed;
on Checkpoints a pickle upload is refused; closing a tab
stops that session's training, and the class-of-30 benchmark's scripted students keep theirs as
an open tab does. Screenshots go to test-artifacts/screenshots/.

Skipped only when /usr/bin/chromium is missing and CI is not set; with CI set a
missing browser is a failure.

Long (over 400 lines) because its tests share one server and one browser (module fixtures): started
once, they keep CI within its time.
"""

import os
import pickle
import re
import time
from pathlib import Path

import pytest
from helpers import assert_no_exception, chromium, follow_to_full_page, need_browser, sidebar_names, wait_for_widgets

from benchmarks.app import (
    CHART_POINTS_JS,
    CHROMIUM,
    LAPTOP,
    ROOT,
    SCRIPT_DONE,
    AppServer,
    app_pages,
    chart_points,
    click_start_and_time_first_point,
    open_page,
    record_script_ends,
    stop_training,
)
from benchmarks.scripted_student import ScriptedStudent
from lab.data import CharTokenizer
from lab.nets.models import LMConfig, build_model
from lab.server.spaces import new_space_key
from lab.training.checkpoints import checkpoint_bytes, read_info
from ui.shared.common import PAGES
from ui.shared.sessions import SPACE_COOKIE

SHOTS = ROOT / "test-artifacts" / "screenshots"
VIEWPORT = {"width": 1400, "height": 2200}  # tall: Streamlit scrolls inside the page, not the window
# a model small enough to train at hundreds of steps a second on a shared CPU
TINY = "emb=8&hidden=16&batch=16&block=32&eval_every=10"
ERROR = '[data-testid="stAlertContentError"]'
UNATTENDED = 6  # seconds without a heartbeat after which this test server stops a session's runs


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("user_checkpoints")


@pytest.fixture(scope="module")
def server(user_dir):
    if not Path(CHROMIUM).exists():
        need_browser(f"{CHROMIUM} is not installed")
    app = AppServer(user_dir, extra_env={"RNNLAB_UNATTENDED_SECONDS": str(UNATTENDED)})
    try:
        yield app.wait_healthy()
    finally:
        app.stop()


@pytest.fixture(scope="module")
def browser(server):
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


def screenshot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def test_every_page_renders_without_an_exception(server, page):
    pages = app_pages()
    assert {name for name, _ in pages} >= {"", "Train", "Checkpoints"}
    for path, file_name in pages:
        seconds = open_page(page, f"{server.url}/{path}")
        page.wait_for_timeout(300)  # charts and fragments settle
        assert_no_exception(page, file_name)
        screenshot(page, path or "Home")
        print(f"{file_name}: {seconds:.2f} s")
    assert sidebar_names(page) == list(PAGES), "the sidebar lists the pages by name, Home first"


def test_a_lessons_link_brings_its_settings_to_a_page_visited_before(server, page):
    open_page(page, f"{server.url}/Memory")
    open_page(page, f"{server.url}/Lessons?lesson=vanilla-forgets")
    slider = page.locator(".st-key-lessons_forget_steps input[type='range']")
    slider.focus()
    slider.press("ArrowLeft")  # 100 -> 90 steps
    page.wait_for_selector("text=Open the Memory page with T = 90")
    page.wait_for_selector(SCRIPT_DONE)
    # within the session (no reload), to a page whose own settings were set on the earlier visit
    follow_to_full_page(
        page,
        page.get_by_text("Open the Memory page with T = 90"),
        "**/Memory?section=gradients&steps=90",
        "memory_grad_steps",
        "90",
    )
    screenshot(page, "Memory-from-a-lesson")


def test_start_draws_loss_points_that_keep_coming(server, page):
    # ten minutes, ended by Stop: on a loaded machine the niced training process can be starved for a minute,
    # and a run that ends by itself first leaves Stop disabled (the second point is then its final one)
    open_page(page, f"{server.url}/Train?{TINY}&seconds=600&name=browser-tiny")
    latency = click_start_and_time_first_point(page)  # waits for the first point (timed in benchmarks/, not here)
    print(f"click Start -> first loss point: {latency:.2f} s")
    first = chart_points(page)
    page.wait_for_function(f"({CHART_POINTS_JS})() > {first}")
    assert "tokens/s" in page.inner_text('[data-testid="stMain"]')
    screenshot(page, "Train-running")
    stop_training(page)
    assert "browser-tiny" in page.inner_text('[data-testid="stAlertContentSuccess"] >> nth=0')
    assert_no_exception(page, "Train after Stop")
    screenshot(page, "Train-stopped")


def test_start_and_the_live_charts_top_are_on_a_laptops_first_screen(server, browser):
    """At 1366×768, without scrolling: Start whole, and the live chart's top with room for its first lines."""
    context = browser.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        open_page(page, f"{server.url}/Train")
        page.wait_for_selector(".st-key-train_chart .js-plotly-plot")
        start = page.locator(".st-key-train_start button").bounding_box()
        chart = page.locator(".st-key-train_chart .js-plotly-plot").bounding_box()
        assert 0 <= start["y"] and start["y"] + start["height"] <= LAPTOP["height"], start
        assert 0 <= chart["y"] <= LAPTOP["height"] - 150, chart  # its legend and upper curves show
        screenshot(page, "Train-1366x768")
    finally:
        context.close()


SPAN_TEXT = ".st-key-gates_span_text .rnnlab-span-text"  # the Gates page's text to select a span in


def test_gates_opens_on_its_gallery_and_moving_the_span_reruns_only_the_span(server, browser):
    """At 1366×768: the gallery's first cards on the first screen; Shift and the right arrow key in the
    text move the span's end one on: the span's part alone reruns, and the highlighted span follows."""
    context = browser.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        ends = record_script_ends(page)
        open_page(page, f"{server.url}/Gates")
        card = page.locator('[data-testid="stMain"] div[style*="max-height: 11rem"]').first  # a card's text
        card.wait_for()
        wait_for_widgets(page)
        assert card.bounding_box()["y"] <= LAPTOP["height"] - 120, card.bounding_box()  # its first lines show
        screenshot(page, "Gates-1366x768")
        assert "page" in ends  # the messages were read (the sidebar's heartbeat adds a fragment's run now and then)
        highlighted = page.locator(f"{SPAN_TEXT} span.chosen")
        # the component can be drawn a moment after the script's end: count its span once it is there
        page.wait_for_function(f"() => document.querySelectorAll('{SPAN_TEXT} span.chosen').length > 0")
        before, runs = highlighted.count(), len(ends)
        page.locator(SPAN_TEXT).focus()
        page.keyboard.press("Shift+ArrowRight")  # the span's end, one on
        page.wait_for_function(f"() => document.querySelectorAll('{SPAN_TEXT} span.chosen').length > {before}")
        page.wait_for_selector(SCRIPT_DONE)
        assert highlighted.count() == before + 1
        completed = [end for end in ends[runs:] if end != "cut short"]
        assert completed and set(completed) == {"fragment"}, ends[runs:]
        assert_no_exception(page, "Gates after moving the span")
    finally:
        context.close()


def test_gates_dragging_over_a_word_shows_the_units_that_fire_on_it(server, browser):
    """At 1366×768 the student drags the mouse across "Angels" in the text: the word is highlighted,
    named over the units that fire on it, and those units are others than the first span's."""
    context = browser.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        open_page(page, f"{server.url}/Gates")
        text = page.locator(SPAN_TEXT)
        text.scroll_into_view_if_needed()
        heading = page.locator('[data-testid="stMarkdownContainer"] strong:has-text("The units that fire on")')
        assert heading.inner_text() == "The units that fire on “[Enter Ghost.”"

        def units():
            buttons = page.locator('[class*="st-key-gates_span_show_"] button')
            return [buttons.nth(i).inner_text() for i in range(buttons.count())]

        shown_js = """() => [...document.querySelectorAll('[class*="st-key-gates_span_show_"] button')]
            .map(b => b.innerText).join('|')"""
        # the five buttons can arrive one by one after the script's end: read them once all are there
        page.wait_for_function(f"() => ({shown_js})().split('|').length === 5")
        before = units()
        assert len(before) == 5, before
        pieces = text.locator("span[data-t]")
        first = page.evaluate(f"() => document.querySelector('{SPAN_TEXT}').textContent.indexOf('Angels')")
        a, s = pieces.nth(first).bounding_box(), pieces.nth(first + len("Angels") - 1).bounding_box()
        page.mouse.move(a["x"] + 1, a["y"] + a["height"] / 2)
        page.mouse.down()
        page.mouse.move(s["x"] + s["width"] - 1, s["y"] + s["height"] / 2, steps=8)
        page.mouse.up()
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-testid=\"stMarkdownContainer\"] strong')]"
            ".some(e => e.innerText.includes('“Angels”'))"
        )
        page.wait_for_selector(SCRIPT_DONE)
        assert text.locator("span.chosen").all_inner_texts() == list("Angels")
        page.wait_for_function(  # the span's units, all five, and others than the first span's
            f"before => {{ const now = ({shown_js})(); return now !== before && now.split('|').length === 5; }}",
            arg="|".join(before),
        )
        assert units() != before and len(units()) == 5
        page.wait_for_url(f"**span={first}-{first + 5}**")  # the link keeps it (one token a character)
        assert_no_exception(page, "Gates after selecting a word")
        page.screenshot(path=f"/tmp/helper-span-{os.getpid()}.png")
    finally:
        context.close()


TYPING_BOX = ".st-key-sample_typing_box"  # the Sample page's text box whose bars follow each key press
TYPING_SHOWN_JS = f"""() => {{
    const root = document.querySelector('{TYPING_BOX} .rnnlab-typing');
    if (!root) return null;
    return {{
        text: root.querySelector('textarea').value,
        bars: [...root.querySelectorAll('.rnnlab-typing-bar .label')].map(e => e.textContent).join('|'),
        note: root.querySelector('.rnnlab-typing-note').textContent,
        stale: root.querySelector('.rnnlab-typing-bars').classList.contains('stale'),
    }};
}}"""


def test_sample_next_character_bars_follow_each_key_press_without_enter(server, browser):
    """At 1366×768 a student types into the Sample page's box: each key press, with no Enter, brings
    the bars for the text as it now is, read one step from the carried state, and only the typing part
    of the page reruns; clicking a bar types its token."""
    context = browser.new_context(viewport=LAPTOP)
    try:
        page = context.new_page()
        ends = record_script_ends(page)
        open_page(page, f"{server.url}/Sample")
        page.get_by_role("tab", name="Type and watch").click()  # the page's fourth tab
        box = page.locator(f"{TYPING_BOX} textarea")
        box.scroll_into_view_if_needed()
        page.wait_for_function(f"() => ({TYPING_SHOWN_JS})()?.bars.length > 0")
        before = page.evaluate(TYPING_SHOWN_JS)
        assert "from the zero state" in before["note"]
        ends.clear()
        box.click()
        box.press("End")
        box.press("e")  # a key, no Enter
        page.wait_for_function(
            f"text => {{ const s = ({TYPING_SHOWN_JS})(); return s.text === text && !s.stale"
            " && s.note.startsWith('Read 1 new token'); }",
            arg=before["text"] + "e",
        )
        after = page.evaluate(TYPING_SHOWN_JS)
        assert after["bars"] != before["bars"]
        for key in "re ":  # three quick presses: the last answer is for the whole text
            box.press(key)
        page.wait_for_function(
            f"text => {{ const s = ({TYPING_SHOWN_JS})(); return s.text === text && !s.stale"
            " && s.note.includes('new token'); }",
            arg=before["text"] + "ere ",
        )
        page.wait_for_selector(SCRIPT_DONE)
        assert ends and set(ends) <= {"fragment", "cut short"}, ends  # the typing part alone, never the page
        # the label read and the click in one step of the page: between two of playwright's, a late answer
        # for the same text may redraw the bars
        label = page.evaluate(
            f"() => {{ const bar = document.querySelector('{TYPING_BOX} .rnnlab-typing-bar');"
            " const label = bar.querySelector('.label').innerText; bar.click(); return label; }"
        )
        page.wait_for_function(
            f"n => {{ const s = ({TYPING_SHOWN_JS})(); return s.text.length === n && !s.stale; }}",
            arg=len(before["text"] + "ere ") + 1,
        )
        assert page.evaluate(TYPING_SHOWN_JS)["text"].endswith(label.replace("␣", " ").replace("↵", "\n"))
        page.wait_for_url("**typed=**")  # the link keeps the typed text
        assert_no_exception(page, "Sample after typing")
        screenshot(page, "sample-typing")
    finally:
        context.close()


def test_settings_are_mirrored_in_the_url(server, page):
    open_page(page, f"{server.url}/Train?hidden=32&bogus=1&layers=many")
    warnings = page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts()
    assert any("bogus=1" in w for w in warnings) and any("layers=many" in w for w in warnings)
    page.wait_for_url("**/Train?hidden=32")  # bad values dropped from the link, good ones kept
    hidden = page.locator(".st-key-train_hidden input")
    hidden.fill("48")
    hidden.press("Enter")
    page.wait_for_url("**/Train?hidden=48")
    page.wait_for_selector(SCRIPT_DONE)
    assert_no_exception(page, "Train with a bad link")


@pytest.mark.parametrize(
    "name, content, message", [("empty.txt", b"", "empty"), ("binary.txt", b"\x00\x01\x02binary\xff\xfe", "not UTF-8")]
)
def test_bad_corpus_uploads_show_an_error(server, page, name, content, message):
    open_page(page, f"{server.url}/Train?corpus=upload")
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": name, "mimeType": "text/plain", "buffer": content}]
    )
    page.wait_for_selector(f"{ERROR}:has-text('{message}')")
    page.wait_for_selector(SCRIPT_DONE)
    assert page.locator(".st-key-train_start button").is_disabled()
    assert_no_exception(page, f"Train with {name}")
    screenshot(page, f"Train-upload-{name.split('.')[0]}")


def students_files(user_dir):
    """The files the students' spaces hold, not the server's own at the folder's top (its key for the spaces, the
    class board's database and the journal SQLite opens and closes as the board is read)."""
    return sorted(p for p in user_dir.rglob("*") if not p.relative_to(user_dir).parts[0].startswith("."))


def test_pickle_checkpoint_upload_is_refused(server, page, user_dir):
    before = students_files(user_dir)
    open_page(page, f"{server.url}/Checkpoints")
    evil = pickle.dumps({"state_dict": [1, 2, 3]})
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": "evil.safetensors", "mimeType": "application/octet-stream", "buffer": evil}]
    )
    page.wait_for_selector(f"{ERROR}:has-text('pickle')")
    assert_no_exception(page, "Checkpoints with a pickle upload")
    assert students_files(user_dir) == before  # nothing written
    screenshot(page, "Checkpoints-pickle")


def running_in_app(page):
    text = page.get_by_text("This server's training budget").inner_text()
    return int(re.search(r"(\d+) runs?\), \d+ waiting", text).group(1))


def test_closing_the_tab_stops_its_training(server, browser, user_dir):
    trainer = browser.new_context(viewport=VIEWPORT).new_page()
    watcher = browser.new_context(viewport=VIEWPORT).new_page()
    try:
        open_page(trainer, f"{server.url}/Train?{TINY}&seconds=600&name=orphan")
        click_start_and_time_first_point(trainer)
        open_page(watcher, f"{server.url}/Train")
        deadline = time.monotonic() + 30  # on a busy machine the page can show its text a moment late
        while running_in_app(watcher) != 1 and time.monotonic() < deadline:
            watcher.wait_for_timeout(1000)
            open_page(watcher, f"{server.url}/Train")
        assert running_in_app(watcher) == 1
        trainer.context.close()  # the tab goes: its heartbeat stops
        closed = time.monotonic()
        deadline = closed + UNATTENDED + 30
        while running_in_app(watcher) and time.monotonic() < deadline:
            watcher.wait_for_timeout(1000)
            open_page(watcher, f"{server.url}/Train")
        print(f"training stopped {time.monotonic() - closed:.1f} s after the tab closed")
        assert running_in_app(watcher) == 0, "the closed tab's training kept running"
        # the job's own record: it saved its checkpoint with reason "stopped", long before its 600 s budget
        saved = [read_info(p) for p in user_dir.glob("*/orphan_v*.safetensors")]
        assert saved and saved[0].metrics["reason"] == "stopped"
    finally:
        watcher.context.close()


def test_a_scripted_student_keeps_its_run_as_an_open_tab_does(server, user_dir):
    """The class-of-30 benchmark's students (benchmarks.scripted_student), without a browser: Start pressed by
    its key trains a run; the page's timed fragments, which the script runs, keep it going well past the
    server's unattended limit; closing the connection stops it, as closing a tab does."""
    query = f"{TINY}&seconds=600&name=scripted"
    student = ScriptedStudent(server.url, "Train", query, {SPACE_COOKIE: new_space_key(user_dir)})
    student.open(timeout=120)
    student.press("train_start", timeout=120)
    student.keep_open()
    time.sleep(2 * UNATTENDED)
    fragments = student.ends.count("fragment")
    student.close()
    deadline = time.monotonic() + UNATTENDED + 60
    while not (saved := [read_info(p) for p in user_dir.glob("*/scripted_v*.safetensors")]):
        assert time.monotonic() < deadline, "the closed session's run was neither stopped nor saved"
        time.sleep(0.5)
    assert not student.errors
    assert fragments >= 3  # the heartbeat every 5 s, the live chart every 2
    assert saved[0].metrics["reason"] == "stopped"
    assert saved[0].metrics["elapsed"] > 1.5 * UNATTENDED  # kept by the fragments, not stopped as unattended


def tiny_checkpoint(name):
    tokenizer = CharTokenizer("abcdefgh \n")
    model = build_model(LMConfig(cell="gru_torch", vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=8))
    return checkpoint_bytes(model, tokenizer, {"history": [], "steps": 1}, name, 1)


def upload_and_save(page, file_name, data):
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": file_name, "mimeType": "application/octet-stream", "buffer": data}]
    )
    page.locator(".st-key-ckpt_save button").click()
    page.wait_for_selector('[data-testid="stAlertContentSuccess"]:has-text("Saved:")')
    page.wait_for_selector(SCRIPT_DONE)


def test_deleting_a_model_shows_one_notice_on_a_laptop_screen(server, browser):
    """Issue 41, item 6: the delete's confirmation is the only notice. The page opened on the model by its
    link (the URL names it) shows another one afterwards without a notice that reads like an error. A
    run's automatic name is shown in words, never its id or its file's name."""
    page = browser.new_context(viewport=LAPTOP).new_page()
    page.set_default_timeout(60_000)
    try:
        open_page(page, f"{server.url}/Checkpoints")
        upload_and_save(page, "upload.safetensors", tiny_checkpoint("gru_torch-e4-h8x1-1"))
        open_page(page, f"{server.url}/Checkpoints?model=yours%3A+gru_torch-e4-h8x1-1_latest")
        main = page.locator('[data-testid="stMain"]')
        assert "yours: GRU (z keeps) · 8 units · run 1" in main.inner_text()
        page.locator(".st-key-ckpt_confirm_delete label").click()
        page.wait_for_selector(SCRIPT_DONE)
        page.locator(".st-key-ckpt_delete button").click()
        page.wait_for_selector('[data-testid="stAlertContentSuccess"]:has-text("Deleted")')
        page.wait_for_selector(SCRIPT_DONE)
        page.wait_for_timeout(500)
        notices = page.locator('[data-testid="stMain"] [data-testid="stAlert"]')
        assert notices.count() == 1, [notices.nth(i).inner_text() for i in range(notices.count())]
        assert "no longer list it as “yours: GRU (z keeps) · 8 units · run 1”" in notices.first.inner_text()
        assert "model=yours" not in page.url  # the page moved to another model, and its link with it
        assert not re.search(r"gru_torch|_latest|\.safetensors", main.inner_text().split("Upload a checkpoint")[0])
        screenshot(page, "Checkpoints-after-delete")
    finally:
        page.context.close()


def checkpoint_menu(page, tries=3):
    """The names in the Checkpoints page's menu of checkpoints, read with the menu open. The click is
    made again when no menu opens: a page redrawing its widgets just then (CI saw it once, a moment
    after a reload) takes the click away."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    dropdown = page.locator('[data-testid="stSelectboxVirtualDropdown"]')
    for attempt in range(tries):
        page.locator(".st-key-ckpt_choice").click()
        try:
            dropdown.wait_for(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
    menu = dropdown.inner_text()
    page.keyboard.press("Escape")
    return menu


def test_two_students_at_once_keep_their_files_apart_and_a_reload_keeps_them(server, browser, user_dir):
    alice = browser.new_context(viewport=VIEWPORT).new_page()
    bob = browser.new_context(viewport=VIEWPORT).new_page()
    try:
        open_page(alice, f"{server.url}/Checkpoints")
        open_page(bob, f"{server.url}/Checkpoints")
        upload_and_save(alice, "alice-model.safetensors", tiny_checkpoint("alice-model"))
        upload_and_save(bob, "bob-model.safetensors", tiny_checkpoint("bob-model"))
        for page, mine, theirs in ((alice, "alice-model", "bob-model"), (bob, "bob-model", "alice-model")):
            assert "rnnlab_space" in [c["name"] for c in page.context.cookies()]
            open_page(page, f"{server.url}/Checkpoints")  # a reload: a new Streamlit session, the same browser
            menu = checkpoint_menu(page)
            assert f"yours: {mine}" in menu and theirs not in menu, menu  # listed by its name for students
        folders = [f for f in user_dir.iterdir() if any(f.glob("*-model_v1.safetensors"))]
        assert len(folders) == 2 and all(len(list(f.glob("*_v1.safetensors"))) == 1 for f in folders)
        screenshot(bob, "Checkpoints-two-students")
    finally:
        alice.context.close()
        bob.context.close()


@pytest.fixture
def fetch_recorder():
    """A web server on 127.0.0.1 that records every request: a page that fetched from it rendered an
    image, or followed a link, written by a user."""
    import http.server
    import threading

    requests = []

    class Record(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    recorder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{recorder.server_port}", requests
    recorder.shutdown()


def test_nothing_a_user_writes_renders_as_markdown_or_a_link(server, page, fetch_recorder):
    from urllib.parse import quote

    here, fetched = fetch_recorder
    # Markdown's image and link, HTML and a bare address, in one text: each page is opened once with it
    payload = f"x\n\n![p]({here}/markdown.png) [Log in again]({here}/phish) <img src='{here}/html.png'> {here}/bare-url"
    for path, file_name in app_pages():  # an unknown parameter and a known one (a text box's) alike
        open_page(page, f"{server.url}/{path}?zz={quote(payload)}&prompt={quote(payload)}&text={quote(payload)}")
        page.wait_for_timeout(200)
        assert_no_exception(page, file_name)
        links = page.locator(f'a[href^="{here}"]')
        assert links.count() == 0, f"{file_name} shows a link to {links.first.get_attribute('href')}"
    open_page(page, f"{server.url}/Checkpoints")  # a file name is a user's string too
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": f"![x]({here}/upload.png).safetensors", "mimeType": "", "buffer": tiny_checkpoint("x")}]
    )
    page.wait_for_selector('[data-testid="stAlertContentSuccess"]')
    page.wait_for_timeout(500)
    assert fetched == [], f"the browser fetched {fetched}"


def test_two_tabs_opened_at_once_on_a_first_visit_share_one_space(server, browser, user_dir):
    context = browser.new_context(viewport=VIEWPORT)
    first, second = context.new_page(), context.new_page()
    try:
        for tab in (first, second):  # both ask before either has a cookie
            tab.goto(f"{server.url}/Checkpoints", wait_until="commit")
        for tab in (first, second):
            tab.wait_for_selector(SCRIPT_DONE, timeout=60_000)
            tab.wait_for_selector('[data-testid="stFileUploaderDropzoneInput"]', state="attached", timeout=60_000)
        upload_and_save(first, "two-tabs.safetensors", tiny_checkpoint("two-tabs"))
        for tab in (first, second):
            tab.bring_to_front()  # a menu opens in the tab that has the focus
            open_page(tab, f"{server.url}/Checkpoints")  # a reload
            menu = checkpoint_menu(tab)
            assert "yours: two-tabs" in menu, menu
        assert len([f for f in user_dir.iterdir() if any(f.glob("two-tabs_v1.safetensors"))]) == 1
    finally:
        context.close()
