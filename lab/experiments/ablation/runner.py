"""The one runner: every (arm, seed) run of a study in a fixed order, results saved after each run, a
study resumed where it stopped. The CLI calls `run_ablation`; the app's live run is `AblationJob`, the
same function on a background thread.

Glossary: N sequences, T time (pixels per sequence), G traced test sequences.
"""

import math
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch

from lab.data import SEQUENCE_DATASETS, load_sequence_dataset
from lab.nets.cost import run_memory_mb
from lab.server.jobs import BackgroundJob
from lab.training import distributed
from lab.training.tasks import ClassificationTask
from lab.training.train import TrainConfig, resolve_device, train

from .config import cli_command
from .model import (
    bias_statistics,
    build_arm_model,
    check_frozen_biases,
    gate_statistics,
    get_arm,
    model_config,
    rounded,
)
from .results import arm_checkpoint, assemble_results, now, results_to_resume, write_arm_checkpoint, write_results


@dataclass
class StudyData:
    task: ClassificationTask  # train (N, T, 1) and test tensors
    gate_x: torch.Tensor  # (G, T, 1): the fixed test sequences whose gates are traced
    info: dict  # dataset name, title, sequence_length, n_train, n_test, num_classes
    steps_per_epoch: int  # ceil(N / batch size)


def _first(dataset, n):
    if n is None or n >= len(dataset):
        return dataset
    if hasattr(dataset, "tensors"):
        return torch.utils.data.TensorDataset(*(t[:n] for t in dataset.tensors))
    return torch.utils.data.Subset(dataset, range(n))


def load_study_data(config):
    """Train and test splits as tensors (CIFAR-10 is transformed once, here)."""
    splits = [
        load_sequence_dataset(config.dataset, train, config.root, config.download, config.size)
        for train in (True, False)
    ]
    task = ClassificationTask(_first(splits[0], config.limit_train), _first(splits[1], config.limit_test))
    task.check(None)
    T = task.x_train.shape[1]
    info = {
        "name": config.dataset,
        "title": SEQUENCE_DATASETS[config.dataset].title,
        "sequence_length": T,
        "input_size": task.x_train.shape[2],
        "n_train": len(task.x_train),
        "n_test": len(task.x_test),
        "num_classes": SEQUENCE_DATASETS[config.dataset].num_classes,
    }
    if config.dataset == "digits":
        info["image_size"] = config.size
    return StudyData(task, task.x_test[: config.gate_batch], info, math.ceil(len(task.x_train) / config.batch_size))


def train_config(config, data, seed):
    """lab.training.train's config for one run: a step budget of whole epochs, evaluated after each."""
    spe = data.steps_per_epoch
    return TrainConfig(
        lr=config.lr,
        min_lr=config.min_lr,
        weight_decay=config.weight_decay,
        batch_size=config.batch_size,
        max_steps=config.epochs * spe,
        max_epochs=None,
        eval_interval=spe,
        grad_clip=config.grad_clip,
        seed=seed,
        device=config.device,
    )


