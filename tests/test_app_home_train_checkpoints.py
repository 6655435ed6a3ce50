"""AppTest of the Home, Train and Checkpoints pages: they render, a tiny run trains live and
stops, and bad input (uploads, settings, links) gives a message instead of a traceback.

Long (over 400 lines) because the three pages share one opener and tiny-checkpoint helpers; each
test is a few lines.
"""

import base64
import json
import os
import pickle
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import join_warm_up, preformatted_texts, stop_every_sessions_jobs
from streamlit.testing.v1 import AppTest

import lab.data
import lab.nets.cost
import lab.server.jobs
import lab.training.tasks
import ui.app.warm_up
import ui.shared.sessions
from lab.data import CharTokenizer
from lab.nets.backends import default_backend, default_scan_mode
from lab.nets.families import text_racers
from lab.nets.models import LMConfig, build_model
from lab.server.spaces import new_space_key, space_dir
from lab.training.checkpoints import (
    BUNDLED_DIR,
    checkpoint_bytes,
    list_checkpoints,
    load_checkpoint,
    read_info,
    sanitize_name,
)
from lab.training.presets import PRESETS
from ui.cell_labels import cell_label
from ui.shared.model_names import PRESET_TITLES, info_title, model_title

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TRAIN = "pages/1_Train.py"
CHECKPOINTS = "pages/5_Checkpoints.py"
TIMEOUT = 30
TINY = {"emb": 8, "hidden": 16, "batch": 8, "block": 16, "eval_every": 5, "seconds": 60}


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    """Each test saves and deletes in its own user directory (pages read RNNLAB_USER_DIR when they run),
    and ends with no jobs left running."""
    folder = tmp_path / "user_checkpoints"
    monkeypatch.setenv("RNNLAB_USER_DIR", str(folder))
    yield folder
    stop_every_sessions_jobs()


def saved_files(root):
    """Names of the files a session saved: all in its one folder inside the user directory."""
    folders = [f for f in root.iterdir() if f.name != ".space-secret"] if root.exists() else []  # the keys' secret
    assert len(folders) <= 1 and all(f.is_dir() for f in folders), folders
    return sorted(p.name for folder in folders for p in folder.iterdir())


def open_page(page=None, query=None):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if query:
        at.query_params.update(query)
    if page:
        at.switch_page(page)
    return at.run()


def texts(elements):
    """What the elements show a student: their Markdown with ui.shared.plain_text.plain's escapes read."""
    return re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in elements))


def assert_clean(at):
    assert not at.exception, texts(at.exception)


def session_logs(at):
    return list(at.session_state["train_logs"].values()) if "train_logs" in at.session_state else []


def stop_all(at):
    for log in session_logs(at):
        log.job.stop()
        log.job.wait(10)


# ---------------------------------------------------------------------------
# Home


def test_training_warms_up_once_a_first_page_is_drawn_not_beside_its_first_run(monkeypatch):
    """The warm-up's imports would slow the first page through the interpreter's lock: it starts at a
    session's second heartbeat (the page's first script has ended), once per server process."""
    warm_ups = []
    monkeypatch.setattr(ui.app.warm_up, "warm_up", lambda: warm_ups.append(1))
    ui.app.warm_up.start_warm_up.clear()
    at = open_page()
    assert_clean(at)
    assert warm_ups == []
    assert sys.getswitchinterval() == ui.shared.sessions.PAGE_WAIT_SECONDS  # the server's, set by its first page
    at.run()  # the heartbeat's next beat (here with the page's rerun)
    at.run()
    join_warm_up()
    assert warm_ups == [1]
    open_page().run()  # another session's second beat: the server has warmed up already
    join_warm_up()
    assert warm_ups == [1]


