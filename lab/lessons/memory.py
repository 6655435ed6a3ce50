"""What the memory lessons say: keep or overwrite (a bias -> how long a memory lasts), the memory a
trained layer spreads over its units, why the vanilla RNN forgets (the gradient's decay per step),
and the gate-bias study read as a lesson. Each sentence is chosen from the numbers it reads."""

import math
from dataclasses import dataclass

from lab.experiments.ablation import (
    ARM_WORDS,
    LEARNED,
    arm_title,
    compare_with_baseline,
    gap_verdict,
    guessing_limit,
)
from lab.instruments.memory import bias_time_constants
from lab.lessons.words import beside, power, share_kept, steps
from lab.nets.families import FAMILIES
from lab.words import count, listing
from lab.words import layer_name as numbered_layer

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
        f"{label} learned a median keep bias of **{row['bias_median']:.2f}** in its {numbered_layer(row['layer'])} "
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
    """A row of lab.instruments.memory.memory_spread's table as the sentences name it: "X, layer 1" (its
    layer numbered from 1, lab.words.layer_name)."""
    return f"{row['name']}, {numbered_layer(row['layer'])}"


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


def factor_words(g):
    """A factor per step as every figure of the lesson shows it: three decimals, more where three would round
    a factor below 1 up to 1."""
    return beside(g, 1.0, 3)


def factor_power(g, k):
    """g^k computed from g as it is shown (factor_words), so that one g has one g^k wherever it appears."""
    return float(factor_words(g)) ** k


def fit_words(r2):
    """A fit's R² beside the lesson's rule (CLOSE_FIT), at the precision that keeps it on its side."""
    return beside(r2, CLOSE_FIT)


def gradient_metric(label, fit):
    """One model's metric beside the forgetting chart: (label, value, help), its g and g^k as the notice says
    them (factor_words, factor_power) and its R² on the side of the rule it is (fit_words)."""
    back = fit.distances - 1
    return (
        f"{label}: per step g",
        factor_words(fit.g),
        f"g^{back} = {power(factor_power(fit.g, back))}; R² {fit_words(fit.r2)}",
    )


def decay_words(g, distance):
    """What a factor g per step does over `distance` steps back (g^distance from g as shown: factor_power)."""
    left, back = factor_power(g, distance), count(distance, "step")
    if float(factor_words(g)) >= 1:
        return f"its gradient does not fade: {back} back it is g^{distance} = {power(left)} times its value"
    verdict = (
        "under a thousandth: too little for training to learn much from"
        if left < TOO_LITTLE
        else "over a thousandth: still something to learn from"
    )
    return f"{back} back its gradient is g^{distance} = **{power(left)}** of its value at the loss, {verdict}"


