"""What a study's results say: its answer in one plain sentence (did the arms learn, is each gap to the
baseline more than the luck of the seeds: Welch's t-test), the accuracy table in Markdown
(BENCHMARKS.md, the CLI's closing print), and what a keep-gate bias alone means in steps."""

import math
import statistics

from lab.nets.cells import sigmoid_time_constant


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
