"""Train the bundled language models in checkpoints/ to quality, on the bundled corpus's 31 training plays
(validation: its 4 held-out plays).

    python scripts/build_checkpoints.py [--minutes 60] [--only char-lstm char-gru-torch] [--device cuda]

Each model in RECIPES trains with the engine the app and `python -m lab train` use
until its validation loss stops improving (early stopping: `--patience` evaluations
without a new best) or its budget of training minutes is spent, and the weights of
its best evaluation are bundled, in float16 (they load as float32; a test checks
that the loss moves by < 0.005 nats/char), as checkpoints/<name>_latest.safetensors.

A build is resumable per model. Every few minutes it writes build/<name>/progress
(the weights, AdamW's moments, the step and the random generators) and
build/<name>/best (the best weights so far); the same command run again continues
each unfinished model where it stopped, and only exports a finished one; run with a larger
--patience, a model that stopped early continues to its budget. The
recipes come from the sweep in benchmarks/bundle_sweep.py (BENCHMARKS-HISTORY.md).
"""

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.nets.backends import default_backend, default_scan_mode  # noqa: E402
from lab.nets.models import build_model, count_parameters, for_device  # noqa: E402
from lab.training.checkpoints import SUFFIX, atomic_write_bytes, checkpoint_bytes, load_checkpoint  # noqa: E402
from lab.training.presets import get_preset  # noqa: E402
from lab.training.process import configure_cpu  # noqa: E402
from lab.training.tasks import TASKS  # noqa: E402
from lab.training.train import (  # noqa: E402
    AMP_MODES,
    DEVICES,
    TrainingState,
    resolve_device,
    resume_training_state,
    run_metrics,
    train,
)

# a build's own progress file (weights and AdamW's two moments in float32): the Leviathan-LSTM's is 278 MB,
# over the limit the app opens
PROGRESS_MAX_BYTES = 1 << 30

