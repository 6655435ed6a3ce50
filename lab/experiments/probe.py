"""Memory probes: toy tasks that need memory and little else, small enough to train in seconds.

Glossary: B batch, k distance, T time (k + 1 steps), V tokens, H hidden units.

Every task is a sequence that ends in a question mark. The answer is due at the "?" and
depends on a token read k steps before it (the `distance`), with other tokens in between:

    recall    C A H B E ?            -> C      the first symbol, behind k - 1 distractors
    brackets  ( · ( · ) · · ?        -> 1      brackets still open (· is a distractor)
    adding    [4] 1 7 [2] 9 ?        -> 6      the sum of the two marked digits
    parity    1 0 1 1 0 ?            -> odd    whether the bits hold an odd number of 1s

The first token always counts (the symbol to recall, a slot that may open a bracket, the
first marked digit, the first bit), so a model that cannot carry something across k steps
is left to guess. Accuracy is scored only at the "?" and compared with chance: always
giving the commonest answer.

The same runs serve a lesson's live run and the shipped table (scripts/build_probe_results.py):
* one model per (task, cell, distance), trained from scratch by lab.training.train.train (so
  TrainingJob runs it from a page), on fresh batches every step;
* the model is a lab RecurrentLM (embedding -> cell -> LayerNorm -> linear) whose one table
  holds the task's tokens and its answers; its loss skips every step but the "?";
* every cell gets the hidden size whose parameter count is closest to `param_budget`, so
  cells are compared at equal size (the counts are in the results);
* a run stops early once it answers `solved` of a fixed set of fresh sequences right, so
  the step budget goes to the distances that are hard; and a cell left at chance at
  `give_up_after` distances in a row is not trained at the longer ones (their rows say
  so), where it could only do as badly, so the budget goes to the cells still learning.

An earlier version scored recall at every step ("the symbol k steps back" for all t at
once). That asks the state to shift a window of the last k symbols along every step, a
delay line in which every unit is overwritten at every step: what a vanilla RNN does by
construction, and what gated cells, initialised to keep (bias +1), must first unlearn. It
measured that head start, not how long one memory survives (BENCHMARKS.md, "Toy tasks").
"""

import functools
import time
from dataclasses import dataclass
from typing import Annotated, Callable, Optional

import pandas as pd
import torch
import torch.nn.functional as F
from pydantic import Field

from lab.errors import LabError
from lab.nets.backends import default_backend, default_scan_mode
from lab.nets.cells import CELLS
from lab.nets.cost import parameter_count, training_memory_bytes
from lab.nets.models import LMConfig, build_model, count_parameters
from lab.schema import Device, PositiveInt, PositiveNumber, Seed, config
from lab.server.jobs import BackgroundJob
from lab.server.ray_runs import RAY_ADDRESS
from lab.training.train import TrainConfig, resolve_device, train

IGNORE = -100  # F.cross_entropy's default ignore_index: the steps with no answer due
MAX_HIDDEN = 1024  # upper end of the hidden-size search
MAX_DISTANCE = 1000
SEQUENCES_PER_EPOCH = 10_000  # the data is generated afresh every step: "an epoch" only paces the progress display
AT_CHANCE = 0.05  # an accuracy less than this above chance counts as "at chance" (give_up_after)
CHANCE_SEQUENCES = 20_000  # enough that the commonest answer's share is within ~0.5% of its probability


# ---------------------------------------------------------------------------
# the tasks: each makes a batch of sequences (B, k + 1), the "?" last, and their answers (B,)


def _query(x, query_id):
    x[:, -1] = query_id
    return x


RECALL_SYMBOLS = "ABCDEFGH"


def make_recall(batch, distance, generator):
    """A random symbol, then distance - 1 random symbols as distractors, then "?": answer the first."""
    S = len(RECALL_SYMBOLS)
    x = torch.randint(S, (batch, distance + 1), generator=generator)  # (B, T)
    return _query(x, S), x[:, 0].clone()


BRACKET_SLOTS = 4  # places that may hold a bracket: the first token and 3 more at random
OPEN, CLOSE, DISTRACTOR = 0, 1, 2


