"""Peak memory each kind of job adds to the processes it runs in, against what the budget charges for it.

    python -m benchmarks.job_memory                  # every kind at the pages' defaults, one process each
    python -m benchmarks.job_memory probe race       # some kinds
    python -m benchmarks.job_memory --small          # the small cases tests/test_job_memory.py checks
    python -m benchmarks.job_memory --in-this-process probe race   # one process, kinds one after another

Each kind runs in a fresh Python that does what the server does: PyTorch's threads capped
(lab.training.process.configure_cpu), the training process started and warmed up where the runs train
in one (ui.shared.sessions.train_in_process), the corpus read. Then the memory of every process the jobs live
in (this one, the server, and its training process) is summed as PSS (each page shared between
processes counted once, split between them) and sampled every tenth of a second while the jobs are
built, started and run: the figure is the peak over that idle baseline. The training process's own
start is measured the same way, as the kind "training process": the budget charges it once, when it
starts (lab.server.workers).
"""

import functools
import json
import os
import subprocess
import sys
import threading
import time

import psutil

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# in one process, memory a kind frees is reused by the kinds after it: the smaller ones go first
KINDS = ("training process", "upload", "toy tasks", "lesson run", "train", "race", "probe", "ablation")


def pss_mb():
    """PSS of this process and its children (the training process), in MB; RSS where there is no PSS."""
    total = 0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            info = process.memory_full_info()
        except psutil.Error:  # ended since it was listed
            continue
        total += getattr(info, "pss", info.rss)
    return total / 2**20


class Peak:
    """The highest pss_mb() seen from `start()` until `stop()`, sampled on a thread of its own.

    Each sample has the kernel walk every mapping of every process (30-60 ms for a process that imported
    PyTorch): sampled back to back, that took a core, mostly in the kernel, from the jobs it measured."""

    def __init__(self, every=0.1):
        self.every, self.peak, self._stop = every, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, pss_mb())
            time.sleep(self.every)

    def __enter__(self):
        self.peak = pss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, pss_mb())


# each kind: (jobs to start together, made after the baseline) as the pages make them, at their defaults
# (`small`: a case of a few seconds, for the test)


def _train_values(small):
    from ui.train.settings import default_values

    values = default_values()  # the page's time too: a run's memory grows with the steps it takes
    if small:
        values.update(emb=16, hidden=64, batch=8, block=32, seconds=4)
    return values


def _task():
    from lab.data import CharTokenizer
    from lab.training.tasks import LMTask, corpus_split

    train_text, val_text = corpus_split("bundled")
    return LMTask(train_text, val_text, CharTokenizer.from_text(train_text + val_text))


def train_jobs(small, race=False, task=None):
    from lab.nets.backends import default_backend
    from lab.nets.models import build_model
    from lab.server.jobs import TrainingJob
    from ui.shared.sessions import train_in_process
    from ui.train import settings as train_settings
    from ui.train.runs import RACE_CELLS, race_values

    values = _train_values(small)
    values["backend"] = default_backend(values["cell"], "cpu")
    task = task or _task()
    model_config = train_settings.model_config(values, task.vocab_size)
    runs = [race_values(values, model_config, cell) for cell in RACE_CELLS] if race else [values]
    return [
        TrainingJob(
            f"m{n}",
            build_model(train_settings.model_config(v, task.vocab_size)),
            task,
            train_settings.train_config(v),
            owner="bench",
            in_process=train_in_process(),
        )
        for n, v in enumerate(runs)
    ]


def probe_jobs(small):
    from lab.experiments.probe import ProbeConfig, ProbeJob
    from ui.shared.sessions import train_in_process

    config = ProbeConfig(
        tasks=("recall",),
        cells=("gru_torch",),
        distances=(2, 5) if small else (2, 5, 10),
        steps=40 if small else 300,
        give_up_after=0,
    )  # the Memory page's "Run the probe" at its defaults
    return [ProbeJob(config, owner="bench", in_process=train_in_process())]


def toy_jobs(small):
    from lab.experiments.probe import TOY_CELLS, ProbeConfig, probe_run
    from lab.server.jobs import TrainingJob
    from ui.shared.sessions import train_in_process

    seconds = 3 if small else 20
    config = ProbeConfig(tasks=("recall",), distances=(20,), seconds=seconds, eval_every=25, eval_sequences=256)
    jobs = []
    for cell in TOY_CELLS:
        model, task, train_config = probe_run(config, "recall", cell, 20)
        jobs.append(TrainingJob(f"toy-{cell}", model, task, train_config, owner="bench", in_process=train_in_process()))
    return jobs