# name: (preset it starts from, model overrides, train overrides). The character models share
# astra-alpha's recipe (AdamW, weight decay 0.1, cosine lr), trained on a GPU in batches of 64 windows of
# 128 characters. Sizes keep checkpoints/ under 40 MB in float16; the gated cells are two layers deep with
# DropConnect on their hidden-to-hidden weights (AWD-LSTM), against over-fitting the 31 plays
GPU_BATCH = {"batch_size": 64, "block_size": 128}
GATED = dict(embed_dim=64, num_layers=2, dropout=0.25, weight_dropout=0.25)
RECIPES = {
    "char-rnn": (
        "astra-alpha",
        {"cell": "rnn", "embed_dim": 64, "hidden_size": 1024, "num_layers": 1, "dropout": 0.2},
        {"lr": 2e-3, **GPU_BATCH},
    ),
    "char-gru-seed": ("astra-alpha", {**GATED, "cell": "gru_seed", "hidden_size": 512}, GPU_BATCH),
    "char-gru-torch": ("astra-alpha", {**GATED, "cell": "gru_torch", "hidden_size": 512}, GPU_BATCH),
    "char-lstm": ("astra-alpha", {**GATED, "cell": "lstm", "hidden_size": 640}, GPU_BATCH),
    "char-scan": (
        "astra-alpha",
        {"cell": "scan", "embed_dim": 64, "hidden_size": 256, "num_layers": 4, "norm": "every", "dropout": 0.2},
        {"lr": 2e-3, **GPU_BATCH},
    ),
    # the minGRU (issue 40's proof of the cell record): three layers, LayerNorm after each as the scan has (a
    # linear recurrence with no tanh keeps its scale only so), under 5 MB in float16; no DropConnect, as it has no U
    "char-min-gru": (
        "astra-alpha",
        {"cell": "min_gru", "embed_dim": 64, "hidden_size": 640, "num_layers": 3, "norm": "every", "dropout": 0.2},
        {"lr": 2e-3, **GPU_BATCH},
    ),
    # seed 004's recipe as the seed trains it: 10 epochs of mixed 2-5-gram samples (an epoch budget, so
    # --minutes does not apply); its contexts are cheap to score, so validation uses more of them, less often
    "scan-markov": ("scan-markov", {}, {"max_epochs": 10, "eval_interval": 2000, "eval_windows": 2048}),
    # seed 000's architecture and dropout, with DropConnect and embedding dropout against its over-fitting
    "scribe-alpha": ("scribe-alpha", {"weight_dropout": 0.3, "embed_dropout": 0.1}, {"batch_size": 64}),
    # seed 000's recipes for the two larger Scribes as the seed gives them (AdamW, weight decay 0.01, cosine over
    # 15 and 20 epochs of the training plays), with alpha's regularisers added against over-fitting the 31 plays.
    # The bundled files had a lent GPU's minutes (--cap-minutes 7.5), gamma 3 more from its file (--init,
    # --batch-size 256): BENCHMARKS.md, "The seeds at their own scale"
    "scribe-beta": ("scribe-beta", {"weight_dropout": 0.3, "embed_dropout": 0.1}, {"batch_size": 64, "max_epochs": 15}),
    "scribe-gamma": (
        "scribe-gamma",
        {"weight_dropout": 0.3, "embed_dropout": 0.1},
        {"batch_size": 64, "max_epochs": 20},
    ),
    # seed 002's recipe exactly as written: 6 epochs of 200 batches of 64 x 128 characters, AdamW 1e-3, weight
    # decay 0.01, dropout 0.2, cosine over the 1,200 steps; evaluated once per seed epoch. Built to compare with the
    # seed's 1.498 (--out elsewhere: the bundled Leviathan is the one trained on to quality below)
    "leviathan-lstm-seed-recipe": ("leviathan-lstm", {}, {"max_steps": 1200, "eval_interval": 200}),
    # the same model trained on to quality: DropConnect and embedding dropout as the bundled 2x640 LSTM uses
    "leviathan-lstm": (
        "leviathan-lstm",
        {"dropout": 0.25, "weight_dropout": 0.25, "embed_dropout": 0.1},
        {"lr": 1e-3, "weight_decay": 0.1},
    ),
}
# recipes with no file in checkpoints/: the seed recipe's run is a comparison, never bundled
NOT_BUNDLED = {"leviathan-lstm-seed-recipe"}
# the model's regularisers the command line may set over a recipe's (a lent GPU's Leviathan runs, issue 52)
REGULARISERS = ("dropout", "weight_dropout", "embed_dropout")
EVAL_INTERVAL, EVAL_WINDOWS = 250, 512


@dataclasses.dataclass
class Plateau:
    """Early stopping: the best validation loss so far and how many evaluations since it."""

    patience: int
    best: float = math.inf
    best_step: int = 0
    since_best: int = 0

    def update(self, value, step, counted=True):
        """True when `value` is a new best; one more evaluation without one, unless not `counted` (those of a
        fresh optimizer's warm-up, which lifts the loss for a while: a continuation is not on a plateau then)."""
        if value < self.best:
            self.best, self.best_step, self.since_best = value, step, 0
            return True
        self.since_best += counted
        return False

    @property
    def reached(self):
        return self.since_best >= self.patience