def test_home_shows_families_links_and_presets():
    at = open_page()
    assert_clean(at)
    equations = " ".join(str(e.value) for e in at.latex)  # LaTeX: its backslashes are its own
    assert r"(1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t" in equations  # seeds' GRU: z overwrites
    assert r"(1 - z_t) \odot n_t + z_t \odot h_{t-1}" in equations  # PyTorch's GRU: z keeps
    assert "c_t" in equations and "A_t" in equations
    assert "z overwrites" in texts(at.subheader) and "z keeps" in texts(at.subheader)
    table = at.dataframe[0].value
    assert list(table["preset"]) == [PRESET_TITLES[name] for name in PRESETS]  # named as the Train page names them
    assert table.set_index("preset").loc["Scribe-α", "parameters"] == 1_075_688
    links = [e.proto.page for e in at.get("page_link")]
    assert "Train" in links and "Checkpoints" in links


# ---------------------------------------------------------------------------
# Train


def test_train_renders_with_the_astra_alpha_defaults():
    at = open_page(TRAIN)
    assert_clean(at)
    assert at.selectbox(key="train_preset").value == "astra-alpha"
    assert at.selectbox(key="train_cell").value == "gru_torch"
    assert at.number_input(key="train_seconds").value == 60
    assert not at.error and not at.warning
    assert dict(at.query_params) == {}  # defaults make a clean link


def test_train_settings_come_from_and_go_to_the_url():
    at = open_page(TRAIN, {"preset": "scribe-alpha", "hidden": "64", "seconds": "30", "stateful": "true"})
    assert_clean(at)
    assert not at.warning
    assert at.selectbox(key="train_preset").value == "scribe-alpha"
    assert at.radio(key="train_tokenizer").value == "sentencepiece"  # from the preset
    assert at.number_input(key="train_hidden").value == 64
    assert at.checkbox(key="train_stateful").value is True
    at.number_input(key="train_layers").set_value(3).run()
    assert at.query_params["layers"] == ["3"] or at.query_params["layers"] == "3"
    assert "hidden" in at.query_params and "seconds" in at.query_params


def test_a_busy_servers_forecast_is_said_in_starts_line_not_in_a_box_above_the_chart(monkeypatch):
    """On a server too busy to call the memory race in its time, the forecast joins the line that says what
    each button does: a box of its own pushed the live chart below a laptop's first screen."""
    monkeypatch.setattr(os, "getloadavg", lambda: (64.0, 64.0, 64.0), raising=False)
    at = open_page(TRAIN, {"seconds": "10"})
    assert_clean(at)
    assert not at.warning
    assert any("⏳" in c.value and "Memory race" in c.value for c in at.caption)


def test_the_preset_list_says_what_each_preset_is_without_a_size_the_settings_beside_it_change():
    """The list named Astra-α "of 269k parameters (256 units)" (counted at 65 characters) above a line that
    said 274,451 (the plays' 83), and kept saying 256 units at 512: the size is said once, by that line."""
    at = open_page(TRAIN, {"hidden": "512"})
    assert_clean(at)
    options = at.selectbox(key="train_preset").options
    assert "Astra-α: a character GRU (z keeps) · a minute on a CPU" in options, options
    assert len(set(options)) == len(options), options  # each preset told apart without its size
    assert not [o for o in options if re.search(r"parameters|\bunits?\b|\d+(\.\d+)?[kM]\b", o)], options


def test_bad_url_values_are_ignored_with_warnings():
    at = open_page(
        TRAIN, {"hidden": "abc", "cell": "transformer", "seconds": "-5", "dropout": "nan", "bogus": "1", "layers": "2"}
    )
    assert_clean(at)
    warnings = texts(at.warning)
    for name in ("hidden=abc", "cell=transformer", "seconds=-5", "dropout=nan", "bogus=1"):
        assert name in warnings
    assert at.number_input(key="train_hidden").value == 256  # the default
    assert at.number_input(key="train_layers").value == 2  # a good value in the same link still applies


