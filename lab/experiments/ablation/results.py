"""The results document (results.json, results.csv, one checkpoint per arm): assembled from the runs with
its per-arm summary, written, read back (or resumed), and its rows for the page's charts. What the
results say is in conclusions.py."""

import csv
import dataclasses
import io
import json
import os
import statistics
from datetime import datetime, timezone
from pathlib import Path

import torch

import lab
from lab.data import DataError
from lab.nets.models import build_model, conventions, count_parameters
from lab.training.checkpoints import atomic_write_bytes, checkpoint_bytes

from .model import GATES, get_arm, model_config, rounded

RESULTS_FORMAT = "rnnlab-ablation"
RESULTS_FILE = "results.json"  # everything: config, per-epoch records, gate statistics, summary
CSV_FILE = "results.csv"  # one row per (arm, seed, epoch), for spreadsheets
SHIPPED_DIR = Path(__file__).resolve().parents[3] / "checkpoints" / "ablation"


def now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return rounded(statistics.fmean(values)), (rounded(statistics.stdev(values)) if len(values) > 1 else None)


def summarize(runs, arms):
    """Per arm: final metrics as mean and sample standard deviation (n - 1) over seeds."""
    summary = {}
    for arm in arms:
        finished = [r for r in runs if r["arm"] == arm and r.get("final")]
        entry = {
            "n_seeds": len(finished),
            "seeds": [r["seed"] for r in finished],
            "epochs": sorted({r["final"]["epoch"] for r in finished}),
        }
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
    "(lab.training.tasks.ClassificationTask); the whole test split is evaluated after every epoch.",
    "std is the sample standard deviation (n - 1) across seeds; null with a single seed.",
]


def config_record(config):
    """The config as results.json holds it (tuples become lists), to write and to compare on resume."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def assemble_results(config, data, runs, complete, created, device, command=None):
    """The results document written to results.json."""
    arms = [a for a in config.arms if any(r["arm"] == a for r in runs)] or list(config.arms)
    model = build_model(model_config(config.arms[0], config, data.info))
    spe = data.steps_per_epoch
    finished = [r for r in runs if r.get("seconds_per_epoch")]
    return {
        "format": RESULTS_FORMAT,
        "format_version": 1,
        "experiment": "GRU gate-bias ablation (seed 003)",
        "lab_version": lab.__version__,
        "created": created,
        "updated": now(),
        "complete": complete,
        "command": command,
        "config": config_record(config),
        "dataset": data.info,
        "model": {
            "cell": "gru_torch",
            "backend": config.backend,
            "hidden_size": config.hidden_size,
            "parameters": count_parameters(model),
            "conventions": conventions(model),
        },
        "training": {
            "optimizer": "AdamW",
            "lr": config.lr,
            "min_lr": config.min_lr,
            "schedule": "cosine",
            "weight_decay": config.weight_decay,
            "batch_size": config.batch_size,
            "grad_clip": config.grad_clip,
            "steps_per_epoch": spe,
            "epochs": config.epochs,
            "device": str(device),
            "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        },
        "arms": {a: dataclasses.asdict(get_arm(a)) for a in config.arms},
        "timing": {
            "seconds_per_epoch_mean": _mean_std([r["seconds_per_epoch"] for r in finished])[0],
            "total_seconds": rounded(sum(r["elapsed"] for r in runs), 1),
        },
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
            row = {
                "arm": run["arm"],
                "seed": run["seed"],
                "epoch": e["epoch"],
                "step": e["step"],
                **{k: e.get(k) for k in ("train_loss", "val_loss", "val_accuracy")},
            }
            for gate in GATES:
                g = e["gates"][gate]
                row.update(
                    {
                        f"{gate}_mean": g["mean"],
                        f"{gate}_q10": g["quantiles"][1],
                        f"{gate}_q50": g["quantiles"][5],
                        f"{gate}_q90": g["quantiles"][9],
                    }
                )
            row.update(
                {
                    "b_z_mean": e["biases"]["b_z"]["mean"],
                    "b_r_mean": e["biases"]["b_r"]["mean"],
                    "rz_bias_max_abs": e["biases"]["rz_max_abs"],
                }
            )
            rows.append(row)
    return rows


def step_rows(results):
    return [
        {"arm": run["arm"], "seed": run["seed"], "step": s[0], "train_loss": s[1]}
        for run in results["runs"]
        for s in run["steps"]
    ]


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


def results_to_resume(out_dir, config):
    """The results already in `out_dir` for this very config, or None where there are none yet.

    A study of 9 runs x 20 minutes outlives a session: rerunning the same command continues it.
    Results of another config are refused (DataError) rather than mixed into this one."""
    if out_dir is None or not (Path(out_dir) / RESULTS_FILE).is_file():
        return None
    results = load_results(out_dir)
    wanted = config_record(config)
    differ = [
        f"{k}: {results['config'].get(k)!r} there, {v!r} here"
        for k, v in wanted.items()
        if results["config"].get(k) != v
    ]
    if differ:
        raise DataError(
            f"{Path(out_dir) / RESULTS_FILE} holds a study with another config ({'; '.join(differ)}); "
            "give the same options to continue it, or another --out for a new study"
        )
    return results


def checkpoint_name(config, arm, seed):
    return f"{config.dataset}-{arm}-seed{seed}.safetensors"


def arm_checkpoint(config, data, record, model):
    """The run's final model as a lab checkpoint (load with lab.training.checkpoints.load_checkpoint): (file name,
    bytes), made where the run trained and written where the results are (write_arm_checkpoint)."""
    name = checkpoint_name(config, record["arm"], record["seed"])
    history = [{k: v for k, v in e.items() if k not in ("gates", "biases")} for e in record["epochs"]]
    metrics = {
        "history": history,
        "reason": record["reason"],
        "steps": record["steps_done"],
        "frozen_bias_check": record["frozen_bias_check"],
    }
    extra = {
        "experiment": "gru-gate-bias-ablation",
        "arm": record["arm"],
        "seed": record["seed"],
        "dataset": data.info,
        "arm_description": get_arm(record["arm"]).description,
    }
    return name, checkpoint_bytes(model, None, metrics, name[: -len(".safetensors")], 1, extra)


def write_arm_checkpoint(out_dir, checkpoint):
    """Write arm_checkpoint's (name, bytes) into `out_dir`, atomically; returns the name."""
    name, data_bytes = checkpoint
    atomic_write_bytes(Path(out_dir) / name, data_bytes)
    return name