def _cpu_state(state):
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def train_until_plateau(
    name,
    model_config,
    train_config,
    task,
    work,
    patience=12,
    chunk_seconds=300,
    log=print,
    init=None,
    continue_at=0,
    stretch_seconds=None,
    continued=None,
):
    """Train with early stopping, resumable from `work` (a folder): -> (model with the best weights,
    metrics of the run). Rerun with the same arguments after an interruption to continue. A new run starts
    from the weights of the checkpoint `init` where one is given, with a fresh optimizer (warmed up over
    train_config.warmup_steps) at step `continue_at` of its schedule. `stretch_seconds`: this call trains at
    most so long (its schedule unchanged), then returns its best weights so far, to be continued later; the
    weights it reached go to `continued` (a path) in float16 (write_continuation)."""
    work.mkdir(parents=True, exist_ok=True)
    progress_path, best_path = work / f"progress{SUFFIX}", work / f"best{SUFFIX}"
    plateau, state, done = Plateau(patience), None, False
    if progress_path.is_file():
        saved = load_checkpoint(progress_path, device="cpu", max_bytes=PROGRESS_MAX_BYTES)
        model, metrics = saved.model, saved.metrics
        saved_plateau = saved.metrics["plateau"]
        best = math.inf if saved_plateau["best"] is None else saved_plateau["best"]
        plateau = Plateau(patience, **{**saved_plateau, "best": best})
        # a build that stopped early continues when rerun with a larger --patience
        done = metrics.get("done", False) and (metrics["reason"] != "early stopping" or plateau.reached)
        if not done:
            state = resume_training_state(saved, train_config)
        log(
            f"{name}: continuing from step {saved.training_state.step} (best {plateau.best:.4f} at step "
            f"{plateau.best_step})"
        )
    else:
        model = build_model(model_config, seed=train_config.seed)
        if init:
            model.load_state_dict(load_checkpoint(init, device="cpu").model.state_dict())
            state = TrainingState.from_weights_at(continue_at, train_config.seed) if continue_at else None
            log(f"{name}: starting from the weights of {init} at step {continue_at:,} of its schedule")
    best_weights = load_checkpoint(best_path, device="cpu").model.state_dict() if best_path.is_file() else None

    def on_event(event):
        nonlocal best_weights, chunk_steps
        chunk_steps += event["type"] == "step"
        warming = state is not None and event["step"] <= state.optimizer_start + train_config.warmup_steps
        if event["type"] == "eval" and plateau.update(event["val_nats_per_char"], event["step"], not warming):
            best_weights = _cpu_state(model.state_dict())
            atomic_write_bytes(best_path, checkpoint_bytes(model, task.tokenizer, {"history": [event]}, name))
        if event["type"] == "eval":
            log(
                f"{name}: step {event['step']:,} train {event['train_loss']:.3f} val {event['val_nats_per_char']:.4f}"
                f" nats/char (best {plateau.best:.4f}) {event['elapsed'] / 60:.1f} min"
            )

    stretch_end = time.monotonic() + (stretch_seconds or math.inf)
    while not done:
        chunk_end, chunk_steps = min(time.monotonic() + chunk_seconds, stretch_end), 0
        result = train(
            model,
            task,
            train_config,
            on_event,
            lambda: plateau.reached or chunk_steps and time.monotonic() > chunk_end,
            state,
        )
        state = result.training_state
        done = result.reason != "stopped" or plateau.reached
        reason = "early stopping" if plateau.reached else result.reason
        if not done and time.monotonic() >= stretch_end:
            reason = "stretch ended"
        metrics = run_metrics(result, train_config, reason=reason, done=done, plateau=dataclasses.asdict(plateau))
        del metrics["plateau"]["patience"]
        if metrics["plateau"]["best"] == math.inf:  # no evaluation yet: a header's numbers are finite
            metrics["plateau"]["best"] = None
        atomic_write_bytes(progress_path, checkpoint_bytes(model, task.tokenizer, metrics, name, 0, None, state))
        if reason == "stretch ended":
            if continued:
                write_continuation(model, task.tokenizer, metrics, name, continued)
            break
    if best_weights is None:  # no evaluation yet: a stretch too short to reach one
        raise SystemExit(f"{name}: the stretch ended before its first evaluation; give it more minutes")
    model.load_state_dict(best_weights)
    return model.eval(), metrics


def write_continuation(model, tokenizer, metrics, name, path):
    """The weights a stretch reached, in float16, its metrics naming the step of the schedule they reached
    (`steps`): small enough to commit (a progress file, with the optimizer's moments in float32, is six times as
    large), so that the next stretch continues on any machine, with --init PATH --continue-at STEPS."""
    half = build_model(model.config).to(torch.float16)
    half.load_state_dict(model.state_dict())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, checkpoint_bytes(half, tokenizer, metrics, name))


