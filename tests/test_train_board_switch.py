"""Where the class board's switch sits on the Train page (issue 51, item 6): in the row under Start, in the
same block as the buttons whose runs it posts, not at the bottom of "More settings" a thousand pixels
below them with its label cut off."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Expander

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path / "user_checkpoints"))


def path_to(node, key, path=()):
    """The blocks from the page's main area down to the widget `key` (the widget last), or None."""
    if getattr(node, "key", None) == key:
        return [*path, node]
    children = getattr(node, "children", None)
    for child in children.values() if isinstance(children, dict) else ():
        found = path_to(child, key, (*path, node))
        if found:
            return found
    return None


def test_the_class_board_switch_sits_in_the_row_under_start_not_in_more_settings():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/1_Train.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    main = at.main
    start, switch, name = (path_to(main, key) for key in ("train_start", "train_board_on", "train_board_name"))
    assert start and switch and name
    assert not any(isinstance(block, Expander) for block in switch + name), "the switch is inside an expander"
    # the same block as Start's: its controls, the buttons' row and then the switch's row
    assert start[1] is switch[1] is name[1]
    rows = [id(row) for row in start[1].children.values()]
    assert rows.index(id(switch[2])) == rows.index(id(start[2])) + 1, "the switch's row does not follow the buttons'"
    assert switch[2] is name[2]  # the switch and the name it posts under side by side
    assert switch[-1].label == "Show my runs on the class board"


def test_on_a_laptop_the_switch_is_on_the_first_screen_under_start_its_label_whole(tmp_path):
    """At 1366×768, in a real browser: the switch and the name box are on the first screen, under Start, and the
    switch's label is whole (not cut off as it was in the expander's narrow column)."""
    from helpers import laptop_page, wait_for_widgets

    from benchmarks.app import LAPTOP, open_page

    with laptop_page(tmp_path / "users", 120_000) as (app, page):
        open_page(page, f"{app.url}/Train", timeout_ms=120_000)
        wait_for_widgets(page, timeout_ms=120_000)
        main = '[data-testid="stMain"]'
        start = page.locator(f"{main} .st-key-train_start button").bounding_box()
        for key in ("train_board_on", "train_board_name"):
            box = page.locator(f"{main} .st-key-{key}").bounding_box()
            assert box is not None and start["y"] < box["y"], (key, box, start)
            assert box["y"] + box["height"] <= LAPTOP["height"], f"{key} is below the first screen: {box}"
        label = page.locator(f"{main} .st-key-train_board_on label")
        assert label.inner_text().strip() == "Show my runs on the class board"
        cut = label.evaluate(  # any element of the label with text wider than its box
            """l => [...l.querySelectorAll('*')].concat([l])
                .some(e => (e.textContent || '').trim() && e.scrollWidth > e.clientWidth + 1)"""
        )
        assert not cut, "the switch's label is cut off"
