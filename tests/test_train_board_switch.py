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


def test_the_class_board_switch_sits_in_starts_row_and_its_name_box_under_it_once_on():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/1_Train.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    start, switch = (path_to(at.main, key) for key in ("train_start", "train_board_on"))
    assert start and switch and not path_to(at.main, "train_board_name")  # off: the switch alone
    assert not any(isinstance(block, Expander) for block in switch), "the switch is inside an expander"
    assert switch[2] is start[2], "the switch is not in Start's row"  # beside the buttons whose runs it posts
    assert switch[-1].label == "Show my runs on the class board"
    at.toggle(key="train_board_on").set_value(True).run()
    name = path_to(at.main, "train_board_name")  # on: the name it posts under appears, under the buttons
    assert name and not any(isinstance(block, Expander) for block in name)


def test_on_a_laptop_the_switch_is_on_the_first_screen_beside_start_its_label_whole(tmp_path):
    """At 1366×768, in a real browser: the switch is on the first screen, in Start's row or just under it, and its
    label is whole (not cut off as it was in the expander's narrow column)."""
    from helpers import laptop_page, wait_for_widgets

    from benchmarks.app import LAPTOP, open_page

    with laptop_page(tmp_path / "users", 120_000) as (app, page):
        open_page(page, f"{app.url}/Train", timeout_ms=120_000)
        wait_for_widgets(page, timeout_ms=120_000)
        main = '[data-testid="stMain"]'
        start = page.locator(f"{main} .st-key-train_start button").bounding_box()
        box = page.locator(f"{main} .st-key-train_board_on").bounding_box()
        assert box is not None and start["y"] <= box["y"] + box["height"], (box, start)  # not above Start's row
        assert box["y"] + box["height"] <= LAPTOP["height"], f"the switch is below the first screen: {box}"
        label = page.locator(f"{main} .st-key-train_board_on label")
        assert label.inner_text().strip() == "Show my runs on the class board"
        cut = label.evaluate(  # any element of the label with text wider than its box
            """l => [...l.querySelectorAll('*')].concat([l])
                .some(e => (e.textContent || '').trim() && e.scrollWidth > e.clientWidth + 1)"""
        )
        assert not cut, "the switch's label is cut off"
