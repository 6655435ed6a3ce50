"""What a study's results say: its answer in one plain sentence (is any arm above guessing, can its test
images tell the arms apart, is each gap to the baseline more than the luck of the seeds: Welch's t-test),
the accuracy table in Markdown (BENCHMARKS.md, the CLI's closing print), and what a keep-gate bias alone
means in steps."""

import math
import statistics

from lab.nets.cells import sigmoid_time_constant
from lab.words import count


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
            (2.0, "+1 in both b_iz and b_hz: an effective b_z of +2"),
            (chrono_mean(seq_len), f"chrono mean, E[log U[1, {seq_len - 1}]]"),
            (6.2, "a chrono average often quoted for 1024 steps"),
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
                f"left after {count(seq_len, 'step')}": retention**seq_len,
            }
        )
    return rows


LEARNED = 0.5  # test accuracy from which the gate-bias lesson calls an arm's learning well under way
SIGNIFICANT = 0.05  # Welch's p below which a gap is called more than the luck of the seeds
Z = 1.96  # standard errors either side of a measured accuracy that test images alone make, 19 times in 20


def _adjusted(accuracy, n_test):
    """An accuracy over n_test images with one right and one wrong answer added (Agresti and Caffo):
    0% and 100% keep a spread, so a perfect score over 10 images is not taken as certain."""
    return (accuracy * n_test + 1) / (n_test + 2)


def resolution(n_test, first, second):
    """The difference of test accuracy (a fraction) that n_test test images can tell apart between two
    arms scoring `first` and `second`: Z binomial standard errors of the difference,
    sqrt(p1 (1 - p1) / n + p2 (1 - p2) / n) (Agresti-Caffo). Cautious: both arms answer the same
    images, and their answers image by image (not recorded) would allow a finer test."""
    p1, p2 = _adjusted(first, n_test), _adjusted(second, n_test)
    return Z * math.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / (n_test + 2))


def guessing_limit(n_test, chance):
    """The test accuracy that guessing reaches over n_test images, one time in 40: an arm below it
    cannot be told from guessing (chance + Z binomial standard errors)."""
    return chance + Z * math.sqrt(chance * (1 - chance) / n_test)


def gap_verdict(n_test, accuracy, base, comparison):
    """The one rule by which this lab calls the gap between an arm's test accuracy and the baseline's
    real: wider than the test images can tell apart (`resolution`), and a gap that size turns up between
    random seeds alone less often than SIGNIFICANT (Welch's test, `comparison`: compare_with_baseline's
    row for the arm, None with fewer than two seeds a side). `conclusion`, `answer` and the gate-bias
    lesson all read it, so no page shows two verdicts. -> (verdict, least): verdict "unresolved" (under
    what the images resolve), "one seed" (no test of the seeds' luck), "luck" (the seeds alone make such
    gaps) or "real"; least: the gap the images can tell apart (a fraction)."""
    least = resolution(n_test, accuracy, base)
    if abs(accuracy - base) < least:
        return "unresolved", least
    if comparison is None:
        return "one seed", least
    return ("luck" if comparison["p"] >= SIGNIFICANT else "real"), least


def verdict_rule():
    """`gap_verdict`'s rule in a student's words, to be stated once on a page that gives its verdicts."""
    return (
        "This lab calls a gap between two arms real only when both hold: it is wider than the test images can "
        "tell apart (a few images more or fewer right can come from which images were drawn), and random seeds "
        f"alone make a gap that size less than one time in {round(1 / SIGNIFICANT)}. Until some arm names more "
        "test images than guessing could, it calls nothing."
    )


def conclusion(results):
    """The study's answer in one plain sentence, from its own summary: whether any arm is above what
    guessing reaches on its test images, whether those test images can tell the arms apart at all
    (`resolution`), and then whether each arm's gap to the baseline is more than the seeds' luck
    (Welch's t-test, with two seeds or more per arm; else the seed-to-seed spread): `gap_verdict`."""
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
    after = f"after {count(results['config']['epochs'], 'epoch')}"
    n_test = results["dataset"]["n_test"]
    images = count(n_test, "test image")
    listed = ", ".join(f"{arm} {100 * mean:.1f}%" for mean, _, arm in arms)
    chance = 1 / results["dataset"]["num_classes"]
    (best, best_std, winner), (worst, worst_std, loser) = arms[0], arms[-1]
    if best <= guessing_limit(n_test, chance):
        return (
            f"{so_far}{after} no arm is above chance yet ({listed}; guessing gives {100 * chance:.0f}%, and with "
            f"{images} guessing can reach {100 * guessing_limit(n_test, chance):.1f}%), so this study cannot "
            "yet say whether the gate biases matter."
        )
    if len(arms) == 1:
        return f"{so_far}only the {winner} arm has results ({listed}), so there is nothing to compare yet."
    comparisons = compare_with_baseline(results)
    if comparisons:  # two seeds or more on each side: a test of each arm against the baseline
        base = results["summary"]["baseline"]["val_accuracy_mean"]
        unresolved, found = {}, []
        for c in comparisons:
            gap = f"{100 * c['difference']:+.1f} points, Welch's t-test p = {c['p']:.2f}"
            verdict, least = gap_verdict(n_test, base + c["difference"], base, c)
            if verdict == "unresolved":  # the test images cannot resolve it, whatever the seeds say
                unresolved[f"{c['arm']} ({gap})"] = least
            elif verdict == "real":
                found.append(
                    f"{c['arm']} differs from the baseline by more than the luck of the random seeds explains ({gap})"
                )
            else:
                found.append(
                    f"{c['arm']} does not differ from the baseline beyond the luck of the random seeds ({gap})"
                )
        if unresolved:
            found.insert(
                0,
                f"with {images}, a difference under {100 * max(unresolved.values()):.1f} points cannot tell an arm "
                f"from the baseline, and {' and '.join(unresolved)} {'is' if len(unresolved) == 1 else 'are'} "
                "under it",
            )
        return f"{so_far}{after} ({listed}): " + "; ".join(found) + "."
    least = resolution(n_test, best, worst)
    if best - worst < least:
        return (
            f"{so_far}{after} ({listed}), with {images} a difference under {100 * least:.1f} points cannot "
            f"tell the arms apart: {winner} ended {100 * (best - worst):.1f} points above {loser}."
        )
    if best_std is None or worst_std is None:  # one seed: no spread to measure the gap against
        return (
            f"{so_far}{winner} ended {100 * (best - worst):.1f} points above {loser} ({listed}) with a single "
            "random seed, too few to tell a real difference from the luck of one initialisation."
        )
    if best - worst <= best_std + worst_std:
        return (
            f"{so_far}the arms learned the task and ended within their seed-to-seed spread ({listed}): "
            "in this study the gate biases made no difference that its random seeds can show."
        )
    return (
        f"{so_far}{winner} beat {loser} by {100 * (best - worst):.1f} points, more than their seed-to-seed "
        f"spread ({listed}): in this study the choice of gate biases mattered."
    )