def run_arm(arm_name, seed, config, data, emit=None, should_stop=None, model=None):
    """Train one arm under one seed with lab.training.train.train -> (record, model).

    Emits train's step events, then {"type": "epoch", ...} after each evaluation, all tagged
    with "arm" and "seed". An ablated run checks its frozen biases after every epoch and at the
    end, and raises FrozenBiasError if one is not exactly 0."""
    emit = emit or (lambda event: None)
    arm = get_arm(arm_name)
    if model is None:
        model = build_arm_model(arm_name, seed, config, data.info, resolve_device(config.device))
    tc = train_config(config, data, seed)
    spe = tc.eval_interval
    gate_seconds = [0.0]

    def gates_now():
        start = time.perf_counter()
        stats = gate_statistics(model, data.gate_x)
        gate_seconds[0] += time.perf_counter() - start
        return stats

    record = {
        "arm": arm_name,
        "seed": seed,
        "initial": {"gates": gates_now(), "biases": bias_statistics(model)},
        "epochs": [],
        "steps": [],
        "frozen_bias_check": None,
        "checkpoint": None,
    }
    window = []  # train losses since the last evaluation

    def on_event(event):
        tagged = {**event, "arm": arm_name, "seed": seed}
        if event["type"] == "step":
            window.append(event["train_loss"])
            record["steps"].append(
                [event["step"], rounded(event["train_loss"]), rounded(event["lr"], 8), rounded(event["grad_norm"], 4)]
            )
            emit(tagged)
        elif event["type"] == "eval":
            if arm.freeze_rz:
                check_frozen_biases(model)  # fail at the first bad epoch, not after hours
            epoch = {
                "epoch": rounded(event["step"] / spe, 4),
                "step": event["step"],
                "train_loss": rounded(sum(window) / len(window)) if window else None,
                "train_loss_last": rounded(event["train_loss"]),
                "val_loss": rounded(event["val_loss"]),
                "val_accuracy": rounded(event["val_accuracy"]),
                "elapsed": rounded(event["elapsed"], 2),
                "gates": gates_now(),
                "biases": bias_statistics(model),
            }
            window.clear()
            record["epochs"].append(epoch)
            emit(
                {
                    "type": "epoch",
                    "arm": arm_name,
                    "seed": seed,
                    **{k: v for k, v in epoch.items() if k not in ("gates", "biases")},
                    "z_mean": epoch["gates"]["z"]["mean"],
                    "r_mean": epoch["gates"]["r"]["mean"],
                    "b_z_mean": epoch["biases"]["b_z"]["mean"],
                }
            )
        elif event["type"] == "done":
            emit(tagged)

    emit({"type": "run_start", "arm": arm_name, "seed": seed, "steps": tc.max_steps, "steps_per_epoch": spe})
    result = train(model, data.task, tc, on_event, should_stop)
    if arm.freeze_rz:
        record["frozen_bias_check"] = check_frozen_biases(model)
    last = record["epochs"][-1] if record["epochs"] else None
    record.update(
        reason=result.reason,
        steps_done=result.steps,
        elapsed=rounded(result.elapsed, 2),
        gate_stats_seconds=rounded(gate_seconds[0], 2),
        seconds_per_epoch=rounded(result.elapsed / (result.steps / spe), 2) if result.steps else None,
        final=None if last is None else {k: last[k] for k in ("epoch", "train_loss", "val_loss", "val_accuracy")},
    )
    return record, model


# Under torchrun a rank waits at the end of each round for the round's slowest run, and a last round
# with fewer runs than ranks keeps some waiting a whole run (hours for seed 003's 40 CIFAR-10 epochs):
# longer than PyTorch's default timeout for a collective. A rank that fails is ended by torchrun.
RANK_PATIENCE = timedelta(days=7)


