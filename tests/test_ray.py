"""Training on a real Ray cluster (lab.server.ray_runs), started by this module on 127.0.0.1 with 2 CPUs and
shut down at its end: a run trains, streams its events, saves into the student's space and its
checkpoint samples; a killed worker is one clear line; more runs than CPUs wait for Ray's scheduler
and all finish, and Stop ends a run training or waiting; the memory probe and the live ablation run
there too. Every wait is bounded."""

import functools
import logging
import threading
import time

import pytest
import torch

ray = pytest.importorskip("ray")  # requirements-ray.txt: the README's test command installs it

from helpers import TINY_PROBE, TINY_STUDY, tiny_lm, tiny_train_config  # noqa: E402

from lab.data import load_bundled_corpus  # noqa: E402
from lab.experiments.ablation import AblationConfig, AblationJob  # noqa: E402
from lab.experiments.probe import ProbeConfig, ProbeJob  # noqa: E402
from lab.instruments.sampling import SamplingConfig, sample_text  # noqa: E402
from lab.server import ray_runs  # noqa: E402
from lab.server.jobs import TrainingJob  # noqa: E402
from lab.server.spaces import new_space_key, reserve_room, space_dir  # noqa: E402
from lab.training.checkpoints import load_checkpoint  # noqa: E402
from lab.training.tasks import LMTask  # noqa: E402

ADDRESS = "local"  # the cluster the fixture starts; the jobs' connect() finds this process connected
WAIT_S = 120  # the bound on any one wait: Ray's start of a worker on 2 busy cores takes seconds


