"""Students read words, not the lab's identifiers: no page or lesson shows a cell id (`gru_torch`), a
backend id as such ("reference / fast / fused"), a run's automatic id (`gru_torch-e8-h16x1-1`), a bundled
file's or preset's key (`char-lstm_latest`, `scribe-alpha`) or a checkpoint's file name (`x_latest.safetensors`);
the Checkpoints page's download alone carries a file name. Each model is named by ui.shared.model_names, the same
on every page.

Every page and lesson is opened fresh; then, in one session, a run is trained on the Train page and its
saved model is opened on every page that lists models (its automatic name is where run ids used to leak).
Everything rendered is read, as tests/test_plain_words.py reads it (its helpers), with no exemption but
the model's and the student's own text (Html and Code elements) and the URLs a link carries (the ids
stay there, so that links keep working).
"""

import json
import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Dataframe, Table
from test_plain_words import QUOTED, chart_strings, component_strings, frame_strings

from lab.nets.backends import BACKENDS
from lab.nets.families import CELLS
from lab.server.spaces import new_space_key
from lab.training.checkpoints import list_checkpoints
from lab.training.presets import PRESETS
from ui.lessons import LESSONS
from ui.shared.common import PAGES
from ui.shared.model_names import describe_info, info_title, model_title, run_title

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan", "scribe-alpha"]
BUNDLED = sorted({info.name for info in list_checkpoints(None, include_versions=False)})
KEYS = sorted({*CELLS, *BACKENDS, *PRESETS, *BUNDLED, *(n.removesuffix("_latest") for n in BUNDLED)}, key=len)
IDS = re.compile(
    r"\bgru_(?:seed|torch)\b"  # the two GRU cells' ids
    r"|\b(?:rnn|lstm)\b"  # lower case: an id, not the acronym
    r"|\b[a-z_]+(?:-[a-z]+)*-e\d+(?:-h\d+x\d+)?-\d+\b"  # a run's automatic id
    r"|\b(?:" + "|".join(re.escape(k) for k in KEYS if "-" in k or "_" in k) + r")\b"  # preset and bundled keys
    r"|_latest\b|_v\d+\b"  # a checkpoint's versions
    r"|[\w-]\.safetensors\b"  # a file's name
    r"|/(?:" + "|".join(BACKENDS) + r")\b"  # "gru_torch/fast"
    r"|\btorch\.[a-z]|\[fused|ScanMarkov"  # code
)
TINY = {"emb": 8, "hidden": 16, "batch": 8, "block": 16, "eval_every": 5, "seconds": 2}
# where a page passes nothing but its URL or its ids: a link's address, a widget's identity
SKIPPED_FIELDS = {"id", "form_id", "page_script_hash", "arrow_data", "data", "spec", "columns", "query_string", "page"}


def proto_strings(message):
    for field, value in message.ListFields():
        if field.name in SKIPPED_FIELDS:
            continue
        for v in value if field.is_repeated else [value]:
            if isinstance(v, str):
                yield v
            elif hasattr(v, "ListFields"):
                yield from proto_strings(v)


def rendered(node):
    """Every string a node and its children put on the screen (its options and help included)."""
    if getattr(node, "type", None) in QUOTED:  # the model's or the student's text, and the cells' source code
        return
    kind = getattr(node, "type", None)
    if kind == "bidi_component":
        yield from component_strings(node.proto)
        return
    if kind == "plotly_chart":
        yield from chart_strings(node.proto.spec)
        return
    if isinstance(node, (Dataframe, Table)):
        yield from frame_strings(node.value)
        config = json.loads(getattr(node.proto, "columns", "") or "{}")
        yield from (str(c["label"]) for c in config.values() if isinstance(c, dict) and c.get("label"))
        return
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "ListFields"):
        yield from proto_strings(proto)
    for child in getattr(node, "children", {}).values():
        yield from rendered(child)


def leaks(at, download=False):
    """The identifiers a run of a page shows: a text that is a key, or holds one. `download`: the page
    offers a file, whose name its download button carries."""
    found = []
    for text in [*rendered(at.main), *rendered(at.sidebar)]:
        text = re.sub(r"\\(.)", r"\1", text)  # ui.shared.plain_text.plain's escapes, as a student reads them
        found += [f"{m.group(0)!r} in {text[:140]!r}" for m in IDS.finditer(text)]
        found += [f"the key {text!r}" for key in KEYS if text.strip() == key]
    if download:
        (button,) = [b for b in at.get("download_button")]
        found = [f for f in found if button.proto.label not in f]
    return found


def opened(page, query=None):
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query or {})
    if page != "app.py":
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def space(tmp_path, monkeypatch):
    root = tmp_path / "user_checkpoints"
    monkeypatch.setenv("RNNLAB_USER_DIR", str(root))
    new_space_key(root)
    return root