# each arm in a student's words, from the least to the most biased toward remembering at the start: the
# legend of the Ablation page's first chart and the subjects of `answer`
ARM_WORDS = {
    "ablated": "gate biases held at 0",
    "baseline": "keep gate started a little toward remembering (+1, the usual start)",
    "chrono": "keep gate started strongly toward remembering",
}
REMEMBERING = {arm: rank - 1 for rank, arm in enumerate(ARM_WORDS)}  # how far each starts past the baseline
# each arm's short name in a student's words, where a label or a list names it (a chart's legend, a metric)
ARM_TITLES = {"ablated": "held at 0", "baseline": "usual start", "chrono": "toward remembering"}


def arm_title(arm):
    """An arm's short name for students ("ablated" -> "held at 0"); an arm of no record keeps its own."""
    return ARM_TITLES.get(arm, arm)


def answer(results):
    """The study's answer to its question, "does starting the GRU's keep gate biased toward remembering help
    it learn?", in sentences a student can repeat: the same rules as `conclusion` (above guessing, the
    resolution of the test images, Welch's test of the random seeds: `gap_verdict`, whose rule
    `verdict_rule` says in words), its figures in plain words, no statistic named. Each arm is held
    against the baseline; one that starts more biased toward remembering and learns better (or less
    biased and learns worse) answers yes."""
    accuracy = {
        arm: s["val_accuracy_mean"] for arm, s in results["summary"].items() if s["val_accuracy_mean"] is not None
    }
    so_far = "" if results["complete"] else " so far (the study is incomplete)"
    if not accuracy:
        return "No run has finished yet, so this study has no answer yet."
    n_test, chance = results["dataset"]["n_test"], 1 / results["dataset"]["num_classes"]
    images = count(n_test, "test image")
    if max(accuracy.values()) <= guessing_limit(n_test, chance):
        return (
            f"This study cannot tell yet: after {count(results['config']['epochs'], 'epoch')} no arm names its "
            f"{images} better than guessing could ({100 * guessing_limit(n_test, chance):.1f}% at most, one time "
            "in 40)."
        )
    if "baseline" not in accuracy or len(accuracy) == 1:
        return "This study cannot tell yet: it has no two arms to compare with the usual start."
    base, tested = accuracy["baseline"], {c["arm"]: c for c in compare_with_baseline(results)}
    clauses, votes = [], set()
    for arm in sorted(set(accuracy) - {"baseline"}, key=lambda a: REMEMBERING.get(a, 0)):
        gap = accuracy[arm] - base
        verdict, least = gap_verdict(n_test, accuracy[arm], base, tested.get(arm))
        named = f"With its {ARM_WORDS[arm]}," if arm in ARM_WORDS else f"In the {arm} arm,"
        said = (
            f"{named} the GRU named {100 * accuracy[arm]:.1f}% of the test images correctly{so_far}, against "
            f"{100 * base:.1f}% with the usual start"
        )
        points = f"{abs(100 * gap):.1f} points"
        if verdict == "unresolved":
            why = f"a gap of {points}, under the {100 * least:.1f} that {images} can tell apart"
        elif verdict == "one seed":
            why = f"a gap of {points}, which a single random seed on a side cannot tell from luck"
        elif verdict == "luck":
            why = f"a gap of {points}, no more than the luck of the random seeds makes"
        else:
            why = f"{points} {'more' if gap > 0 else 'fewer'}, more than the luck of the random seeds explains"
            if REMEMBERING.get(arm):  # an arm that starts more, or less, toward remembering than the baseline
                votes.add((gap > 0) == (REMEMBERING[arm] > 0))
        clauses.append(f"{said}: {why}.")
    lead = {
        frozenset({True}): "Yes, in this study it helped.",
        frozenset({False}): "No, in this study it hurt.",
        frozenset({True, False}): "This study gives no single answer.",
    }.get(frozenset(votes), "This study cannot tell whether it helps.")
    return " ".join([lead, *clauses])


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
