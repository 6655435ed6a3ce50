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
from ui.shared.plain_text import WORD_JOINER, piece_label, plain

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


# ---------------------------------------------------------------------------
# every message a page can show of text it did not write: refusals and failures included (issue 50, item 6)

# one payload with every kind of markup: an image (the browser fetches it), a link, HTML, an autolink, a
# directive, LaTeX, emphasis
HOSTILE = (
    "![u](http://127.0.0.1:8765/x.png) [Log in again](http://127.0.0.1:8765/phish) <img src=x onerror=alert(1)> "
    "<b>bold</b> www.example.com :red[alarm] $x^2$ __under__ *star*"
)
SHOWN_KINDS = ("error", "warning", "info", "success", "markdown", "caption", "toast")


def shown_markdown(at):
    """Every Markdown text the page drew, by its kind (alerts, text, captions), and its widgets' labels."""
    texts = [str(e.value) for kind in SHOWN_KINDS for e in at.get(kind)]
    return texts + [str(w.label) for kind in ("button", "checkbox", "toggle", "number_input") for w in at.get(kind)]


def assert_inert(texts, marker):
    """The texts that quote the payload (by `marker`) quote it inert: no image, link, tag, directive or
    formula left live, and no emphasis either."""
    quoting = [text for text in texts if marker in re.sub(r"\\(.)", r"\1", text).replace(WORD_JOINER, "")]
    assert quoting, f"no message quoted {marker!r}: {texts}"
    for text in quoting:
        assert live_syntax(text) == [], text
        assert not re.search(r"(?<!\\)<\w|(?<!\\)_(?=_)|(?<![\\\w])\*\w", text), text  # a tag, __, *emphasis


def fail_inside_user_errors(what, error):
    from ui.shared.plain_text import user_errors

    with user_errors(what):
        raise error


@pytest.mark.parametrize(
    "error",
    [ValueError(HOSTILE), OSError(2, HOSTILE, "![f](http://127.0.0.1:8765/f.png)")],
    ids=["a refusal", "a file problem"],
)
def test_user_errors_shows_what_was_being_done_and_the_reason_inert(error):
    """`what` names a file or a model ("Checking NAME"): it was put into st.error as Markdown."""
    at = AppTest.from_function(fail_inside_user_errors, args=(f"Checking {HOSTILE}", error)).run()
    assert not at.exception
    [shown] = [str(e.value) for e in at.error]
    assert_inert([shown], "Log in again")
    assert shown.count("Log in again") == 2  # what was being done, and why it did not work
    assert re.sub(r"\\(.)", r"\1", shown).replace(WORD_JOINER, "").startswith(f"Checking {HOSTILE} did not work")


@pytest.mark.parametrize("name", [f"{HOSTILE}.safetensors", "[Log in again](http://127.0.0.1:8765/x)x.pt"])
def test_a_refused_uploads_name_is_shown_inert(tmp_path, monkeypatch, name):
    """The hostile student's finding: "Checking … did not work" drew the file's name as Markdown."""
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/5_Checkpoints.py")
    at.run()
    at.file_uploader(key="ckpt_upload_0").set_value((name, b"\x80\x04not a checkpoint", "")).run()
    assert not at.exception
    assert [e for e in at.error if "did not work" in str(e.value)], "the upload was not refused"
    assert_inert(shown_markdown(at), "Log in again")


def test_a_failed_runs_message_and_its_name_are_shown_inert(tmp_path, monkeypatch):
    """A run's failure is its error's own words (lab.server.jobs), and its name is the student's."""
    from helpers import stop_every_sessions_jobs

    import lab.server.jobs
    from lab.errors import LabError

    def fails(job):
        raise LabError(HOSTILE)

    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path))
    monkeypatch.setattr(lab.server.jobs.TrainingJob, "_work", fails)
    try:
        at = AppTest.from_file(APP, default_timeout=60)
        at.switch_page("pages/1_Train.py")
        at.run()
        for name, value in {"emb": 8, "hidden": 16, "batch": 8, "block": 16, "seconds": 2}.items():
            at.number_input(key=f"train_{name}").set_value(value)
        at.text_input(key="train_name").set_value("__Log_in_again__")
        at.button(key="train_start").click().run()
        (log,) = at.session_state["train_logs"].values()
        assert log.job.wait(60) == "failed"
        at.run()
        assert not at.exception
        assert_inert([str(e.value) for e in at.error], "Log in again")  # the failure's message
        [failed] = [str(e.value) for e in at.error if "failed" in str(e.value)]
        assert failed.startswith(r"\_\_Log\_in\_again\_\_") and "_" not in failed.replace(r"\_", "")  # its name
    finally:
        stop_every_sessions_jobs()


@pytest.mark.parametrize("page", ["pages/2_Sample.py", "pages/3_Gates.py", "pages/5_Checkpoints.py"])
def test_a_linked_model_that_is_not_there_is_named_inert(tmp_path, monkeypatch, page):
    """ "There is no model called …": the name comes from the link (within a link's 64 characters for a name)."""
    monkeypatch.setenv("RNNLAB_USER_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "![u](http://h.io/x.png)[Log in again](http://h.io/p)<b>b</b>"
    at.switch_page(page)
    at.run()
    assert not at.exception
    assert [w for w in at.warning if "no model called" in str(w.value)]
    assert_inert(shown_markdown(at), "Log in again")


def test_a_bad_settings_line_is_shown_inert(monkeypatch):
    """A setting's value is quoted in the line every page shows in its place (ui.shared.sessions)."""
    monkeypatch.setenv("RNNLAB_RAY_ADDRESS", "[Log in again](http://127.0.0.1:8765/x)")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert_inert([str(e.value) for e in at.error], "Log in again")
