"""The memory probe's runs: one model per (task, cell, distance), every cell at the hidden size closest
to one parameter budget, trained until solved or out of budget, a cell left at chance skipping the
longer distances; the results as a table, and ProbeJob, the same runs on the server's budget.
"""

import time
from typing import Annotated, Optional

from pydantic import Field

from lab.errors import LabError
from lab.nets.backends import default_backend, default_scan_mode
from lab.nets.cost import parameter_count, run_memory_mb
from lab.nets.families import CELLS
from lab.nets.models import LMConfig, build_model, count_parameters
from lab.schema import Device, PositiveInt, PositiveNumber, Seed, config
from lab.server.jobs import BackgroundJob
from lab.training.train import TrainConfig, resolve_device, train

from .tasks import MAX_DISTANCE, TOY_CELLS, TOY_TASKS, ProbeTask

MAX_HIDDEN = 1024  # upper end of the hidden-size search
AT_CHANCE = 0.05  # an accuracy less than this above chance counts as "at chance" (give_up_after)
HOLDS = 0.9  # an accuracy at which a cell "holds" a memory over that distance


Names = Annotated[tuple[str, ...], Field(strict=False, min_length=1)]  # a list from a page or JSON too
Distance = Annotated[int, Field(le=MAX_DISTANCE)]


@config
class ProbeConfig:
    """A set of probe runs: every task in `tasks`, every cell in `cells`, at every distance."""

    tasks: Names = tuple(TOY_TASKS)  # keys of TOY_TASKS
    cells: Names = TOY_CELLS  # family ids (lab.nets.families.FAMILIES)
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
    model = build_model(model_config(config, task, cell, hidden_size), seed=config.seed)
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
    """probe_rows as a DataFrame."""
    import pandas as pd  # here, not above: the training process that computes the rows builds no table

    return pd.DataFrame(probe_rows(config, emit, should_stop))


def probe_rows(config=None, emit=None, should_stop=None):
    """Train and score every (task, cell, distance) of the config, one after the other, the
    distances of a cell from the shortest up.

    emit(event: dict) hears lab.training.train's events, each with the run's task, cell and
    distance added, and a {"type": "probe_result", ...} per row. Returns a list with one
    dict per (task, cell, distance): task, cell, distance, accuracy, chance, params,
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
                        return rows
                    at_chance = at_chance + 1 if row["accuracy"] < row["chance"] + AT_CHANCE else 0
                rows.append(row)
                if emit:
                    emit({"type": "probe_result", **row})
    return rows


def results_table(results, values="accuracy"):
    """run_memory_probe's rows of one task -> a row per cell (its parameters and hidden size) and a
    column per distance holding `values` (NaN where the cell skipped that distance)."""
    import pandas as pd  # here, not above: see run_memory_probe

    cells = results["cell"].unique()
    table = results.pivot(index="cell", columns="distance", values=values).reindex(cells)
    table = table.where(~results.pivot(index="cell", columns="distance", values="skipped").reindex(cells).astype(bool))
    table.columns = [f"k = {k}" for k in table.columns]
    per_cell = results.groupby("cell")[["params", "hidden_size"]].first().reindex(cells)
    return pd.concat([per_cell.rename(columns={"hidden_size": "hidden size"}), table], axis=1)


# what a probe adds beyond its largest model's training memory, measured (benchmarks/job_memory.py): its
# results and each distance's evaluation set; a small probe added 41 MB where its model's training memory
# was 8 MB (then with pandas imported where it trained, ~37 MB of it)
PROBE_MB = 30


class ProbeJob(BackgroundJob):
    """run_memory_probe on a background thread, through the one admission door every training path
    takes (lab.server.jobs.BackgroundJob): it waits in the server's budget queue at the cost of its largest
    model, and its steps take turns with every other job's, in the server's training process (`in_process`,
    as the app's runs) or in this thread; or on Ray, as every job (lab.server.ray_runs).
    `table` holds the results when it ends.

        job = ProbeJob(ProbeConfig(tasks=("recall",), cells=("gru_torch",)), owner=key).start()
    """

    what = "The memory probe"

    def __init__(self, config, owner=None, budget=None, turns=None, in_process=False, ray_address=None):
        runs = [
            probe_run(config, task, cell, distance)
            for task in config.tasks
            for cell in config.cells
            for distance in config.distances
        ]
        cost_mb = PROBE_MB + max(  # one model trains at a time
            run_memory_mb(model.config, train_config.batch_size, train_config.block_size)
            for model, _, train_config in runs
        )
        super().__init__(cost_mb, owner, budget, turns, in_process, ray_address)
        self.config, self.table = config, None

    def _work(self):
        import pandas as pd  # here, not above: see run_memory_probe

        self.table = pd.DataFrame(self._compute(probe_rows, config=self.config))
        return "stopped" if self._stop.is_set() else "finished"
