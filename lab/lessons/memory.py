"""What the memory lessons say: keep or overwrite (a bias -> how long a memory lasts), the memory a
trained layer spreads over its units, why the vanilla RNN forgets (the gradient's decay per step),
and the gate-bias study read as a lesson. Each sentence is chosen from the numbers it reads."""

import math
from dataclasses import dataclass

from lab.experiments.ablation import LEARNED, SIGNIFICANT
from lab.instruments.memory import bias_time_constants
from lab.lessons.words import power, share_kept, steps
from lab.nets.families import FAMILIES
from lab.words import count, listing

# ---------------------------------------------------------------------------
# keep or overwrite

E_WITHIN = 0.05  # a ratio τ(b + 1) / τ(b) within this share of e is "about e"


def e_from_bias(within=E_WITHIN):
    """The bias from which one step up in b multiplies τ = 1 + e^b by within `within` of e: the
    ratio is e − (e − 1) / (1 + e^b), which climbs towards e as b grows."""
    return math.log((math.e - 1) / (within * math.e) - 1)


def tau_ratio(bias):
    """τ(b + 1) / τ(b) for τ = 1 + e^b, computed as e − (e − 1) / (1 + e^b): no overflow at any b."""
    try:
        return math.e - (math.e - 1) / (1 + math.exp(bias))
    except OverflowError:
        return math.e


@dataclass(frozen=True)
class KeepBias:
    """What a keep-gate bias alone implies, and the sentence that reads it."""

    bias: float
    retention: float  # σ(b)
    tau: float  # 1 / (1 − σ(b)) = 1 + e^b
    half_life: float  # steps until half is left
    ratio: float  # τ(b + 1) / τ(b)

    @property
    def about_e(self):
        return self.ratio >= (1 - E_WITHIN) * math.e

    def sentence(self):
        b = f"{self.bias:g}"
        growth = (
            ": close to e ≈ 2.72, so from here on memory time grows exponentially with the bias."
            if self.about_e
            else f", less than e ≈ 2.72: while e^b is small the 1 in 1 + e^b still counts. The ratio comes "
            f"within {E_WITHIN:.0%} of e only from b ≈ {e_from_bias():.1f} on; from there memory time grows "
            "exponentially with the bias."
        )
        return (
            f"A keep factor of σ({b}) = **{share_kept(self.retention)}** multiplies the old memory every "
            f"step, so k steps keep σ(b)^k: a time constant of τ = 1/(1 − σ(b)) = {steps(self.tau)}, "
            f"and half of it is gone after **{steps(self.half_life)}**. Since τ = 1 + e^b, one step up "
            f"in b, from {b} to {self.bias + 1:g}, multiplies τ by **{self.ratio:.2f}**{growth}"
        )


def keep_bias(bias):
    """KeepBias of one bias (lab.instruments.memory.bias_time_constants)."""
    row = bias_time_constants([bias]).iloc[0]
    return KeepBias(float(bias), row["retention"], row["tau"], row["half_life"], tau_ratio(bias))


def learned_bias_sentence(label, row):
    """What a trained layer's keep biases (a row of lab.instruments.memory.keep_gate_biases) imply."""
    return (
        f"{label} learned a median keep bias of **{row['bias_median']:.2f}** in its layer {row['layer']} "
        f"(10–90% of units: {row['bias_q10']:.2f} to {row['bias_q90']:.2f}), which alone would keep "
        f"{share_kept(row['retention'])} per step, a half-life of {steps(row['half_life'])}."
    )


CHART_FLOOR = 1e-6  # the lowest share a retention chart draws: float64 products underflow far below it


def band_sentence(r, floor=CHART_FLOOR):
    """The retention chart of one layer (lab.instruments.memory.Retention) in numbers: where its median
    unit and the unit that keeps most end (floor: the lowest share the chart draws)."""
    median, top = r.median[-1], r.per_unit[-1, r.longest_units(1)[0]]
    below = f" (below the chart's floor of {power(floor)})"
    return (
        f"In the chart, after {count(int(r.lags[-1]), 'step')} the median unit keeps {power(median)} of what it "
        f"held{below if median < floor else ''} and the unit that keeps most {power(top)}"
        f"{below if top < floor else ''} (the dashed line)."
    )


# ---------------------------------------------------------------------------
# how a layer spreads its memory over its units

FAST = 10  # a median half-life at most this many tokens is "forgets fast"
FEW = 0.2  # a share of units at most this is "a few units"


def half_life_words(half_life, lags):
    """A half-life in words: "3 tokens", or "more than 128 tokens" for one longer than every lag measured."""
    if math.isinf(half_life):
        return f"more than {count(lags, 'token')}"
    return count(round(half_life), "token")  # round() rounds half to even, as "{:.0f}" did