def lesson_jobs(small):
    from lab.instruments.learning import LEARN_MODEL, LEARN_RECIPE, LEARN_STEPS, StepSampler, sample_steps
    from lab.instruments.sampling import SamplingConfig, sample_text
    from lab.nets.models import LMConfig, build_model
    from lab.server.jobs import TrainingJob
    from lab.training.tasks import LMTask
    from lab.training.train import TrainConfig
    from ui.shared.sessions import train_in_process

    task = LMTask.from_text(("Shall I compare thee to a summer's day? " * 12)[:480], "char")
    config = TrainConfig(max_steps=60 if small else LEARN_STEPS, max_seconds=300, **LEARN_RECIPE)
    model = build_model(LMConfig(vocab_size=task.vocab_size, **LEARN_MODEL))
    sampling = SamplingConfig(strategy="greedy", max_new_tokens=200)
    sampler = StepSampler(
        functools.partial(sample_text, task.tokenizer, "Shall I", sampling), sample_steps(LEARN_STEPS)
    )
    return [  # as ui.lessons.learning starts it: a greedy sample at the lesson's steps
        TrainingJob(
            "lesson-learn",
            model,
            task,
            config,
            sampler=sampler,
            sample_every_s=0,
            owner="bench",
            in_process=train_in_process(),
        )
    ]


def ablation_jobs(small):
    from lab.experiments.ablation import AblationConfig
    from lab.experiments.ablation.runner import AblationJob
    from ui.shared.sessions import train_in_process

    config = AblationConfig(  # the Ablation page's live run at its defaults
        dataset="digits",
        size=8,
        epochs=1 if small else 6,
        seeds=(0,),
        arms=("baseline", "ablated"),
        batch_size=32,
        lr=3e-3,
        limit_train=200 if small else 1437,
        limit_test=40 if small else 120,
        gate_batch=8,
    )
    return [AblationJob(config, owner="bench", in_process=train_in_process())]


def upload_bytes():
    from lab.training.checkpoints import BUNDLED_DIR

    return (BUNDLED_DIR / "char-lstm_latest.safetensors").read_bytes()


def measure_all(kinds, small):
    """-> [{"kind", "added_mb", "estimate_mb"}] for `kinds` one after the other, in this (fresh) process.
    "training process" is measured first, as it starts; the other kinds find it warm."""

    from lab.training.process import configure_cpu

    configure_cpu()
    import ui.shared.sessions  # noqa: F401  (the server's imports, before any baseline)
    from lab.server import workers
    from lab.training.process import train_two_tiny_steps

    rows = []
    with Peak() as peak:
        base = peak.peak
        if ui.shared.sessions.train_in_process():
            workers.run_in_process(train_two_tiny_steps, {}, on_event=lambda e: None, stopped=lambda: False)
    if "training process" in kinds:
        rows.append({"kind": "training process", "added_mb": peak.peak - base, "estimate_mb": workers.PROCESS_MB})
    task = _task() if {"train", "race"} & set(kinds) else None  # the corpus: one per server, for every run
    for kind in kinds:
        if kind != "training process":
            rows.append(measure(kind, small, task))
            print(rows[-1], file=sys.stderr, flush=True)  # as it comes: a slow machine shows progress
    return rows


def measure(kind, small, task):
    """One kind's jobs made, started together and run to their end: their peak over the baseline."""
    from lab.server.jobs import start_together

    data = upload_bytes() if kind == "upload" else None
    with Peak() as peak:
        base = peak.peak
        if kind == "upload":
            from lab.server.capacity import Budget
            from lab.server.uploads import UPLOAD_COST_PER_MB, load_upload

            load_upload(data, "bench", Budget(4096, 1.0))
            estimate = UPLOAD_COST_PER_MB * len(data) / 2**20
        else:
            make = {
                "train": lambda s: train_jobs(s, task=task),
                "race": lambda s: train_jobs(s, race=True, task=task),
                "probe": probe_jobs,
                "toy tasks": toy_jobs,
                "lesson run": lesson_jobs,
                "ablation": ablation_jobs,
            }[kind]
            jobs = make(small)
            estimate = sum(job.cost_mb for job in jobs)
            start_together(jobs)
            statuses = [job.wait() for job in jobs]
            assert all(s in ("finished", "stopped") for s in statuses), [(j.status, j.message) for j in jobs]
    return {"kind": kind, "added_mb": peak.peak - base, "estimate_mb": estimate}


def measure_in_fresh_process(kinds, small=False):
    """measure_all(kinds) in a fresh Python -> its rows (each over that process's baseline just before)."""
    command = [sys.executable, "-m", "benchmarks.job_memory", "--in-this-process", *kinds]
    done = subprocess.run(command + (["--small"] if small else []), capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    if done.returncode or not lines:
        raise RuntimeError(f"measuring {kinds} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv):
    small = "--small" in argv
    argv = [a for a in argv if a != "--small"]
    if argv[:1] == ["--in-this-process"]:
        print(json.dumps(measure_all(argv[1:], small)))
        return
    case = "small cases" if small else "page defaults"
    print(f"| job ({case}) | peak added (MB) | estimate (MB) | estimate / peak |")
    print("|---|---:|---:|---:|")
    for kind in argv or KINDS:  # each in a fresh process: memory freed by one kind is not reused by the next
        (row,) = [r for r in measure_in_fresh_process([kind], small) if r["kind"] == kind]
        ratio = row["estimate_mb"] / max(row["added_mb"], 1e-9)
        print(f"| {kind} | {row['added_mb']:,.0f} | {row['estimate_mb']:,.0f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
