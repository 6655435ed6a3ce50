"""The one runner: every (arm, seed) run of a study in a fixed order, results saved after each run, a
study resumed where it stopped. The CLI calls `run_ablation`; the app's live run is `AblationJob`, the
same function on a background thread.

Glossary: N sequences, T time (pixels per sequence), G traced test sequences.
"""
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from lab.cost import training_memory_bytes
from lab.data import SEQUENCE_DATASETS, load_sequence_dataset
from lab.train import BackgroundJob, ClassificationTask, TrainConfig, resolve_device, train

from .config import cli_command
from .model import (bias_statistics, build_arm_model, check_frozen_biases, gate_statistics, get_arm, model_config,
                    rounded)
from .results import assemble_results, now, results_to_resume, save_arm_checkpoint, write_results


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
    splits = [load_sequence_dataset(config.dataset, train, config.root, config.download, config.size)
              for train in (True, False)]
    task = ClassificationTask(_first(splits[0], config.limit_train), _first(splits[1], config.limit_test))
    task.check(None)
    T = task.x_train.shape[1]
    info = {"name": config.dataset, "title": SEQUENCE_DATASETS[config.dataset].title, "sequence_length": T,
            "input_size": task.x_train.shape[2], "n_train": len(task.x_train), "n_test": len(task.x_test),
            "num_classes": SEQUENCE_DATASETS[config.dataset].num_classes}
    if config.dataset == "digits":
        info["image_size"] = config.size
    return StudyData(task, task.x_test[: config.gate_batch], info, math.ceil(len(task.x_train) / config.batch_size))


def train_config(config, data, seed):
    """lab.train's config for one run: a step budget of whole epochs, evaluated after each."""
    spe = data.steps_per_epoch
    return TrainConfig(lr=config.lr, min_lr=config.min_lr, weight_decay=config.weight_decay,
                       batch_size=config.batch_size, max_steps=config.epochs * spe, max_epochs=None,
                       eval_interval=spe, grad_clip=config.grad_clip, seed=seed, device=config.device)


