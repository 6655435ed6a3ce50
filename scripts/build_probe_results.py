"""Run the memory probe (lab.probe) for every cell and ship the table the Memory page shows.

    python scripts/build_probe_results.py [--steps 300] [--lags 1 2 4 8 16 32] [--out checkpoints/memory_probe.csv]

Delayed recall: a model of ~5,000 parameters per cell reads random symbols and
must output the symbol it saw k steps ago (chance 1/S). One model per (cell,
lag), trained from scratch on the CPU for the same number of steps, scored on
fresh sequences. With the defaults the whole table takes about 4 minutes on
two busy CPU cores. The file also records the probe settings, one column each,
so the page can say what was run; the accuracy table is printed as Markdown.
"""
import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.cells import CELLS  # noqa: E402
from lab.probe import ProbeConfig, run_memory_probe  # noqa: E402

SETTINGS = ("alphabet", "param_budget", "embed_dim", "steps", "batch_size", "seq_len", "lr", "eval_sequences", "seed")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="*", default=list(CELLS), choices=sorted(CELLS))
    parser.add_argument("--lags", nargs="*", type=int, default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--steps", type=int, default=300, help="AdamW steps per (cell, lag) model")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (tiny models: 1 is fastest)")
    parser.add_argument("--out", default=str(ROOT / "checkpoints" / "memory_probe.csv"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = ProbeConfig(cells=tuple(args.cells), lags=tuple(args.lags), steps=args.steps)

    start = time.perf_counter()

    def report(event):
        if event["event"] == "probe_result":
            print(f"  {event['cell']:>9} lag {event['lag']:>2}: accuracy {event['accuracy']:.3f} "
                  f"({event['seconds']:.1f} s)", file=sys.stderr, flush=True)

    results = run_memory_probe(config, callback=report)
    for field in SETTINGS:
        results[field] = getattr(config, field)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results.to_csv(out, index=False, float_format="%.4f")

    table = results.pivot(index="cell", columns="lag", values="accuracy").reindex(list(config.cells))
    params = results.groupby("cell")["params"].first()
    print(f"Memory probe: accuracy vs lag (chance {1 / config.alphabet:.3f}), "
          f"{config.steps} steps per model, {time.perf_counter() - start:.0f} s in all; wrote {out}")
    print("| cell | params | " + " | ".join(f"lag {k}" for k in table.columns) + " |")
    print("|---|---|" + "---|" * len(table.columns))
    for cell, row in table.iterrows():
        print(f"| {cell} | {params[cell]:,} | " + " | ".join(f"{a:.2f}" for a in row) + " |")
    print("settings: " + ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(config).items() if k in SETTINGS))


if __name__ == "__main__":
    main()
