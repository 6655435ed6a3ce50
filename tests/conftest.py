"""Test-wide settings: one intra-op thread; the bundled checkpoints a module needs are there; the workers
the suite is shared among (pytest-xdist).

The tests train and sample tiny models, where a second OpenMP thread costs more
in synchronisation than it saves, and where busy cores make spinning threads
orders of magnitude slower. Speed is measured in benchmarks/, not here.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads OpenMP: see lab/__init__.py

import pytest  # noqa: E402
import torch  # noqa: E402

# the modules of a minute or more (servers, browsers, process trees; their times: BENCHMARKS-HISTORY.md, "The
# test suite on every core"): handed out first, so that the last module a worker takes is a short one and the
# other worker does not wait on it
LONG_MODULES = ["test_browser", "test_sign_in_browser", "test_page_heights", "test_ray"]
LONG_MODULES += ["test_clean_exit", "test_distributed", "test_without_posix"]


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest.ini): a worker per core, at most four. Each test trains on one thread, so on two cores
    two workers take over a third off the suite; past four, the browser tests' servers and Chromiums crowd the
    machine."""
    return min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (pytest.ini: --dist loadfile) a module's tests share one worker, so that its servers,
    browsers and trained models (module fixtures) are set up once. The long modules come first (pytest.ini:
    --no-loadscope-reorder keeps this order; the sort is stable, so each module keeps its own)."""
    first = {module: rank for rank, module in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: first.get(item.path.stem, len(first)))


@pytest.fixture(scope="module")
def one_ray_cluster_at_a_time(tmp_path_factory):
    """Held by a module while it runs a local Ray cluster: pytest-xdist's workers share one temporary folder
    above their own, and two clusters at once would halve each other's cores under the tests' waits."""
    from filelock import FileLock

    with FileLock(tmp_path_factory.getbasetemp().parent / "ray-cluster.lock"):
        yield


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)  # again before every test: `python -m lab train --threads N` changes it
    yield


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """The Train page forecasts the memory race from the machine's load (lab.server.capacity.lane_share):
    pages opened in a test see an idle machine, whatever else the test machine runs; a test of the
    forecast passes its load."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0), raising=False)
    yield


@pytest.fixture(autouse=True)
def own_experiments(monkeypatch):
    """Each test starts with no run of an earlier test to join (lab.server.shared_runs): one test's finished run
    would otherwise be shown whole to the next test that asks for the same settings."""
    import lab.server.shared_runs

    monkeypatch.setattr(lab.server.shared_runs, "_shared", lab.server.shared_runs.SharedRuns())
    yield


@pytest.fixture(autouse=True)
def bundled_checkpoints(request):
    """A test module whose pages open on bundled models names them in NEEDED ("char-gru-torch", ...):
    without those files its tests fail, they do not skip."""
    needed = getattr(request.module, "NEEDED", ())
    if needed:
        from lab.training.checkpoints import BUNDLED_DIR

        missing = [n for n in needed if not (BUNDLED_DIR / f"{n}_latest.safetensors").is_file()]
        assert not missing, f"bundled checkpoints missing: {missing} (python scripts/build_checkpoints.py)"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small corpus file (20,000 characters of the bundled plays), for CLI runs."""
    from lab.data import load_bundled_corpus

    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text(load_bundled_corpus()[:20_000], encoding="utf-8")
    return path


def pytest_sessionfinish(session, exitstatus):
    """The end the server gets at exit (lab.server.shutdown), while pytest still captures the output: the
    runs tests left, the warm-up and the training processes end in order, and their last log lines go to
    the handlers a test set up on pytest's streams, before pytest closes them."""
    from lab.server import shutdown

    shutdown.end()


def pytest_terminal_summary(terminalreporter):
    """The machine the suite ran on, beside its time: the suite's length is read against its cores."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    terminalreporter.write_line(f"on {os.cpu_count()} CPU cores; load average at the end {load}")
