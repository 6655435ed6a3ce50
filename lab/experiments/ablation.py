"""Seed 003's GRU gate-bias ablation: do the reset and update biases matter over T = 1024 steps?

Glossary: B batch, T time (pixels per sequence), H hidden units, C classes, N sequences.

    config = AblationConfig(dataset="digits", epochs=3, seeds=(0, 1), arms=("baseline", "ablated"))
    results = run_ablation(config, out_dir="runs/ablation", emit=print)
    results["summary"]["ablated"]["val_accuracy_mean"]

    python -m lab ablation --dataset digits --epochs 3 --seeds 0 1 --out runs/ablation

The model is seed 003's: one GRU layer in PyTorch's convention (lab.cells.TorchGRULayer;
fused torch.nn.GRU by default), H = 181, one grey pixel per step, a linear head on the final
state: 3H(1 + H + 2) + C(H + 1) = 99,912 + 1,820 = 101,732 parameters.

    r_t = sigmoid(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}          z KEEPS memory (PyTorch's convention)

Both bias vectors stack [r; z; n], so indices [0:2H] are the reset and update biases.

Arms (registry ARMS):
    baseline   every bias learnable; b_iz = +1, so z ~ sigmoid(1) = 0.73 at first: keep more memory
    ablated    r and z chunks [0:2H] of BOTH b_ih and b_hh frozen at exactly 0 by gradient hooks,
               the candidate biases b_in, b_hn learnable (seed 003 section 4)
    chrono     b_iz ~ log U[1, T - 1] (Tallec & Ollivier 2018), which seed 003 tried and dropped

Deviation from seed 003, on purpose: its code fills the z chunk of both bias vectors with 1
(effective b_z = b_iz + b_hz = +2, sigmoid(2) = 0.88) while its text reasons with sigmoid(1);
lab puts +1 in b_iz only (lab.cells.TorchGRULayer), which is what the text describes.

Why frozen zeros stay exactly 0 under AdamW: the hooks zero the gradient of those entries
before it reaches .grad, so Adam's moments stay 0 and its step m / (sqrt(v) + eps) is exactly 0;
decoupled weight decay multiplies the parameter by (1 - lr * wd), which leaves 0 at 0; gradient
clipping rescales, 0 stays 0. `check_frozen_biases` checks this exactly after every epoch and
at the end of every ablated run, and raises FrozenBiasError otherwise.

Training is lab.train.train with seed 003's recipe: AdamW, lr 5e-4 cosine-annealed to 1e-5,
batch 128, weight decay 0.01, gradient-norm clipping at 1.0 (lab's default). An epoch is
ceil(N / B) steps; batches are drawn uniformly with replacement (lab.train.ClassificationTask);
the test split is evaluated in full after every epoch. Gate statistics (z and r: mean,
quantiles, histogram, time profile) come from the reference twin (lab.models.to_reference) reading
a fixed batch of test sequences, at initialisation and after every epoch.
"""
import csv
import dataclasses
import io
import json
import math
import os
import statistics
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import torch

import lab
from lab.backends import FusedLayer, check_cell
from lab.cells import TorchGRULayer, sigmoid_time_constant
from lab.checkpoints import atomic_write_bytes, checkpoint_bytes
from lab.data import SEQUENCE_DATASETS, DataError, load_sequence_dataset
from lab.models import ClassifierConfig, build_model, conventions, count_parameters, recurrent_layers, to_reference
from lab.train import BackgroundJob, ClassificationTask, TrainConfig, resolve_device, train

RESULTS_FORMAT = "rnnlab-ablation"
RESULTS_FILE = "results.json"  # everything: config, per-epoch records, gate statistics, summary
CSV_FILE = "results.csv"  # one row per (arm, seed, epoch), for spreadsheets
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "checkpoints" / "ablation"
GATES = ("z", "r")
QUANTILES = tuple(i / 10 for i in range(11))  # min, deciles, max
HIST_BINS = 20  # over [0, 1]
TIME_BINS = 32  # the time profile averages T steps into this many bins
MAX_QUANTILE_ELEMENTS = 2**24  # torch.quantile's input limit; larger traces are subsampled evenly


class FrozenBiasError(RuntimeError):
    """A reset/update bias of the ablated arm is not exactly 0: the ablation is invalid."""


