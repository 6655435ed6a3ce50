"""The training engine: one loop for every model family, reporting through events.

Glossary: B batch, T block (time steps per window), V vocabulary.

    events = []
    result = train(model, task, TrainConfig(max_seconds=60), emit=events.append)

`train` never prints. It emits plain dicts, which the CLI turns into a tqdm
bar and the app into live charts (minGPT's trainer-with-callbacks idea):

    {"type": "step", step, epoch, train_loss, lr, grad_norm, tokens_per_s, elapsed, eta, progress}
    {"type": "eval", step, epoch, val_loss, val_nats_per_char | val_accuracy, elapsed}
    {"type": "done", reason, step, elapsed}      reason: finished | stopped | time budget | non-finite ...

A run can continue where it stopped: `train` returns its `TrainingState`
(optimizer moments, step, elapsed time, random generators), lab.training.checkpoints can
save it beside the weights, and `train(..., resume=state)` goes on from there
as if it had never stopped (`resume_training_state` checks a checkpoint first).

What it trains on is a task (lab.training.tasks); lab.server.jobs runs `train` in the
background for the app.

The seeds' recipe is the default: AdamW (weight decay 0.01), cosine-annealed
learning rate, gradient clipping at 1.0, optional label smoothing (seed 004).

One file (longer than most here) for the loop and what it cannot run without: its config, the device
and precision policy, and the state a resumed run restores, so the loop reads top to bottom. Readying
the process that trains (CPU threads, malloc, a warm-up) is lab.training.process's.
"""

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Annotated, Literal, Optional, get_args

import torch
from pydantic import Field

from lab.errors import LabError
from lab.nets.cells import detach_state
from lab.nets.cost import check_training_memory
from lab.nets.families import FAMILIES
from lab.nets.randomness import drawing_from
from lab.schema import CLASSROOM, MAX_SECONDS, Device, Fraction, Names, PageRange, Seed, config, declare
from lab.training import distributed
from lab.words import count

MAX_LR = 1.0  # AdamW moves a weight by about lr per step: beyond 1 a run only diverges
MAX_BATCH_SIZE = MAX_BLOCK_SIZE = 4096  # each also bounded by lab.nets.cost's training memory limit
MAX_STEPS = 10**9
MAX_EVAL_WINDOWS = 2048  # the validation windows are built at once: 2048 x 4096 ids is 64 MB
MAX_GRAD_CLIP = 1e6  # clipping at a norm beyond it clips nothing a finite run produces
AMP_MODES = ("auto", "off", "bf16", "fp16")


Steps = Annotated[int, Field(ge=1, le=MAX_STEPS)]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
Epochs = Annotated[float, Field(gt=0, le=MAX_STEPS)]  # an epoch takes a step at least