def run_ablation(config, out_dir=None, emit=None, should_stop=None, command=None):
    """Every arm under every seed, one after the other, seed by seed (so early results already compare
    arms). With `out_dir`, results.json/.csv are rewritten after every run ("complete": false until
    the end), the final model of each arm under `config.saved_seeds` is saved there, and a study
    already begun there with the same config is continued: its finished runs are kept, not rerun
    (a run cut short by should_stop is run again from its start).

    Under torchrun (lab.training.distributed) the runs still to do are dealt out in rounds, one run per rank:
    round k gives run k*W + r of that list to rank r, which trains it alone, exactly as one process
    would (same seed, same batches). At the end of each round rank 0 gathers the round's records and
    checkpoints and writes them as above, so the files are those of a study run in one process, and a
    rerun continues after the last round finished. A run that raises on some rank ends the study on
    every rank with lab.training.distributed.RankFailed, once the round's other runs are saved.

    Events: {"type": "study_start", runs, resumed, dataset, steps_per_run, ranks, runs_here (this
    rank's share)}, then run_arm's events for this rank's runs, and on rank 0 {"type": "run_done", ...}
    for each run trained and {"type": "study_done", path, complete}. Returns the results on rank 0,
    None on the other ranks."""
    emit = emit or (lambda event: None)
    should_stop = should_stop or (lambda: False)
    rank, world = distributed.rank_and_world()
    plan = [(arm, seed) for seed in config.seeds for arm in config.arms]
    # rank 0 alone reads and writes the study's folder
    study = _StudyFiles(config, plan, out_dir, command, emit) if rank == 0 else None
    with distributed.first_on_each_machine():  # a CIFAR-10 download is made once per machine
        data = load_study_data(config)
    distributed.check_same_as_rank0(
        [len(data.task.x_train), data.task.x_train.sum().item(), len(data.task.x_test), data.task.x_test.sum().item()],
        "dataset",
        config.dataset,
    )
    finished = distributed.object_from_rank0(set(study.done) if study else None)
    todo = [key for key in plan if key not in finished]
    emit(
        {
            "type": "study_start",
            "runs": len(plan),
            "resumed": len(finished),
            "dataset": data.info,
            "steps_per_run": config.epochs * data.steps_per_epoch,
            "ranks": world,
            "runs_here": len(todo[rank::world]),
        }
    )
    for first in range(0, len(todo), world):
        if distributed.object_from_rank0(should_stop()):
            break
        round_runs = todo[first : first + world]
        outcome = None
        if rank < len(round_runs):
            outcome = _train_one(*round_runs[rank], config, data, emit, should_stop, out_dir is not None)
        outcomes = distributed.gather_to_rank0(outcome)
        failures, stopped = distributed.object_from_rank0(study.add(outcomes, data) if study else None)
        if failures:
            saved = f"the finished runs are saved in {out_dir}; " if out_dir is not None else ""
            raise distributed.RankFailed(f"{'; '.join(failures)}; {saved}the same command continues the study")
        if stopped:
            break
    return study.finish(data) if study else None


class _StudyFiles:
    """Rank 0's side of a study: the runs done so far, and results.json/.csv and the checkpoints,
    written after every run."""

    def __init__(self, config, plan, out_dir, command, emit):
        previous = results_to_resume(out_dir, config)
        if out_dir is not None:
            Path(out_dir).mkdir(parents=True, exist_ok=True)  # checkpoints land there before results.json
        self.config, self.plan, self.out_dir, self.command, self.emit = config, plan, out_dir, command, emit
        self.created = previous["created"] if previous else now()
        self.done = {
            (r["arm"], r["seed"]): r for r in (previous["runs"] if previous else []) if r["reason"] != "stopped"
        }
        self.runs = [self.done[key] for key in plan if key in self.done]
        self.device = resolve_device(config.device)
        self.path = self.results = None

    def add(self, outcomes, data):
        """Save a round's outcomes (_train_one's, in rank order) -> (failures, whether a run was stopped)."""
        failures, stopped = [], False
        for rank, outcome in enumerate(outcomes):
            if outcome is None:  # an idle rank in the last round
                continue
            if "error" in outcome:
                failures.append(
                    f"the {outcome['arm']} run at seed {outcome['seed']} failed on rank {rank}: {outcome['error']}"
                )
                continue
            record, key = outcome["record"], (outcome["record"]["arm"], outcome["record"]["seed"])
            if outcome["checkpoint"] is not None:
                write_arm_checkpoint(self.out_dir, outcome["checkpoint"])
            self.runs.append(record)
            self.runs.sort(key=lambda r: self.plan.index((r["arm"], r["seed"])))
            if record["reason"] != "stopped":
                self.done[key] = record
            self.results = self._assemble(data)
            if self.out_dir is not None:
                self.path = write_results(self.out_dir, self.results)
            self.emit(
                {
                    "type": "run_done",
                    "index": self.plan.index(key),
                    "runs": len(self.plan),
                    "arm": key[0],
                    "seed": key[1],
                    "final": record["final"],
                    "reason": record["reason"],
                    "elapsed": record["elapsed"],
                    "frozen_bias_check": record["frozen_bias_check"],
                }
            )
            stopped = stopped or record["reason"] == "stopped"
        return failures, stopped

    def finish(self, data):
        if self.results is None:  # nothing ran (stopped at once, or every run was done before): nothing to rewrite
            self.results = self._assemble(data)
        self.emit(
            {
                "type": "study_done",
                "path": None if self.path is None else str(self.path),
                "complete": self.results["complete"],
            }
        )
        return self.results

    def _assemble(self, data):
        return assemble_results(
            self.config, data, self.runs, len(self.done) == len(self.plan), self.created, self.device, self.command
        )


