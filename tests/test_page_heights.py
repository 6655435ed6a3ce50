"""At most three screens on a 1366×768 laptop, in a real browser: every page and every lesson, once its
default content has loaded, is at most PAGE_MAX pixels tall and names things in words (no cell, run or
file ids in its text, as tests/test_student_words.py checks everything rendered); the Train page's Start
button sits on the first screen with its main settings (cell, hidden size, time) beside it, not below the
chart; the Ablation page's first screen holds its question, the chart of its arms and its answer.
Screenshots go to test-artifacts/screenshots/heights/, for a person to look at.

Skipped only when /usr/bin/chromium is missing and CI is not set (as tests/test_browser.py).
"""

import pytest
from helpers import laptop_page, wait_for_widgets
from test_student_words import IDS

from benchmarks.app import LAPTOP, ROOT, app_pages, open_page
from ui.lessons import LESSONS

SHOTS = ROOT / "test-artifacts" / "screenshots" / "heights"
MAIN = '[data-testid="stMain"]'
PAGE_MAX = 2300  # three laptop screens of 768 pixels, less the browser's own bars
# how tall the page's content is: Streamlit scrolls an element inside the page, not the window, so the
# tallest scrolling box (the document's own included) holds it
SCROLL_HEIGHT_JS = """() => Math.max(document.scrollingElement.scrollHeight,
    ...[...document.querySelectorAll('*')]
        .filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowY))
        .map(e => e.scrollHeight))"""
# the text a student reads on the page: the cells' source code and the model's own samples (code blocks) and
# the Checkpoints page's downloads (a file's name, where it is saved) aside
WORDS_JS = """() => { const main = document.querySelector('[data-testid="stMain"]').cloneNode(true);
    main.querySelectorAll('pre, code, [data-testid="stDownloadButton"]').forEach(e => e.remove());
    return main.innerText; }"""


@pytest.fixture(scope="module")
def laptop(tmp_path_factory):
    with laptop_page(tmp_path_factory.mktemp("user_checkpoints"), 90_000) as (app, page):
        yield app, page


def settled_height(page, name):
    """The page's height once its widgets and charts have drawn. A screenshot shows all of it: the window
    is made as tall as the page for it (the page scrolls inside the window, so a full-page shot would not)."""
    wait_for_widgets(page)
    page.wait_for_timeout(1_000)  # charts and fragments settle
    height = page.evaluate(f"({SCROLL_HEIGHT_JS})()")
    print(f"{name}: {height} px")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": LAPTOP["width"], "height": height})
    page.wait_for_timeout(300)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size(LAPTOP)
    return height


def test_every_page_and_every_lesson_is_at_most_three_laptop_screens_in_words(laptop):
    server, page = laptop
    heights, ids = {}, {}
    for path, _ in app_pages():
        open_page(page, f"{server.url}/{path}")
        heights[path or "Home"] = settled_height(page, path or "Home")
        ids[path or "Home"] = IDS.findall(page.evaluate(f"({WORDS_JS})()"))
    for number, (slug, lesson) in enumerate(LESSONS.items(), 1):
        open_page(page, f"{server.url}/Lessons?lesson={slug}")
        page.wait_for_selector(f"{MAIN} h2:has-text('{number} · {lesson.title}')")
        heights[f"lesson {number}"] = settled_height(page, f"Lesson-{number}-{slug}")
        ids[f"lesson {number}"] = IDS.findall(page.evaluate(f"({WORDS_JS})()"))
    too_tall = {name: height for name, height in heights.items() if height > PAGE_MAX}
    assert not too_tall, f"taller than {PAGE_MAX} px at 1366×768: {too_tall}"
    assert not {name: found for name, found in ids.items() if found}, "identifiers where students read words"
    assert min(heights.values()) >= LAPTOP["height"] - 100, f"the height was not measured: {heights}"


def test_the_train_pages_start_button_and_main_settings_are_on_the_first_screen(laptop):
    server, page = laptop
    open_page(page, f"{server.url}/Train")
    wait_for_widgets(page)
    page.wait_for_timeout(500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "Train-first-screen.png"))
    for what, selector in (
        ("Start", f"{MAIN} .st-key-train_start button"),
        ("the memory race", f"{MAIN} .st-key-train_memory_race"),
        ("the cell", f"{MAIN} .st-key-train_cell"),
        ("the hidden size", f"{MAIN} .st-key-train_hidden"),
        ("the time", f"{MAIN} .st-key-train_seconds"),
    ):
        box = page.locator(selector).bounding_box()
        assert box is not None, f"{what} is not on the Train page"
        assert 0 <= box["y"] and box["y"] + box["height"] <= LAPTOP["height"], (
            f"{what} is below the first screen: {box}"
        )
    chart = page.locator(f"{MAIN} .st-key-train_chart").bounding_box()
    start = page.locator(f"{MAIN} .st-key-train_start button").bounding_box()
    assert chart is not None and start["y"] < chart["y"], "Start sits below the chart"


def test_the_ablation_pages_first_screen_asks_its_question_shows_the_arms_and_answers(laptop):
    server, page = laptop
    open_page(page, f"{server.url}/Ablation")
    wait_for_widgets(page)
    page.wait_for_timeout(500)
    for what, locator in (
        ("the question", page.locator(MAIN).get_by_text("help the GRU learn?").first),
        ("the chart of the arms", page.locator(f"{MAIN} .stPlotlyChart").first),
        ("the answer", page.locator(MAIN).get_by_text("The answer.").first),
    ):
        box = locator.bounding_box()
        assert box is not None, f"{what} is not on the Ablation page"
        assert box["y"] + box["height"] <= LAPTOP["height"], f"{what} is below the first screen: {box}"
    assert not page.locator(MAIN).get_by_text("Welch").first.is_visible(), "the statistics stay in the expander"