@config
class TrainConfig:
    # the fields come from a CLI, a form or a file: each is checked, finite, and within what a run on a
    # shared server can mean (lr 1e6 or inf only ever produced NaN weights). Each is declared once, here:
    # the command line's options, the Train page's widgets and its URL read them (lab.schema.declared_settings)
    lr: declare(
        float,
        "Peak learning rate, annealed to its floor over the run (cosine)",
        Names(url="lr", label="Learning rate", page=PageRange(1e-6, 1.0, "a number box needs a least value")),
        gt=0,
        le=MAX_LR,
    ) = 3e-3
    min_lr: declare(float, "The learning rate's floor at the end of the run, at most lr", ge=0) = 0.0  # seed 003: 1e-5
    warmup_steps: declare(
        int,
        "Steps over which the learning rate rises linearly to its schedule's, from the first step of a fresh "
        "optimizer (a run continued from weights alone starts its optimizer afresh)",
        ge=0,
        le=MAX_STEPS,
    ) = 0
    weight_decay: declare(float, "AdamW weight decay", Names(url="wd", label="Weight decay"), ge=0, le=1) = 0.01
    batch_size: declare(
        int,
        "Windows per batch",
        Names(url="batch", label="Batch size B", page=PageRange(1, 1024, CLASSROOM)),
        ge=1,
        le=MAX_BATCH_SIZE,
    ) = 64
    block_size: declare(
        int,
        "Time steps per window: how far back gradients flow (BPTT length)",
        Names(url="block", label="Block size T", page=PageRange(1, 2048, CLASSROOM)),
        ge=1,
        le=MAX_BLOCK_SIZE,
    ) = 128
    # budgets: training stops at whichever comes first
    max_steps: declare(Optional[Steps], "Step budget", Names(cli="steps")) = 1000
    max_seconds: declare(
        Optional[Seconds],
        "Wall-clock budget of a run in seconds, and of each runner of a race; the learning rate anneals over it",
        Names(cli="seconds", url="seconds", label="Time budget (s)", page=PageRange(1, 3600, CLASSROOM)),
    ) = None
    max_epochs: declare(Optional[Epochs], "Epoch budget", Names(cli="epochs")) = None
    grad_clip: declare(
        float,
        "Clip the global gradient norm to this value: a gradient that grows through many steps (an "
        "exploding gradient) then cannot throw the weights far in one update",
        Names(url="clip", label="Gradient clip", page=PageRange(0.01, 100.0, "a box needs a least value")),
        gt=0,
        le=MAX_GRAD_CLIP,
    ) = 1.0  # seeds 002, 003
    label_smoothing: declare(
        Fraction,
        "Label smoothing: the share of each target spread over the other tokens",
        Names(url="smoothing", label="Label smoothing", page=PageRange(0.0, 0.5, "a box needs a largest value")),
    ) = 0.0  # seed 004 uses 0.1
    stateful: declare(
        bool,
        "Consecutive windows, the hidden state carried across batches (truncated BPTT)",
        Names(url="stateful", label="Stateful (truncated BPTT)"),
    ) = False
    eval_interval: declare(
        Steps,
        "Training steps between validation passes",
        Names(url="eval_every", label="Validate every", page=PageRange(1, 100000, "a page's run takes fewer steps")),
    ) = 50
    eval_seconds: declare(
        Optional[Seconds], "At most this many seconds between validation passes (a slow model's first point)"
    ) = None
    eval_windows: declare(
        int,
        "Validation windows per pass: the same ones every time, whatever the batch size",
        ge=1,
        le=MAX_EVAL_WINDOWS,
    ) = 256
    seed: declare(
        Seed,
        "Random seed: the initial weights, the batches' order and the dropout masks all follow from it, so the same "
        "settings and seed train the same run (a class's identical runs are trained once)",
        Names(
            url="seed",
            label="Random seed",
            page=PageRange(0, 2**53 - 1, "a browser's number box counts exactly so far"),
        ),
    ) = 1337
    device: declare(Device, "Auto (CUDA when available), cpu or cuda") = "auto"
    amp: declare(
        Literal[AMP_MODES],
        "Mixed precision: auto is bf16 (or fp16 with a gradient scaler) for the fused backend on CUDA, "
        "otherwise off; fp16 needs CUDA; bf16 also on a CPU, where its instructions make it pay; the fast backend "
        f"trains in mixed precision only the {' and '.join(f.name for f in FAMILIES.values() if f.fast_autocasts)}",
    ) = "auto"
    compile: declare(
        bool, "Compile the model with torch.compile first (minutes of compiling, then faster steps on a GPU)"
    ) = False

    def __post_init__(self):
        if self.min_lr > self.lr:
            raise LabError(f"min_lr: must be at most lr ({self.lr:g}), got {self.min_lr!r}")
        if self.max_steps is None and self.max_seconds is None and self.max_epochs is None:
            raise LabError("max_steps: give at least one budget (max_steps, max_seconds or max_epochs)")


DEVICES = get_args(Device)