def test_tiny_run_draws_live_losses_and_stops(user_dir):
    at = open_page(TRAIN)
    for name, value in TINY.items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.text_input(key="train_name").set_value("apptest-tiny")
    at.number_input(key="train_seconds").set_value(600)  # ended by Stop, not by itself on a slow machine
    at.run()
    at.button(key="train_start").click().run()
    assert_clean(at)
    try:
        (log,) = session_logs(at)
        deadline = time.monotonic() + 120  # a fresh training process imports PyTorch first: slow on busy cores
        while not (log.steps["loss"] and at.get("plotly_chart")) and time.monotonic() < deadline:
            time.sleep(0.3)
            at.run()
        assert log.steps["loss"], "no step event arrived"
        assert at.get("plotly_chart"), "no loss chart"
        assert log.job.running
        assert at.get("progress")  # progress bar with tokens/s and ETA
        at.button(key="train_stop").click().run()
        assert_clean(at)
        assert log.job.status == "stopped"
        assert log.job.checkpoint_path is not None and log.job.checkpoint_path.parent.parent == user_dir
        assert "the Sample and Gates pages list it as “yours: apptest-tiny”." in texts(at.success)
        for page, key in (("pages/2_Sample.py", "sample_checkpoint"), ("pages/3_Gates.py", "gates_checkpoint")):
            picker = at.switch_page(page).run().selectbox(key=key)
            assert "yours: apptest-tiny" in picker.options, page  # shown by its name, its value the listed name
        at.switch_page(TRAIN).run()
        space_key = log.job.checkpoint_path.parent.name  # the session's secret
        shown = everything_shown(at)
        assert space_key not in shown and str(user_dir) not in shown  # no key, no server path, anywhere
    finally:
        stop_all(at)


def everything_shown(at):
    """Every text an AppTest page renders: Markdown, alerts, code, tables, widget labels and values."""
    parts = [
        str(e.value)
        for kind in ("markdown", "caption", "success", "error", "warning", "info", "code", "text", "latex")
        for e in at.get(kind)
    ]
    parts += [e.value.to_csv() for e in at.dataframe] + [str(t.value) for t in at.table]
    parts += [
        f"{w.label} {w.value}"
        for kind in ("text_input", "text_area", "selectbox", "radio", "number_input")
        for w in at.get(kind)
    ]
    return re.sub(r"\\(.)", r"\1", "\n".join(parts))


def chart_traces(at):
    """The race chart's traces as drawn: (name, y values). Plotly sends numpy arrays as base64 typed
    arrays ({"dtype": "f8", "bdata": ...})."""
    (chart,) = [c for c in at.get("plotly_chart") if "train_chart" in c.proto.id]

    def values(y):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"]) if isinstance(y, dict) else y

    return [(trace["name"], values(trace.get("y", []))) for trace in json.loads(chart.proto.spec)["data"]]


def test_the_race_button_trains_four_families_at_once_on_one_chart_in_nats_per_char(user_dir):
    """The text race's families (their records say so), sized to the page's model's parameter count, fit in one
    session's share of the
    budget and race on one chart, each named in plain words with its size and steps."""
    at = open_page(TRAIN)
    at.number_input(key="train_seconds").set_value(60)
    at.run()
    at.button(key="train_race").click().run()
    assert_clean(at)
    try:
        logs = session_logs(at)
        assert sorted(log.cell.split("/")[0] for log in logs) == sorted(text_racers())  # the record's runners
        assert all(log.job.running for log in logs)  # none waits in the queue: the race fits
        for log in logs:  # each family in its fastest measured form on this device (the scan: its loop on a CPU)
            config = log.job.model.config
            assert config.backend == default_backend(config.cell, "cpu")
            assert config.scan_mode == default_scan_mode("cpu") == "sequential"
        deadline = time.monotonic() + 60
        while not all(log.steps["loss"] for log in logs) and time.monotonic() < deadline:
            time.sleep(0.5)
            at.run()
        counts = [lab.nets.cost.parameter_count(log.job.model.config) for log in logs]
        assert max(counts) / min(counts) < 1.02  # equal parameters, not equal widths
        traces = dict(chart_traces(at.run()))
        curves = [name for name, y in traces.items() if not name.endswith("held-out text") and len(y)]
        assert len(curves) == 4, traces.keys()
        assert all(0 < y < 6 for name in curves for y in traces[name])  # nats per character: below ln 76 + 2
        assert {name.split(" · ")[0] for name in curves} == {"vanilla RNN", "GRU (z keeps)", "LSTM", "selective scan"}
        assert all(re.search(r" · \d+k parameters · (1 step|[\d,]+ steps)$", name) for name in curves), curves
    finally:
        stop_all(at)


