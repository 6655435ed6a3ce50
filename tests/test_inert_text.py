"""Every string from a URL, a file or a user is shown as text: never Markdown, never a link or an image.

The hostile battery's payload: an ignored URL parameter whose value ends the warning's code span
with a blank line, then an image that fetches from another server and a phishing link."""

import re
from pathlib import Path

import pytest
from helpers import preformatted_texts
from streamlit.testing.v1 import AppTest

from ui.shared.coloured_text import chart_piece
from ui.shared.common import PAGES
from ui.shared.links import parse_query
from ui.shared.plain_text import piece_label, plain

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAYLOADS = [
    "<script>alert(1)</script> & &amp;",
    "x\n\n![p](http://127.0.0.1:8765/p.png) [Log in again](http://127.0.0.1:8765/phish)",
    "<img src=http://127.0.0.1:8765/p.png>",
    "http://127.0.0.1:8765/phish www.example.com someone@example.com",
    ":red[alarm] **bold** `code` $x^2$ :material/home:",
]
# what would act in rendered Markdown: an image or link, raw HTML, a directive (inert when a backslash
# precedes it) ...
LIVE = [r"!\[", r"\]\(", r"<img", r":red\[", r"\*\*", r"`", r"\$"]
# ... and what the renderer links by itself, backslashes or not (a real browser showed "http\:\/\/..."
# linked): a URL, "www.", an address
AUTOLINKS = [r"(?i)https?\\?:", r"(?i)www\\?\.", r"@\w"]


def live_syntax(markdown):
    """The live constructs left in `markdown`."""
    return [p for p in LIVE if re.search(r"(?<!\\)" + p, markdown)] + [p for p in AUTOLINKS if re.search(p, markdown)]


def show_preformatted(payload):
    from ui.shared.plain_text import preformatted

    preformatted(payload)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_fixed_width_block_shows_the_characters_it_is_given(payload):
    """ui.shared.plain_text.preformatted (samples, commands, model summaries): no tag of the payload reaches
    the page, and its text reads back exactly."""
    at = AppTest.from_function(show_preformatted, args=(payload,)).run()
    [body] = [h.proto.body for h in at.get("html")]
    assert "<img" not in body and "<script" not in body
    assert preformatted_texts(at) == [payload]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_plain_leaves_nothing_live(payload):
    assert live_syntax(plain(payload)) == []
    assert live_syntax(piece_label(payload)) == []
    assert "<" not in chart_piece(payload)  # plotly reads <a href> in labels: escaped as &lt;


def test_plain_keeps_the_characters():
    shown = plain("It's 3.5 (a*b) [x]_y!")
    assert re.sub(r"\\(.)", r"\1", shown) == "It's 3.5 (a*b) [x]_y!"  # unescaped, the same text
    linked = plain("see http://a.b or me@c.d")
    assert re.sub(r"\\(.)", r"\1", linked).replace("\u2060", "") == "see http://a.b or me@c.d"


def test_a_links_warnings_are_plain_text():
    _, warnings = parse_query({"zz": PAYLOADS[0]}, {})
    assert warnings and "`" not in warnings[0]  # no code span for a blank line to end


@pytest.mark.parametrize("page", [script for script, _ in PAGES.values()])
def test_no_page_renders_a_links_markdown(page):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"zz": PAYLOADS[0], "yy": PAYLOADS[2]})
    if page != "app.py":
        at.switch_page(page)
    at.run()
    assert not at.exception
    shown = [str(e.value) for e in [*at.markdown, *at.caption, *at.warning, *at.error, *at.info, *at.success]]
    warned = [s for s in shown if "8765" in s or "example" in s]
    assert warned or page == "app.py", "a page with settings in its link quotes what it ignored"
    for text in warned:
        assert live_syntax(text) == [], text


@pytest.mark.parametrize("page", [script for script, _ in PAGES.values()])
def test_every_text_box_is_bounded_where_text_enters(page):
    """A text box without max_chars let one student send 100,000 characters through one forward pass."""
    at = AppTest.from_file(APP, default_timeout=60)
    if page != "app.py":
        at.switch_page(page)
    at.run()
    assert not at.exception
    boxes = [*at.text_area, *at.text_input]
    unbounded = [box.label for box in boxes if not box.proto.max_chars]
    assert unbounded == [], unbounded