def run_arm(arm_name, seed, config, data, emit=None, should_stop=None, model=None):
    """Train one arm under one seed with lab.train.train -> (record, model).

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

    record = {"arm": arm_name, "seed": seed, "initial": {"gates": gates_now(), "biases": bias_statistics(model)},
              "epochs": [], "steps": [], "frozen_bias_check": None, "checkpoint": None}
    window = []  # train losses since the last evaluation

    def on_event(event):
        tagged = {**event, "arm": arm_name, "seed": seed}
        if event["type"] == "step":
            window.append(event["train_loss"])
            record["steps"].append([event["step"], rounded(event["train_loss"]), rounded(event["lr"], 8),
                                    rounded(event["grad_norm"], 4)])
            emit(tagged)
        elif event["type"] == "eval":
            if arm.freeze_rz:
                check_frozen_biases(model)  # fail at the first bad epoch, not after hours
            epoch = {"epoch": rounded(event["step"] / spe, 4), "step": event["step"],
                     "train_loss": rounded(sum(window) / len(window)) if window else None,
                     "train_loss_last": rounded(event["train_loss"]), "val_loss": rounded(event["val_loss"]),
                     "val_accuracy": rounded(event["val_accuracy"]), "elapsed": rounded(event["elapsed"], 2),
                     "gates": gates_now(), "biases": bias_statistics(model)}
            window.clear()
            record["epochs"].append(epoch)
            emit({"type": "epoch", "arm": arm_name, "seed": seed,
                  **{k: v for k, v in epoch.items() if k not in ("gates", "biases")},
                  "z_mean": epoch["gates"]["z"]["mean"], "r_mean": epoch["gates"]["r"]["mean"],
                  "b_z_mean": epoch["biases"]["b_z"]["mean"]})
        elif event["type"] == "done":
            emit(tagged)

    emit({"type": "run_start", "arm": arm_name, "seed": seed, "steps": tc.max_steps,
          "steps_per_epoch": spe})
    result = train(model, data.task, tc, on_event, should_stop)
    if arm.freeze_rz:
        record["frozen_bias_check"] = check_frozen_biases(model)
    last = record["epochs"][-1] if record["epochs"] else None
    record.update(
        reason=result.reason, steps_done=result.steps, elapsed=rounded(result.elapsed, 2),
        gate_stats_seconds=rounded(gate_seconds[0], 2),
        seconds_per_epoch=rounded(result.elapsed / (result.steps / spe), 2) if result.steps else None,
        final=None if last is None else {k: last[k] for k in ("epoch", "train_loss", "val_loss", "val_accuracy")})
    return record, model


def run_ablation(config, out_dir=None, emit=None, should_stop=None, command=None):
    """Every arm under every seed, one after the other, seed by seed (so early results already compare
    arms). With `out_dir`, results.json/.csv are rewritten after every run ("complete": false until
    the end), the final model of each arm under `config.saved_seeds` is saved there, and a study
    already begun there with the same config is continued: its finished runs are kept, not rerun
    (a run cut short by should_stop is run again from its start).

    Events: {"type": "study_start", runs, resumed, dataset, steps_per_run}, then run_arm's events and
    {"type": "run_done", ...} for each run still to do, and {"type": "study_done", path, complete}."""
    emit = emit or (lambda event: None)
    should_stop = should_stop or (lambda: False)
    previous = results_to_resume(out_dir, config)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)  # checkpoints land there before results.json
    created = previous["created"] if previous else now()
    done = {(r["arm"], r["seed"]): r for r in (previous["runs"] if previous else []) if r["reason"] != "stopped"}
    device = resolve_device(config.device)
    data = load_study_data(config)
    plan = [(arm, seed) for seed in config.seeds for arm in config.arms]
    emit({"type": "study_start", "runs": len(plan), "resumed": len(done), "dataset": data.info,
          "steps_per_run": config.epochs * data.steps_per_epoch})
    path, results, runs = None, None, [done[key] for key in plan if key in done]
    for index, (arm, seed) in enumerate(plan):
        if (arm, seed) in done:
            continue
        if should_stop():
            break
        record, model = run_arm(arm, seed, config, data, emit, should_stop)
        if out_dir is not None and seed in config.saved_seeds and record["steps_done"]:
            record["checkpoint"] = save_arm_checkpoint(out_dir, config, data, record, model)
        runs.append(record)
        runs.sort(key=lambda r: plan.index((r["arm"], r["seed"])))
        if record["reason"] != "stopped":
            done[(arm, seed)] = record
        results = assemble_results(config, data, runs, len(done) == len(plan), created, device, command)
        if out_dir is not None:
            path = write_results(out_dir, results)
        emit({"type": "run_done", "index": index, "runs": len(plan), "arm": arm, "seed": seed,
              "final": record["final"], "reason": record["reason"], "elapsed": record["elapsed"],
              "frozen_bias_check": record["frozen_bias_check"]})
        if record["reason"] == "stopped":
            break
    if results is None:  # nothing ran (stopped at once, or every run was done before): nothing to rewrite
        results = assemble_results(config, data, runs, len(done) == len(plan), created, device, command)
    emit({"type": "study_done", "path": None if path is None else str(path), "complete": results["complete"]})
    return results


def expected_data_info(config):
    """The shape of the study's data before it is loaded: one grey pixel per step, T = side^2 steps
    (CIFAR-10 is 32 x 32), for estimating a run's cost."""
    side = config.size if config.dataset == "digits" else 32
    return {"input_size": 1, "num_classes": SEQUENCE_DATASETS[config.dataset].num_classes,
            "sequence_length": side * side}


class AblationJob(BackgroundJob):
    """run_ablation on a background thread (the app's live run): the same run order, results files,
    checkpoints and events as the CLI, into `out_dir` (by default a fresh temporary folder that lives as
    long as the job, so one session's study is not visible to another and none is left behind). It
    draws on the server's training budget (lab.capacity) and waits in its queue, as training runs do.

        job = AblationJob(config).start(); job.events(since=n); job.stop(); job.wait(); job.results

    status: ready -> queued -> running -> finished | stopped | failed (message says why)."""

    what = "The live ablation"

    def __init__(self, config, out_dir=None, cost_mb=None, owner=None, budget=None):
        if cost_mb is None:  # one run trains at a time: the budget holds one model's training memory
            info = expected_data_info(config)
            cost_mb = training_memory_bytes(model_config("baseline", config, info), config.batch_size,
                                            info["sequence_length"]) / 2**20
        super().__init__(cost_mb, owner, budget)
        self.config, self.out_dir, self.results = config, out_dir, None
        self.command = cli_command(config)  # what the page offers: run this study yourself
        self._folder = None
        if out_dir is None:
            self._folder = tempfile.TemporaryDirectory(prefix="rnnlab-ablation-")  # deleted with the job
            self.out_dir = self._folder.name

    def _work(self):
        self.results = run_ablation(self.config, self.out_dir, self._log, self._stop.is_set, self.command)
        return "finished" if self.results["complete"] else "stopped"