def resolve_device(name="auto"):
    """The one device policy of the lab: "auto" is CUDA when present, else the CPU."""
    if name not in DEVICES:
        raise LabError(f"device: must be one of {list(DEVICES)}, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise LabError("device: CUDA was asked for but no CUDA device is available")
    return torch.device("cuda" if name == "auto" and torch.cuda.is_available() else "cpu" if name == "auto" else name)


def resolve_amp(mode, device, backend, cell=None):
    """The dtype autocast computes in, or None for float32 throughout.

    "auto" is bfloat16 where the GPU has it, else float16, for the fused backend (cuDNN) on
    CUDA, where tensor cores make it pay; never on a CPU (bfloat16 pays only on CPUs with its
    instructions), nor for the reference backend (it is the equations to read and trace). Of the
    fast backend's forms, only those whose family record says so (`fast_autocasts`, the plain
    autograd loops) run under autocast; the hand-written kernels write into float32 buffers, so
    mixed precision is refused for them. float16's narrow range needs a gradient scaler, which
    torch.amp has for CUDA only: refused on a CPU."""
    if mode not in AMP_MODES:
        raise LabError(f"amp: must be one of {list(AMP_MODES)}, got {mode!r}")
    if mode == "fp16" and device.type != "cuda":
        raise LabError(
            "amp: float16 mixed precision needs a CUDA device (its gradient scaler is CUDA's); "
            "on a CPU use --amp bf16 or off"
        )
    if mode in ("bf16", "fp16") and backend == "fast" and not (cell in FAMILIES and FAMILIES[cell].fast_autocasts):
        raise LabError(
            "amp: the fast backend's kernel for this cell (lab/nets/kernels.py) computes in float32 only; "
            "use --backend fused for mixed precision, or --amp off"
        )
    if mode == "auto" and (device.type != "cuda" or backend != "fused"):
        return None
    bf16 = device.type != "cuda" or torch.cuda.is_bf16_supported()
    if mode == "bf16" and not bf16:
        raise LabError("amp: this GPU has no bfloat16; use --amp fp16")
    return {
        "auto": torch.bfloat16 if bf16 else torch.float16,
        "off": None,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
    }[mode]


# ---------------------------------------------------------------------------
# the loop


def cosine_lr(config, progress):
    """CosineAnnealingLR's curve evaluated on training progress in [0, 1], so that
    time budgets anneal as well as step budgets do."""
    return config.min_lr + 0.5 * (config.lr - config.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


def scheduled_lr(config, progress, step, optimizer_start=0):
    """The learning rate of step `step` + 1: the cosine at `progress`, scaled by the warm-up of an optimizer whose
    moments began at step `optimizer_start` (AdamW's first moments are noisy: a fresh optimizer at its peak rate
    undoes part of what a continued model's weights had learned)."""
    warm = 1.0 if not config.warmup_steps else min(1.0, (step - optimizer_start + 1) / config.warmup_steps)
    return cosine_lr(config, progress) * warm


def _progress(config, step, elapsed, epoch):
    parts = [
        step / config.max_steps if config.max_steps else 0.0,
        elapsed / config.max_seconds if config.max_seconds else 0.0,
        epoch / config.max_epochs if config.max_epochs else 0.0,
    ]
    return max(parts)


def run_metrics(result, config, **more):
    """What a checkpoint records about the run that made it (its `metrics`)."""
    return {
        "history": result.history,
        "steps": result.steps,
        "elapsed": result.elapsed,
        "reason": result.reason,
        "train_config": dataclasses.asdict(config),
        **more,
    }


@dataclass
class TrainingState:
    """Everything besides the weights that the next step of a run depends on.

    The learning-rate schedule has no state of its own: cosine_lr is a function of the
    step and the elapsed time (for time budgets), so restoring those restores it."""

    step: int  # optimizer steps taken
    elapsed: float  # seconds trained so far: time budgets and the schedule count on from here
    train_loss: float  # the last step's loss
    optimizer: dict  # parameter name -> AdamW's {"exp_avg", "exp_avg_sq", "step"} tensors for it
    hyperparameters: dict  # AdamW's settings (betas, eps, weight_decay, ...): JSON numbers, booleans, lists, null
    rng: dict  # "torch": the dropout masks' generator (W, S) uint8 ("cuda" on a GPU); "data": the sampler's (S,)
    history: list = dataclasses.field(default_factory=list)  # the eval events so far
    optimizer_start: int = 0  # the step the optimizer's moments began at (its warm-up counts from it)

    @classmethod
    def from_weights_at(cls, step, seed):
        """The state of a run continued at step `step` of its schedule from a model's weights alone (a file with
        no optimizer moments): a fresh optimizer, warmed up from there, and generators seeded by `seed`."""
        fresh = torch.Generator().manual_seed(seed).get_state()
        return cls(step, 0.0, math.nan, {}, {}, {"torch": fresh[None], "data": fresh}, [], optimizer_start=step)


# what a resumed run may change: budgets, and where and how fast it runs, not what it computes
RESUME_MAY_CHANGE = {
    "max_steps",
    "max_seconds",
    "max_epochs",
    "eval_interval",
    "eval_seconds",
    "device",
    "amp",
    "compile",
}


def resume_training_state(checkpoint, config):
    """The TrainingState to continue the run that saved `checkpoint` (lab.training.checkpoints.Checkpoint)
    with `config`: ValueError, one line, if the checkpoint has none, or if `config` differs from the
    saved run's in anything but RESUME_MAY_CHANGE, or if its budgets are already spent.

        config = TrainConfig(**{**checkpoint.metrics["train_config"], "max_steps": 2000})
        job = TrainingJob(name, checkpoint.model, LMTask(train_text, val_text, checkpoint.tokenizer), config,
                          resume=resume_training_state(checkpoint, config), resumable=True)
    """
    state = checkpoint.training_state
    if state is None:
        raise LabError(
            f"resume: {checkpoint.path or 'this checkpoint'} has no training state; only a run "
            "saved as resumable (--resumable) can be continued"
        )
    saved = checkpoint.metrics.get("train_config", {})
    for key, value in dataclasses.asdict(config).items():
        if key not in RESUME_MAY_CHANGE and key in saved and saved[key] != value:
            raise LabError(
                f"resume: {key} is {value!r} but the run being resumed used {saved[key]!r}; "
                "a resumed run keeps its settings (only budgets and the device may change)"
            )
    # epochs need the task's size: an epoch budget already spent ends the resumed run at once instead
    if _progress(config, state.step, state.elapsed, 0.0) >= 1.0:
        raise LabError(
            f"resume: the run already spent its budget ({count(state.step, 'step')}, {state.elapsed:.0f}s); "
            "give a larger budget to continue it"
        )
    return state


def _named_optimizer_state(optimizer, names):
    """AdamW's state_dict keyed by parameter names instead of positions: (per parameter, settings)."""
    saved = optimizer.state_dict()
    (group,) = saved["param_groups"]
    hyperparameters = {k: list(v) if isinstance(v, tuple) else v for k, v in group.items() if k != "params"}
    return {names[i]: dict(tensors) for i, tensors in saved["state"].items()}, hyperparameters


def _load_named_optimizer_state(optimizer, names, per_parameter, hyperparameters):
    """The inverse of _named_optimizer_state, into an AdamW built over the same parameters."""
    saved = optimizer.state_dict()
    (group,) = saved["param_groups"]
    group.update({k: tuple(v) if isinstance(group[k], tuple) else v for k, v in hyperparameters.items() if k in group})
    position = {name: i for i, name in enumerate(names)}
    saved["state"] = {position[name]: dict(tensors) for name, tensors in per_parameter.items()}
    optimizer.load_state_dict(saved)


@dataclass
class TrainResult:
    reason: str  # why training ended
    steps: int  # optimizer steps taken in all, counting those before a resume
    elapsed: float
    history: list  # the eval events
    last_train_loss: float = math.nan
    training_state: Optional[TrainingState] = None  # to continue the run (train(..., resume=...))


_ENDINGS = ("", "finished", "time budget", "stopped")  # why a run ends (or "" not yet), as rank 0 broadcasts it


def train(model, task, config, emit=None, should_stop=None, resume=None):
    """Train `model` on `task` until a budget is spent, `should_stop()` is true, or the loss,
    the gradients or the weights stop being finite: then the run stops with the weights of
    the last step that left them finite (a copy is kept before every step for this).

    `resume`, a TrainingState (from a previous result or a checkpoint, resume_training_state),
    continues that run: with the same config, weights and data, the steps taken after it are
    those the run would have taken had it never stopped.

    In a torch.distributed process group (torchrun, lab.training.distributed) the ranks train one
    model data-parallel: each takes its slice of every global batch of config.batch_size
    windows, and the schedule, the budgets and should_stop follow rank 0, which alone emits
    events and evaluates.

    Raises lab.nets.cost.CostError (a ValueError) before allocating anything when one step would
    need more memory than this server allows (RNNLAB_MAX_TRAIN_MEMORY_MB)."""
    rank, world = distributed.rank_and_world()
    _check_before_allocating(model, task, config, world)
    emit = emit if emit is not None and rank == 0 else (lambda event: None)
    should_stop = should_stop or (lambda: False)
    device = resolve_device(config.device)
    amp = resolve_amp(config.amp, device, getattr(model.config, "backend", None), getattr(model.config, "cell", None))
    # dropout masks from the run's own generator, never the process's (lab.nets.randomness): rank 0's are a
    # single process's, and runs sharing a process draw nothing from each other's
    masks = torch.Generator(device=device).manual_seed(config.seed + rank)
    batches = Batches(task, config, device, rank, world)
    model.to(device).train()
    net = distributed.wrap(model, device)  # DistributedDataParallel under torchrun: it averages the gradients
    if config.compile:
        net = torch.compile(net)
    updates = Updates(model, config, amp)
    history, step, loss_value, elapsed, optimizer_start = [], 0, math.nan, 0.0, 0
    if resume is not None:
        history, step, loss_value, elapsed = _restore(resume, config, updates, batches, masks, rank)
        optimizer_start = resume.optimizer_start
    start = time.perf_counter() - elapsed
    state = None  # the hidden state carried from batch to batch (stateful runs)

    def evaluate():
        model.eval()
        metrics = task.evaluate(model, config, device)
        model.train()
        event = {
            "type": "eval",
            "step": step,
            "epoch": batches.epoch(step),
            "elapsed": time.perf_counter() - start,
            "train_loss": loss_value,
            **metrics,
        }
        history.append(event)
        emit(event)

    while True:
        progress, reason = _ending(config, step, time.perf_counter() - start, batches, should_stop)
        if reason:
            break
        lr = scheduled_lr(config, progress, step, optimizer_start)
        x, y, restart, tokens = next(batches)
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None), drawing_from(masks):
            _, loss, new_state = net(x, y, None if restart else state, label_smoothing=config.label_smoothing)
        global_loss, grad_norm, failure = updates.step(loss, lr, step)
        if failure:
            reason = f"{failure}; stopped and kept the weights from step {step}"
            break
        state = detach_state(new_state) if config.stateful else None
        step, loss_value, elapsed = step + 1, global_loss, time.perf_counter() - start
        emit(_step_event(config, batches, step, elapsed, loss_value, lr, grad_norm, tokens))
        if rank == 0 and _eval_due(config, step, elapsed, history):
            evaluate()
    if step and (not history or history[-1]["step"] != step) and not reason.startswith("non-finite") and rank == 0:
        evaluate()
    elapsed = time.perf_counter() - start
    emit({"type": "done", "reason": reason, "step": step, "elapsed": elapsed})
    model.eval()
    training_state = TrainingState(
        step,
        elapsed,
        loss_value,
        *_named_optimizer_state(updates.optimizer, updates.names),
        rng=_generator_states(masks, batches, config, rank),
        history=list(history),
        optimizer_start=optimizer_start,
    )
    return TrainResult(reason, step, elapsed, history, loss_value, training_state)


def _check_before_allocating(model, task, config, world):
    """Refuse a batch the ranks cannot share evenly, a text shorter than a window, or a step over the memory
    limit (lab.nets.cost.CostError), before anything is allocated."""
    if config.batch_size % world:
        raise LabError(
            f"batch_size: {config.batch_size} windows cannot be split evenly over {world} ranks; "
            f"give a multiple of {world}"
        )
    task.check(config)
    check_training_memory(model.config, config.batch_size // world, task.sequence_length(config))


class Batches:
    """A run's training batches, built once with their geometry: the task's batches of config.batch_size
    items, drawn by the run's generator (the same global batch on every rank), and this rank's share of each
    on the run's device.

        batches = Batches(task, config, device, rank, world)
        x, y, restart, tokens = next(batches)   # this rank's (B / W, T) share; the global batch's tokens
    """

    def __init__(self, task, config, device, rank=0, world=1):
        self.generator = torch.Generator().manual_seed(config.seed)  # its state is saved for a resumed run
        self.per_epoch = task.items_per_epoch(config)  # steps in an epoch
        self._global = task.batches(config, self.generator)  # draws nothing until the first batch is asked for
        self._tokens = task.tokens
        self._shard = slice(rank * config.batch_size // world, (rank + 1) * config.batch_size // world)
        self._device = device

    def epoch(self, step):
        return step / self.per_epoch

    def __next__(self):
        """-> x, y: this rank's share of the next global batch, on the device; whether a carried state must
        be reset first; the global batch's tokens."""
        x, y, restart = next(self._global)
        return self._to_device(x[self._shard]), self._to_device(y[self._shard]), restart, self._tokens(x)

    def _to_device(self, batch):
        """On CUDA through pinned memory, so that the copy overlaps the GPU's work (non_blocking)."""
        if self._device.type == "cuda":
            return batch.pin_memory().to(self._device, non_blocking=True)
        return batch.to(self._device)


class Updates:
    """A run's weight updates: AdamW on the model's parameters, and the guards of a step. A non-finite loss
    (on any rank) or gradient stops the run before the step; weights a step makes non-finite are put back as
    they were before it (a copy is kept before every step)."""

    def __init__(self, model, config, amp):
        self.names, self.params = zip(*model.named_parameters())
        self.last_good = [p.detach().clone() for p in self.params]  # the weights before the step being taken
        self.optimizer = torch.optim.AdamW(self.params, lr=config.lr, weight_decay=config.weight_decay)
        # float16's gradient scaler skips the steps whose gradients overflow
        self.scaler = torch.amp.GradScaler("cuda") if amp == torch.float16 else None
        self.grad_clip = config.grad_clip

    def step(self, loss, lr, taken):
        """Step `taken` + 1, at learning rate `lr`, on this rank's `loss` -> (the ranks' mean loss, the
        gradients' norm before clipping, "" or why the step was refused or undone)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        global_loss = distributed.mean(loss.detach())  # every rank sees every rank's non-finite loss
        if not torch.isfinite(global_loss):
            return math.nan, math.nan, f"non-finite loss ({global_loss.item()}) at step {taken + 1}"
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)  # clip the true gradients
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip).item()
        if not math.isfinite(grad_norm) and self.scaler is None:  # with a scaler, an overflow only skips the step
            return math.nan, grad_norm, f"non-finite gradient at step {taken + 1}"
        if self.scaler is None:
            self.optimizer.step()
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return global_loss.item(), grad_norm, self._keep_finite_weights(taken)

    @torch.no_grad()
    def _keep_finite_weights(self, taken):
        """ "" and a copy of the weights, or why they are put back as they were before the step."""
        if not torch.isfinite(torch.stack([p.abs().amax() for p in self.params])).all():
            for p, good in zip(self.params, self.last_good):
                p.copy_(good)
            return f"non-finite weights after step {taken + 1} (diverged)"
        for p, good in zip(self.params, self.last_good):
            good.copy_(p)
        return ""


def _generator_states(masks, batches, config, rank):
    """A run's generators as a TrainingState keeps them: "torch" every rank's dropout masks' (W, S) on a CPU,
    "cuda" theirs on a GPU (with "torch" then the CPU state their seed gives, which the file format names), "data"
    the batch sampler's."""
    states = {"data": batches.generator.get_state()}
    if masks.device.type == "cuda":
        states["cuda"] = distributed.stack(masks.get_state())
        states["torch"] = distributed.stack(torch.Generator().manual_seed(config.seed + rank).get_state())
    else:
        states["torch"] = distributed.stack(masks.get_state())  # (W, S): every rank's
    return states


def _restore(resume, config, updates, batches, masks, rank):
    """Put back a resumed run's optimizer moments and random generators -> its history, step, loss, elapsed."""
    if config.stateful:
        raise LabError("resume: a stateful run cannot be resumed (its carried state is not saved)")
    _load_named_optimizer_state(updates.optimizer, updates.names, resume.optimizer, resume.hyperparameters)
    saved = resume.rng.get("cuda" if masks.device.type == "cuda" else "torch", ())
    # a rank the saved run did not have, or a run saved on another kind of device, keeps its fresh seed
    if rank < len(saved) and saved[rank].numel() == masks.get_state().numel():
        masks.set_state(saved[rank])
    batches.generator.set_state(resume.rng["data"])
    return list(resume.history), resume.step, resume.train_loss, resume.elapsed


def _ending(config, step, elapsed, batches, should_stop):
    """-> (progress in its budgets, why the run ends now or ""), as rank 0 sees them: all ranks stop together."""
    progress = _progress(config, step, elapsed, batches.epoch(step))
    if progress >= 1.0:
        ending = "finished" if not config.max_seconds or elapsed < config.max_seconds else "time budget"
    else:
        ending = "stopped" if should_stop() else ""
    progress, ending = distributed.from_rank0([progress, _ENDINGS.index(ending)])
    return progress, _ENDINGS[int(ending)]


def _step_event(config, batches, step, elapsed, train_loss, lr, grad_norm, tokens):
    progress = _progress(config, step, elapsed, batches.epoch(step))
    return {
        "type": "step",
        "step": step,
        "epoch": batches.epoch(step),
        "train_loss": train_loss,
        "lr": lr,
        "grad_norm": grad_norm,
        "tokens_per_s": tokens * step / elapsed,
        "elapsed": elapsed,
        "progress": min(progress, 1.0),
        "eta": elapsed / progress * (1 - progress) if progress > 0 else math.nan,
    }


def _eval_due(config, step, elapsed, history):
    """Every eval_interval steps, and eval_seconds after the last validation point when that comes first."""
    since_last = elapsed - (history[-1]["elapsed"] if history else 0.0)
    return step % config.eval_interval == 0 or (config.eval_seconds is not None and since_last >= config.eval_seconds)
