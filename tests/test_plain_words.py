"""Students read plain words: no page, lesson, glossary entry, table header or chart cites a design
document the app does not show ("the equations appendix", "the Leviathan notebook", "seed 002", ...) or
shows a shell command (`python -m`, `streamlit run`, `pip install`, `torchrun`, a "$ " prompt).

Two checks: every page and every lesson is opened and everything it renders is read (Markdown,
alerts, headings, widget labels, options and help, expander labels, table headers and cells, chart
titles and trace names); and every string literal of app.py, pages/ and ui/ that is not a docstring
is read too, so that a sentence shown only for some model or setting is covered as well. Python
comments and docstrings are not rendered and may cite what they like. Text inside an expander
whose label starts with "For the curious" is exempt; so is the student's or the model's text a page
quotes (Html and Code elements, the passage a custom component carries), which are not the page's words.
"""

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from streamlit.proto.Element_pb2 import Element as ElementProto
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Dataframe, Expander, Table, UnknownElement

from ui.gates import span_select
from ui.lessons import LESSONS
from ui.sample import typing_box
from ui.shared.common import PAGES

ROOT = Path(__file__).resolve().parent.parent

APP = str(ROOT / "app.py")
LESSONS_PAGE = PAGES["Lessons"][0]
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan", "scribe-alpha"]
TIMEOUT = 90
FORBIDDEN = re.compile(
    r"appendix|scribe design|leviathan notebook|scanmarkov design|seeds? 00[0-4]|the seeds|seed['’]s|seeds['’]"
    r"|design note|notebook",
    re.IGNORECASE,
)
# a source file, which students never open from the app (the Gates page shows the cells' code itself)
SOURCE_FILE = re.compile(r"\blab/[\w/.]*|\b\w+\.py\b")
# in the app's sources: the library's files (a missing installation's warning may name a command to run)
LIBRARY_PATH = re.compile(r"\blab/[\w/.]*")
# a Python name of the library's or the pages' own ("lab.nets.cells.sigmoid_time_constant"): code, not words
MODULE_NAME = re.compile(r"\b(?:lab|ui)\.[a-z_]\w*(?:\.\w+)*")
# a shell command: a student has no terminal on the server, and a page that tells them to run something
# has nothing they can do (whoever runs the server reads the README); "$ " at a line's start is a prompt
SHELL_COMMAND = re.compile(
    r"\bpython3? -m\b|\bstreamlit run\b|\bpip3? install\b|\btorchrun\b"
    r"|(?m:^\s*\$ (?:python|pip|streamlit|torchrun|uv|conda|git|cd|bash|sh|export)\b)"
)
# lab's old name for the z-overwrites GRU's convention (after its document): lab now writes it plainly
LAB_WORDS = re.compile(r"\bseed convention", re.IGNORECASE)
# lab's own names for numbers, each shown to students under a plain label instead
CODE_NAMES = {
    "bias_q10",
    "bias_median",
    "bias_q90",
    "half_life",
    "retention",
    "abs_correlation",
    "max_abs_diff",
    "sequential_ms",
    "parallel_ms",
}
EXEMPT = "For the curious"
# the element kinds that quote generated or typed text (a kind name, not a class: Streamlit 1.62 has no Html class)
QUOTED = {"html", "code"}
SKIPPED_FIELDS = {"id", "form_id", "page_script_hash", "arrow_data", "data", "spec", "columns"}
# a custom component's name -> the fields of its data that carry a passage (the student's or the model's
# text, read like an html element's: not at all); the rest of its data, its labels, is read
COMPONENT_PASSAGES = {span_select.NAME: {span_select.PASSAGE_FIELD}, typing_box.NAME: set(typing_box.PASSAGE_FIELDS)}


def proto_strings(message):
    """Every string field of a protobuf message, recursively (identifiers left out)."""
    for field, value in message.ListFields():
        if field.name in SKIPPED_FIELDS:
            continue
        values = value if field.is_repeated else [value]
        for v in values:
            if isinstance(v, str):
                yield v
            elif hasattr(v, "ListFields"):
                yield from proto_strings(v)


def chart_strings(spec):
    """A plotly spec's titles, trace names, annotations and texts."""

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, k)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v, key)
        elif isinstance(node, str) and key in ("name", "text", "title", "hovertemplate"):
            yield node

    yield from walk(json.loads(spec))


def component_strings(proto):
    """A custom component's own words: the strings of its data, less the passage it carries (its
    JavaScript, CSS and HTML are code, never shown as text)."""

    def walk(node):
        if isinstance(node, dict):
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)
        elif isinstance(node, str):
            yield node

    passage = COMPONENT_PASSAGES.get(proto.component_name, set())
    data = json.loads(proto.json or "{}")
    yield from walk({k: v for k, v in data.items() if k not in passage} if isinstance(data, dict) else data)


def frame_strings(frame):
    """A table's column headers and its text cells."""
    if not isinstance(frame, pd.DataFrame):
        frame = pd.DataFrame(frame)
    yield from (str(c) for c in frame.columns)
    for column in frame.columns:
        yield from (v for v in frame[column] if isinstance(v, str))


