"""No exception ever reaches a page (issue 50, item 2): every page and fragment fails at one boundary
(ui.shared.boundary) as one plain line, without a path of the server's folders or the student's space key.

The reported case: a checkpoint deleted while the Sample page read it put a FileNotFoundError, with its stack and
the path holding the key, beside the page's own message. Here the student's file vanishes at the k-th time a
page looks at it, for every k the page reaches, on every page that reads a student's file; and every page is
walked for an exception element once.
"""

import pathlib
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lab.data import CharTokenizer, load_bundled_corpus
from lab.errors import LabError
from lab.nets.models import LMConfig, build_model
from lab.server.spaces import new_space_key, space_dir
from lab.training.checkpoints import save_checkpoint
from ui.shared import boundary
from ui.shared.common import PAGES

APP = str(Path(__file__).resolve().parent.parent / "app.py")
NEEDED = ["char-rnn", "char-gru-torch", "char-lstm"]
RUN = "lstm-e8-h16x1-1"
LISTED = f"yours: {RUN}_latest"
METRICS = {"corpus": "bundled", "history": [{"step": s, "val_loss": 3.0 - s, "train_loss": 3.1 - s} for s in (0, 1)]}
# the pages that read a student's file, and the widget that picks it
READERS = {
    "Sample": {"sample_checkpoint": LISTED},
    "Gates": {"gates_checkpoint": LISTED},
    "Memory": {"memory_reach_checkpoints": [LISTED, "char-rnn_latest"]},
    "Checkpoints": {"ckpt_choice": LISTED},
}
MOST_MOMENTS = 8  # the moments tried per page: the first ones, where listing ends and reading starts


@pytest.fixture
def space(tmp_path, monkeypatch):
    """A student's space with one saved model -> (user folder, key, a function that saves it again)."""
    root = tmp_path / "user_checkpoints"
    monkeypatch.setenv("RNNLAB_USER_DIR", str(root))
    key = new_space_key(root)
    tokenizer = CharTokenizer.from_text(load_bundled_corpus())
    model = build_model(LMConfig(vocab_size=tokenizer.vocab_size, embed_dim=8, hidden_size=16, cell="lstm"))

    def save():
        for old in space_dir(root, key).glob("*"):
            old.unlink()
        save_checkpoint(space_dir(root, key), RUN, model, tokenizer, metrics=METRICS)

    save()
    return root, key, save


class Vanishing:
    """Path.stat that deletes the student's files at its `at`-th look at one of them (0: never), and counts."""

    def __init__(self, folder, at):
        self.folder, self.at, self.looks = str(folder), at, 0

    def install(self, monkeypatch):
        original = pathlib.Path.stat

        def stat(path, *args, **kwargs):
            if str(path).startswith(self.folder) and str(path).endswith(".safetensors"):
                self.looks += 1
                if self.looks == self.at:
                    for file in pathlib.Path(self.folder).glob("*.safetensors"):
                        file.unlink()
            return original(path, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, "stat", stat)


def shown_text(at):
    """Every message the page shows, as one string."""
    parts = [str(e.value) for kind in ("error", "warning", "info", "success") for e in at.get(kind)]
    return " ".join(parts + [str(m.value) for m in at.markdown])


def visit(page, key, state):
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["_rnnlab_session_key"] = key
    for name, value in state.items():
        at.session_state[name] = value
    return at.switch_page(PAGES[page][0]).run()


def assert_plain(at, root, key, where):
    assert not at.exception, (where, [e.value for e in at.exception])
    shown = shown_text(at)
    assert key not in shown and str(root) not in shown and "Traceback" not in shown, (where, shown)
    for error in at.error:
        assert len(str(error.value).splitlines()) == 1, (where, error.value)


@pytest.mark.parametrize("page", list(READERS))
def test_a_file_deleted_while_a_page_reads_it_gives_one_plain_line(page, space, monkeypatch):
    root, key, save = space
    folder = space_dir(root, key)
    counting = Vanishing(folder, at=0)
    with monkeypatch.context() as patch:
        counting.install(patch)
        assert_plain(visit(page, key, READERS[page]), root, key, f"{page}, nothing deleted")
    assert counting.looks, f"{page} never looked at the student's file"
    for moment in range(1, min(counting.looks, MOST_MOMENTS) + 1):
        save()  # a new file (a new modification time): nothing of it is in the pages' caches
        with monkeypatch.context() as patch:
            Vanishing(folder, at=moment).install(patch)
            at = visit(page, key, READERS[page])
        assert_plain(at, root, key, f"{page}, deleted at look {moment} of {counting.looks}")


def test_every_page_opens_with_no_exception_element(space):
    root, key, _ = space
    for page in PAGES:
        assert_plain(visit(page, key, READERS.get(page, {})), root, key, page)


@pytest.mark.parametrize(
    "error, expected",
    [
        (FileNotFoundError(2, "No such file", "/srv/user_checkpoints/abc/x.safetensors"), boundary.GONE),
        (PermissionError(13, "Permission denied", "/srv/user_checkpoints/abc"), boundary.UNREADABLE),
        (KeyError("/srv/user_checkpoints/abc"), boundary.FAILED),
        (LabError("prompt: *empty*\nsecond line"), r"prompt\: \*empty\* second line"),
    ],
)
def test_the_boundary_says_one_plain_line_and_never_a_path(error, expected):
    said = boundary.plain_failure(error)
    assert said == expected and "\n" not in said and not re.search(r"/srv|user_checkpoints", said)


def test_the_boundary_shows_its_line_and_logs_the_traceback(monkeypatch, caplog):
    shown = []
    monkeypatch.setattr(boundary.st, "error", lambda text, **_: shown.append(text))
    with boundary.page_part():
        raise FileNotFoundError(2, "gone", "/srv/user_checkpoints/key/x.safetensors")
    assert shown == [boundary.GONE]
    assert "Traceback" in caplog.text and "FileNotFoundError" in caplog.text
