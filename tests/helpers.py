"""What several test modules share: running the CLI in-process and reading its errors, the smallest model,
study and probe a test trains, a study's records without their timings, and CIFAR-10's on-disk format in
miniature. (Fixtures live in conftest.)"""

import contextlib
import hashlib
import io
import os
import pickle
import statistics

import numpy as np
import pytest
import torch

from benchmarks.app import SCRIPT_DONE
from lab.__main__ import main
from lab.nets.models import LMConfig, build_model
from lab.training.train import TrainConfig

# a CLI model small enough for a test: `--eval-interval` follows, a test's own
TINY_CLI_MODEL = [
    "--hidden-size",
    "16",
    "--embed-dim",
    "8",
    "--block-size",
    "16",
    "--batch-size",
    "4",
    "--threads",
    "1",
]
# a digits study small enough for a test: AblationConfig's fields, and on the command line (where the
# seeds, arms and what follows are a test's own)
TINY_STUDY = dict(
    dataset="digits",
    epochs=1,
    seeds=(0,),
    arms=("baseline",),
    size=8,
    hidden_size=8,
    limit_train=64,
    limit_test=32,
    batch_size=32,
)
TINY_STUDY_CLI = [
    "--size",
    "8",
    "--epochs",
    "1",
    "--limit-train",
    "16",
    "--limit-test",
    "8",
    "--batch-size",
    "8",
    "--gate-batch",
    "2",
]
TINY_PROBE = dict(tasks=("recall",), cells=("rnn",), distances=(2,), steps=5, eval_every=5, eval_sequences=16)


def tiny_lm(task, seed=0):
    """A language model of a few hundred parameters for `task`, initialised from `seed`."""
    torch.manual_seed(seed)
    return build_model(LMConfig(vocab_size=task.vocab_size, embed_dim=8, hidden_size=16))


def tiny_train_config(**overrides):
    """Eight steps of four 16-token windows on the CPU, validated every four; `overrides` change any field."""
    defaults = dict(batch_size=4, block_size=16, max_steps=8, eval_interval=4, eval_windows=8, lr=1e-2, device="cpu")
    return TrainConfig(**{**defaults, **overrides})


# what lesson 5 says of the vanilla RNN, one phrase per case (the others must be absent)
RNN_VERDICTS = (
    "Here the vanilla RNN forgets no faster than the others",
    "Here the vanilla RNN forgets fastest.",
    "Here the vanilla RNN forgets fastest, level with",
    "Here the vanilla RNN is not the one that forgets fastest",
)


def vanilla_rnn_verdict(g, rnn):
    """The one phrase of RNN_VERDICTS lesson 5 must say, from the g values its metrics show ({label: g to three
    decimals}) and the vanilla RNN's label: every cell level, the RNN fastest alone or level with another, or
    another cell fastest. tests/test_lesson_claims.py and tests/test_lessons_walk.py both read it from here."""
    low, high = min(g.values()), max(g.values())
    if low == high:
        return RNN_VERDICTS[0]
    if g[rnn] == low:
        return RNN_VERDICTS[2] if sum(v == low for v in g.values()) > 1 else RNN_VERDICTS[1]
    return RNN_VERDICTS[3]


def run(argv):
    """main(argv) in-process -> (exit code, stdout, stderr); argparse's exits give their code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def assert_one_line_error(code, err, message):
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()  # also splits a progress bar's carriage returns
    assert lines[-1].startswith("error: ") and sum("error:" in line for line in lines) == 1, err
    assert message in lines[-1]


TIMING = ("elapsed", "gate_stats_seconds", "seconds_per_epoch")


def without_timing(run):
    """A run record less its wall-clock fields, which differ between two runs of the same computation."""
    return {
        **{k: v for k, v in run.items() if k not in TIMING},
        "epochs": [{k: v for k, v in e.items() if k != "elapsed"} for e in run["epochs"]],
    }


def cifar_fixture(root, n_train=2, n_test=3):
    """CIFAR-10's on-disk format with a few random images.

    The real files are Python 2 pickles that torchvision loads with
    encoding="latin1", which turns their keys into str, so our dicts use str
    keys ("data", "labels") to be read the same way. Returns the md5 of each file.
    """
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    batches = {f"data_batch_{i}": n_train for i in range(1, 6)} | {"test_batch": n_test}
    labels = {}
    for name, n in batches.items():
        labels[name] = rng.integers(0, 10, n).tolist()
        entry = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "labels": labels[name]}
        (folder / name).write_bytes(pickle.dumps(entry))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"class{i}" for i in range(10)]}))
    md5 = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    return md5, labels


def need_browser(what):
    """A browser test without its browser: skipped on a developer's machine, a failure in CI."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set, so the browser tests must run)")
    pytest.skip(what)