def forgetting_sentences(fits, cells, read):
    """The forgetting lesson's notice. fits: {label: lab.instruments.memory.DecayFit}, all fitted over
    the same distances; cells: {label: cell}; read: T, the steps the models read. Every g is said as the
    metrics show it (factor_words) and every R² beside its rule (fit_words)."""
    span = min(fit.distances for fit in fits.values())
    shown = {label: float(factor_words(fit.g)) for label, fit in fits.items()}  # as the metrics show them
    low, high = min(shown.values()), max(shown.values())
    fastest = [label for label, g in shown.items() if g == low]
    slowest = [label for label, g in shown.items() if g == high]
    g_low, g_high = (factor_words(fits[names[0]].g) for names in (fastest, slowest))
    three = all(len(factor_words(fit.g).split(".")[-1]) == 3 for fit in fits.values())
    level_to = "to three decimals" if three else "to the decimals shown"
    rough = [label for label, fit in fits.items() if fit.r2 < CLOSE_FIT]
    fitted = count(span, "step")
    steps_fitted = f"all {fitted} before the loss" if span >= read else f"the {fitted} nearest the loss"
    fit = (
        f"each curve is close to a straight line on the log scale (R² ≥ {CLOSE_FIT:g}): a constant factor g per step"
        if not rough
        else f"{listing(rough)} {'bends' if len(rough) == 1 else 'bend'} away from a straight line on the log "
        f"scale (R² < {CLOSE_FIT:g}: "
        + ", ".join(f"{fit_words(fits[label].r2)}" for label in rough)
        + "), so their g is only an average factor per step"
    )
    distance = span - 1
    first = (
        f"Over {steps_fitted}, {fit}; k steps back a curve is about g^k of its value at the loss, "
        "the picture of a product of one factor per step."
    )
    if low == high:
        same = f"All {len(shown)} lose at the same rate {level_to}, g = {g_low}"
        ranking = f" {same}: {decay_words(low, distance)}."
    else:
        ranking = (
            f" **{listing(fastest)}** {'loses' if len(fastest) == 1 else 'lose'} fastest, g = {g_low}: "
            f"{decay_words(low, distance)}. **{listing(slowest)}** {'keeps' if len(slowest) == 1 else 'keep'} "
            f"the most, g = {g_high}: {decay_words(high, distance)}."
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
            + (f", level with {listing(level)} {level_to}" if level else "")
            + f". It squashes its whole state through tanh and one matrix every step, and on this text that factor "
            f"averages g = {factor_words(fits[rnn[0]].g)} per step. A gated cell has a path where the factor is its "
            "keep gate, "
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


def study_reading(summary, dataset, epochs, title=arm_title):
    """What the shipped gate-bias study shows and what it cannot, from its own summary: the gates
    each arm ended with, and which arms reached LEARNED test accuracy. Each arm is named by `title`
    (lab.experiments.ablation.arm_title: its short name in a student's words); whether a gap between two
    arms is real is `answer`'s, by the one rule the page states (verdict_rule), never decided here."""
    keeps = listing(
        f"{s['z_mean_final']:.2f} for *{title(arm)}*" for arm, s in summary.items() if s["z_mean_final"] is not None
    )
    accuracy = {arm: s["val_accuracy_mean"] for arm, s in summary.items() if s["val_accuracy_mean"] is not None}
    chance = 1 / dataset["num_classes"]
    learned = [arm for arm, a in accuracy.items() if a >= LEARNED]
    measured = (
        f"Each arm's accuracy is measured on {count(dataset['n_test'], 'test image')}, so one image is "
        f"{100 / dataset['n_test']:.2f} points."
    )
    reached = listing(f"*{title(arm)}* {a:.1%}" for arm, a in accuracy.items())
    if not learned:
        reading = (
            f"**What it cannot show.** Whether that matters for the task: no arm reaches the {LEARNED:.0%} "
            f"test accuracy this lab takes as having learned it ({reached}; chance is {chance:.0%}). Until the "
            f"arms have learned the task, a gap between them says little about memory; after {count(epochs, 'epoch')} "
            "a longer run would answer the question."
        )
    else:
        others = [arm for arm in accuracy if arm not in learned]
        who = "Every arm reached" if not others else f"Only {listing(f'*{title(arm)}*' for arm in learned)} reached"
        below = f"; {listing(f'*{title(arm)}*' for arm in others)} stayed below it" if others else ""
        reading = (
            f"**What it means.** {who} the {LEARNED:.0%} test accuracy this lab takes as having learned the task"
            f"{below} ({reached}; chance is {chance:.0%}). Whether the gaps between the arms are real is the "
            "answer above, by its rule: a mark crossed is not a gap told apart."
        )
    shows = f"**What it shows.** The biases change the gates: on average the update gate keeps {keeps} per step."
    return f"{shows} {measured} {reading}"


def ablated_check(study, arm="ablated"):
    """The check-yourself question and answer on the `arm` (the biases held at 0) against the baseline,
    from the study's results, by the one rule of lab.experiments.ablation.gap_verdict (the page states it:
    verdict_rule), in plain words: no statistic named."""
    summary = study["summary"]
    accuracy = (summary.get(arm) or {}).get("val_accuracy_mean")
    base = (summary.get("baseline") or {}).get("val_accuracy_mean")
    if accuracy is None or base is None:
        return (
            "The arm with its gate biases held at 0 scores a little differently from the usual start. Can you "
            "conclude that the gate biases matter?",
            "Not from one gap alone: a gap counts only by the rule above, and this study has not yet finished "
            "both arms to hold it against.",
        )
    points = 100 * (accuracy - base)
    where = (
        "level with the usual start (to a tenth of a point)"
        if round(abs(points), 1) == 0
        else f"{abs(points):.1f} points {'above' if points > 0 else 'below'} the usual start"
    )
    n_test = study["dataset"]["n_test"]
    best = max(s["val_accuracy_mean"] for s in summary.values() if s["val_accuracy_mean"] is not None)
    if best <= guessing_limit(n_test, 1 / study["dataset"]["num_classes"]):  # as `answer`: nothing learned yet
        return (
            question_about(arm, where),
            "No. By the rule above: no arm names its test images better than guessing could yet, so the study "
            "cannot tell yet.",
        )
    comparison = {c["arm"]: c for c in compare_with_baseline(study)}.get(arm)
    verdict, least = gap_verdict(n_test, accuracy, base, comparison)
    gap = f"a gap of {abs(points):.1f} points"
    answer = {
        "unresolved": f"No. By the rule above: {gap} is under the {100 * least:.1f} points that "
        f"{count(n_test, 'test image')} can tell apart, so the study cannot tell the two apart on accuracy, "
        "even though their gates differ.",
        "one seed": "No. With a single random seed on a side a gap can be the luck of one initialisation: the "
        "study needs several random seeds per arm before the rule above can call a difference real.",
        "luck": f"No. By the rule above: random seeds alone make {gap} too often, so the study cannot tell the "
        "two apart on accuracy, even though their gates differ.",
        "real": f"For this task and length, yes. By the rule above: {gap} is more than the test images can blur "
        "and more than random seeds alone make. Other tasks, lengths and sizes may differ.",
    }[verdict]
    return question_about(arm, where), answer


def question_about(arm, where):
    """ablated_check's question: where the arm ends against the usual start."""
    return (
        f"With its {ARM_WORDS.get(arm, arm)}, the GRU ends {where}. Can you conclude that holding the gate "
        "biases at 0 changes how well a GRU learns this task?"
    )


# ---------------------------------------------------------------------------
# how far a change travels (the Memory page's first view)


def reach_sentence(curves, share=0.01):
    """What the reach chart shows, computed from it: how far a change travels in each model, as the last k
    at which more than `share` of it is kept, counted in each model's own tokens (a character model's k
    are characters, a subword model's subwords: models of different units are never ranked against each
    other). Said of one model alone, of models that rank, of models level on the measure, and of a text so
    short that the change outlives it (then the shares left at its end are said, never "they do not
    differ"). curves: [(name, cell, lab.instruments.reach.ChangeReach)]."""
    if not curves:
        return ""
    reaches = {name: reach for name, _, reach in curves}
    travels = {name: reach.last_above(share) for name, reach in reaches.items()}
    words = f"more than {share:.0%} of it"

    def how_far(name):
        k, reach = travels[name], reaches[name]
        if k >= len(reach.lags):
            return f"still keeps {words} after all {count(len(reach.lags), reach.unit)} measured"
        if k == 0:
            return f"keeps less than {share:.0%} of it one {reach.unit} later"
        return f"keeps {words} for {count(k, reach.unit)}"

    def bold(names):
        return listing(f"**{name}**" for name in names)

    def of(names):
        """The names and what they keep, the verb agreeing: "the **a** keeps ...", "the **a** and **b** keep ..."."""
        said = how_far(names[0])
        return f"the {bold(names)} " + (said if len(names) == 1 else said.replace("keeps", "keep", 1))

    by_unit = {}
    for name, reach in reaches.items():
        by_unit.setdefault(reach.unit, []).append(name)
    sentences, ranked_any = [], False
    for unit, names in by_unit.items():
        kind = "model" if len(by_unit) == 1 else f"{unit} model"
        said = {name: how_far(name) for name in names}
        if len(names) == 1:
            sentences.append(of(names))
        elif all(travels[name] >= len(reaches[name].lags) for name in names):
            left = sorted(f"{float(reaches[name].kept[-1]):.0%}" for name in names)
            kept = left[0] if left[0] == left[-1] else f"from {left[0]} to {left[-1]}"
            sentences.append(
                f"every {kind} here "
                + (said[names[0]] if len(set(said.values())) == 1 else f"still keeps {words} at the end of the text")
                + f": the text ends before the change fades in any of them, so it is too short to rank them (at "
                f"its last {unit} they keep {kept} of the change)"
            )
        elif len(set(said.values())) == 1:
            sentences.append(f"every {kind} here {said[names[0]]}: on this measure they are level")
        else:
            ranked_any = True
            ranked = sorted(names, key=travels.get)
            soonest = [n for n in ranked if travels[n] == travels[ranked[0]]]
            furthest = [n for n in ranked if travels[n] == travels[ranked[-1]]]
            if len({said[n] for n in soonest}) == 1 and len({said[n] for n in furthest}) == 1:
                sentences.append(f"{of(soonest)}, {of(furthest)}")
            else:  # models level on k that read different lengths of text: each said on its own
                sentences.append(", ".join(of([n]) for n in ranked))
    said = "Change one token: " + "; ".join(sentences) + "."
    if len(by_unit) > 1:
        said += (
            " Each model's k counts its own tokens ("
            + listing(f"{unit}s for {bold(names)}" for unit, names in by_unit.items())
            + "), so models of different kinds are not ranked against each other."
        )
    if ranked_any:
        said += " A state that forgets lets a change fade; one that remembers carries it."
    elif all(travels[n] >= len(reaches[n].lags) for n in reaches):
        said += " A longer text would show how far it goes."
    return said