@dataclass(frozen=True)
class Arm:
    name: str
    description: str
    keep_bias: float = 1.0  # initial b_iz (lab.cells.TorchGRULayer puts it in b_ih only)
    chrono: bool = False  # chrono initialisation of b_iz with T_max = the sequence length
    freeze_rz: bool = False  # the r and z chunks of b_ih and b_hh are frozen at 0


ARMS = {arm.name: arm for arm in [
    Arm("baseline", "every bias learnable; update-gate bias b_iz = +1, so z ~ sigmoid(1) = 0.73 at "
        "initialisation (PyTorch convention: z keeps, so +1 means keep more memory)", keep_bias=1.0),
    Arm("ablated", "reset and update biases (r and z chunks [0:2H] of b_ih and b_hh) frozen at exactly 0 "
        "by gradient hooks, so z ~ sigmoid(0) = 0.5; candidate biases b_in, b_hn learnable",
        keep_bias=0.0, freeze_rz=True),
    Arm("chrono", "chrono initialisation b_iz ~ log U[1, T - 1] (mean ~5.9 at T = 1024), every bias "
        "learnable", chrono=True),
]}


def get_arm(name):
    if name not in ARMS:
        raise ValueError(f"arms: unknown arm {name!r}; valid arms are {list(ARMS)}")
    return ARMS[name]


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass
class AblationConfig:
    """One study: every arm trained once per seed with the same data and recipe."""

    dataset: str = "digits"  # lab.data.SEQUENCE_DATASETS: "digits" (offline) or "cifar10" (download)
    size: int = 32  # digits only: size x size images, T = size**2 steps (32 -> 1024, like CIFAR-10)
    root: Optional[str] = None  # CIFAR-10 folder (default <cache dir>/cifar10)
    download: bool = False  # CIFAR-10 only: fetch the 170 MB archive when it is missing
    arms: tuple = ("baseline", "ablated")  # keys of ARMS
    seeds: tuple = (0, 1, 2)  # one run per arm and seed; summaries are mean ± std over seeds
    epochs: int = 40  # seed 003 trains 40 epochs
    backend: str = "fused"  # "fused" (torch.nn.GRU, as seed 003) or "fast"/"reference" (lab.cells.TorchGRULayer)
    hidden_size: int = 181  # H; 181 gives seed 003's 101,732 parameters (change only for quick demos)
    lr: float = 5e-4  # seed 003: 1e-3 spiked, 5e-4 converged
    min_lr: float = 1e-5  # cosine floor (seed 003's CosineAnnealingLR eta_min)
    weight_decay: float = 0.01  # AdamW's decoupled decay
    batch_size: int = 128  # seed 003
    grad_clip: float = 1.0  # global gradient-norm clipping (lab.train's default)
    limit_train: Optional[int] = None  # keep only the first N training sequences (quick runs)
    limit_test: Optional[int] = None  # keep only the first N test sequences
    gate_batch: int = 32  # the first G test sequences are traced for gate statistics every epoch
    checkpoint_seeds: Optional[tuple] = None  # seeds whose final model is saved, per arm; None: the first
    device: str = "auto"  # "auto" (CUDA when available), "cpu" or "cuda"

    def __post_init__(self):
        self.arms = tuple(self.arms)
        self.seeds = tuple(self.seeds)
        if self.checkpoint_seeds is not None:
            self.checkpoint_seeds = tuple(self.checkpoint_seeds)
        if self.dataset not in SEQUENCE_DATASETS:
            raise ValueError(f"dataset: unknown dataset {self.dataset!r}; valid datasets are {list(SEQUENCE_DATASETS)}")
        if not self.arms:
            raise ValueError("arms: give at least one arm")
        for name in self.arms:
            get_arm(name)
        if len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms: {list(self.arms)} lists an arm twice")
        if not self.seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in self.seeds):
            raise ValueError(f"seeds: give at least one integer seed, got {list(self.seeds)}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: {list(self.seeds)} lists a seed twice")
        for name in ("epochs", "hidden_size", "batch_size", "gate_batch"):
            if not _positive_int(getattr(self, name)):
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
        if not (_positive_int(self.size) and 2 <= self.size <= 64):
            raise ValueError(f"size: must be an integer from 2 to 64, got {self.size!r}")
        for name in ("limit_train", "limit_test"):
            value = getattr(self, name)
            if value is not None and not _positive_int(value):
                raise ValueError(f"{name}: must be a positive integer or None, got {value!r}")
        check_cell("gru_torch", self.backend)
        if not self.lr > 0 or not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"lr: need lr > 0 and 0 <= min_lr <= lr, got lr={self.lr!r}, min_lr={self.min_lr!r}")
        if self.weight_decay < 0 or not self.grad_clip > 0:
            raise ValueError("weight_decay: must be >= 0, and grad_clip > 0")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device: must be 'auto', 'cpu' or 'cuda', got {self.device!r}")

    @property
    def saved_seeds(self):
        return self.checkpoint_seeds if self.checkpoint_seeds is not None else self.seeds[:1]


