"""What the stepping lessons say: one step of a cell (how much of its old state it keeps, and what it
does with the rest, which differs by cell), and the selective scan's recurrence computed two ways and
raced (which way wins is read from the timings, never assumed)."""

from lab.nets.families import FAMILIES
from lab.words import count, layer_name, listing

# ---------------------------------------------------------------------------
# one step of a cell


def layer_words(layer, layers):
    """Which layer a step's numbers are of, numbered from 1: "its only layer", "layer 1 of 2 (the first,
    which reads the tokens)"."""
    if layers == 1:
        return "its only layer"
    first = " (the first, which reads the tokens)" if layer == 0 else ""
    return f"{layer_name(layer)} of {layers}{first}"


def step_gist(kept, moved=None, layer=0, layers=1):
    """The gist of one step of `layer` (of `layers`). kept: [(name, cell, mean keep factor over the layer's
    units)] for the gated cells shown; moved: for the vanilla RNN, the mean |h_t − h_{t−1}| over its units."""
    where = layer_words(layer, layers)
    if not kept:
        return (
            f"The vanilla RNN has no gate: every unit of {where} is recomputed from scratch each step, moving by "
            f"**{moved:.2f}** on average (|h_t − h_{{t−1}}|), whether or not the token matters."
        )
    return (
        f"Averaged over all the units of {where}, at this step "
        + "; ".join(f"{name} keeps **{share:.0%}** {FAMILIES[cell].besides_keeping}" for name, cell, share in kept)
        + "."
    )


def what_to_watch(cells):
    """What to watch as the steps go on, from the cells' records: their gates where they have some, their
    units where one has none (the vanilla RNN: nothing there shuts or opens)."""
    if all(FAMILIES[cell].gates for cell in cells):
        gates = listing(dict.fromkeys(g for cell in cells for g in FAMILIES[cell].gates))
        return (
            f"watch which gates move with the token ({gates}): does a space or a capital letter shut or open "
            "whole groups of units at once?"
        )
    return (
        "watch how far its units move with the token (it has no gate to shut or open): does a space or a capital "
        "letter move whole groups of units at once?"
    )


# ---------------------------------------------------------------------------
# the two scans raced

SAME_BELOW = 1e-5  # the largest difference at which the loop and the parallel scan count as the same answer


def widths_compared(raced, longest):
    """How the widths raced so far compare at the longest length, from their timings: raced is {H: the
    scan's speed-up over the loop at T = longest}, the width shown among them."""
    if len(raced) < 2:
        return (
            "Race another width to see which way the units tip it on this machine: the lesson then compares "
            "the widths you have raced."
        )
    widths = sorted(raced)
    speeds = [raced[H] for H in widths]
    each = listing(f"{raced[H]:.2f}× with H = {H:,}" for H in widths)
    if all(a > b for a, b in zip(speeds, speeds[1:])):
        trend = "here fewer units favour the scan and more units favour the loop, as those costs lead you to expect"
    elif all(a < b for a, b in zip(speeds, speeds[1:])):
        trend = "here more units favour the scan: on this machine other costs than these two weigh more"
    else:
        trend = "no steady trend with the width here: timings on a shared machine move from one measurement to the next"
    return f"Of the widths raced so far, at T = {longest} the parallel scan ran at {each} the loop's speed: {trend}."


def race_sentences(lengths, differences, speedups, hidden, device, raced):
    """The race's notice: whether both ways agree, which one wins where, and how the widths raced so far
    compare. lengths, differences, speedups: lab.instruments.scans.race_scans' columns T, max_abs_diff and
    speedup; device: where it ran, in words ("this server's CPU"); raced: {H: speed-up at the longest
    length} of every width raced so far, this one included (widths_compared)."""
    worst = max(differences)
    agree = (
        f"Both ways give the same $h_t$: the largest difference over every T is **{worst:.1e}**, float32 "
        f"rounding, below the lesson's bar of {SAME_BELOW:.0e}."
        if worst < SAME_BELOW
        else f"The two ways differ by up to **{worst:.1e}**, more than the lesson's bar of {SAME_BELOW:.0e}: "
        "more than float32 rounding explains."
    )
    wins = [T for T, s in zip(lengths, speedups) if s > 1]
    longest, last = lengths[-1], speedups[-1]
    if not wins:
        verdict = (
            f"the loop wins at every length measured: at T = {longest} the parallel scan takes {1 / last:.1f}× as long"
        )
    elif len(wins) == len(lengths):
        verdict = f"the parallel scan wins at every length, {last:.1f}× faster at T = {longest}"
    else:
        verdict = (
            f"the parallel scan wins at T = {listing(str(T) for T in wins)} and the loop at the other lengths "
            f"(at T = {longest}: {last:.2f}× the loop's speed)"
        )
    return (
        f"{agree} With H = {count(hidden, 'unit')}, on {device}, **{verdict}**.\n\n"
        "The race runs both ways on random numbers of these sizes, not on a trained model: keep factors $A_t$ "
        "drawn between 0 and 1 and written terms $b_t = B_t \\odot e_t$ drawn from a normal distribution. The "
        "time depends only on the sizes, so random numbers time it as well as a model would.\n\n"
        "Why it can go either way: the loop pays a fixed cost for each of its T steps, one after the other, "
        "while the parallel scan does log₂T rounds over the whole sequence, about log₂T times more arithmetic. "
        "The loop's fixed cost per step does not grow with the units H; the scan's extra arithmetic does. "
        f"{widths_compared(raced, longest)} "
        "On a GPU each round spreads over thousands of cores while the loop's T steps still wait for each "
        "other: that is the case Mamba-style models are built for. It works only because $A_t$ and $B_t$ "
        "depend on the input, never on $h$: a GRU's gates read $h_{t-1}$, so it cannot be scanned. These "
        "timings were measured on a shared machine; press *Measure again* to see how much they move."
    )
