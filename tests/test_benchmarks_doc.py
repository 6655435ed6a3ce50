"""BENCHMARKS.md is a page, not a log: at most 300 lines, every section with the command behind its figures
and their date, and a link to its history in BENCHMARKS-HISTORY.md that lands on a heading there."""

import datetime
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "BENCHMARKS.md"
HISTORY = ROOT / "BENCHMARKS-HISTORY.md"
MAX_LINES = 300
COMMAND = re.compile(r"python -m |python scripts/|python benchmarks/|pytest")
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
HISTORY_LINK = re.compile(r"\]\(BENCHMARKS-HISTORY\.md(?:#([^)\s]*))?\)")


def headings(text):
    """(level, text) of each Markdown heading outside fenced code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{1,6}) +(.*?)\s*#*\s*$", line)):
            found.append((len(match.group(1)), match.group(2)))
    return found


def slug(heading):
    """The anchor GitHub gives a heading: its text without links' targets, emphasis or code marks, lower
    case, every character that is not a letter, digit, underscore, space or hyphen dropped, spaces as
    hyphens."""
    shown = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("*", "").replace("`", "")
    return re.sub(r"[^\w\- ]", "", shown.lower()).replace(" ", "-")


def anchors(text):
    """Every heading's anchor, the repeated ones numbered as GitHub numbers them (-1, -2, ...)."""
    seen, found = {}, set()
    for _, heading in headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def sections(text):
    """{title: body} of each second-level section of the page."""
    parts = re.split(r"^## +(.*)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_slugs_are_githubs():
    assert slug("The corpus's speaker headings (fourth session)") == "the-corpuss-speaker-headings-fourth-session"
    assert slug("Leviathan-LSTM and Scribe-β on a GPU (not run)") == "leviathan-lstm-and-scribe-β-on-a-gpu-not-run"
    assert slug("One screen, two seconds: `serve.py` **now**") == "one-screen-two-seconds-servepy-now"
    assert anchors("## A\n## A\n```\n## B\n```\n### A\n") == {"a", "a-1", "a-2"}


def test_the_page_is_at_most_300_lines_and_links_its_history():
    text = PAGE.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    assert HISTORY_LINK.search(text), "BENCHMARKS.md links BENCHMARKS-HISTORY.md"
    assert "](BENCHMARKS.md)" in HISTORY.read_text(encoding="utf-8"), "the history points back to the page"


def test_every_section_has_a_command_a_date_and_its_history():
    found = sections(PAGE.read_text(encoding="utf-8"))
    assert len(found) >= 5, "the page is organised in sections"
    for title, body in found.items():
        assert any(COMMAND.search(line) for line in body.splitlines()), f"{title!r}: no command"
        dates = DATE.findall(body)
        assert dates, f"{title!r}: no date"
        for date in dates:
            datetime.date.fromisoformat(date)  # a real day, not just its shape
        assert any(anchor for anchor in HISTORY_LINK.findall(body)), f"{title!r}: no link to its history"


def test_every_link_into_the_history_lands_on_a_heading():
    targets = anchors(HISTORY.read_text(encoding="utf-8"))
    links = HISTORY_LINK.findall(PAGE.read_text(encoding="utf-8"))
    assert links
    missing = [anchor for anchor in links if anchor and anchor not in targets]
    assert not missing, f"no heading in BENCHMARKS-HISTORY.md for {missing}"