# ---------------------------------------------------------------------------
# data


@dataclass
class StudyData:
    task: ClassificationTask  # train (N, T, 1) and test tensors
    gate_x: torch.Tensor  # (G, T, 1): the fixed test sequences whose gates are traced
    info: dict  # dataset name, title, sequence_length, n_train, n_test, num_classes


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
    return StudyData(task, task.x_test[: config.gate_batch], info)


def steps_per_epoch(config, n_train):
    return math.ceil(n_train / config.batch_size)


def train_config(config, data, seed):
    """lab.train's config for one run: a step budget of whole epochs, evaluated after each."""
    spe = steps_per_epoch(config, data.info["n_train"])
    return TrainConfig(lr=config.lr, min_lr=config.min_lr, weight_decay=config.weight_decay,
                       batch_size=config.batch_size, max_steps=config.epochs * spe, max_epochs=None,
                       eval_interval=spe, grad_clip=config.grad_clip, seed=seed, device=config.device)


# ---------------------------------------------------------------------------
# the model and its biases


def model_config(arm_name, config, data_info):
    arm = get_arm(arm_name)
    return ClassifierConfig(cell="gru_torch", backend=config.backend, input_size=data_info.get("input_size", 1),
                            hidden_size=config.hidden_size, num_layers=1, num_classes=data_info["num_classes"],
                            keep_bias=arm.keep_bias,
                            chrono_tmax=data_info["sequence_length"] if arm.chrono else None)


def gate_bias_pairs(model):
    """(b_ih, b_hh) of every GRU layer, each (3H,) stacked [r; z; n], for either backend."""
    pairs = []
    for layer in recurrent_layers(model):
        if isinstance(layer, FusedLayer) and layer.cell == "gru_torch":
            pairs.append((layer.rnn.bias_ih_l0, layer.rnn.bias_hh_l0))
        elif isinstance(layer, TorchGRULayer):
            pairs.append((layer.bias, layer.bias_hh))
        else:
            raise ValueError(f"the gate-bias ablation needs gru_torch layers (PyTorch convention), "
                             f"not {type(layer).__name__}")
    return pairs


def _zero_reset_update_grad(H):
    def hook(grad):  # grad (3H,) -> the same with the r and z chunks [0:2H] zeroed
        grad = grad.clone()
        grad[: 2 * H] = 0
        return grad
    return hook


def freeze_gate_biases(model):
    """Set the r and z chunks of both bias vectors of every GRU layer to 0 and keep them there with
    gradient hooks (seed 003 section 4). Returns the hook handles (`handle.remove()` unfreezes).

    The hooks do not travel inside a checkpoint: call this again after loading to keep training."""
    handles = []
    for b_ih, b_hh in gate_bias_pairs(model):
        H = b_ih.numel() // 3
        for bias in (b_ih, b_hh):
            with torch.no_grad():
                bias[: 2 * H] = 0
            handles.append(bias.register_hook(_zero_reset_update_grad(H)))
    return handles


def check_frozen_biases(model):
    """Raise FrozenBiasError unless every r and z bias (b_ih[0:2H], b_hh[0:2H]) is exactly 0."""
    for l, (b_ih, b_hh) in enumerate(gate_bias_pairs(model)):
        H = b_ih.numel() // 3
        for name, bias in (("b_ih", b_ih), ("b_hh", b_hh)):
            frozen = bias.detach()[: 2 * H]
            nonzero = int(torch.count_nonzero(frozen))
            if nonzero:
                raise FrozenBiasError(
                    f"layer {l} {name}[0:2H]: {nonzero} of {2 * H} frozen reset/update biases are not exactly 0 "
                    f"(max |b| = {frozen.abs().max().item():.3g}); the ablation is invalid")
    return "passed: r and z chunks of b_ih and b_hh are exactly 0"


