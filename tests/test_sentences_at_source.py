"""Each sentence is written once, in the words students read: lab writes its user-facing text plainly
at its source, and the app shows it as lab writes it. Two checks.

The app rewrites no text of lab's. Every call in app.py, pages/ and ui/ that rewrites a string (str's
`replace`, `translate` and case changes, `re.sub`/`subn` and a compiled pattern's `sub`/`subn`) is
listed below, function by function, with whose text it rewrites and why; a new one fails until it is
listed, and lab's sentences never belong on the list: a sentence a page needs in other words is changed
in lab, where the CLI reads it too (or the CLI writes its own line).

The text the pages show from lab cites no design document: a cell's convention (every cell, every
backend) and a model's summary, the gate-bias study's conclusion and answer at every turn they take,
the toy tasks' titles and questions, and every sentence written in the modules the pages' sentences come
from. Docstrings and comments, which no page shows, may cite what they like, and so may the CLI.
"""

import ast
import re
from pathlib import Path

import pytest
from helpers import study_results
from test_plain_words import FORBIDDEN, LAB_WORDS

from lab.experiments.ablation import SHIPPED_DIR, answer, conclusion, load_results, time_constant_table
from lab.experiments.probe.tasks import TOY_TASKS
from lab.nets.backends import BACKENDS
from lab.nets.families import CELLS, FAMILIES
from lab.nets.models import LMConfig, build_model, model_summary
from lab.words import count

ROOT = Path(__file__).resolve().parent.parent
CASE_CHANGES = {"lower", "upper", "capitalize", "title", "swapcase", "casefold"}
STRING_REWRITES = {"replace", "translate", *CASE_CHANGES}
PATTERN_REWRITES = {"sub", "subn"}

# (file, function, the text rewritten) -> whose text it is, and why it is rewritten
ALLOWED = {
    ("ui/memory/analytic.py", "bias_table", "biases_text"): "the student's list of biases: ';' read as ','",
    (
        "ui/checkpoints/listing.py",
        "checkpoint_table",
        "i.timestamp",
    ): "a checkpoint's timestamp (data): its date, UTC time",
    ("ui/cell_labels.py", "equations_latex", "equation"): "LaTeX layout: lab's equations aligned at their first '='",
    (
        "ui/shared/coloured_text.py",
        "visible_piece",
        "piece",
    ): "the model's or student's text: newline, tab, space as signs",
    ("ui/shared/coloured_text.py", "_span", "shown"): "the model's or student's text (escaped): a newline drawn faint",
    ("ui/gates/charts.py", "_token_axis", "piece"): "a subword token's text: SentencePiece's '▁' is a space",
    ("ui/lessons/learning.py", "learning_timeline", "continuation"): "the model's sample: a newline as ↵ in a table",
    ("ui/lessons/stepping.py", "number", "f'{value:.3f}'"): "a number: its minus sign typeset as −",
    ("ui/shared/plain_text.py", "plain", "str(text)"): "text from a file, a link or a user made inert in Markdown",
    ("ui/shared/plain_text.py", "plain", "escaped"): "the same text, escaped: every autolink in it broken",
    (
        "ui/shared/plain_text.py",
        "without_paths",
        "str(text)",
    ): "an error's message: the server's folders cut to file names",
    (
        "ui/shared/plain_text.py",
        "without_paths",
        "text",
    ): "an error's message: a student's space key (a password) hidden",
    ("ui/sample/views.py", "quoted", "text"): "the model's text in a code span: backticks and newlines",
    ("ui/shared/sign_in.py", "identity_from", "email.strip()"): "the signed-in address, compared case-blind",
    ("ui/shared/sign_in.py", "sign_in_buttons", "provider"): "a sign-in provider's name, from the server's settings",
    ("ui/gates/span_select.py", "span_text", "''.join(token_texts[first:last + 1])"): "the student's selected tokens",
}