def make_brackets(batch, distance, generator):
    """Distractors with up to BRACKET_SLOTS brackets, the first token always a slot: answer the
    depth at the "?" (brackets opened and not closed). Each slot stays a distractor with
    probability 1/3, else holds a bracket, opening or closing with equal odds (opening at depth 0)."""
    x = torch.full((batch, distance + 1), DISTRACTOR)  # (B, T)
    later = min(BRACKET_SLOTS - 1, distance - 1)
    picks = torch.rand(batch, distance - 1, generator=generator).argsort(1)[:, :later] + 1  # (B, later)
    slots = torch.cat([torch.zeros(batch, 1, dtype=torch.long), picks.sort(1).values], 1)  # in reading order
    depth, rows = torch.zeros(batch, dtype=torch.long), torch.arange(batch)
    for slot in slots.unbind(1):
        draw = torch.rand(batch, generator=generator)
        bracket = draw < 2 / 3
        opens = (draw < 1 / 3) | (depth == 0)
        x[rows[bracket], slot[bracket]] = torch.where(opens, OPEN, CLOSE)[bracket]
        depth += torch.where(bracket, torch.where(opens, 1, -1), 0)
    return _query(x, 3), depth


def make_adding(batch, distance, generator):
    """Random digits, the first and one later digit marked (ids 10-19), then "?": answer the
    sum of the two marked digits (Hochreiter & Schmidhuber's adding problem, in digits)."""
    digits = torch.randint(10, (batch, distance + 1), generator=generator)  # (B, T)
    second = torch.randint(1, distance, (batch,), generator=generator)  # the other mark, after the first
    rows = torch.arange(batch)
    answer = digits[:, 0] + digits[rows, second]
    x = digits.clone()
    x[:, 0] += 10
    x[rows, second] += 10
    return _query(x, 20), answer


def make_parity(batch, distance, generator):
    """distance random bits, then "?": answer whether they hold an odd number of 1s."""
    x = torch.randint(2, (batch, distance + 1), generator=generator)  # (B, T)
    answer = x[:, :-1].sum(1) % 2
    return _query(x, 2), answer


@dataclass(frozen=True)
class ToyTask:
    title: str  # as a student reads it
    question: str  # what the model must answer at the "?"
    tokens: tuple  # display text of every input token, "?" last
    answers: tuple  # display text of every answer (the model's classes)
    make: Callable  # (batch, distance, torch.Generator) -> x (B, distance + 1) token ids, answers (B,)
    min_distance: int = 1

    @property
    def vocab_size(self):
        """One table for the tokens read and the answers given (the model is a language model)."""
        return max(len(self.tokens), len(self.answers))

    def show(self, token_ids):
        """A sequence (T,) as text, e.g. "( · ( · ) ?"."""
        return " ".join(self.tokens[i] for i in token_ids)

    def example(self, distance, seed=0, longest=24):
        """One sequence and its answer as text, "( · ( · ) ? → 1"; a long one shortened in the middle."""
        x, answer = self.make(1, distance, torch.Generator().manual_seed(seed))
        ids = x[0].tolist()
        shown = self.show(ids) if len(ids) <= longest else f"{self.show(ids[: longest - 8])} … {self.show(ids[-6:])}"
        return f"{shown} → {self.answers[answer.item()]}"


TOY_TASKS = {
    "recall": ToyTask(
        "Recall the first symbol",
        "which symbol came first, before all the distractors?",
        tuple(RECALL_SYMBOLS) + ("?",),
        tuple(RECALL_SYMBOLS),
        make_recall,
    ),
    "brackets": ToyTask(
        "Count the open brackets",
        "how many brackets are open (opened and not yet closed)?",
        ("(", ")", "·", "?"),
        tuple(str(d) for d in range(BRACKET_SLOTS + 1)),
        make_brackets,
    ),
    "adding": ToyTask(
        "Add two marked digits",
        "what is the sum of the two digits in brackets?",
        tuple(str(d) for d in range(10)) + tuple(f"[{d}]" for d in range(10)) + ("?",),
        tuple(str(s) for s in range(19)),
        make_adding,
        min_distance=2,
    ),
    "parity": ToyTask("Parity of the bits", "is the number of 1s odd?", ("0", "1", "?"), ("even", "odd"), make_parity),
}
TOY_CELLS = ("rnn", "gru_torch", "lstm", "scan")  # one of each kind; the GRU in PyTorch's convention