_BUILD_LOCK = threading.Lock()  # seeding + initialising is one atomic act when jobs build in threads


def build_arm_model(arm_name, seed, config, data_info, device="cpu"):
    """Seed 003's classifier for one arm, initialised under `seed`, on `device`, frozen if ablated."""
    arm = get_arm(arm_name)
    with _BUILD_LOCK:
        torch.manual_seed(seed)
        model = build_model(model_config(arm_name, config, data_info))
    model.to(device)  # before the hooks, so they sit on the parameters that train
    if arm.freeze_rz:
        freeze_gate_biases(model)
    return model


def _r(x, digits=6):
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


def _stats(v):
    return {"mean": _r(v.mean()), "std": _r(v.std()) if v.numel() > 1 else 0.0, "min": _r(v.min()), "max": _r(v.max())}


@torch.no_grad()
def bias_statistics(model):
    """Effective gate biases of the first layer: b_r = b_ir + b_hr, b_z = b_iz + b_hz, and b_in, b_hn."""
    b_ih, b_hh = (b.detach().float().cpu() for b in gate_bias_pairs(model)[0])
    H = b_ih.numel() // 3
    frozen = torch.cat([b_ih[: 2 * H], b_hh[: 2 * H]])
    return {"b_r": _stats(b_ih[:H] + b_hh[:H]), "b_z": _stats(b_ih[H:2 * H] + b_hh[H:2 * H]),
            "b_in": _stats(b_ih[2 * H:]), "b_hn": _stats(b_hh[2 * H:]), "rz_max_abs": _r(frozen.abs().max())}


def _distribution(v):
    """v (B, T, H) gate values in (0, 1) -> mean, std, quantiles, histogram and time profile."""
    v = v.detach().float().cpu()
    flat = v.flatten()
    if flat.numel() > MAX_QUANTILE_ELEMENTS:
        flat = flat[:: math.ceil(flat.numel() / MAX_QUANTILE_ELEMENTS)]
    quantiles = torch.quantile(flat, torch.tensor(QUANTILES))
    hist = torch.histc(v, bins=HIST_BINS, min=0.0, max=1.0)
    T = v.size(1)
    per_step = v.transpose(0, 1).reshape(T, -1)  # (T, B*H)
    bins = torch.tensor_split(torch.arange(T), min(TIME_BINS, T))
    chunks = [per_step[idx].flatten() for idx in bins]
    chunks_q = [torch.quantile(c[:: math.ceil(c.numel() / MAX_QUANTILE_ELEMENTS)], torch.tensor([0.1, 0.9]))
                for c in chunks]
    return {
        "mean": _r(v.mean()), "std": _r(v.std()),
        "quantiles": [_r(q) for q in quantiles], "histogram": [_r(h) for h in hist / hist.sum()],
        "below_0.1": _r((v < 0.1).float().mean()), "above_0.9": _r((v > 0.9).float().mean()),
        "time": {"t_start": [int(idx[0]) for idx in bins], "t_end": [int(idx[-1]) + 1 for idx in bins],
                 "mean": [_r(c.mean()) for c in chunks], "q10": [_r(q[0]) for q in chunks_q],
                 "q90": [_r(q[1]) for q in chunks_q]},
    }


@torch.no_grad()
def gate_statistics(model, x, gates=GATES):
    """Trace the gates of the first layer on x (G, T, 1) through the reference twin (fused layers cannot
    trace; lab.models.to_reference computes the same function) -> {gate: distribution}."""
    twin = to_reference(model)
    was_training = twin.training
    trace = [{} for _ in recurrent_layers(twin)]
    twin.eval()
    try:
        twin(x.to(next(twin.parameters()).device), trace=trace)
    finally:
        twin.train(was_training)
    return {gate: _distribution(trace[0][gate]) for gate in gates}


# ---------------------------------------------------------------------------
# one run


