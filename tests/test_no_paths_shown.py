"""No message a page shows holds a path of the server's folders: a student's folder is named by its space key,
which opens it, and a server path tells a stranger where the files are. "Continue this run" after its file
was deleted says so in plain words; the common failures of saving, loading and deleting are shown as the
pages show them (ui.shared.plain_text.user_errors, a job's message) and scanned for the folder and the key."""

import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.shared.plain_text
import ui.shared.sessions
from lab.data import CharTokenizer
from lab.errors import LabError
from lab.nets.models import LMConfig, build_model
from lab.server.jobs import TrainingJob
from lab.server.spaces import new_space_key, reserve_room, space_dir
from lab.training.checkpoints import delete_checkpoint, load_checkpoint, read_info, save_checkpoint
from lab.training.checkpoints.store import _folder_lock
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TINY = {"emb": 8, "hidden": 16, "batch": 8, "block": 16, "eval_every": 5, "seconds": 2}


@pytest.fixture
def space(tmp_path, monkeypatch):
    """A student's space inside a user directory the pages use: (user dir, key, folder)."""
    root = tmp_path / "user_checkpoints"
    monkeypatch.setenv("RNNLAB_USER_DIR", str(root))
    key = new_space_key(root)
    return root, key, space_dir(root, key)


def assert_no_server_path(shown, root, key):
    assert key not in shown and str(root) not in shown and "user_checkpoints" not in shown, shown
    assert not re.search(r"(^|[\s'\"(])/\w", shown), shown  # no absolute path of any folder


def shown_by_user_errors(monkeypatch, action):
    """What ui.shared.plain_text.user_errors shows for the exception `action()` raises (one st.error line)."""
    lines = []
    monkeypatch.setattr(ui.shared.plain_text.st, "error", lines.append)
    with ui.shared.plain_text.user_errors("That"):
        action()
    assert len(lines) == 1, "the action did not fail"
    return re.sub(r"\\(.)", r"\1", lines[0])  # plain()'s escapes read


def tiny():
    tokenizer = CharTokenizer.from_text("abc")
    return build_model(LMConfig(vocab_size=3, embed_dim=4, hidden_size=8)), tokenizer


def test_common_failures_of_files_in_a_space_show_no_server_path_or_key(space, monkeypatch):
    root, key, folder = space
    model, tokenizer = tiny()
    saved = save_checkpoint(folder, "mine", model, tokenizer)
    (folder / "broken_v1.safetensors").write_bytes(b"not a checkpoint")
    (folder / "taken").write_bytes(b"a file where a folder would go")
    full = lambda n: reserve_room(root, folder, n, space_bytes=1, total_bytes=1)  # noqa: E731
    failures = {
        "loading a deleted file": lambda: load_checkpoint(folder / "gone_v1.safetensors"),
        "reading a broken file": lambda: read_info(folder / "broken_v1.safetensors"),
        "saving into a file": lambda: save_checkpoint(folder / "taken" / "sub", "x", model, tokenizer),
        "saving over the quota": lambda: save_checkpoint(folder, "more", model, tokenizer, room=full),
        "deleting outside the space": lambda: delete_checkpoint(root / "elsewhere.safetensors", folder),
        "locking a folder that is gone": lambda: _folder_lock(folder / "gone").__enter__(),
        "deleting a file twice": lambda: [delete_checkpoint(saved.name, folder) for _ in range(2)],
    }
    for what, action in failures.items():
        shown = shown_by_user_errors(monkeypatch, action)
        assert_no_server_path(shown, root, key)
        assert shown.startswith("That did not work: "), (what, shown)


def test_a_job_whose_save_failed_and_one_whose_file_was_deleted_show_no_path(space):
    root, key, folder = space
    model, _ = tiny()
    task = LMTask("abcabcabc" * 20, "abcabc" * 20, CharTokenizer.from_text("abc"))
    (folder / "blocked").write_bytes(b"a file where the run's folder would be")
    job = TrainingJob(
        "t", model, task, TrainConfig(max_steps=2, batch_size=2, block_size=4), checkpoint_dir=folder / "blocked"
    )
    assert job.start().wait(60) == "failed" and "saving failed" in job.message
    assert_no_server_path(re.sub(r"\\(.)", r"\1", ui.shared.plain_text.said(job.message)), root, key)
    job = TrainingJob("u", model, task, TrainConfig(max_steps=2, batch_size=2, block_size=4), checkpoint_dir=folder)
    job.resumable = True
    assert job.start().wait(60) == "finished"
    for path in list(folder.glob("u_*")):
        path.unlink()
    with pytest.raises(LabError, match=r"^This run's saved file was deleted, so it cannot continue$"):
        job.continuation(5.0)


def test_continue_after_the_runs_file_was_deleted_says_so_and_shows_no_path(space):
    root, key, folder = space
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("pages/1_Train.py")
    at.run()
    for name, value in TINY.items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.text_input(key="train_name").set_value("deleted-later")
    at.button(key="train_start").click().run()
    (log,) = at.session_state["train_logs"].values()
    deadline = time.monotonic() + 60
    while log.job.running and time.monotonic() < deadline:
        time.sleep(0.3)
    assert log.job.status == "finished", log.job.message
    at.run()
    assert f"train_continue_{id(log.job)}" in [b.key for b in at.button]  # offered while its file is there
    delete_checkpoint(log.job.checkpoint_path.name.replace("_v1", "_latest"), log.job.checkpoint_path.parent)
    at.run()
    assert not at.exception
    assert f"train_continue_{id(log.job)}" not in [b.key for b in at.button]
    captions = " ".join(str(c.value) for c in at.caption)
    assert "cannot be continued: its saved file was deleted" in re.sub(r"\\(.)", r"\1", captions)
    space_key = log.job.checkpoint_path.parent.name
    everything = " ".join(
        str(e.value) for kind in ("error", "warning", "info", "success", "caption", "markdown") for e in at.get(kind)
    )
    assert_no_server_path(everything, root, space_key)