def test_the_memory_race_trains_the_four_cells_on_recall_and_says_who_leads_from_their_curves(user_dir):
    """Said before Start: 5 s is too short to call it. Then the four toy cells train at once (not as language-model
    runs), and the chart and its verdict are the runs' own, as lab.experiments.memory_race reads them."""
    import pandas as pd

    from lab.experiments.memory_race import memory_verdict, race_curves
    from lab.experiments.probe import TOY_CELLS
    from lab.training.checkpoints import BUNDLED_DIR
    from ui.train.memory_race import DISTANCE, TASK, shipped_ends

    at = open_page(TRAIN, {"seconds": "5"})
    (forecast,) = [c.value for c in at.caption if "⏳" in c.value]  # in the line above the buttons
    assert "memory race in 5 s" in forecast or "5 s is too short" in forecast  # before it starts
    at.number_input(key="train_seconds").set_value(600).run()  # ended by Stop, not by itself when slow
    at.button(key="train_memory_race").click().run()
    assert_clean(at)
    jobs = at.session_state["train_memory_jobs"]
    try:
        assert sorted(jobs) == sorted(TOY_CELLS) and all(job.running for job in jobs.values())
        assert session_logs(at) == []  # toy-task runs are not read as language-model runs
        deadline = time.monotonic() + 120
        while any(len(xs) < 2 for xs, _ in race_curves(jobs).values()) and time.monotonic() < deadline:
            time.sleep(0.5)
        at.button(key="train_stop").click().run()
        assert_clean(at)
        assert not any(job.running for job in jobs.values())
        (chart,) = [c for c in at.get("plotly_chart") if "train_memory_chart" in c.proto.id]
        names = [trace["name"] for trace in json.loads(chart.proto.spec)["data"]]
        assert names == [cell_label(cell) for cell in TOY_CELLS]  # each family named and coloured by its record
        rows = pd.read_csv(BUNDLED_DIR / "memory_probe.csv")
        chance = jobs["rnn"].task.chance
        said = memory_verdict(
            race_curves(jobs), chance, "elapsed", DISTANCE, shipped_ends(rows[rows["task"] == TASK], chance)
        )
        assert said.startswith("After ") and said in texts(at.caption)
    finally:
        for job in jobs.values():
            job.stop()
            job.wait(10)


def wait_until_ended(at, log, timeout=60):
    deadline = time.monotonic() + timeout
    while log.job.running and time.monotonic() < deadline:
        time.sleep(0.3)
        at.run()
    assert not log.job.running, "the run did not end"
    at.run()  # the page as it is once the run has ended


def test_a_finished_run_continues_where_it_ended_and_saves_the_next_version(user_dir):
    at = open_page(TRAIN)
    for name, value in {**TINY, "seconds": 2}.items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.text_input(key="train_name").set_value("apptest-more")
    at.run()
    at.button(key="train_start").click().run()
    try:
        (first,) = session_logs(at)
        wait_until_ended(at, first)
        assert first.job.status == "finished" and first.job.checkpoint_path.name == "apptest-more_v1.safetensors"
        at.number_input(key=f"train_more_{id(first.job)}").set_value(2)
        at.button(key=f"train_continue_{id(first.job)}").click().run()
        assert_clean(at)
        _, continued = session_logs(at)
        assert continued.job.name == "apptest-more" and "continued from step" in continued.label
        wait_until_ended(at, continued)
        assert continued.job.status == "finished", continued.job.message
        # its chart goes on from where the first part ended, in steps and in seconds
        assert continued.steps["step"][0] == first.steps["step"][-1] + 1 == first.job.result.steps + 1
        assert continued.steps["elapsed"][0] > first.job.result.elapsed
        assert continued.job.checkpoint_path.name == "apptest-more_v2.safetensors"
        saved = load_checkpoint(continued.job.checkpoint_path)
        assert saved.training_state.step == continued.job.result.steps > first.job.result.steps
        keys = [b.key for b in at.button]
        assert f"train_continue_{id(continued.job)}" in keys and f"train_continue_{id(first.job)}" not in keys
    finally:
        stop_all(at)