def evaluate(model, task, train_config, device=torch.device("cpu")):
    """The validation figures a bundled model reports: the build's random windows, and the split
    read in order with the state carried (character and subword models)."""
    model.to(device)
    figures = task.evaluate(model, train_config, device)
    if hasattr(task, "evaluate_in_order"):
        figures.update(task.evaluate_in_order(model, device))
    return figures


def export_float16(model, task, train_config, metrics, name, extra, path, device=torch.device("cpu")):
    """Write `model` to `path` in float16 (half the bytes; it loads as float32), computed the fastest
    way on a CPU (lab.nets.models.for_device), with its validation figures measured on what the file holds,
    beside the float32 weights' for comparison."""
    float32 = evaluate(model, task, train_config, device)
    model = for_device(model.cpu().float(), "cpu")
    half = build_model(model.config).to(torch.float16)
    half.load_state_dict(model.state_dict())
    model.load_state_dict(half.state_dict())  # the float32 model now holds exactly the file's values
    metrics = {
        **metrics,
        **evaluate(model, task, train_config, device),
        "weights": "float16",
        "float32_val_nats_per_char": float32["val_nats_per_char"],
    }
    atomic_write_bytes(path, checkpoint_bytes(half, task.tokenizer, metrics, name, 0, extra))
    return metrics


def recipe_train_config(name, options, device):
    """The recipe `name`'s training settings with the command line's `options` over them: its budget and caps,
    batch size, peak learning rate and mixed precision."""
    preset_name, _, train_overrides = RECIPES[name]
    preset = get_preset(preset_name)
    # a recipe's own epochs or steps are its budget (--minutes does not apply); --steps caps any budget, and
    # --cap-minutes caps any budget in time (a lent GPU's lease), the cosine annealing over whichever ends first
    cap_seconds = options.cap_minutes * 60 if options.cap_minutes else None
    if options.steps or {"max_epochs", "max_steps"} & train_overrides.keys():
        budget = {"max_steps": options.steps or train_overrides.get("max_steps"), "max_seconds": cap_seconds}
    else:
        budget = {"max_steps": None, "max_seconds": min(options.minutes * 60, cap_seconds or math.inf)}
    return preset.train_config(
        **{
            "eval_interval": EVAL_INTERVAL,
            "eval_windows": EVAL_WINDOWS,
            **train_overrides,
            **({"batch_size": options.batch_size} if options.batch_size else {}),
            **({"lr": options.lr} if options.lr else {}),
            **({"amp": options.amp} if options.amp else {}),
            **({"warmup_steps": options.warmup} if options.warmup else {}),
            **budget,
            "device": device.type,
        }
    )


def recipe_model_config(name, options, vocab_size, device):
    """The recipe `name`'s model with the command line's regularisers over its own (an experiment: a file built so
    records them in its config, and is bundled only once RECIPES says the same), at `vocab_size`, in the fastest
    of the equal implementations on `device`."""
    preset_name, model_overrides, _ = RECIPES[name]
    regularisers = {key: getattr(options, key) for key in REGULARISERS if getattr(options, key) is not None}
    config = dataclasses.replace(
        get_preset(preset_name).model, vocab_size=vocab_size, **{**model_overrides, **regularisers}
    )
    if hasattr(config, "backend"):
        config = dataclasses.replace(
            config, backend=default_backend(config.cell, device), scan_mode=default_scan_mode(device)
        )
    return config