def _train_one(arm, seed, config, data, emit, should_stop, keep_checkpoint):
    """One run on this rank, alone -> {"record", "checkpoint": arm_checkpoint's (name, bytes) or None}.
    In a torchrun group an exception is returned as {"arm", "seed", "error"}, for rank 0 to save the
    round's other runs before every rank stops; in a single process it is raised as it is."""
    try:
        with distributed.alone():
            record, model = run_arm(arm, seed, config, data, emit, should_stop)
    except Exception as e:
        if distributed.rank_and_world()[1] == 1:
            raise
        return {"arm": arm, "seed": seed, "error": f"{type(e).__name__}: {e}"}
    checkpoint = None
    if keep_checkpoint and seed in config.saved_seeds and record["steps_done"]:
        checkpoint = arm_checkpoint(config, data, record, model)
        record["checkpoint"] = checkpoint[0]
    return {"record": record, "checkpoint": checkpoint}


def expected_data_info(config):
    """The shape of the study's data before it is loaded: one grey pixel per step, T = side^2 steps
    (CIFAR-10 is 32 x 32), for estimating a run's cost."""
    side = config.size if config.dataset == "digits" else 32
    return {
        "input_size": 1,
        "num_classes": SEQUENCE_DATASETS[config.dataset].num_classes,
        "sequence_length": side * side,
    }


# what a study adds beyond its one model's training memory, measured (benchmarks/job_memory.py): its data
# set and the libraries that read it, its arms' results and gate statistics; 136-296 MB for a small study
STUDY_MB = 150


class AblationJob(BackgroundJob):
    """run_ablation on a background thread (the app's live run): the same run order, results files,
    checkpoints and events as the CLI, into `out_dir` (by default a fresh temporary folder that lives as
    long as the job, so one session's study is not visible to another and none is left behind). It
    draws on the server's training budget (lab.server.capacity) and waits in its queue, as training runs do.

        job = AblationJob(config).start(); job.events(since=n); job.stop(); job.wait(); job.results

    status: ready -> queued -> running -> finished | stopped | failed (message says why).

    `in_process` computes it in the server's niced training process (lab.server.workers), as the app's training runs do,
    and `ray_address` (None: RNNLAB_RAY_ADDRESS) in an actor of a Ray cluster (lab.server.ray_runs), perhaps
    on another machine: there, without an `out_dir` given, the study writes no files (no temporary
    folder is left behind on a worker's machine); its results come back all the same."""

    what = "The live ablation"

    def __init__(self, config, out_dir=None, cost_mb=None, owner=None, budget=None, in_process=False, ray_address=None):
        if cost_mb is None:  # one run trains at a time: the budget holds one model's training memory
            info = expected_data_info(config)
            cost_mb = STUDY_MB + run_memory_mb(
                model_config("baseline", config, info), config.batch_size, info["sequence_length"]
            )
        super().__init__(cost_mb, owner, budget, in_process=in_process, ray_address=ray_address)
        self.config, self.out_dir, self.results = config, out_dir, None
        self.command = cli_command(config)  # what the page offers: run this study yourself
        self._folder = None
        if out_dir is None and self.ray_address is None:
            self._folder = tempfile.TemporaryDirectory(prefix="rnnlab-ablation-")  # deleted with the job
            self.out_dir = self._folder.name

    def _work(self):
        self.results = self._compute(run_ablation, config=self.config, out_dir=self.out_dir, command=self.command)
        return "finished" if self.results["complete"] else "stopped"