@contextlib.contextmanager
def chromium():
    """Headless Chromium for a module's browser tests (need_browser when it or playwright is missing)."""
    from benchmarks.app import CHROMIUM, launch_browser

    if not os.path.exists(CHROMIUM):
        need_browser(f"{CHROMIUM} is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need_browser("playwright is not installed")
    with sync_playwright() as p:
        browser = launch_browser(p)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def laptop_page(user_dir, timeout_ms):
    """(an app server over `user_dir`, one browser page at the laptop's 1366×768) for a module's tests."""
    from benchmarks.app import LAPTOP, AppServer

    with chromium() as browser:
        app = AppServer(user_dir)
        try:
            app.wait_healthy()
            page = browser.new_context(viewport=LAPTOP).new_page()
            page.set_default_timeout(timeout_ms)
            yield app, page
        finally:
            app.stop()


def stop_every_sessions_jobs():
    """Stop the jobs of every session the app's registry holds, and forget the sessions: what a test's
    pages started ends with the test."""
    import ui.shared.sessions

    registry = ui.shared.sessions.job_registry()
    with registry["lock"]:
        jobs = [job for session in registry["sessions"].values() for job in session["jobs"]]
        registry["sessions"].clear()
    for job in jobs:
        job.stop()
        job.wait(10)


def join_warm_up(timeout=60):
    """Wait for the server's warm-up threads (ui.app.warm_up: the pages' and the training process's), started by
    a session's second heartbeat."""
    import threading

    from ui.app.warm_up import THREAD_NAME

    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_NAME):
            thread.join(timeout)


def preformatted_texts(at):
    """The text of each fixed-width block on an AppTest page (ui.shared.plain_text.preformatted), unescaped."""
    import html
    import re

    blocks = [h.proto.body for h in at.get("html") if 'class="rnnlab-pre"' in h.proto.body]
    return [html.unescape(re.sub(r"<[^>]*>", "", block)) for block in blocks]


def assert_no_exception(page, where):
    assert page.locator('[data-testid="stException"]').count() == 0, f"exception box on {where}"
    assert "Traceback" not in page.inner_text('[data-testid="stMain"]'), f"traceback on {where}"


def follow_to_full_page(page, link, url, widget, value):
    """Click a lesson's link to its full page: the URL and the page's widget carry the lesson's setting."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    link.click()
    try:
        page.wait_for_url(url, timeout=30_000)
    except PlaywrightTimeout:  # a live view redrew the page under the click (a busy machine): a student clicks again
        link.click()
        page.wait_for_url(url)
    page.wait_for_selector(SCRIPT_DONE)
    # the widgets can arrive a moment after the script's end on a busy machine: wait for the value
    page.wait_for_function(
        "([selector, value]) => document.querySelector(selector)?.value === value",
        arg=[f".st-key-{widget} input", value],
    )
    assert_no_exception(page, f"{url} opened from a lesson")


def sidebar_names(page):
    links = page.locator('[data-testid="stSidebar"] [data-testid="stPageLink"]')
    return [links.nth(i).inner_text().split()[-1] for i in range(links.count())]


def wait_for_widgets(page, timeout_ms=30_000):
    """Wait until no widget on a browser page is still Streamlit's grey placeholder, shorter than the
    widget, drawn until its script has loaded (on a fresh server and busy cores, after the page's run)."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=stMain] [data-testid=stSkeleton]')", timeout=timeout_ms
    )


def study_results(accuracies, n_test=360, complete=True):
    """A study's results with the fields conclusion() and answer() read: {arm: [test accuracy per random seed]}."""
    return {
        "complete": complete,
        "config": {"epochs": 6},
        "dataset": {"num_classes": 10, "n_test": n_test},
        "summary": {
            arm: {
                "val_accuracy_mean": statistics.fmean(v) if v else None,
                "val_accuracy_std": statistics.stdev(v) if len(v) > 1 else None,
                "val_accuracy_by_seed": dict(enumerate(v)),
            }
            for arm, v in accuracies.items()
        },
    }


def without_errors(at):
    """An AppTest after its run -> itself, once it shows no exception and no error message (their texts
    are the failure's message)."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def train_until_stopped(emit, should_stop):
    """A run for a training process (lab.server.workers) that trains tiny steps until it is stopped; its first event
    names the process."""
    from lab.training.process import train_two_tiny_steps

    emit({"type": "step", "pid": os.getpid()})
    while not should_stop():
        train_two_tiny_steps()
