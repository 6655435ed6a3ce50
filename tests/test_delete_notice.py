"""One notice after a delete: the delete's own confirmation. A page still holding the deleted model (in its
URL, in the session) shows another one without a second notice that reads like an error; a stale link
opened in a fresh session still says, in plain words, that its model is not here."""

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.data import CharTokenizer, load_bundled_corpus
from lab.nets.models import LMConfig, build_model
from lab.server.spaces import new_space_key, space_dir
from lab.training.checkpoints import save_checkpoint
from ui.shared.common import PAGES

APP = str(Path(__file__).resolve().parent.parent / "app.py")
NEEDED = ["char-rnn", "char-gru-torch", "char-lstm"]
RUN = "gru_torch-e8-h16x1-1"  # a run's automatic name, as the Train page saves it
LISTED = f"yours: {RUN}_latest"
TITLE = "yours: GRU (z keeps) · 16 units · run 1"
# a run's record, as the Train page saves it: two evaluations on the bundled plays
METRICS = {"corpus": "bundled", "history": [{"step": s, "val_loss": 3.0 - s, "train_loss": 3.1 - s} for s in (0, 1)]}
NOTICES = ("success", "info", "warning", "error")


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """A session's space holding two versions of one run -> (the user folder, the space key)."""
    root = tmp_path / "user_checkpoints"
    monkeypatch.setenv("RNNLAB_USER_DIR", str(root))
    key = new_space_key(root)
    tokenizer = CharTokenizer.from_text(load_bundled_corpus())  # every character the pages' texts hold
    model = build_model(LMConfig(vocab_size=tokenizer.vocab_size, embed_dim=8, hidden_size=16))
    for _ in range(2):
        save_checkpoint(space_dir(root, key), RUN, model, tokenizer, metrics=METRICS)
    return root, key


def notices(at):
    """(kind, text as read) of every notice on the page's main part."""
    return [(kind, re.sub(r"\\(.)", r"\1", str(e.value))) for kind in NOTICES for e in at.main.get(kind)]


def visit(at, page, **state):
    at.query_params.clear()  # the sidebar's links carry no settings: each page keeps its own
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(PAGES[page][0]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_after_a_delete_only_its_confirmation_shows_on_every_page_that_held_the_model(saved):
    root, key = saved
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["_rnnlab_session_key"] = key
    visit(at, "Sample", sample_checkpoint=LISTED)
    assert at.selectbox(key="sample_checkpoint").value == LISTED and notices(at) == []
    visit(at, "Memory", memory_reach_checkpoints=[LISTED, "char-rnn_latest"])
    visit(at, "Checkpoints", ckpt_choice=LISTED)
    assert at.selectbox(key="ckpt_choice").value == LISTED and notices(at) == []
    assert at.query_params["model"] == LISTED  # the page's link names it, as the student's URL does
    at.checkbox(key="ckpt_confirm_delete").check().run()
    at.button(key="ckpt_delete").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (notice,) = notices(at)
    assert notice == (
        "success",
        f"Deleted, with every saved version of it: the Sample and Gates pages no longer list it as “{TITLE}”.",
    )
    assert at.selectbox(key="ckpt_choice").value == "char-lstm_latest"  # the page's own default, silently
    assert not list(space_dir(root, key).glob(f"{RUN}_*"))
    at.run()  # the next view: nothing more to say
    assert notices(at) == []
    for page, key in (("Sample", "sample_checkpoint"), ("Memory", None)):
        visit(at, page)
        assert notices(at) == [], page
        if key:
            assert at.selectbox(key=key).value != LISTED
    assert at.session_state["memory_reach_checkpoints"] == ["char-rnn_latest"]


def test_a_stale_link_opened_fresh_says_so_in_plain_words(saved):
    """Someone else's link (or one whose model was deleted in another browser): one warning, naming the
    model as the pages name it, and the page shows its own default."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = "yours: gru_torch-e8-h32x1-3_latest"
    at.switch_page(PAGES["Sample"][0]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert notices(at) == [
        (
            "warning",
            "There is no model called “yours: GRU (z keeps) · 32 units · run 3” here (it was deleted, or saved in "
            "another browser), so this page shows Character GRU (z keeps).",
        )
    ]
