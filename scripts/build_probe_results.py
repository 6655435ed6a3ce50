"""Train every toy task of lab.experiments.probe for every cell and ship the table the Memory page and the
toy-tasks lesson show.

    python scripts/build_probe_results.py [--jobs 2] [--steps 1500] [--distances 5 10 20 50 100 200]

One model of ~5,000 parameters per (task, cell, distance), trained from scratch on the CPU
by lab.training.train.train until it answers 99% of fresh sequences right or has taken --steps
steps; a cell at chance at two distances in a row skips the longer ones (lab.experiments.probe). The
tasks run in --jobs processes of one thread each. With the defaults the table took about
15 minutes on two CPU cores shared with another training job (BENCHMARKS.md, "Toy tasks").
The file also records the settings, one column each, so a page can say what was run; the
accuracy tables are printed as Markdown.
"""

import argparse
import dataclasses
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.experiments.probe import TOY_CELLS, TOY_TASKS, ProbeConfig, results_table, run_memory_probe  # noqa: E402
from lab.nets.families import CELLS  # noqa: E402

# the settings written beside the results, one column each ("steps" is a row's own: the steps it took)
SETTINGS = {
    "param_budget": "param_budget",
    "embed_dim": "embed_dim",
    "steps": "steps_budget",
    "batch_size": "batch_size",
    "lr": "lr",
    "eval_sequences": "eval_sequences",
    "solved": "solved",
    "seed": "seed",
}


def run_tasks(config):
    """One worker: the config's tasks, one thread, a line on stderr per result."""
    torch.set_num_threads(1)

    def report(event):
        if event["type"] == "probe_result":
            what = (
                "skipped"
                if event["skipped"]
                else (f"accuracy {event['accuracy']:.3f} (chance {event['chance']:.3f}) after {event['steps']} steps")
            )
            print(
                f"  {event['task']:>8} {event['cell']:>9} k={event['distance']:>3}: {what} ({event['seconds']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    return run_memory_probe(config, emit=report)


def markdown_table(results, task):
    rows = results[results.task == task]
    accuracy, steps = results_table(rows), results_table(rows, "steps")
    distances = [c for c in accuracy.columns if c.startswith("k = ")]
    lines = [
        f"{TOY_TASKS[task].title} (chance {rows['chance'].max():.2f})",
        "",
        "| cell | params | " + " | ".join(distances) + " |",
        "|---|---|" + "---|" * len(distances),
    ]
    for cell, row in accuracy.iterrows():
        shown = ["—" if pd.isna(row[k]) else f"{row[k]:.2f} ({steps.loc[cell, k]:.0f})" for k in distances]
        lines.append(f"| {cell} | {int(row['params']):,} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="*", default=list(TOY_TASKS), choices=list(TOY_TASKS))
    parser.add_argument("--cells", nargs="*", default=list(TOY_CELLS), choices=sorted(CELLS))
    parser.add_argument("--distances", nargs="*", type=int, default=list(ProbeConfig.distances))
    parser.add_argument("--steps", type=int, default=ProbeConfig.steps, help="most AdamW steps per model")
    parser.add_argument("--jobs", type=int, default=2, help="processes (tasks are shared out between them)")
    parser.add_argument("--out", default=str(ROOT / "checkpoints" / "memory_probe.csv"))
    args = parser.parse_args()
    configs = [
        ProbeConfig(tasks=(task,), cells=tuple(args.cells), distances=tuple(args.distances), steps=args.steps)
        for task in args.tasks
    ]

    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = pd.concat(list(pool.map(run_tasks, configs)), ignore_index=True)
    for field, column in SETTINGS.items():
        results[column] = getattr(configs[0], field)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results.to_csv(out, index=False, float_format="%.4f")

    print(
        f'Toy tasks: accuracy at the "?" against the distance k (steps taken in brackets; — skipped), '
        f"{time.perf_counter() - start:.0f} s in all; wrote {out}\n"
    )
    for task in args.tasks:
        print(markdown_table(results, task) + "\n")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(configs[0]).items() if k in SETTINGS))


if __name__ == "__main__":
    main()