def shown(node, exempt=False):
    """(text, exempt) for everything a node and its children render."""
    if isinstance(node, Expander):
        exempt = exempt or str(node.label).startswith(EXEMPT)
    if getattr(node, "type", None) in QUOTED:  # generated or quoted text: the model's words, not the lab's
        return
    if getattr(node, "type", None) == "bidi_component":
        yield from ((s, exempt) for s in component_strings(node.proto))
        return
    if getattr(node, "type", None) == "plotly_chart":
        yield from ((s, exempt) for s in chart_strings(node.proto.spec))
        return
    if isinstance(node, (Dataframe, Table)):
        yield from ((s, exempt) for s in frame_strings(node.value))
        try:
            config = json.loads(node.proto.columns or "{}")
        except (AttributeError, ValueError):
            config = {}
        yield from ((str(c.get("label")), exempt) for c in config.values() if isinstance(c, dict) and c.get("label"))
        return
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "ListFields"):
        yield from ((s, exempt) for s in proto_strings(proto))
    for child in getattr(node, "children", {}).values():
        yield from shown(child, exempt)


def citations(at):
    """The forbidden phrases and code names a run of a page shows, outside "For the curious"."""
    return cited([*shown(at.main), *shown(at.sidebar)])


def cited(texts):
    """The forbidden phrases and code names among (text, exempt) pairs, the exempt ones left out."""
    found = []
    for text, exempt in texts:
        text = re.sub(r"\\(.)", r"\1", text)  # ui.shared.plain_text.plain's escapes, as a student reads them
        if exempt:
            continue
        found += [
            f"{m.group(0)!r} in {text[:160]!r}"
            for pattern in (FORBIDDEN, LAB_WORDS, SOURCE_FILE, MODULE_NAME, SHELL_COMMAND)
            for m in pattern.finditer(text)
        ]
        found += [f"code name {text!r}" for name in CODE_NAMES if text == name]
    return found


def opened(page, query=None):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if query:
        at.query_params.update(query)
    if page != "app.py":
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page", [script for script, _ in PAGES.values()])
def test_every_page_speaks_in_plain_words(page):
    assert citations(opened(page)) == []


@pytest.mark.parametrize("slug", list(LESSONS))
def test_every_lesson_speaks_in_plain_words(slug):
    assert citations(opened(LESSONS_PAGE, {"lesson": slug})) == []


def test_a_components_passage_is_the_students_text_but_its_label_is_the_pages():
    """The Gates page's span component carries the passage a student may have typed: a word of theirs
    is not the page's, while a label of the component's is."""
    element = ElementProto()
    element.bidi_component.component_name = span_select.NAME
    element.bidi_component.json = json.dumps(
        {span_select.PASSAGE_FIELD: ["My ", "notebook ", "says"], "label": "The text: select a part of it"}
    )
    assert cited(shown(UnknownElement(element, root=None))) == []
    element.bidi_component.json = json.dumps({span_select.PASSAGE_FIELD: ["My "], "label": "Select the notebook"})
    assert cited(shown(UnknownElement(element, root=None))) != []


def test_the_train_pages_scan_preset_speaks_in_plain_words():
    at = opened(PAGES["Train"][0], {"preset": "scan-markov"})
    assert citations(at) == []
    assert at.selectbox(key="train_preset").value == "scan-markov"  # the preset's key stays the value


def test_presets_are_offered_under_plain_labels():
    at = opened(PAGES["Train"][0])
    preset = at.selectbox(key="train_preset")
    assert preset.value == "astra-alpha"
    assert all(" " in option for option in preset.options), preset.options  # words, not only a key


def rendered_literals():
    """(file, line, text) of every string literal that is not a docstring in app.py, pages/ and ui/, and in
    lab/lessons/, which writes the lessons' sentences."""
    files = [
        ROOT / "app.py",
        *sorted((ROOT / "pages").glob("*.py")),
        *sorted((ROOT / "ui").rglob("*.py")),
        *sorted((ROOT / "lab" / "lessons").glob("*.py")),
    ]
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docstrings.add(id(first.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                yield path.relative_to(ROOT), node.lineno, node.value


def test_no_string_the_app_can_show_cites_a_document():
    """Also the sentences only some settings show (a ScanMarkov model's note, one cell's equations), and no
    shell command on a branch no run of a page draws (the no-models warning once held one)."""
    found = [
        f"{path}:{line}: {m.group(0)!r} in {text[:120]!r}"
        for path, line, text in rendered_literals()
        for pattern in (FORBIDDEN, LIBRARY_PATH, MODULE_NAME, SHELL_COMMAND)
        for m in pattern.finditer(text)
    ]
    assert found == []


@pytest.mark.parametrize(
    "text",
    [
        "Run `python -m lab ablation` to make them",
        "streamlit run app.py",
        "pip install -r requirements-ray.txt",
        "torchrun --nproc_per_node=4 -m lab train",
        "To rebuild:\n$ python scripts/build_checkpoints.py",
        "  $ cd lab",
    ],
)
def test_a_shell_command_is_found_wherever_a_page_would_show_it(text):
    """The guard itself: each form a command takes is caught, in rendered text and in a literal."""
    assert SHELL_COMMAND.search(text) and cited([(text, False)])


@pytest.mark.parametrize("text", ["$h_t$ and $ k$ tokens", "the costs $ 2 a run", "pip, the tool", "Python"])
def test_latex_and_plain_words_are_not_taken_for_a_shell_command(text):
    assert not SHELL_COMMAND.search(text)


def test_the_glossary_explains_the_words_the_pages_lean_on():
    from ui.app.frame import GLOSSARY

    for term in ("token", "embedding", "softmax", "entropy", "epoch", "state", "gate", "BPTT", "nats/char"):
        assert term in GLOSSARY and len(GLOSSARY[term]) > 40, term
