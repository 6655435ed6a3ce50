"""A laptop's screens (1366×768), in a real browser: one screen per idea, and at most three for a page.

- Every lesson's question, its first control and its first figure are on the first screen without scrolling;
  every page opens on its title and something to read or do. Then each lesson (opened from its link) runs
  without an exception and reveals its answer; the step-through steps on; the lesson on learning a text
  links to its full page with its settings.
- Every page and every lesson, once its default content has loaded, is at most PAGE_MAX pixels tall and names
  things in words (no cell, run or file ids in its text, as tests/test_student_words.py checks everything
  rendered).
- The Train page's Start button sits on the first screen with its main settings (cell, hidden size, time)
  beside it, not below the chart; the Ablation page's first screen holds its question, the chart of its arms
  and its answer.

- A direct link to Train, the fresh server's first visit, gets the app's own sidebar and the link's settings.

Each page and lesson is opened once for all of it, by one server and one browser. Screenshots go to
test-artifacts/screenshots/laptop/ (the first screen) and heights/ (the whole page), for a person to look at.

Skipped only when /usr/bin/chromium is missing and CI is not set (as tests/test_browser.py).
"""

import pytest
from helpers import assert_no_exception, follow_to_full_page, laptop_page, sidebar_names, wait_for_widgets
from test_student_words import IDS

from benchmarks.app import LAPTOP, ROOT, SCRIPT_DONE, app_pages, open_page
from ui.lessons import LESSONS
from ui.shared.common import PAGES

SHOTS = ROOT / "test-artifacts" / "screenshots"
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
CONTROLS = ", ".join(
    f"{MAIN} {selector}"
    for selector in (
        '[data-testid="stButton"] button',
        '[data-testid="stSlider"]',
        '[data-testid="stSelectbox"]',
        '[data-testid="stRadio"]',
        '[data-testid="stNumberInput"]',
        '[data-testid="stTextArea"]',
        '[data-testid="stSegmentedControl"]',
        '[data-testid="stButtonGroup"]',
        '[data-testid="stToggle"]',
    )
)
FIGURES = ", ".join(
    f"{MAIN} {selector}"
    for selector in (
        ".js-plotly-plot",
        '[data-testid="stImage"]',
        '[data-testid="stDataFrame"]',
        '[data-testid="stTable"]',
        '[data-testid="stHtml"]',
        '[data-testid="stCode"]',
        '[data-testid="stLatex"]',
    )
)


@pytest.fixture(scope="module")
def fresh_laptop(tmp_path_factory):
    """(server, page, what its first visit found): a fresh server's first visit is a direct link to Train,
    before anyone opened "/"."""
    with laptop_page(tmp_path_factory.mktemp("user_checkpoints"), 90_000) as (app, page):
        prepared = "prepared for the first visitors" in app.output(last_chars=None)  # before its health check said ok
        open_page(page, f"{app.url}/Train?hidden=32")
        page.wait_for_function("() => document.querySelector('.st-key-train_hidden input')?.value === '32'")
        page.wait_for_selector(SCRIPT_DONE)
        exceptions = page.locator('[data-testid="stException"]').count()
        title = page.locator(f"{MAIN} h1").first.inner_text()
        yield app, page, {"prepared": prepared, "sidebar": sidebar_names(page), "title": title, "errors": exceptions}


@pytest.fixture(scope="module")
def laptop(fresh_laptop):
    return fresh_laptop[:2]


def test_a_direct_link_to_a_fresh_server_gets_the_apps_sidebar(fresh_laptop):
    """A link to /Train opened before anyone opened "/" shows the lab's own sidebar (Home first, no automatic
    "app" entry) and the link's settings. The server prepared for it before its pages opened (until then they show
    how far it has got: tests/test_start_speaks.py)."""
    _, _, first = fresh_laptop
    assert first["prepared"]
    assert first["sidebar"] == list(PAGES)
    assert first["title"].endswith("Train") and first["errors"] == 0


def settled_height_and_ids(page, name):
    """The page's height once its widgets and charts have drawn, and the ids in its words. A screenshot shows
    all of it: the window is made as tall as the page for it (the page scrolls inside the window, so a
    full-page shot would not)."""
    height = page.evaluate(f"({SCROLL_HEIGHT_JS})()")
    print(f"{name}: {height} px")
    page.set_viewport_size({"width": LAPTOP["width"], "height": height})
    page.wait_for_timeout(300)
    shot(page, "heights", name)
    page.set_viewport_size(LAPTOP)
    assert height >= LAPTOP["height"] - 100, f"{name}: the height was not measured ({height} px)"
    assert height <= PAGE_MAX, f"{name}: {height} px tall at 1366×768, over {PAGE_MAX}"
    ids = IDS.findall(page.evaluate(f"({WORDS_JS})()"))
    assert not ids, f"{name}: identifiers where students read words: {ids}"


def first_below_the_top(page, selector, after_y, wait_ms=20_000):
    """The top (y) of the first element matching `selector` that starts below `after_y`, or None if none
    has come within `wait_ms`: Streamlit draws a widget as a grey placeholder until its script has
    loaded, which on a fresh server and busy cores can outlast the page's run."""
    top = """([selector, after]) => {
        const tops = [...document.querySelectorAll(selector)]
            .map(e => e.getBoundingClientRect())
            .filter(r => r.height > 0 && r.top >= after)
            .map(r => r.top);
        return tops.length ? Math.min(...tops) : null;
    }"""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(top, arg=[selector, after_y], timeout=wait_ms)
    except PlaywrightTimeout:
        return None
    return page.evaluate(top, [selector, after_y])