def layer_name(row):
    """A row of lab.instruments.memory.memory_spread's table as the sentences name it: "X, layer 0"."""
    return f"{row['name']}, layer {row['layer']}"


def not_followed(rows):
    """Why these rows of memory_spread's table were not followed further: the longest lag asked for stopped
    them, or the text was too short to go further (fewer lags measured than asked for)."""
    reasons = [
        f"the longest lag is set to {count(int(row['lag_limit']), 'token')}"
        if row["lags"] >= row["lag_limit"]
        else f"the text is too short to follow a unit for more than {count(int(row['lags']), 'token')}"
        for row in rows
    ]
    return listing(dict.fromkeys(reasons))


def typical_sentence(spread):
    """How long the median unit keeps half of what it held: read in the layer whose median unit keeps
    longest, and said of every layer only where every layer's median unit reads the same way."""

    def kind(half_life):
        return "fast" if half_life <= FAST else "a while" if math.isfinite(half_life) else "keeps"

    typical = spread.loc[spread["median_half_life"].idxmax()]
    alike = spread[[kind(h) == kind(typical["median_half_life"]) for h in spread["median_half_life"]]]
    if len(spread) == 1:
        where = "the median unit"
    elif len(alike) == len(spread):
        where = "in every layer shown, the median unit"
    else:
        where = f"in {layer_name(typical)}, the median unit"
    within = half_life_words(typical["median_half_life"], typical["lags"])
    return {
        "fast": f"The typical unit forgets fast: {where} has lost half of what it held within {within}.",
        "a while": f"The typical unit keeps half of what it held for a while: {where} loses half within {within}.",
        "keeps": f"The typical unit keeps what it holds: {where} still keeps more than half after "
        f"{count(int(alike['lags'].min()), 'token')}, as far as it was followed.",
    }[kind(typical["median_half_life"])]


def memory_spread_sentence(spread):
    """What lab.instruments.memory.memory_spread's table says, in a student's words: computed from the
    table, so that it says what the chart drawn from the same retention shows. A span the units were not
    followed for is never read as "none": the sentence says so, and whether the longest lag asked for or
    the text's length stopped it."""
    spans = [int(c.removeprefix("longer_than_")) for c in spread.columns if c.startswith("longer_than_")]
    sentences = [typical_sentence(spread)]
    first = spans[0]
    followed, short = spread[spread["lags"] >= first], spread[spread["lags"] < first]
    others = (
        f" {listing(layer_name(row) for _, row in short.iterrows())} {'was' if len(short) == 1 else 'were'} not "
        f"followed for {count(first, 'token')}: {not_followed(row for _, row in short.iterrows())}."
        if len(short)
        else ""
    )
    if followed.empty:
        longest = spread.sort_values(["longest_half_life", "lags"], ascending=False).iloc[0]
        sentences.append(
            f"Whether a unit keeps more than half of what it held for {count(first, 'token')} is not measured here: "
            f"{not_followed(row for _, row in spread.iterrows())}. Over the {count(int(longest['lags']), 'token')} "
            f"followed, the longest-memory unit of {layer_name(longest)} keeps half for "
            f"{half_life_words(longest['longest_half_life'], longest['lags'])}."
        )
        return " ".join(sentences)
    # the layer with the most units that keep half for the first span, then for longer ones (a span not
    # followed ranks last), then the longest-memory unit: "none" is said only where no layer followed has one
    by_memory = [f"longer_than_{k}" for k in spans] + ["longest_half_life"]
    best = followed.sort_values(by_memory, ascending=False, na_position="last", kind="stable").iloc[0]
    share = best[f"longer_than_{first}"]
    if share == 0:
        which = "no unit" if short.empty else f"no unit of {listing(layer_name(r) for _, r in followed.iterrows())}"
        sentences.append(f"On this text {which} keeps more than half of what it held for {count(first, 'token')}.")
        return " ".join(sentences) + others
    later = []
    for k in spans[1:]:
        kept = best[f"longer_than_{k}"]
        if kept != kept:  # NaN: fewer than k lags measured
            later.append(f"not followed for {count(k, 'token')} ({not_followed([best])})")
        else:
            later.append(f"{round(kept * best['units'])} ({kept:.1%}) after {k}" if kept > 0 else f"none after {k}")
    where = "a few units" if share <= FEW else "many units"
    sentences.append(
        f"Long memories live in {where}: in {layer_name(best)}, "
        f"{round(share * best['units'])} of its {count(best['units'], 'unit')} ({share:.1%}) still keep more "
        f"than half of what they held after {count(first, 'token')}"
        + "".join(f", {c}" for c in later)
        + f". Its longest-memory unit keeps half for {half_life_words(best['longest_half_life'], best['lags'])}."
    )
    return " ".join(sentences) + others