def toy_task(name):
    if name not in TOY_TASKS:
        raise LabError(f"task: unknown task {name!r}; valid tasks are {list(TOY_TASKS)}")
    return TOY_TASKS[name]


def targets(x, answers):
    """y (B, T): the answer at the "?" (the last step), IGNORE everywhere else."""
    y = torch.full_like(x, IGNORE)
    y[:, -1] = answers
    return y


class ProbeTask:
    """One toy task at one distance, in the shape lab.training.train.train trains (like LMTask): a fresh
    batch every step and, as validation, the accuracy at the "?" on a fixed set of fresh
    sequences (drawn with another random seed than training's)."""

    tokenizer = None  # the tokens are the task's own: nothing to save beside a checkpoint

    def __init__(self, task, distance, eval_sequences=512, seed=0):
        spec = toy_task(task)
        if not isinstance(distance, int) or not spec.min_distance <= distance <= MAX_DISTANCE:
            raise LabError(
                f"distance: {task} needs an integer in [{spec.min_distance}, {MAX_DISTANCE}], got {distance!r}"
            )
        self.task, self.distance, self.eval_sequences, self.seed = task, distance, eval_sequences, seed

    @property
    def vocab_size(self):
        return TOY_TASKS[self.task].vocab_size

    def sequence_length(self, config):
        return self.distance + 1

    def check(self, config):
        """Nothing to check: the sequences are made to measure."""

    def items_per_epoch(self, config):
        return SEQUENCES_PER_EPOCH / config.batch_size

    def batch(self, batch_size, generator):
        """-> x (B, T) token ids, y (B, T) targets, answers (B,)."""
        x, answers = TOY_TASKS[self.task].make(batch_size, self.distance, generator)
        return x, targets(x, answers), answers

    def train_batch(self, config, generator):
        x, y, _ = self.batch(config.batch_size, generator)
        return x, y, True

    def tokens(self, x):
        return x.numel()

    def eval_set(self):
        """The fixed validation sequences -> x, y, answers."""
        return self.batch(self.eval_sequences, torch.Generator().manual_seed(1_000_003 + self.seed))

    @functools.cached_property
    def chance(self):
        """The accuracy of always giving the commonest answer (measured on many fresh sequences)."""
        answers = self.batch(CHANCE_SEQUENCES, torch.Generator().manual_seed(2_000_003 + self.seed))[2]
        return answers.bincount().max().item() / len(answers)

    @torch.no_grad()
    def evaluate(self, model, config, device):
        x, y, answers = self.eval_set()
        logits = model(x.to(device))[0][:, -1]  # (B, V): the answers given at the "?"
        return {
            "val_loss": F.cross_entropy(logits, answers.to(device)).item(),
            "val_accuracy": (logits.argmax(-1).cpu() == answers).float().mean().item(),
        }


# ---------------------------------------------------------------------------
# runs


Names = Annotated[tuple[str, ...], Field(strict=False, min_length=1)]  # a list from a page or JSON too
Distance = Annotated[int, Field(le=MAX_DISTANCE)]