@pytest.mark.parametrize("content, message", [(b"", "empty"), (b"\x00\x01binary\xff", "not UTF-8")])
def test_bad_corpus_uploads_are_refused(content, message):
    at = open_page(TRAIN, {"corpus": "upload"})
    at.file_uploader(key="train_upload").set_value(("corpus.txt", content, "text/plain")).run()
    assert_clean(at)
    assert message in texts(at.error)
    assert at.button(key="train_start").disabled


def test_a_corpus_shorter_than_one_window_is_an_error_on_start():
    at = open_page(TRAIN, {"corpus": "upload", "block": "64"})
    at.file_uploader(key="train_upload").set_value(("short.txt", b"To be, or not to be.", "text/plain")).run()
    assert not at.error  # a valid text ...
    at.button(key="train_start").click().run()
    assert_clean(at)
    assert "shorter than one training window" in texts(at.error)  # ... too short for the block size
    assert not session_logs(at)


def test_a_run_name_without_usable_characters_is_an_error():
    at = open_page(TRAIN, {"name": "!!!", "emb": "8", "hidden": "16"})
    at.button(key="train_start").click().run()
    assert_clean(at)
    assert "no usable characters" in texts(at.error)
    assert not session_logs(at)


def test_fused_backend_only_where_torch_has_the_cell():
    at = open_page(TRAIN, {"cell": "gru_seed", "backend": "fused"})
    assert_clean(at)
    assert "fused backend exists only for" in texts(at.warning)
    assert at.button(key="train_start").disabled
    at.selectbox(key="train_cell").set_value("lstm").run()
    assert not at.warning and not at.button(key="train_start").disabled


def test_offline_download_shows_the_data_error(monkeypatch):
    def offline():
        raise lab.data.DataError("could not download Tiny Shakespeare: offline")

    monkeypatch.setitem(lab.training.tasks.CORPORA, "tiny-shakespeare", offline)
    at = open_page(TRAIN, {"corpus": "tiny-shakespeare", "hidden": "32"})
    assert_clean(at)
    assert "offline" in texts(at.error)
    assert at.button(key="train_start").disabled
    assert at.button(key="train_retry")
    assert at.number_input(key="train_hidden").value == 32  # the settings are kept


# ---------------------------------------------------------------------------
# Checkpoints


def tiny_checkpoint(name="tiny", hidden=8):
    tokenizer = CharTokenizer("abcdefgh \n")
    model = build_model(LMConfig(cell="lstm", vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=hidden))
    history = [{"step": 5, "train_loss": 2.3, "val_loss": 2.2, "val_nats_per_char": 2.2}]
    return checkpoint_bytes(model, tokenizer, {"history": history, "steps": 5}, name, 1)


def test_checkpoints_lists_the_bundled_ones_and_summarises_one():
    bundled = [info_title(info) for info in list_checkpoints(None, include_versions=False)]
    at = open_page(CHECKPOINTS)
    assert_clean(at)
    assert bundled, "no bundled checkpoints (python scripts/build_checkpoints.py)"
    table = at.dataframe[0].value
    assert set(bundled) <= set(table["name"]) and set(table["where"]) == {"bundled"}
    summary = " ".join(preformatted_texts(at))
    assert "MODEL SUMMARY" in summary and "Cell convention" in summary
    assert at.get("plotly_chart")  # the validation history
    assert at.get("download_button")


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("evil.safetensors", pickle.dumps({"weights": [1, 2, 3]}), "pickle"),
        ("model.pt", b"PK\x03\x04 torch.save zip", "pickle"),
        ("garbage.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!", "its header is damaged"),
    ],
)
def test_bad_checkpoint_uploads_are_refused_and_nothing_is_written(user_dir, name, content, message):
    at = open_page(CHECKPOINTS)
    at.file_uploader(key="ckpt_upload_0").set_value((name, content, "application/octet-stream")).run()
    assert_clean(at)
    assert message in texts(at.error)
    assert saved_files(user_dir) == []