def run_arm(arm_name, seed, config, data, emit=None, should_stop=None, model=None):
    """Train one arm under one seed with lab.train.train -> (record, model).

    Emits train's step events, then {"type": "epoch", ...} after each evaluation, all tagged
    with "arm" and "seed". An ablated run checks its frozen biases after every epoch and at the
    end, and raises FrozenBiasError if one is not exactly 0."""
    emit = emit or (lambda event: None)
    arm = get_arm(arm_name)
    device = resolve_device(config.device)
    if model is None:
        model = build_arm_model(arm_name, seed, config, data.info, device)
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
            record["steps"].append([event["step"], _r(event["train_loss"]), _r(event["lr"], 8),
                                    _r(event["grad_norm"], 4)])
            emit(tagged)
        elif event["type"] == "eval":
            if arm.freeze_rz:
                check_frozen_biases(model)  # fail at the first bad epoch, not after hours
            epoch = {"epoch": _r(event["step"] / spe, 4), "step": event["step"],
                     "train_loss": _r(sum(window) / len(window)) if window else None,
                     "train_loss_last": _r(event["train_loss"]), "val_loss": _r(event["val_loss"]),
                     "val_accuracy": _r(event["val_accuracy"]), "elapsed": _r(event["elapsed"], 2),
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
        reason=result.reason, steps_done=result.steps, elapsed=_r(result.elapsed, 2),
        gate_stats_seconds=_r(gate_seconds[0], 2),
        seconds_per_epoch=_r(result.elapsed / (result.steps / spe), 2) if result.steps else None,
        final=None if last is None else {k: last[k] for k in ("epoch", "train_loss", "val_loss", "val_accuracy")})
    return record, model


# ---------------------------------------------------------------------------
# summaries and the results file


def _mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return _r(statistics.fmean(values)), (_r(statistics.stdev(values)) if len(values) > 1 else None)


def summarize(runs, arms):
    """Per arm: final metrics as mean and sample standard deviation (n - 1) over seeds."""
    summary = {}
    for arm in arms:
        finished = [r for r in runs if r["arm"] == arm and r.get("final")]
        entry = {"n_seeds": len(finished), "seeds": [r["seed"] for r in finished],
                 "epochs": sorted({r["final"]["epoch"] for r in finished})}
        for metric in ("val_accuracy", "val_loss", "train_loss"):
            entry[f"{metric}_mean"], entry[f"{metric}_std"] = _mean_std([r["final"][metric] for r in finished])
            entry[f"{metric}_by_seed"] = {str(r["seed"]): r["final"][metric] for r in finished}
        for gate in GATES:
            entry[f"{gate}_mean_final"], _ = _mean_std([r["epochs"][-1]["gates"][gate]["mean"] for r in finished])
        entry["b_z_mean_final"], _ = _mean_std([r["epochs"][-1]["biases"]["b_z"]["mean"] for r in finished])
        summary[arm] = entry
    return summary


NOTES = [
    "Cell convention: PyTorch's GRU (torch.nn.GRU), h_t = (1 - z_t) * n_t + z_t * h_{t-1}: z keeps memory, so "
    "the baseline's update-gate bias +1 (z ~ sigmoid(1) = 0.73 at initialisation) means 'keep more memory'.",
    "lab puts the +1 in b_iz only (effective b_z = +1); seed 003's code fills the z chunk of both b_ih and b_hh "
    "(effective +2, sigmoid(2) = 0.88) while its text reasons with sigmoid(1).",
    "Ablated arm: the r and z chunks [0:2H] of both b_ih and b_hh are frozen at exactly 0 by gradient hooks "
    "(AdamW's decoupled decay multiplies by 1 - lr*wd, which keeps 0 at 0); checked exactly after every epoch.",
    "An epoch is ceil(N / batch) AdamW steps on batches drawn uniformly with replacement "
    "(lab.train.ClassificationTask); the whole test split is evaluated after every epoch.",
    "std is the sample standard deviation (n - 1) across seeds; null with a single seed.",
]


