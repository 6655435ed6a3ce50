"""The server trains where POSIX's process calls are missing, as on Windows: a run in the training process and
a run in a Ray actor both train with os.nice, the scheduling calls, the priority calls and fcntl removed, in
the server and in every process it starts, and each is still lowered below the server (lab.server.priority,
through psutil).

The calls are removed by a sitecustomize module on PYTHONPATH, which Python runs as it starts: in the test's
own server process, in the training process multiprocessing spawns (a fresh Python, given the same
environment) and in Ray's workers. Each run's sampler, which runs where the run trains, reports what that
process lacks, so the test proves the removal there and does not take it on trust."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from lab.server.priority import LOWEST_NICE, NICENESS

TESTS = Path(__file__).resolve().parent
REMOVED = ["nice", "setpriority", "getpriority", "sched_setscheduler", "sched_getscheduler", "SCHED_IDLE"]

SITECUSTOMIZE = f"""
import os, sys
for name in {REMOVED!r}:
    if hasattr(os, name):
        delattr(os, name)
sys.modules["fcntl"] = None  # importing it raises ImportError, as on Windows
"""

# the sampler each run calls where it trains: what that process lacks, and its priority
PLATFORM_REPORT = """
import json, os


def report(model):
    try:
        import fcntl  # noqa: F401
        fcntl_missing = False
    except ImportError:
        fcntl_missing = True
    import psutil

    missing = [name for name in {removed!r} if not hasattr(os, name)] + ["fcntl"] * fcntl_missing
    return json.dumps({{"pid": os.getpid(), "missing": missing, "nice": psutil.Process().nice()}})
""".format(removed=REMOVED)

SERVER = """
import json, sys
import psutil
from helpers import tiny_lm, tiny_train_config
from platform_report import report
from lab.data import load_bundled_corpus
from lab.server import ray_runs
from lab.server.jobs import TrainingJob
from lab.training.tasks import LMTask

task = LMTask.from_text(load_bundled_corpus()[:20_000], "char")
ray_runs.connect("local", num_cpus=1, include_dashboard=False)
answers = {"server": json.loads(report(None))}
for where, options in (("process", {"in_process": True}), ("ray", {"ray_address": "local"})):
    job = TrainingJob(where, tiny_lm(task), task, tiny_train_config(max_steps=2), sampler=report, sample_every_s=0,
                      **options).start()
    status = job.wait(300)
    samples = [json.loads(e["text"]) for e in job.events() if e["type"] == "sample"]
    steps = [e["step"] for e in job.events() if e["type"] == "step"]
    child = samples[-1] if samples else None
    answers[where] = {"status": status, "message": job.message, "steps": steps, "child": child}
print(json.dumps(answers))
"""


def test_a_run_trains_in_the_training_process_and_in_a_ray_actor_without_posixs_process_calls(
    tmp_path, one_ray_cluster_at_a_time
):
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "platform_report.py").write_text(PLATFORM_REPORT)
    paths = [str(tmp_path), str(TESTS), str(TESTS.parent)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])}
    env["RAY_worker_niceness"] = "0"  # Ray starts its workers at nice 15: the actor's own lowering would not show
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SERVER)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    server = answers["server"]
    assert sorted(server["missing"]) == sorted(REMOVED + ["fcntl"])
    for where in ("process", "ray"):
        run = answers[where]
        assert run["status"] == "finished", (where, run["message"])
        assert run["steps"] == [1, 2]
        child = run["child"]
        assert child["pid"] != server["pid"], where  # it trained in a process of its own ...
        assert sorted(child["missing"]) == sorted(REMOVED + ["fcntl"]), where  # ... which lacked them too ...
        assert child["nice"] >= min(LOWEST_NICE, server["nice"] + NICENESS), where  # ... and was lowered