@config
class ProbeConfig:
    """A set of probe runs: every task in `tasks`, every cell in `cells`, at every distance."""

    tasks: Names = tuple(TOY_TASKS)  # keys of TOY_TASKS
    cells: Names = TOY_CELLS  # keys of lab.nets.cells.CELLS
    # k: steps between the first token that counts and the "?"
    distances: Annotated[tuple[Distance, ...], Field(strict=False, min_length=1)] = (5, 10, 20, 50, 100, 200)
    param_budget: PositiveInt = 5000  # target parameter count of every model
    embed_dim: PositiveInt = 8  # E, the same for every cell
    steps: PositiveInt = 1500  # most AdamW steps per model (training stops early once solved)
    seconds: Optional[PositiveNumber] = None  # or a time budget per model (a lesson's live run)
    batch_size: PositiveInt = 32  # B sequences per step
    lr: PositiveNumber = 3e-3  # peak learning rate, cosine-annealed over the budget (1e-2 stalled the LSTM and the RNN)
    eval_every: PositiveInt = 100  # steps between validation passes
    eval_sequences: PositiveInt = 512  # fixed fresh sequences for the accuracy
    solved: Annotated[float, Field(gt=0, le=1)] = 0.99  # validation accuracy at which a run stops early
    give_up_after: Annotated[int, Field(ge=0)] = 2  # distances in a row at chance after which a cell skips the
    # longer ones (0: never)
    seed: Seed = 0
    device: Device = "auto"  # "auto" (CUDA when available), "cpu" or "cuda" (lab.training.train.resolve_device)

    def __post_init__(self):
        unknown = [c for c in self.cells if c not in CELLS]
        if unknown:
            raise LabError(f"cells: unknown cells {unknown}; valid cells are {sorted(CELLS)}")
        if any(t not in TOY_TASKS for t in self.tasks):
            raise LabError(f"tasks: must be among {list(TOY_TASKS)}, got {list(self.tasks)}")
        lowest = max(TOY_TASKS[t].min_distance for t in self.tasks)
        if any(k < lowest for k in self.distances):
            raise LabError(f"distances: must be integers in [{lowest}, {MAX_DISTANCE}], got {list(self.distances)}")


def model_config(config, task, cell, hidden_size):
    device = resolve_device(config.device)
    return LMConfig(
        cell=cell,
        backend=default_backend(cell, device),
        scan_mode=default_scan_mode(device),
        vocab_size=TOY_TASKS[task].vocab_size,
        embed_dim=config.embed_dim,
        hidden_size=hidden_size,
    )


def hidden_size_for_budget(config, task, cell):
    """The hidden size whose model is closest to config.param_budget -> (H, parameter count).

    Parameters grow with H, so a binary search finds the last H under budget; then the
    closer of it and H + 1 wins. Counted by arithmetic (lab.nets.cost): nothing is built."""

    def params(h):
        return parameter_count(model_config(config, task, cell, h))

    lo, hi = 1, MAX_HIDDEN
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if params(mid) <= config.param_budget:
            lo = mid
        else:
            hi = mid - 1
    H = min((lo, lo + 1), key=lambda h: abs(params(h) - config.param_budget))
    return H, params(H)


def probe_run(config, task, cell, distance):
    """One run, ready for lab.training.train.train or a TrainingJob -> (model, ProbeTask, TrainConfig).
    The model is initialised from config.seed without touching the caller's random state."""
    hidden_size, _ = hidden_size_for_budget(config, task, cell)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = build_model(model_config(config, task, cell, hidden_size))
    train_config = TrainConfig(
        lr=config.lr,
        batch_size=config.batch_size,
        block_size=distance + 1,
        max_steps=None if config.seconds else config.steps,
        max_seconds=config.seconds,
        eval_interval=config.eval_every,
        seed=config.seed,
        device=config.device,
    )
    return model, ProbeTask(task, distance, config.eval_sequences, config.seed), train_config


def _train_one(config, task, cell, distance, emit, should_stop=None):
    """Train one (task, cell, distance) model until solved or out of budget -> its result row, or None
    when `should_stop()` stopped it before its first evaluation."""
    model, probe_task, train_config = probe_run(config, task, cell, distance)
    where = {"task": task, "cell": cell, "distance": distance}
    evals = []

    def emit_where(event):
        if event["type"] == "eval":
            evals.append(event["val_accuracy"])
        if emit:
            emit({**event, **where})

    start = time.perf_counter()
    result = train(
        model,
        probe_task,
        train_config,
        emit_where,
        should_stop=lambda: bool(evals) and evals[-1] >= config.solved or bool(should_stop and should_stop()),
    )
    if not evals:
        return None
    return {
        **where,
        "accuracy": evals[-1],
        "chance": probe_task.chance,
        "params": count_parameters(model),
        "hidden_size": model.config.hidden_size,
        "steps": result.steps,
        "final_loss": result.last_train_loss,
        "seconds": time.perf_counter() - start,
        "skipped": False,
    }


