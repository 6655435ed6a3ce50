"""Test-wide settings: one intra-op thread; the bundled checkpoints a module needs are there.

The tests train and sample tiny models, where a second OpenMP thread costs more
in synchronisation than it saves, and where busy cores make spinning threads
orders of magnitude slower. Speed is measured in benchmarks/, not here.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads OpenMP: see lab/__init__.py

import pytest  # noqa: E402
import torch  # noqa: E402


# modules that start a local Ray cluster: in one worker, one after the other, so that two clusters never start at once
RAY_MODULES = {"test_ray", "test_without_posix"}


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest.ini): a worker per core, at most four. Each test trains on one thread, so on two cores
    two workers halve the suite; past four, the browser tests' servers and Chromiums crowd the machine."""
    return min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (--dist loadgroup, pytest.ini) a module's tests share one worker, so that its servers,
    browsers and trained models (module fixtures) are set up once; the Ray modules share one."""
    for item in items:
        module = item.path.stem
        item.add_marker(pytest.mark.xdist_group("ray" if module in RAY_MODULES else module))


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