def build(name, options, device):
    """Train and export the recipe `name` on `device`, with the command line's `options` (its budget and caps,
    folders, patience, batch size, learning rate, regularisers and starting weights) -> its row of the table
    main() prints."""
    preset_name, _, _ = RECIPES[name]
    preset = get_preset(preset_name)
    task = TASKS[preset.task].from_corpus("bundled", preset.tokenizer, **preset.tokenizer_options)
    config = recipe_model_config(name, options, task.vocab_size, device)
    train_config = recipe_train_config(name, options, device)
    model, metrics = train_until_plateau(
        name,
        config,
        train_config,
        task,
        Path(options.work) / name,
        options.patience,
        chunk_seconds=options.save_minutes * 60,
        init=options.init,
        continue_at=options.continue_at,
        stretch_seconds=options.stretch_minutes * 60 if options.stretch_minutes else None,
        continued=Path(options.continued) / f"{name}{SUFFIX}",
    )
    plateau = metrics.pop("plateau")
    metrics.pop("done")
    metrics = export_float16(
        model,
        task,
        train_config,
        {**metrics, "corpus": "bundled", "best_step": plateau["best_step"]},
        name,
        {"preset": preset_name, "bundled": True},
        Path(options.out) / f"{name}_latest{SUFFIX}",
        device,
    )
    return (
        f"| {name} | {config.cell} | {count_parameters(model):,} | {task.tokenizer.kind} | "
        f"{metrics['best_step']:,} of {metrics['steps']:,} | {metrics['elapsed'] / 60:.0f} | {metrics['reason']} | "
        f"{metrics['val_nats_per_char']:.3f} | {metrics.get('val_nats_per_char_in_order', math.nan):.3f} |"
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60, help="training budget per model (the cosine schedule's)")
    parser.add_argument(
        "--steps",
        type=int,
        help="a budget of optimizer steps instead of minutes (the same run whatever else shares the cores)",
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=12,
        help=f"evaluations (every {EVAL_INTERVAL} steps) without a new best before stopping",
    )
    parser.add_argument("--device", default="auto", choices=DEVICES, help="where to train (auto: CUDA when present)")
    parser.add_argument("--only", nargs="*", choices=sorted(RECIPES), help="build only these")
    parser.add_argument("--work", default=str(ROOT / "build"), help="where unfinished builds keep their progress")
    parser.add_argument("--out", default=str(ROOT / "checkpoints"))
    parser.add_argument(
        "--cap-minutes",
        type=float,
        help="a time cap on any recipe's budget, epochs and steps too (a lent GPU's lease): the cosine anneals "
        "over whichever ends first",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="windows per step instead of the recipe's (on a GPU, more windows cost about the same step time)",
    )
    parser.add_argument(
        "--amp",
        choices=AMP_MODES,
        help="mixed precision instead of the recipe's (auto): bf16 trains Scribe's GRU faster on a CPU with "
        "bfloat16 instructions (BENCHMARKS.md)",
    )
    parser.add_argument(
        "--init",
        help="start a new build from this checkpoint's weights: a build continued on a later GPU lease, when its "
        "progress file (the optimizer's moments too) was too large to bring back",
    )
    parser.add_argument(
        "--lr",
        type=float,
        help="a peak learning rate instead of the recipe's (a build continued from --init warms its fresh optimizer "
        "up with --warmup rather than lowering the peak)",
    )
    parser.add_argument(
        "--continue-at",
        type=int,
        default=0,
        help="with --init: the step of the recipe's schedule its weights reached; the cosine resumes there",
    )
    parser.add_argument(
        "--warmup", type=int, help="steps of linear warm-up for the fresh optimizer of a build continued from --init"
    )
    parser.add_argument(
        "--stretch-minutes",
        type=float,
        help="train this long, then export the best weights so far with the step reached (the schedule unchanged: "
        "a later stretch continues it with --init and --continue-at)",
    )
    parser.add_argument(
        "--continued",
        default=str(ROOT / "continued"),
        help="where a stretch writes the weights it reached, in float16 with their step, to be committed",
    )
    for regulariser in REGULARISERS:
        parser.add_argument(
            f"--{regulariser.replace('_', '-')}",
            type=float,
            help=f"{regulariser.replace('_', ' ')} instead of the recipe's: an experiment against over-fitting",
        )
    parser.add_argument(
        "--save-minutes", type=float, default=5, help="how often an unfinished build writes its progress"
    )
    return parser.parse_args(argv)


def main():
    args = parse_args()
    configure_cpu(2)
    device = resolve_device(args.device)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    print(
        "| checkpoint | cell | params | tokenizer | best step of steps | minutes | ended by | "
        "val nats/char (the build's validation sample) | val nats/char (split in order) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.only or RECIPES:
        print(build(name, args, device), flush=True)


if __name__ == "__main__":
    main()