def app_files():
    return [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").rglob("*.py"))]


def rewrite_of(call):
    """The method and the text a call rewrites, or None: str's replace, translate and case changes, re.sub
    and re.subn, a compiled pattern's sub and subn. dataclasses.replace(config, ...) builds a config and
    st.title("...") writes a heading: neither rewrites text (str's case changes take no argument)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None
    method, owner = call.func.attr, call.func.value
    if method in PATTERN_REWRITES:
        module_call = isinstance(owner, ast.Name) and owner.id == "re"
        position = 2 if module_call else 1
        return (method, call.args[position]) if len(call.args) > position else (method, owner)
    if method not in STRING_REWRITES or (isinstance(owner, ast.Name) and owner.id == "dataclasses"):
        return None
    if method in CASE_CHANGES and (call.args or call.keywords):
        return None
    return method, owner


def subject(expr):
    """The text a chain of rewrites starts from: `t.replace(a, b).replace(c, d)` -> `t`."""
    found = rewrite_of(expr)
    return subject(found[1]) if found else expr


def rewrites(source):
    """(function, method, the text rewritten, the names that text is made of, line) of every string-rewriting
    call in `source`; function is the innermost enclosing def's name, "<module>" at the top level. A chain
    of rewrites on one text counts once per call."""
    found = []

    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            rewrite = rewrite_of(child)
            if rewrite:
                text = subject(rewrite[1])
                names = {n.id for n in ast.walk(text) if isinstance(n, ast.Name)}
                found.append((function, rewrite[0], ast.unparse(text), names, child.lineno))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def lab_names(source):
    """The names a file imports from lab: what they hold is lab's."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lab":
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "lab"}
    return names


def test_the_app_rewrites_only_the_texts_it_lists_and_never_labs_sentences():
    found, from_lab = set(), []
    unlisted = []
    for path in app_files():
        name, source = path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")
        labs = lab_names(source)
        for function, method, text, names, line in rewrites(source):
            found.add((name, function, text))
            if names & labs:  # a value lab returned, or lab's own constant: its sentence is changed in lab
                from_lab.append(f"{name}:{line} {function}() .{method}() of {text} (lab's: {sorted(names & labs)})")
            elif (name, function, text) not in ALLOWED:
                unlisted.append(f"{name}:{line} {function}() .{method}() of {text}: whose text, and why?")
    assert from_lab == []
    assert unlisted == []
    assert sorted(set(ALLOWED) - found) == []  # a stale entry would allow a rewrite nobody needs


def test_the_scan_finds_the_rewrites_the_pages_used_to_make():
    """The two patches that once sat in ui/shared/common.py, and their kin, are each found, with lab's names."""
    old = """
from lab.experiments.ablation import conclusion
from lab.nets.families import CELLS

def plain_convention(text):
    return text.replace("GRU, seed convention", "GRU, Scribe-α's convention").replace(" [fused", " (")

def study_conclusion(results):
    return re.sub(r"\\bthe (?=seeds\\b)", "the random ", conclusion(results))

SPEAKS = re.compile("seeds")
line = SPEAKS.sub("random seeds", CELLS["gru_seed"].convention).capitalize()
config = dataclasses.replace(config, lr=1e-3)
st.title("Train")
"""
    found = [(function, method, text, names) for function, method, text, names, _ in rewrites(old)]
    assert found == [
        ("plain_convention", "replace", "text", {"text"}),
        ("plain_convention", "replace", "text", {"text"}),
        ("study_conclusion", "sub", "conclusion(results)", {"conclusion", "results"}),
        ("<module>", "capitalize", "CELLS['gru_seed'].convention", {"CELLS"}),
        ("<module>", "sub", "CELLS['gru_seed'].convention", {"CELLS"}),
    ]
    assert lab_names(old) == {"conclusion", "CELLS"}


# a design document's name, or "Scribe" that is not the name of a model students see (Scribe-α, -β, -γ)
NOT_A_MODEL = re.compile(r"Scribe(?![-‑][αβγ])")
CODE = re.compile(r"\[fused|torch\.nn\b")


def citing(text):
    return [m.group(0) for pattern in (FORBIDDEN, LAB_WORDS, NOT_A_MODEL, CODE) for m in pattern.finditer(text)]


MANY = 10**6  # test images enough that their resolution never decides a sentence

