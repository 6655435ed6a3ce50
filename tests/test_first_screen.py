"""One screen per idea, on a 1366×768 laptop in a real browser: every lesson's question, its first
control and its first figure are on the first screen without scrolling, and every page opens on
something to read or do. Screenshots of each go to test-artifacts/screenshots/laptop/, for a person
to look at.

Skipped only when /usr/bin/chromium is missing and CI is not set (as tests/test_browser.py).
"""

import pytest
from helpers import laptop_page, wait_for_widgets

from benchmarks.app import LAPTOP, ROOT, app_pages, open_page
from ui.lessons import LESSONS

SHOTS = ROOT / "test-artifacts" / "screenshots" / "laptop"
MAIN = '[data-testid="stMain"]'
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
def laptop(tmp_path_factory):
    with laptop_page(tmp_path_factory.mktemp("user_checkpoints"), 60_000) as (app, page):
        yield app, page


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


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


@pytest.mark.parametrize("slug", list(LESSONS))
def test_each_lessons_question_control_and_first_figure_fit_a_laptops_first_screen(laptop, slug):
    server, page = laptop
    open_page(page, f"{server.url}/Lessons?lesson={slug}")
    wait_for_widgets(page)
    page.wait_for_timeout(500)  # charts settle
    number = list(LESSONS).index(slug) + 1
    shot(page, f"Lesson-{number}-{slug}")
    heading = page.locator(f"{MAIN} h2:has-text('{number} · {LESSONS[slug].title}')").bounding_box()
    question = page.locator(f"{MAIN} p:has-text('The question.')").first.bounding_box()
    assert heading and question and question["y"] + question["height"] <= LAPTOP["height"], question
    below = question["y"] + question["height"]
    control = first_below_the_top(page, CONTROLS, below)
    start = page.locator(f"{MAIN} [data-testid='stButton'] button:has-text('Start')")
    figure = first_below_the_top(page, FIGURES, below, wait_ms=2_000 if start.count() else 20_000)
    if figure is None and start.count():  # a live lesson: its first figure comes with the run the student starts
        start.first.click()
        page.wait_for_selector(FIGURES, timeout=90_000)
        page.wait_for_timeout(500)
        shot(page, f"Lesson-{number}-{slug}-running")
        figure = first_below_the_top(page, FIGURES, below)
    assert control is not None and control <= LAPTOP["height"] - 30, f"{slug}: first control at {control}"
    assert figure is not None and figure <= LAPTOP["height"] - 100, f"{slug}: first figure at {figure}"


def test_every_page_opens_on_its_title_and_something_to_do_on_a_laptop(laptop):
    server, page = laptop
    for path, file_name in app_pages():
        open_page(page, f"{server.url}/{path}")
        wait_for_widgets(page)
        page.wait_for_timeout(500)
        shot(page, path or "Home")
        title = page.locator(f"{MAIN} h1").first.bounding_box()
        assert title and title["y"] + title["height"] <= LAPTOP["height"] / 3, f"{file_name}: title at {title}"
        first = first_below_the_top(page, f"{CONTROLS}, {FIGURES}, {MAIN} [data-testid='stPageLink']", title["y"])
        assert first is not None and first <= LAPTOP["height"] - 30, f"{file_name}: nothing to do on the first screen"