def test_wrong_architecture_upload_is_refused(user_dir):
    good = tiny_checkpoint()
    tampered = good.replace(b'\\"hidden_size\\": 8', b'\\"hidden_size\\": 9')
    assert tampered != good
    at = open_page(CHECKPOINTS)
    at.file_uploader(key="ckpt_upload_0").set_value(("tampered.safetensors", tampered, "")).run()
    assert_clean(at)
    assert "do not match the architecture" in texts(at.error)
    assert saved_files(user_dir) == []


def test_upload_save_inspect_and_delete_a_user_checkpoint(user_dir, monkeypatch):
    import ui.checkpoints.upload

    reads = []
    read = ui.checkpoints.upload.load_upload  # the Checkpoints page's reader of uploads (lab.server.uploads)
    monkeypatch.setattr(ui.checkpoints.upload, "load_upload", lambda *args: reads.append(1) or read(*args))
    at = open_page(CHECKPOINTS)
    at.file_uploader(key="ckpt_upload_0").set_value(("my model!.safetensors", tiny_checkpoint("my model!"), "")).run()
    assert_clean(at)
    assert "valid RNN Lab checkpoint" in texts(at.success)
    at.run()
    assert "valid RNN Lab checkpoint" in texts(at.success) and len(reads) == 1  # read once, not on every rerun
    at.button(key="ckpt_save").click().run()
    assert_clean(at)
    assert saved_files(user_dir) == ["my-model_latest.safetensors", "my-model_v1.safetensors"]  # a sanitised name
    assert "Saved: the Sample and Gates pages list it as “yours: my-model”" in texts(at.success)

    table = at.dataframe[0].value
    assert list(table[table["where"] == "yours"]["name"]) == ["yours: my-model"]  # the run once, not its v1 too
    at.selectbox(key="ckpt_choice").set_value("yours: my-model_latest").run()
    assert at.button(key="ckpt_delete").disabled  # not without the confirmation
    at.checkbox(key="ckpt_confirm_delete").check().run()
    at.button(key="ckpt_delete").click().run()
    assert_clean(at)
    assert saved_files(user_dir) == []  # the run and its versions: no earlier version comes back
    assert (
        "Deleted, with every saved version of it: the Sample and Gates pages no longer list it as “yours: my-model”"
        in texts(at.success)
    )


def test_bundled_checkpoints_have_no_delete_button():
    assert list_checkpoints(None), "no bundled checkpoints (python scripts/build_checkpoints.py)"
    at = open_page(CHECKPOINTS)
    assert not [b for b in at.button if b.key == "ckpt_delete"]


def test_two_sessions_cannot_see_or_delete_each_others_checkpoints(user_dir):
    alice = open_page(CHECKPOINTS)
    alice.file_uploader(key="ckpt_upload_0").set_value(("alice.safetensors", tiny_checkpoint("alice"), "")).run()
    alice.button(key="ckpt_save").click().run()
    assert_clean(alice)
    (alice_folder,) = [f for f in user_dir.iterdir() if f.is_dir()]

    bob = open_page(CHECKPOINTS)
    names = set(bob.dataframe[0].value["name"])
    assert not {n for n in names if n.startswith("alice")}  # bob does not see alice's files
    assert not [o for o in bob.selectbox(key="ckpt_choice").options if "alice" in o]
    # a name bob types cannot reach alice's folder: it is sanitised into a file of bob's own
    bob.file_uploader(key="ckpt_upload_0").set_value(("x.safetensors", tiny_checkpoint("x"), "")).run()
    bob.text_input(key="ckpt_save_name").set_value(f"../{alice_folder.name}/alice_latest").run()
    bob.button(key="ckpt_save").click().run()
    assert_clean(bob)
    assert sorted(p.name for p in alice_folder.iterdir()) == ["alice_latest.safetensors", "alice_v1.safetensors"]
    bob_folder = next(f for f in user_dir.iterdir() if f.is_dir() and f != alice_folder)
    assert len(list(bob_folder.iterdir())) == 2
    bob.switch_page("pages/2_Sample.py").run()  # nor does the model picker of another page list them
    assert_clean(bob)
    options = bob.selectbox(key="sample_checkpoint").options
    assert "yours: alice" not in options
    typed = sanitize_name(f"../{alice_folder.name}/alice_latest")  # a key may start with "-", which goes
    assert [o for o in options if o.startswith("yours: ")] == [model_title(f"yours: {typed}_latest")]
    alice.run()  # alice still sees hers
    assert "yours: alice" in set(alice.dataframe[0].value["name"])