def assemble_results(config, data, runs, complete, started, command=None):
    """The results document written to results.json."""
    arms = [a for a in config.arms if any(r["arm"] == a for r in runs)] or list(config.arms)
    model = build_model(model_config(config.arms[0], config, data.info))
    spe = steps_per_epoch(config, data.info["n_train"])
    finished = [r for r in runs if r.get("seconds_per_epoch")]
    return {
        "format": RESULTS_FORMAT, "format_version": 1, "experiment": "GRU gate-bias ablation (seed 003)",
        "lab_version": lab.__version__, "created": started,
        "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "complete": complete, "command": command,
        "config": dataclasses.asdict(config),
        "dataset": data.info,
        "model": {"cell": "gru_torch", "backend": config.backend, "hidden_size": config.hidden_size,
                  "parameters": count_parameters(model), "conventions": conventions(model)},
        "training": {"optimizer": "AdamW", "lr": config.lr, "min_lr": config.min_lr, "schedule": "cosine",
                     "weight_decay": config.weight_decay, "batch_size": config.batch_size,
                     "grad_clip": config.grad_clip, "steps_per_epoch": spe, "epochs": config.epochs,
                     "device": str(resolve_device(config.device)), "torch_threads": torch.get_num_threads(),
                     "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")},
        "arms": {a: dataclasses.asdict(get_arm(a)) for a in config.arms},
        "timing": {"seconds_per_epoch_mean": _mean_std([r["seconds_per_epoch"] for r in finished])[0],
                   "total_seconds": _r(sum(r["elapsed"] for r in runs), 1)},
        "summary": summarize(runs, arms),
        "runs": runs,
        "notes": NOTES,
    }


def epoch_rows(results):
    """One flat row per (arm, seed, epoch), epoch 0 being the initialisation (gates only)."""
    rows = []
    for run in results["runs"]:
        stages = [{"epoch": 0.0, "step": 0, **run["initial"]}] + run["epochs"]
        for e in stages:
            row = {"arm": run["arm"], "seed": run["seed"], "epoch": e["epoch"], "step": e["step"],
                   **{k: e.get(k) for k in ("train_loss", "val_loss", "val_accuracy")}}
            for gate in GATES:
                g = e["gates"][gate]
                row.update({f"{gate}_mean": g["mean"], f"{gate}_q10": g["quantiles"][1],
                            f"{gate}_q50": g["quantiles"][5], f"{gate}_q90": g["quantiles"][9]})
            row.update({"b_z_mean": e["biases"]["b_z"]["mean"], "b_r_mean": e["biases"]["b_r"]["mean"],
                        "rz_bias_max_abs": e["biases"]["rz_max_abs"]})
            rows.append(row)
    return rows


def step_rows(results):
    return [{"arm": run["arm"], "seed": run["seed"], "step": s[0], "train_loss": s[1]}
            for run in results["runs"] for s in run["steps"]]


def results_csv(results):
    rows = epoch_rows(results)
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def write_results(out_dir, results):
    """results.json and results.csv, each written atomically."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out_dir / RESULTS_FILE, json.dumps(results, indent=1, allow_nan=False).encode())
    atomic_write_bytes(out_dir / CSV_FILE, results_csv(results).encode())
    return out_dir / RESULTS_FILE


def load_results(path=SHIPPED_DIR):
    """A results.json (or the folder holding one) -> dict; DataError if missing or malformed."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise DataError(f"no ablation results at {path}; run `python -m lab ablation` to make them")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is not a readable results file: {e}") from None
    if not isinstance(results, dict) or results.get("format") != RESULTS_FORMAT:
        raise DataError(f"{path} is not an RNN Lab ablation results file (no {RESULTS_FORMAT!r} format key)")
    missing = [k for k in ("config", "dataset", "summary", "runs") if k not in results]
    if missing:
        raise DataError(f"{path} is missing {missing}")
    return results


def checkpoint_name(config, arm, seed):
    return f"{config.dataset}-{arm}-seed{seed}.safetensors"


def save_arm_checkpoint(out_dir, config, data, record, model):
    """The run's final model as a lab checkpoint (load with lab.checkpoints.load_checkpoint)."""
    name = checkpoint_name(config, record["arm"], record["seed"])
    history = [{k: v for k, v in e.items() if k not in ("gates", "biases")} for e in record["epochs"]]
    metrics = {"history": history, "reason": record["reason"], "steps": record["steps_done"],
               "frozen_bias_check": record["frozen_bias_check"]}
    extra = {"experiment": "gru-gate-bias-ablation", "arm": record["arm"], "seed": record["seed"],
             "dataset": data.info, "arm_description": get_arm(record["arm"]).description}
    data_bytes = checkpoint_bytes(model, None, metrics, name[: -len(".safetensors")], 1, extra)
    atomic_write_bytes(Path(out_dir) / name, data_bytes)
    return name