STUDIES = [  # every turn conclusion() and answer() take
    study_results({"baseline": [], "ablated": []}, n_test=MANY),  # nothing finished
    study_results({"baseline": [0.11, 0.12], "ablated": [0.10, 0.12]}, n_test=120),  # at chance
    study_results({"baseline": [0.8, 0.82]}, n_test=MANY),  # one arm
    study_results({"baseline": [0.80, 0.84, 0.82], "ablated": [0.81, 0.79, 0.83]}, n_test=MANY),  # no more than luck
    study_results(
        {"baseline": [0.60, 0.62, 0.61], "ablated": [0.4, 0.41, 0.42], "chrono": [0.9, 0.91, 0.92]}, n_test=MANY
    ),  # apart
    study_results({"baseline": [0.30, 0.31], "chrono": [0.2, 0.21]}, n_test=10),  # the test images cannot tell
    study_results({"baseline": [0.80], "ablated": [0.60]}, n_test=100),  # under the resolution, one seed each
    study_results({"baseline": [0.75], "ablated": [0.72]}, complete=False, n_test=MANY),  # one seed: no spread
    study_results({"baseline": [0.90], "ablated": [0.60, 0.62, 0.61]}, n_test=MANY),  # one seed on a side
    study_results({"baseline": [0.90, 0.60], "ablated": [0.70]}, n_test=MANY),  # within the spread
]


def test_the_studys_sentences_cite_no_document():
    shipped = load_results(SHIPPED_DIR)
    said = [text for study in [shipped, *STUDIES] for text in (conclusion(study), answer(study))]
    assert len(set(said)) >= 12  # the studies above take different turns
    assert [(text, citing(text)) for text in said if citing(text)] == []
    assert any("the luck of the random seeds" in text for text in said)  # "the seeds" said plainly
    meanings = [row["meaning"] for row in time_constant_table()]  # the default rows' words
    assert [(m, citing(m)) for m in meanings if citing(m)] == []


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_a_cells_convention_and_summary_cite_no_document_on_any_backend(cell):
    shown = [FAMILIES[cell].convention, FAMILIES[cell].note, FAMILIES[cell].origin]
    for backend in (b for b, cells in BACKENDS.items() if cell in cells):  # PyTorch has no selective scan, ...
        model = build_model(LMConfig(cell=cell, backend=backend, vocab_size=5, embed_dim=4, hidden_size=4))
        summary = model_summary(model, "a model")
        assert summary.conventions
        shown += [*summary.conventions, summary.format()]
    assert [(text[:160], citing(text)) for text in shown if citing(text)] == []
    assert all("Scribe" not in text or "Scribe-α" in text for text in shown)  # the model's name, if any


def test_the_toy_tasks_words_cite_no_document():
    shown = [w for task in TOY_TASKS.values() for w in (task.title, task.question, task.in_a_sentence)]
    assert [(text, citing(text)) for text in shown if citing(text)] == []
    assert TOY_TASKS["recall"].in_a_sentence == "recall the first symbol"  # inside a sentence, lower case


# the modules that write sentences the pages show (lab/lessons is read by tests/test_plain_words.py)
SENTENCE_MODULES = [
    "lab/nets/cells.py",
    "lab/nets/models.py",
    "lab/experiments/ablation/conclusions.py",
    "lab/experiments/probe/tasks.py",
    "lab/experiments/memory_race.py",
    "lab/words.py",
]


def written_sentences(path):
    """(line, text) of every string literal in `path` that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


@pytest.mark.parametrize("module", SENTENCE_MODULES)
def test_the_sentences_the_pages_show_are_plain_where_lab_writes_them(module):
    found = [
        f"{module}:{line}: {cited!r} in {text[:120]!r}"
        for line, text in written_sentences(ROOT / module)
        for cited in citing(text)
    ]
    assert found == []


def test_a_written_citation_would_be_found():
    """The check reads what it should: lab's old convention line and conclusion are each caught."""
    assert citing("GRU, seed convention: h_t = (1-z)*h_{t-1} + z*n_t (z overwrites)") == ["seed convention"]
    assert citing(f"ablated does not differ beyond the luck of the seeds ({count(3, 'point')})") == ["the seeds"]
    assert citing("LSTM: c_t = f*c_{t-1} + i*g [fused torch.nn]") == ["[fused", "torch.nn"]
    assert citing("the Scribe design's GRU") != [] and citing("Scribe-α's convention") == []