def test_strings_from_a_file_render_as_text_not_markdown(user_dir):
    """A checkpoint's metadata is data: an image link in it must not make the browser fetch a URL."""
    tokenizer = CharTokenizer("abcdefgh \n")
    model = build_model(LMConfig(cell="lstm", vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=8))
    evil = "![p](http://127.0.0.1:9/pixel.png) :red[alarm] $x$ <img src=x>"
    data = checkpoint_bytes(model, tokenizer, {"history": [], "steps": 5, "reason": evil}, "evil", 1)
    at = open_page(CHECKPOINTS)
    at.file_uploader(key="ckpt_upload_0").set_value(("![x](http://127.0.0.1:9/a.png).safetensors", data, "")).run()
    at.button(key="ckpt_save").click().run()
    at.selectbox(key="ckpt_choice").set_value("yours: evil_latest").run()
    assert_clean(at)
    shown = " ".join(str(e.value) for e in [*at.markdown, *at.success, *at.error, *at.warning])
    assert "alarm" in shown and "pixel" in shown  # the text is there...
    for live in (r"!\[", r"\]\(", r":red\[", r"<img"):  # ...but no Markdown, directive or HTML can act
        assert not re.search(r"(?<!\\)" + live, shown), live


def test_a_model_too_large_for_the_server_is_refused_before_it_is_built():
    """Settings within the widgets' bounds can ask for a 780M-parameter model: it is refused, not built."""
    at = open_page(TRAIN, {"emb": "2048", "hidden": "4096", "layers": "8"})
    assert_clean(at)
    vocab = len(set("".join(lab.data.load_bundled_split())))  # the bundled corpus's characters
    asked = LMConfig(cell="gru_torch", vocab_size=vocab, embed_dim=2048, hidden_size=4096, num_layers=8)
    assert f"{lab.nets.cost.parameter_count(asked):,} parameters" in texts(
        at.error
    ) and "more than this server" in texts(at.error)
    assert at.button(key="train_start").disabled


def test_a_run_that_does_not_fit_beside_the_others_waits_in_the_queue(monkeypatch):
    import lab.server.capacity

    budget = lab.server.capacity.Budget(capacity=1024, owner_share=1.0)
    monkeypatch.setattr(lab.server.jobs, "server_budget", lambda: budget)
    holder = budget.request(1023.99, owner="another student")  # the server is full
    at = open_page(TRAIN)
    for name, value in TINY.items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.button(key="train_start").click().run()
    try:
        assert_clean(at)
        (log,) = session_logs(at)
        assert log.job.status == "queued" and log.job.queue_position == 1
        assert any("number 1 in the queue" in p.proto.text for p in at.get("progress"))
        holder.release()  # room again: the queued run starts by itself
        deadline = time.monotonic() + 30
        while log.job.status == "queued" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.job.status == "running"
    finally:
        stop_all(at)