# ---------------------------------------------------------------------------
# the study


def run_ablation(config, out_dir=None, emit=None, should_stop=None, command=None):
    """Every arm under every seed, one after the other (seed by seed, so early results already compare
    arms). With `out_dir`, results.json/.csv are rewritten after every run ("complete": false until
    the end) and the final model of each arm under `config.saved_seeds` is saved there.

    Events: {"type": "study_start", runs, dataset}, then run_arm's events, {"type": "run_done", record
    summary} after each run, and {"type": "study_done", path}."""
    emit = emit or (lambda event: None)
    should_stop = should_stop or (lambda: False)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    data = load_study_data(config)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    plan = [(arm, seed) for seed in config.seeds for arm in config.arms]
    emit({"type": "study_start", "runs": len(plan), "dataset": data.info,
          "steps_per_run": config.epochs * steps_per_epoch(config, data.info["n_train"])})
    runs, path, stopped = [], None, False
    for index, (arm, seed) in enumerate(plan):
        if should_stop():
            stopped = True
            break
        record, model = run_arm(arm, seed, config, data, emit, should_stop)
        if out_dir is not None and seed in config.saved_seeds and record["steps_done"]:
            record["checkpoint"] = save_arm_checkpoint(out_dir, config, data, record, model)
        runs.append(record)
        stopped = record["reason"] == "stopped"
        complete = index == len(plan) - 1 and not stopped
        results = assemble_results(config, data, runs, complete, started, command)
        if out_dir is not None:
            path = write_results(out_dir, results)
        emit({"type": "run_done", "index": index, "runs": len(plan), "arm": arm, "seed": seed,
              "final": record["final"], "reason": record["reason"], "elapsed": record["elapsed"],
              "frozen_bias_check": record["frozen_bias_check"]})
        if stopped:
            break
    if not runs:
        results = assemble_results(config, data, runs, False, started, command)
    emit({"type": "study_done", "path": None if path is None else str(path), "complete": results["complete"]})
    return results


class AblationJob(BackgroundJob):
    """A study on background threads, one per arm, so the arms train side by side (the app's live
    run). Models are all initialised up front in the calling thread, so results do not depend on
    thread timing. A live ablation takes one of the process-wide job slots that training runs
    take (lab.train.MAX_CONCURRENT_JOBS).

        job = AblationJob(config).start(); job.events(since=n); job.stop(); job.wait(); job.results

    status: ready -> running -> finished | stopped | failed (message says why)."""

    def __init__(self, config, data=None):
        super().__init__()
        self.config, self.data, self.results = config, data, None
        self._threads, self._runs = [], []

    def start(self):
        if self._threads:
            raise RuntimeError("this job has already been started")
        self._claim_slot()
        try:
            self.data = self.data or load_study_data(self.config)
            device = resolve_device(self.config.device)
            models = {(arm, seed): build_arm_model(arm, seed, self.config, self.data.info, device)
                      for arm in self.config.arms for seed in self.config.seeds}
        except BaseException:
            self._free_slot()
            raise
        self._started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.status = "running"
        self._threads = [threading.Thread(target=self._run_arm, args=(arm, models), name=f"ablation-{arm}",
                                          daemon=True) for arm in self.config.arms]
        self._pending = len(self._threads)
        for thread in self._threads:
            thread.start()
        return self

    def _emit(self, event):
        self._log(event)

    def _run_arm(self, arm, models):
        try:
            for seed in self.config.seeds:
                if self._stop.is_set():
                    break
                record, _ = run_arm(arm, seed, self.config, self.data, self._emit, self._stop.is_set,
                                    models[(arm, seed)])
                with self._lock:
                    self._runs.append(record)
        except Exception as e:  # reported to the UI, which never shows a traceback
            self.message = f"{arm}: {type(e).__name__}: {e}"
            self._emit({"type": "error", "arm": arm, "message": self.message})
            self._stop.set()
        finally:
            with self._lock:
                self._pending -= 1
                last = self._pending == 0
            if last:
                self._finish()

    def _finish(self):
        order = {(a, s): i for i, (s, a) in enumerate((s, a) for s in self.config.seeds for a in self.config.arms)}
        runs = sorted(self._runs, key=lambda r: order[(r["arm"], r["seed"])])
        failed = any(e["type"] == "error" for e in self.events())
        stopped = self._stop.is_set() or any(r["reason"] == "stopped" for r in runs)
        try:
            self.results = assemble_results(self.config, self.data, runs, not (failed or stopped), self._started)
        except Exception as e:
            failed, self.message = True, f"{type(e).__name__}: {e}"
        status = "failed" if failed else "stopped" if stopped else "finished"
        self._emit({"type": "study_done", "complete": status == "finished"})
        self._free_slot()
        self.status = status  # last: a UI that sees a final status finds the slot free for a new job

    def wait(self, timeout=None):
        for thread in self._threads:
            thread.join(timeout)
        return self.status