def run_memory_probe(config=None, emit=None, should_stop=None):
    """Train and score every (task, cell, distance) of the config, one after the other, the
    distances of a cell from the shortest up.

    emit(event: dict) hears lab.training.train's events, each with the run's task, cell and
    distance added, and a {"type": "probe_result", ...} per row. Returns a DataFrame with one
    row per (task, cell, distance): task, cell, distance, accuracy, chance, params,
    hidden_size, steps (taken, fewer than config.steps when solved early), final_loss,
    seconds, skipped (True: not trained, the cell having been at chance at the
    `give_up_after` shorter distances before it; its accuracy is NaN). `should_stop()`, asked before
    every step, ends the probe early with the rows finished so far.
    """
    config = config or ProbeConfig()
    rows = []
    for task in config.tasks:
        for cell in config.cells:
            at_chance = 0  # distances in a row
            for distance in sorted(config.distances):
                if config.give_up_after and at_chance >= config.give_up_after:
                    row = {
                        "task": task,
                        "cell": cell,
                        "distance": distance,
                        "accuracy": float("nan"),
                        "chance": ProbeTask(task, distance, seed=config.seed).chance,
                        "params": rows[-1]["params"],
                        "hidden_size": rows[-1]["hidden_size"],
                        "steps": 0,
                        "final_loss": float("nan"),
                        "seconds": 0.0,
                        "skipped": True,
                    }
                else:
                    row = _train_one(config, task, cell, distance, emit, should_stop)
                    if row is None:  # stopped
                        return pd.DataFrame(rows)
                    at_chance = at_chance + 1 if row["accuracy"] < row["chance"] + AT_CHANCE else 0
                rows.append(row)
                if emit:
                    emit({"type": "probe_result", **row})
    return pd.DataFrame(rows)


def results_table(results, values="accuracy"):
    """run_memory_probe's rows of one task -> a row per cell (its parameters and hidden size) and a
    column per distance holding `values` (NaN where the cell skipped that distance)."""
    cells = results["cell"].unique()
    table = results.pivot(index="cell", columns="distance", values=values).reindex(cells)
    table = table.where(~results.pivot(index="cell", columns="distance", values="skipped").reindex(cells).astype(bool))
    table.columns = [f"k = {k}" for k in table.columns]
    per_cell = results.groupby("cell")[["params", "hidden_size"]].first().reindex(cells)
    return pd.concat([per_cell.rename(columns={"hidden_size": "hidden size"}), table], axis=1)


class ProbeJob(BackgroundJob):
    """run_memory_probe on a background thread, through the one admission door every training path
    takes (lab.server.jobs.BackgroundJob): it waits in the server's budget queue at the cost of its largest
    model, and its steps take turns with every other job's; or on Ray, as every job (lab.server.ray_runs).
    `table` holds the results when it ends.

        job = ProbeJob(ProbeConfig(tasks=("recall",), cells=("gru_torch",)), owner=key).start()
    """

    what = "The memory probe"

    def __init__(self, config, owner=None, budget=None, turns=None, ray_address=RAY_ADDRESS):
        runs = [
            probe_run(config, task, cell, distance)
            for task in config.tasks
            for cell in config.cells
            for distance in config.distances
        ]
        cost_mb = (
            max(
                training_memory_bytes(model.config, train_config.batch_size, train_config.block_size)
                for model, _, train_config in runs
            )
            / 2**20
        )
        super().__init__(cost_mb, owner, budget, turns, ray_address=ray_address)
        self.config, self.table = config, None

    def _work(self):
        self.table = self._compute(run_memory_probe, config=self.config)
        return "stopped" if self._stop.is_set() else "finished"