def hostile_variants():
    """An honest checkpoint's metadata rewritten by hand, one defect class each."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load, save

    good = tiny_checkpoint("good")
    tensors = load(good)
    with tempfile.NamedTemporaryFile(suffix=".safetensors") as f:
        f.write(good)
        f.flush()
        with safe_open(f.name, framework="pt") as opened:
            metadata = opened.metadata()
    config = json.loads(metadata["config"])
    edits = {
        "history-string": {"metrics": json.dumps({"history": "abc"})},
        "metrics-list": {"metrics": json.dumps([1, 2])},
        "tokenizer-null": {"tokenizer": "null"},
        "extra-number": {"extra": "7"},
        "config-strings": {"config": json.dumps({**config, "hidden_size": "8"})},
        "config-huge": {"config": json.dumps({**config, "num_layers": 100_000})},
        "reason-markdown": {"metrics": json.dumps({"history": [], "reason": "![p](http://127.0.0.1:9/x.png)"})},
    }
    variants = {name: save(tensors, {**metadata, **edit}) for name, edit in edits.items()}
    variants["weights-nan"] = save({k: torch.full_like(v, float("nan")) for k, v in tensors.items()}, metadata)
    return variants


def test_hand_edited_files_are_named_and_removable_and_break_no_page(user_dir):
    alice = open_page(CHECKPOINTS)
    folder = space_dir(user_dir, alice.session_state["_rnnlab_session_key"])
    for name, data in hostile_variants().items():
        (folder / f"{name}_latest.safetensors").write_bytes(data)
    alice.run()
    assert_clean(alice)
    named = " ".join(preformatted_texts(alice))
    # headers are checked when listing: the markdown one is valid (its reason is only text), the NaN
    # weights show when the file is loaded, a missing tokenizer where text is read; the rest are named
    listed = ("reason-markdown", "tokenizer-null", "weights-nan")
    for name in hostile_variants():
        assert (name in named) != (name in listed), name
    alice.selectbox(key="ckpt_choice").set_value("yours: weights-nan_latest").run()
    assert_clean(alice)
    assert "not finite" in texts(alice.error)
    alice.switch_page("pages/2_Sample.py").run()
    assert_clean(alice)  # a text model without its tokenizer is not offered where text is read
    assert "yours: tokenizer-null" not in alice.selectbox(key="sample_checkpoint").options
    for page in ("pages/3_Gates.py", "pages/4_Memory.py", "pages/5_Checkpoints.py"):
        alice.switch_page(page).run()
        assert_clean(alice)
    bob = open_page(CHECKPOINTS)  # another student's page shows none of it
    assert_clean(bob)
    assert not bob.warning and not [o for o in bob.selectbox(key="ckpt_choice").options if "markdown" in o]
    alice.button(key="ckpt_delete_unreadable").click().run()
    assert_clean(alice)
    assert sorted(p.name for p in folder.iterdir()) == [f"{name}_latest.safetensors" for name in listed]
    alice.selectbox(key="ckpt_choice").set_value("yours: tokenizer-null_latest").run()
    assert_clean(alice)


def test_the_space_cookie_is_written_again_on_every_visit_so_its_expiry_slides(monkeypatch):
    """A browser that sent its cookie still gets it again with a fresh max-age: files are kept 48 h after
    the student was last seen, not after the first visit."""
    key = new_space_key(ui.shared.sessions.users_root())
    monkeypatch.setattr(ui.shared.sessions, "space_cookie", lambda: key)
    for _ in range(2):  # two visits: two sessions, each renewing the cookie
        at = open_page()
        assert_clean(at)
        scripts = [str(h.proto.body) for h in at.get("html") if "document.cookie" in str(h.proto.body)]
        assert len(scripts) == 1 and f"rnnlab_space={key}" in scripts[0]
        assert f"max-age={48 * 3600}" in scripts[0]  # RNNLAB_KEEP_HOURS's default


def test_the_cookie_script_shares_one_space_per_browser_and_never_embeds_a_raw_cookie():
    key = new_space_key(ui.shared.sessions.users_root())
    script = ui.shared.sessions.space_cookie_script(key, "x';alert(1)//")
    assert "alert" not in script  # a cookie from the browser never reaches the script as code
    assert script.count("window.location.reload()") == 1 and "sessionStorage" in script  # reloads at most once
    assert f"rnnlab_space={key}; path=/; max-age={48 * 3600}" in script


def test_checkpoints_opens_on_the_best_character_model_and_compares_per_character_only():
    at = open_page(CHECKPOINTS)
    assert_clean(at)
    assert at.selectbox(key="ckpt_choice").value == "char-lstm_latest"
    (table,) = [d.value for d in at.dataframe if "val nats/char" in d.value.columns]
    assert "final val loss" not in table.columns  # a subword model's loss per token would sit beside characters'
    lstm = table[table.name == "Character LSTM"].iloc[0]
    assert (lstm.family, lstm.cell) == ("language model", "LSTM")  # plain words, not the lab's keys
    assert lstm["val nats/char"] == pytest.approx(
        read_info(BUNDLED_DIR / "char-lstm_latest.safetensors", bundled=True).metrics["val_nats_per_char"]
    )