# ---------------------------------------------------------------------------
# why the vanilla RNN forgets

CLOSE_FIT = 0.9  # R² of the straight line through log(gradient) at or above which g is "a constant factor"
TOO_LITTLE = 1e-3  # a gradient shrunk below this share of its value at the loss leaves training little to act on


def decay_words(g, distance):
    """What a factor g per step does over `distance` steps back."""
    left, back = g**distance, count(distance, "step")
    if g >= 1:
        return f"its gradient does not fade: {back} back it is g^{distance} = {power(left)} times its value"
    verdict = (
        "under a thousandth: too little for training to learn much from"
        if left < TOO_LITTLE
        else "over a thousandth: still something to learn from"
    )
    return f"{back} back its gradient is g^{distance} = **{power(left)}** of its value at the loss, {verdict}"


def forgetting_sentences(fits, cells, read):
    """The forgetting lesson's notice. fits: {label: lab.instruments.memory.DecayFit}, all fitted over
    the same distances; cells: {label: cell}; read: T, the steps the models read."""
    span = min(fit.distances for fit in fits.values())
    shown = {label: round(fit.g, 3) for label, fit in fits.items()}  # as the metrics show them
    low, high = min(shown.values()), max(shown.values())
    fastest = [label for label, g in shown.items() if g == low]
    slowest = [label for label, g in shown.items() if g == high]
    rough = [label for label, fit in fits.items() if fit.r2 < CLOSE_FIT]
    fitted = count(span, "step")
    steps_fitted = f"all {fitted} before the loss" if span >= read else f"the {fitted} nearest the loss"
    fit = (
        "each curve is close to a straight line on the log scale (R² ≥ 0.9): a constant factor g per step"
        if not rough
        else f"{listing(rough)} {'bends' if len(rough) == 1 else 'bend'} away from a straight line on the log "
        "scale (R² < 0.9), so their g is only an average factor per step"
    )
    distance = span - 1
    first = (
        f"Over {steps_fitted}, {fit}; k steps back a curve is about g^k of its value at the loss, "
        "the picture of a product of one factor per step."
    )
    if low == high:
        same = f"All {len(shown)} lose at the same rate to three decimals, g = {low:.3f}"
        ranking = f" {same}: {decay_words(low, distance)}."
    else:
        ranking = (
            f" **{listing(fastest)}** {'loses' if len(fastest) == 1 else 'lose'} fastest, g = {low:.3f}: "
            f"{decay_words(low, distance)}. **{listing(slowest)}** {'keeps' if len(slowest) == 1 else 'keep'} "
            f"the most, g = {high:.3f}: {decay_words(high, distance)}."
        )
    rnn = [label for label in fits if FAMILIES[cells[label]].keep is None]  # the gateless vanilla RNN
    gated_path = (
        "A gated cell has a path where the factor is its keep gate: training can push it towards 1, but nothing "
        "forces the gates to keep on this text, and a gate that overwrites passes as little gradient back as tanh does."
    )
    if not rnn:
        why = ""
    elif low == high:
        why = (
            f"Here the vanilla RNN forgets no faster than the others: all lose at the same rate on these "
            f"{count(read, 'step')}. {gated_path}"
        )
    elif rnn[0] in fastest:
        level = [label for label in fastest if label != rnn[0]]
        why = (
            "Here the vanilla RNN forgets fastest"
            + (f", level with {listing(level)} to three decimals" if level else "")
            + f". It squashes its whole state through tanh and one matrix every step, and on this text that factor "
            f"averages g = {shown[rnn[0]]:.3f} per step. A gated cell has a path where the factor is its keep gate, "
            "which training can push towards 1, so the gradient can reach far back along it."
        )
    else:
        why = (
            f"Here the vanilla RNN is not the one that forgets fastest: {listing(fastest)} "
            f"{'is' if len(fastest) == 1 else 'are'}, on these {count(read, 'step')}. {gated_path}"
        )
    flip = (
        "Flip the toggle to see the same models at initialisation: what differs there comes from the cells "
        "alone, and what changes between the two views is what training did."
    )
    return first + ranking + "\n\n" + " ".join(part for part in (why, flip) if part)


# ---------------------------------------------------------------------------
# the gate-bias study read as a lesson