def test_the_guard_sees_what_it_guards_against():
    for text in (
        "automatic: gru_torch-e64-h256x1-1",
        "scan-markov-windows-e128-3 #2",
        "yours: my-run_latest",
        "Sample shows char-lstm_latest.safetensors",
        "Download a.safetensors",
        "scribe-alpha",
        "gru_seed: GRU",
        "cell lstm/fused",
        "`torch.nn.GRU`",
        "rnn",
    ):
        assert IDS.search(text), text
    assert not IDS.search("A vanilla RNN, a GRU (z keeps) and an LSTM: a selective scan, step by step, fast")
    assert not IDS.search("Character GRU (z keeps) · 256 units · run 1, Scribe-α, a file ending in .safetensors")


@pytest.mark.parametrize("page", [script for script, _ in PAGES.values()])
def test_every_page_names_things_in_words(page):
    at = opened(page)
    assert leaks(at, download=page == PAGES["Checkpoints"][0]) == []


@pytest.mark.parametrize("slug", list(LESSONS))
def test_every_lesson_names_things_in_words(slug):
    assert leaks(opened(PAGES["Lessons"][0], {"lesson": slug})) == []


def test_a_run_and_its_saved_model_are_named_in_words_on_every_page(space):
    """A run named automatically: the Train page shows it by its plain name (its chart, its table, where it
    was saved), and every page listing models shows the saved model by the same name."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(PAGES["Train"][0])
    at.run()
    assert at.text_input(key="train_name").proto.placeholder == "automatic: GRU (z keeps) · 256 units · run 1"
    for name, value in TINY.items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.button(key="train_start").click().run()
    (log,) = at.session_state["train_logs"].values()
    deadline = time.monotonic() + 90
    while log.job.running and time.monotonic() < deadline:
        time.sleep(0.3)
    assert log.job.status == "finished", log.job.message
    at.run()
    name = log.job.name
    assert re.fullmatch(r"gru_torch-e8-h16x1-1", name)  # the id stays the file's and the link's
    title = "GRU (z keeps) · 16 units · run 1"
    assert run_title(name) == title and log.label == title
    assert leaks(at) == []
    shown = " ".join(re.sub(r"\\(.)", r"\1", s) for s in rendered(at.main))
    assert f"“yours: {title}”" in shown  # where it was saved, as the model pages list it
    listed = f"yours: {name}_latest"
    for page, key in (("Sample", "sample_checkpoint"), ("Gates", "gates_checkpoint"), ("Checkpoints", "ckpt_choice")):
        at.session_state[key] = listed
        at.query_params.clear()  # as the sidebar's links do: the last page's settings stay with it
        at.switch_page(PAGES[page][0]).run()
        assert not at.exception, [e.value for e in at.exception]
        picker = next(s for s in at.selectbox if s.key == key)
        assert picker.value == listed and model_title(listed) == f"yours: {title}"
        assert f"yours: {title}" in picker.options  # the options are shown by their titles
        assert leaks(at, download=page == "Checkpoints") == [], page
        captions = " ".join(re.sub(r"\\(.)", r"\1", c.value) for c in at.caption)
        assert f"yours: {title}: a character GRU (z keeps) of " in captions, page  # named and explained
    at.session_state["memory_reach_checkpoints"] = [listed, "char-rnn_latest"]
    at.query_params.clear()
    at.switch_page(PAGES["Memory"][0]).run()
    assert not at.exception and leaks(at) == []


def test_a_runs_plain_name_is_unique_among_the_sessions_runs():
    """Two automatic runs of different embedding widths would read alike ("GRU (z keeps) · 256 units ·
    run 1"): the second takes the next number instead."""
    from ui.train.runs import unused_run_name

    taken = {"gru_torch-e64-h256x1-1", "gru_torch-e32-h256x1-2", "lstm-e64-h256x1-1"}
    shown = {run_title(n) for n in taken}
    for base in ("gru_torch-e128-h256x1", "gru_torch-e64-h256x1", "lstm-e8-h256x1", "rnn-e64-h256x1"):
        name = unused_run_name(base, taken)
        assert name not in taken and run_title(name) not in shown, name


def test_every_bundled_model_is_named_and_explained_from_its_own_file():
    for info in list_checkpoints(None, include_versions=False):
        sentence = describe_info(info)
        assert sentence.startswith(f"{info_title(info)}: a") and not IDS.search(sentence), sentence
        assert "parameters" in sentence and "trained on the Shakespeare plays" in sentence
    assert model_title("scribe-alpha_latest") == "Scribe-α" and model_title("char-lstm_latest") == "Character LSTM"