def cli_command(config, out_dir=None):
    """The `python -m lab ablation` command line that reruns `config` (recorded in results.json)."""
    default = AblationConfig()
    parts = ["python -m lab ablation", f"--dataset {config.dataset}"]
    if config.dataset == "digits":
        parts.append(f"--size {config.size}")
    parts += [f"--epochs {config.epochs}", "--seeds " + " ".join(map(str, config.seeds)),
              "--arms " + " ".join(config.arms)]
    for flag, name in [("--backend", "backend"), ("--hidden-size", "hidden_size"), ("--lr", "lr"),
                       ("--min-lr", "min_lr"), ("--weight-decay", "weight_decay"), ("--batch-size", "batch_size"),
                       ("--limit-train", "limit_train"), ("--limit-test", "limit_test"),
                       ("--gate-batch", "gate_batch"), ("--root", "root"), ("--device", "device")]:
        value = getattr(config, name)
        if value != getattr(default, name):
            parts.append(f"{flag} {value}")
    if config.download:
        parts.append("--download")
    if out_dir is not None:
        parts.append(f"--out {out_dir}")
    return " ".join(parts)


def chrono_mean(t_max):
    """E[log U] for U ~ U[1, t_max - 1], the mean chrono bias (lab.cells.chrono_bias)."""
    b = t_max - 1
    return (b * math.log(b) - b + 1) / (b - 1)


def time_constant_table(biases=None, seq_len=1024):
    """What a keep-gate bias alone implies (inputs and state at zero): retention sigmoid(b), time
    constant tau = 1 / (1 - sigmoid(b)) steps, half-life, and what is left after seq_len steps."""
    if biases is None:
        biases = [(0.0, "ablated arm: b_z frozen at 0"), (1.0, "baseline (lab): b_iz = +1"),
                  (2.0, "seed 003's code: +1 in both b_iz and b_hz"),
                  (chrono_mean(seq_len), f"chrono mean, E[log U[1, {seq_len - 1}]]"),
                  (6.2, "seed 003's quoted chrono average")]
    rows = []
    for bias, label in biases:
        retention, tau, half_life = sigmoid_time_constant(bias)
        rows.append({"b_z": round(bias, 3), "meaning": label, "sigmoid(b)": retention, "tau (steps)": tau,
                     "half-life (steps)": half_life, f"left after {seq_len} steps": retention ** seq_len})
    return rows


def summary_markdown(results):
    """The accuracy table as Markdown (BENCHMARKS.md, the CLI's closing print)."""
    lines = ["| arm | seeds | test accuracy (mean ± std) | test loss | train loss (last epoch) | mean z | b_z |",
             "|---|---|---|---|---|---|---|"]

    def pm(mean, std, pct=False):
        if mean is None:
            return "–"
        scale, unit = (100, "%") if pct else (1, "")
        text = f"{mean * scale:.1f}{unit}" if pct else f"{mean:.3f}"
        return text + (f" ± {std * scale:.1f}{unit}" if pct and std is not None else
                       f" ± {std:.3f}" if std is not None else "")

    for arm, s in results["summary"].items():
        by_seed = ", ".join(f"{100 * v:.1f}" for v in s["val_accuracy_by_seed"].values() if v is not None)
        lines.append(f"| {arm} | {s['n_seeds']} ({by_seed}) | {pm(s['val_accuracy_mean'], s['val_accuracy_std'], True)} "
                     f"| {pm(s['val_loss_mean'], s['val_loss_std'])} | {pm(s['train_loss_mean'], s['train_loss_std'])} "
                     f"| {pm(s['z_mean_final'], None)} | {pm(s['b_z_mean_final'], None)} |")
    return "\n".join(lines)
