"""The results document (results.json, results.csv, one checkpoint per arm), its summaries, and the
tables the page and BENCHMARKS.md show: accuracy in Markdown, what a keep-gate bias means in steps."""

import csv
import dataclasses
import io
import json
import math
import os
import statistics
from datetime import datetime, timezone
from pathlib import Path

import torch

import lab
from lab.data import DataError
from lab.nets.cells import sigmoid_time_constant
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


def chrono_mean(t_max):
    """E[log U] for U ~ U[1, t_max - 1], the mean chrono bias (lab.nets.cells.chrono_bias)."""
    b = t_max - 1
    return (b * math.log(b) - b + 1) / (b - 1)


def time_constant_table(biases=None, seq_len=1024):
    """What a keep-gate bias alone implies (inputs and state at zero): retention sigmoid(b), time
    constant tau = 1 / (1 - sigmoid(b)) steps, half-life, and what is left after seq_len steps."""
    if biases is None:
        biases = [
            (0.0, "ablated arm: b_z frozen at 0"),
            (1.0, "baseline (lab): b_iz = +1"),
            (2.0, "seed 003's code: +1 in both b_iz and b_hz"),
            (chrono_mean(seq_len), f"chrono mean, E[log U[1, {seq_len - 1}]]"),
            (6.2, "seed 003's quoted chrono average"),
        ]
    rows = []
    for bias, label in biases:
        retention, tau, half_life = sigmoid_time_constant(bias)
        rows.append(
            {
                "b_z": round(bias, 3),
                "meaning": label,
                "sigmoid(b)": retention,
                "tau (steps)": tau,
                "half-life (steps)": half_life,
                f"left after {seq_len} steps": retention**seq_len,
            }
        )
    return rows


LEARNED = 0.5  # test accuracy below which an arm has not learned the task: a gap between arms then says nothing
SIGNIFICANT = 0.05  # Welch's p below which a gap is called more than the luck of the seeds


def conclusion(results):
    """The study's answer in one plain sentence, from its own summary: whether the arms learned the
    task at all (at least LEARNED test accuracy), and whether each arm's gap to the baseline is more
    than the seeds' luck (Welch's t-test, with two seeds or more per arm; else the seed-to-seed spread)."""
    arms = sorted(
        (
            (s["val_accuracy_mean"], s["val_accuracy_std"], arm)
            for arm, s in results["summary"].items()
            if s["val_accuracy_mean"] is not None
        ),
        reverse=True,
    )
    so_far = "" if results["complete"] else "So far (the study is incomplete): "
    if not arms:
        return "No run has finished yet, so there is nothing to conclude."
    epochs = results["config"]["epochs"]
    listed = ", ".join(f"{arm} {100 * mean:.1f}%" for mean, _, arm in arms)
    chance = 100 / results["dataset"]["num_classes"]
    (best, best_std, winner), (worst, worst_std, loser) = arms[0], arms[-1]
    if best < LEARNED:
        return (
            f"{so_far}after {epochs} epochs every arm is still near chance ({listed}; guessing gives "
            f"{chance:.0f}%), so this study cannot yet say whether the gate biases matter."
        )
    if len(arms) == 1:
        return f"{so_far}only the {winner} arm has results ({listed}), so there is nothing to compare yet."
    comparisons = compare_with_baseline(results)
    if comparisons:  # two seeds or more on each side: a test of each arm against the baseline
        found = []
        for c in comparisons:
            gap = f"{100 * c['difference']:+.1f} points, Welch's t-test p = {c['p']:.2f}"
            found.append(
                f"{c['arm']} differs from the baseline by more than the luck of the seeds explains ({gap})"
                if c["p"] < SIGNIFICANT
                else f"{c['arm']} does not differ from the baseline beyond the luck of the seeds ({gap})"
            )
        return f"{so_far}after {epochs} epochs ({listed}), " + "; ".join(found) + "."
    if best_std is None or worst_std is None:  # one seed: no spread to measure the gap against
        return (
            f"{so_far}{winner} ended {100 * (best - worst):.1f} points above {loser} ({listed}) with a single "
            "seed, too few to tell a real difference from the luck of one initialisation."
        )
    if best - worst <= best_std + worst_std:
        return (
            f"{so_far}the arms learned the task and ended within their seed-to-seed spread ({listed}): "
            "in this study the gate biases made no difference that its seeds can show."
        )
    return (
        f"{so_far}{winner} beat {loser} by {100 * (best - worst):.1f} points, more than their seed-to-seed "
        f"spread ({listed}): in this study the choice of gate biases mattered."
    )


def compare_with_baseline(results, baseline="baseline"):
    """Each other arm's final test accuracy against the baseline's over the random seeds: the
    difference of the means and Welch's t-test (unequal variances; scipy), which asks whether a gap
    that size is likely between seeds alone. -> [{"arm", "difference", "t", "p", "n"}], empty until
    both sides have two finished seeds (a t-test needs a spread on each side)."""
    from scipy.stats import ttest_ind

    def accuracies(arm):
        return [v for v in results["summary"].get(arm, {}).get("val_accuracy_by_seed", {}).values() if v is not None]

    base = accuracies(baseline)
    rows = []
    for arm in results["summary"]:
        other = accuracies(arm)
        if arm == baseline or len(base) < 2 or len(other) < 2:
            continue
        test = ttest_ind(other, base, equal_var=False)
        rows.append(
            {
                "arm": arm,
                "difference": statistics.fmean(other) - statistics.fmean(base),
                "t": float(test.statistic),
                "p": float(test.pvalue),
                "n": (len(other), len(base)),
            }
        )
    return rows


def summary_markdown(results):
    """The accuracy table as Markdown (BENCHMARKS.md, the CLI's closing print)."""
    lines = [
        "| arm | seeds | test accuracy (mean ± std) | test loss | train loss (last epoch) | mean z | b_z |",
        "|---|---|---|---|---|---|---|",
    ]

    def pm(mean, std, pct=False):
        if mean is None:
            return "–"
        scale, unit = (100, "%") if pct else (1, "")
        text = f"{mean * scale:.1f}{unit}" if pct else f"{mean:.3f}"
        return text + (
            f" ± {std * scale:.1f}{unit}" if pct and std is not None else f" ± {std:.3f}" if std is not None else ""
        )

    for arm, s in results["summary"].items():
        by_seed = ", ".join(f"{100 * v:.1f}" for v in s["val_accuracy_by_seed"].values() if v is not None)
        lines.append(
            f"| {arm} | {s['n_seeds']} ({by_seed}) | {pm(s['val_accuracy_mean'], s['val_accuracy_std'], True)} "
            f"| {pm(s['val_loss_mean'], s['val_loss_std'])} | {pm(s['train_loss_mean'], s['train_loss_std'])} "
            f"| {pm(s['z_mean_final'], None)} | {pm(s['b_z_mean_final'], None)} |"
        )
    comparisons = compare_with_baseline(results)
    if comparisons:
        lines += [
            "",
            "| arm vs baseline | difference in test accuracy | Welch's t | p (two-sided) | seeds |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {c['arm']} | {100 * c['difference']:+.1f} points | {c['t']:+.2f} | {c['p']:.3f} | "
            f"{c['n'][0]} vs {c['n'][1]} |"
            for c in comparisons
        ]
    return "\n".join(lines)