def study_reading(summary, dataset, epochs):
    """What the shipped gate-bias study shows and what it cannot, from its own summary: the gates
    each arm ended with, and which arms reached LEARNED test accuracy."""
    keeps = listing(
        f"{s['z_mean_final']:.2f} in the {arm} arm" for arm, s in summary.items() if s["z_mean_final"] is not None
    )
    accuracy = {arm: s["val_accuracy_mean"] for arm, s in summary.items() if s["val_accuracy_mean"] is not None}
    chance = 1 / dataset["num_classes"]
    learned = [arm for arm, a in accuracy.items() if a >= LEARNED]
    measured = (
        f"Each arm's accuracy is measured on {count(dataset['n_test'], 'test image')}, so one image is "
        f"{100 / dataset['n_test']:.2f} points."
    )
    reached = listing(f"{arm} {a:.1%}" for arm, a in accuracy.items())
    if not learned:
        reading = (
            f"**What it cannot show.** Whether that matters for the task: no arm reaches the {LEARNED:.0%} "
            f"test accuracy this lab takes as having learned it ({reached}; chance is {chance:.0%}). Until the "
            f"arms have learned the task, a gap between them says little about memory; after {count(epochs, 'epoch')} "
            "a longer run would answer the question."
        )
    else:
        others = [arm for arm in accuracy if arm not in learned]
        who = "Every arm reached" if not others else f"Only {listing(learned)} reached"
        below = f"; {listing(others)} stayed below it" if others else ""
        reading = (
            f"**What it means.** {who} the {LEARNED:.0%} test accuracy this lab takes as having learned the task"
            f"{below} ({reached}; chance is {chance:.0%}). Whether the biases changed how well the model names "
            "the digits is what the test above decides, arm by arm, against the luck of the random seeds."
        )
    shows = f"**What it shows.** The biases change the gates: on average the update gate keeps {keeps} per step."
    return f"{shows} {measured} {reading}"


def ablated_check(comparison):
    """The check-yourself question and answer on the ablated arm against the baseline, from
    lab.experiments.ablation.compare_with_baseline's row for it (None: fewer than two seeds an arm)."""
    if comparison is None:
        return (
            "The ablated arm scores a little differently from the baseline. Can you conclude that the "
            "gate biases matter?",
            "No. With a single random seed a gap can be the luck of one initialisation: the study needs "
            "several seeds per arm before a difference means anything.",
        )
    points = 100 * comparison["difference"]
    where = (
        "level with the baseline (to a tenth of a point)"
        if round(abs(points), 1) == 0
        else f"{abs(points):.1f} points {'above' if points > 0 else 'below'} the baseline"
    )
    seeds = f"the {comparison['n'][0]} and {count(comparison['n'][1], 'random seed')}"
    threshold = f"(this lab calls a gap real below p = {SIGNIFICANT})"
    answer = (
        f"No. Welch's t-test over {seeds} gives p = {comparison['p']:.2f} {threshold}: a gap that size turns up "
        "between seeds alone, so the study cannot tell the arms apart on accuracy, even though their gates differ."
        if comparison["p"] >= SIGNIFICANT
        else f"For this task and length, yes: Welch's t-test over {seeds} gives p = {comparison['p']:.3f} "
        f"{threshold}, a gap that seeds alone rarely make. Other tasks, lengths and sizes may differ."
    )
    question = (
        f"The ablated arm ends {where}. Can you conclude that freezing the gate biases at 0 changes how well "
        "a GRU learns this task?"
    )
    return question, answer


# ---------------------------------------------------------------------------
# how far a change travels (the Memory page's first view)


def reach_sentence(curves, share=0.01):
    """What the reach chart shows, computed from it: which model lets a change fade soonest and which
    carries it furthest, as the last k at which more than `share` of it is kept."""
    if not curves:
        return ""
    travels = {name: reach.last_above(share) for name, _, reach in curves}
    measured = {name: len(reach.lags) for name, _, reach in curves}
    soonest, furthest = min(travels, key=travels.get), max(travels, key=travels.get)
    words = f"more than {share:.0%} of it"

    def how_far(name):
        k = travels[name]
        if k >= measured[name]:
            return f"still keeps {words} after all {count(measured[name], 'token')} measured"
        if k == 0:
            return f"keeps less than {share:.0%} of it one token later"
        return f"keeps {words} for {count(k, 'token')}"

    if travels[soonest] == travels[furthest]:
        return f"Change one token: every model here {how_far(soonest)}. On this text they do not differ."
    return (
        f"Change one token: the **{soonest}** {how_far(soonest)}, the **{furthest}** {how_far(furthest)}. "
        "A state that forgets lets a change fade; one that remembers carries it."
    )