def shot(page, folder, name):
    (SHOTS / folder).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / folder / f"{name}.png"))


def open_settled(page, url):
    open_page(page, url)
    wait_for_widgets(page)
    page.wait_for_timeout(1_000)  # charts and fragments settle


@pytest.mark.parametrize("slug", list(LESSONS))
def test_each_lesson_asks_controls_and_shows_on_its_first_screen_in_at_most_three(laptop, slug):
    server, page = laptop
    open_settled(page, f"{server.url}/Lessons?lesson={slug}")
    number = list(LESSONS).index(slug) + 1
    heading = page.locator(f"{MAIN} h2:has-text('{number} · {LESSONS[slug].title}')").bounding_box()
    shot(page, "laptop", f"Lesson-{number}-{slug}")
    settled_height_and_ids(page, f"Lesson-{number}-{slug}")
    question = page.locator(f"{MAIN} p:has-text('The question.')").first.bounding_box()
    assert heading and question and question["y"] + question["height"] <= LAPTOP["height"], question
    below = question["y"] + question["height"]
    control = first_below_the_top(page, CONTROLS, below)
    start = page.locator(f"{MAIN} [data-testid='stButton'] button:has-text('Start')")
    figure = first_below_the_top(page, FIGURES, below, wait_ms=2_000 if start.count() else 20_000)
    started = figure is None and start.count()
    if started:  # a live lesson: its first figure comes with the run the student starts
        start.first.click()
        page.wait_for_selector(FIGURES, timeout=90_000)
        page.wait_for_timeout(500)
        shot(page, "laptop", f"Lesson-{number}-{slug}-running")
        figure = first_below_the_top(page, FIGURES, below)
    assert control is not None and control <= LAPTOP["height"] - 30, f"{slug}: first control at {control}"
    assert figure is not None and figure <= LAPTOP["height"] - 100, f"{slug}: first figure at {figure}"
    reveal_the_answer(page, slug, started)


def reveal_the_answer(page, slug, started):
    """After the lesson's screens are measured: it runs without an exception, the step-through steps on, the
    notice and the answer show, and the lesson on learning a text links to its full page with its settings."""
    assert_no_exception(page, f"lesson {slug}")
    if slug == "step-through":  # step on: the numbers move (the worked update in the notice), the URL follows
        worked = page.locator(f'{MAIN} [data-testid="stMarkdownContainer"]:has(h4:has-text("What to notice"))')
        first = worked.inner_text()
        page.locator(".st-key-lessons_step_next button").click()
        page.wait_for_url("**/Lessons?*t=2*")
        page.wait_for_selector("text=Step t = 2 of")
        page.wait_for_selector(SCRIPT_DONE)
        assert worked.inner_text() != first, "step 2 shows step 1's numbers"
    if slug == "learn-your-text" and not started:  # a live run: its samples are replayed one by one as it trains
        page.locator(".st-key-lessons_learn_start button").click()
    page.wait_for_selector("h4:has-text('What to notice')", timeout=90_000)
    page.get_by_text("Show the answer").click()
    page.wait_for_timeout(300)
    answer = page.locator(f'{MAIN} details[open] [data-testid="stExpanderDetails"]')
    assert answer.count() == 1 and len(answer.inner_text()) > 80, f"no answer revealed in {slug}"
    if slug == "learn-your-text":  # it links to its full page with the same settings
        link = page.locator(f'{MAIN} [data-testid="stPageLink"] a')
        follow_to_full_page(page, link, "**/Train?*hidden=128*", "train_hidden", "128")


@pytest.mark.parametrize(("path", "file_name"), app_pages())
def test_each_page_opens_on_its_title_and_something_to_do_in_at_most_three_screens(laptop, path, file_name):
    server, page = laptop
    open_settled(page, f"{server.url}/{path}")
    shot(page, "laptop", path or "Home")
    title = page.locator(f"{MAIN} h1").first.bounding_box()
    assert title and title["y"] + title["height"] <= LAPTOP["height"] / 3, f"{file_name}: title at {title}"
    first = first_below_the_top(page, f"{CONTROLS}, {FIGURES}, {MAIN} [data-testid='stPageLink']", title["y"])
    assert first is not None and first <= LAPTOP["height"] - 30, f"{file_name}: nothing to do on the first screen"
    settled_height_and_ids(page, path or "Home")


def test_the_train_pages_start_button_and_main_settings_are_on_the_first_screen(laptop):
    server, page = laptop
    open_settled(page, f"{server.url}/Train")
    shot(page, "laptop", "Train-first-screen")
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
    open_settled(page, f"{server.url}/Ablation")
    for what, locator in (
        ("the question", page.locator(MAIN).get_by_text("help the GRU learn?").first),
        ("the chart of the arms", page.locator(f"{MAIN} .stPlotlyChart").first),
        ("the answer", page.locator(MAIN).get_by_text("The answer.").first),
    ):
        box = locator.bounding_box()
        assert box is not None, f"{what} is not on the Ablation page"
        assert box["y"] + box["height"] <= LAPTOP["height"], f"{what} is below the first screen: {box}"
    assert not page.locator(MAIN).get_by_text("Welch").first.is_visible(), "the statistics stay in the expander"