@pytest.fixture(scope="module", autouse=True)
def cluster(one_ray_cluster_at_a_time):
    ray_runs.connect(ADDRESS, num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def task():
    return LMTask.from_text(load_bundled_corpus()[:20_000], "char")


def long_run(task, name, folder):
    return TrainingJob(
        name, tiny_lm(task), task, tiny_train_config(max_steps=None, max_seconds=300), folder, ray_address=ADDRESS
    )


def wait_until(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(0.05)


def has_stepped(job):
    return any(e["type"] == "step" for e in job.events())


def test_a_run_on_ray_trains_streams_saves_in_the_students_space_and_samples(task, tmp_path):
    key = new_space_key(tmp_path)
    space = space_dir(tmp_path, key)
    room = functools.partial(reserve_room, tmp_path, space, space_bytes=2**20, total_bytes=2**21)
    sampler = functools.partial(sample_text, task.tokenizer, "", SamplingConfig(max_new_tokens=5))
    jobs = [
        TrainingJob(
            f"run-{where}",
            tiny_lm(task),
            task,
            tiny_train_config(),
            checkpoint_dir=space,
            sampler=sampler,
            sample_every_s=0,
            room=room,
            ray_address=ADDRESS if where == "ray" else None,
        )
        for where in ("thread", "ray")
    ]
    for job in jobs:
        assert job.start().wait(WAIT_S) == "finished", job.message
    thread, on_ray = jobs
    for (name, a), b in zip(thread.model.state_dict().items(), on_ray.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)  # the same run, computed elsewhere
    kinds = [e["type"] for e in on_ray.events()]
    assert kinds == [e["type"] for e in thread.events()]
    assert kinds.count("step") == 8 and kinds.count("sample") == 8 and kinds[-1] == "done"
    assert on_ray.checkpoint_path.parent == space
    saved = load_checkpoint(on_ray.checkpoint_path, device="cpu")
    for a, b in zip(saved.model.state_dict().values(), on_ray.model.state_dict().values()):
        assert torch.equal(a, b)
    text = sample_text(saved.tokenizer, "RO", SamplingConfig(max_new_tokens=20), saved.model)
    assert text.startswith("RO") and len(text) > 2


def test_a_killed_ray_worker_is_one_clear_line_and_its_account_is_in_the_log(task, tmp_path, caplog):
    job = long_run(task, "doomed", tmp_path).start()
    wait_until(lambda: has_stepped(job), "step")
    [name] = [n for n in ray.util.list_named_actors() if n.startswith("The run doomed ")]
    with caplog.at_level(logging.ERROR, logger="lab.server.ray_runs"):
        ray.kill(ray.get_actor(name))
        assert job.wait(WAIT_S) == "failed"
    assert job.message.startswith("the Ray worker computing it died") and "\n" not in job.message
    assert job.events()[-1] == {"type": "error", "message": job.message}
    assert any("its Ray worker died" in r.getMessage() for r in caplog.records)


def test_more_runs_than_cpus_wait_in_rays_queue_stop_works_running_or_waiting_and_all_finish(task, tmp_path):
    busy = [long_run(task, f"busy-{i}", tmp_path).start() for i in range(2)]  # both CPUs
    wait_until(lambda: all(has_stepped(job) for job in busy), "step of both")
    waiting = long_run(task, "waiting", tmp_path).start()
    time.sleep(1)
    assert waiting.status == "queued" and not waiting.events()
    waiting.stop()  # it leaves Ray's queue
    assert waiting.wait(WAIT_S) == "stopped" and waiting.message == "stopped before it started"
    short = [
        TrainingJob(f"short-{i}", tiny_lm(task, i), task, tiny_train_config(), tmp_path, ray_address=ADDRESS).start()
        for i in range(3)
    ]
    for job in busy:
        job.stop()  # between two steps: saved as far as it got
    assert [job.wait(WAIT_S) for job in busy + short] == ["stopped"] * 2 + ["finished"] * 3
    assert all(job.result.steps > 0 and job.checkpoint_path.is_file() for job in busy + short)


def test_the_memory_probe_and_the_live_ablation_run_on_ray():
    probe = ProbeJob(
        ProbeConfig(**TINY_PROBE),
        ray_address=ADDRESS,
    ).start()
    ablation = AblationJob(AblationConfig(**TINY_STUDY), ray_address=ADDRESS).start()
    assert probe.wait(WAIT_S) == "finished", probe.message
    assert ablation.wait(WAIT_S) == "finished", ablation.message
    assert probe.table.steps.tolist() == [5] and any(e["type"] == "probe_result" for e in probe.events())
    assert ablation.results["complete"] and ablation.out_dir is None  # no folder left on a worker's machine


def test_a_warm_actor_takes_runs_one_after_another_and_is_given_back(task, tmp_path):
    """RNNLAB_RAY_WARM_ACTORS: actors started before the class, PyTorch imported; a run that fits takes an
    idle one instead of a process of its own, and gives it back, reset, when it ends."""
    ray_runs.start_warm_actors(ADDRESS, count=1, memory_mb=2048)
    try:
        assert ray_runs.idle_warm_actors() == 1
        kinds = []
        for n in range(2):
            job = long_run(task, f"warm-{n}", tmp_path).start()
            wait_until(lambda: has_stepped(job), "step")
            assert ray_runs.idle_warm_actors() == 0  # it computes in the warm actor...
            assert not [a for a in ray.util.list_named_actors() if a.startswith(f"The run warm-{n} ")]  # ...not its own
            job.stop()
            assert job.wait(WAIT_S) == "stopped" and job.checkpoint_path.is_file()
            assert ray_runs.idle_warm_actors() == 1
            kinds.append([e["type"] for e in job.events()])
        assert kinds[1][0] == kinds[0][0] and kinds[1].count("done") <= 1  # the second run saw none of the first's
        steps = [e["step"] for e in job.events() if e["type"] == "step"]
        assert steps == list(range(1, len(steps) + 1))
    finally:
        ray_runs.retire_warm_actors()


def test_a_run_no_warm_actor_fits_gets_its_own_and_idle_warm_actors_make_room_for_it(task, tmp_path):
    ray_runs.start_warm_actors(ADDRESS, count=2, memory_mb=64)  # both CPUs, too little memory for a run
    try:
        job = TrainingJob("big", tiny_lm(task), task, tiny_train_config(), tmp_path, ray_address=ADDRESS).start()
        assert job.wait(WAIT_S) == "finished", job.message
        assert ray_runs.idle_warm_actors() < 2  # one was ended to give the run its CPU
    finally:
        ray_runs.retire_warm_actors()
    assert ray_runs.idle_warm_actors() == 0


def test_runs_that_come_while_the_warm_actors_start_end_none_of_them(task, tmp_path):
    """A run that takes a warm actor still starting waits for its start, not for room: the other warm
    actors are kept (they once were ended one every two seconds while it waited)."""
    starting = threading.Thread(target=ray_runs.start_warm_actors, args=(ADDRESS, 2, 2048))
    starting.start()
    try:
        wait_until(lambda: ray_runs.idle_warm_actors() == 2, "warm actors asked for")
        job = TrainingJob("early", tiny_lm(task), task, tiny_train_config(), tmp_path, ray_address=ADDRESS).start()
        assert job.wait(WAIT_S) == "finished", job.message
        starting.join(WAIT_S)
        assert ray_runs.idle_warm_actors() == 2
    finally:
        ray_runs.retire_warm_actors()
