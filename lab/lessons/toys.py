"""What the lessons that train small models say: the toy tasks (how far each cell carries a memory,
read from the accuracy at every distance, with the thresholds said) and a fresh model learning one
paragraph (what its samples show so far, and whether it memorised or learned)."""

from lab.experiments.probe import AT_CHANCE, HOLDS
from lab.instruments.learning import milestones_sentence
from lab.nets.families import keeps_with_gates
from lab.words import count, listing

# ---------------------------------------------------------------------------
# toy tasks


def chance_words(chance):
    """Chance, the accuracy of always giving the commonest answer, as every sentence, table and chart of the
    toy tasks shows it: one rounding for one number ("39%", never "0.40" beside it)."""
    return f"{chance:.0%}"


def live_toy_sentence(rows, seconds, label, at_chance=AT_CHANCE):
    """The live run of every cell so far in words, from its rows (cell, accuracy, chance; accuracy NaN before
    its first point) and the seconds trained: which cells answer off chance (at least `at_chance` above it), which
    are still at it. "" before every cell has its first point."""
    if rows.empty or rows["accuracy"].isna().any():
        return ""
    chance = rows["chance"].iloc[0]
    off = [r for _, r in rows.iterrows() if r["accuracy"] >= r["chance"] + at_chance]
    at = [r for _, r in rows.iterrows() if r["accuracy"] < r["chance"] + at_chance]

    def right(group):
        return listing(f"the {label(r['cell'])} {r['accuracy']:.0%}" for r in group)

    after = f"After {seconds:.0f} s"
    against = (
        f"chance: {chance_words(chance)}, always giving the commonest answer; off chance: "
        f"{100 * at_chance:.0f} points above"
    )
    if not off:
        return f"{after}, no cell answers off chance yet ({right(at)} right; {against})."
    rest = f"; {right(at)} still at chance" if at else ""
    return f"{after}, off chance: {right(off)} right{rest} ({against})."


def held_distances(runs, holds=HOLDS):
    """(the distances at which a cell's runs hold, at least `holds` right, and the longest k it holds at every
    distance up to: 0 when it does not hold at the shortest)."""
    runs = runs.sort_values("distance")
    trained = runs[~runs["skipped"]]
    held = [int(k) for k in trained.loc[trained["accuracy"] >= holds, "distance"]]
    through = 0
    for k in runs["distance"]:
        if int(k) not in held:
            break
        through = int(k)
    return held, through


def reach_words(runs, holds=HOLDS, at_chance=AT_CHANCE):
    """How far one cell carries a memory, in words, from its runs (rows with distance, accuracy,
    chance, skipped, sorted by distance or not): "holds ... up to k = 20, at chance from k = 50"."""
    runs = runs.sort_values("distance")
    trained = runs[~runs["skipped"]]
    distances = [int(k) for k in runs["distance"]]
    held, through = held_distances(runs, holds)
    lost = [int(k) for k in trained.loc[trained["accuracy"] < trained["chance"] + at_chance, "distance"]]
    skipped = [int(k) for k in runs.loc[runs["skipped"], "distance"]]
    threshold = f"(at least {holds:.0%} right)"
    if through:
        again = [k for k in held if k > through]
        holding = f"holds {threshold} up to k = {through}" + (
            f", and again at k = {listing(map(str, again))}" if again else ""
        )
    elif held:
        holding = f"holds {threshold} only at k = {listing(map(str, held))}"
    else:
        holding = f"holds {threshold} at no distance measured"
    if lost:
        after = [k for k in distances if k >= lost[0]]
        chance = (
            f", at chance from k = {lost[0]} on"
            if all(k in lost or k in skipped for k in after)
            else f", at chance at k = {listing(map(str, lost))}"
        )
    else:
        chance = ", above chance at every distance it was trained at"
    if skipped:
        chance += f" (not trained at k = {listing(map(str, skipped))}: at chance twice before)"
    return holding + chance


def toy_sentences(rows, distance, label, at_chance=AT_CHANCE):
    """The shipped curves of one task in words: one line per cell (label: cell -> its name), then which
    cells beat chance at the chosen distance. rows: the task's rows of the shipped table."""
    lines = [f"- **{label(cell)}** {reach_words(runs)}." for cell, runs in rows.groupby("cell", sort=False)]
    here = rows[rows["distance"] == distance]
    if here.empty:
        return "\n".join(lines)
    beating = [
        label(r["cell"]) for _, r in here.iterrows() if not r["skipped"] and r["accuracy"] >= r["chance"] + at_chance
    ]
    sequences = int(here["eval_sequences"].iloc[0]) if "eval_sequences" in here else None
    measured = f", each accuracy measured on {sequences:,} test sequences" if sequences else ""
    at_k = (
        f"At k = {distance}, "
        + (f"{listing(beating)} beat chance" if beating else "no cell beats chance")
        + f" by at least {100 * at_chance:.0f} points (chance: {chance_words(here['chance'].iloc[0])}, always "
        + "giving the "
        + f"commonest answer{measured})."
    )
    return "\n".join(lines) + "\n\n" + at_k


def gated_recall_words(recall, label, scan="scan", holds=HOLDS):
    """How far the gated cells (those whose gates read their state) recall the first symbol against the
    selective scan, in the shipped recall curves (recall: the recall task's rows; label: cell -> its name):
    said to reach further only where each of them holds at more distances in a row than the scan does."""
    gated = [cell for cell in dict.fromkeys(recall["cell"]) if keeps_with_gates(cell)]

    reach = {cell: held_distances(recall[recall["cell"] == cell], holds)[1] for cell in (*gated, scan)}

    def up_to(cell):
        return f"up to k = {reach[cell]}" if reach[cell] else "at no distance"

    each = listing(f"the {label(cell)} holds {up_to(cell)}" for cell in gated)
    against = f"where the {label(scan)} holds {up_to(scan)} (holding: at least {holds:.0%} right)"
    behind = [cell for cell in gated if reach[cell] <= reach[scan]]
    if not behind:
        return f"In the shipped recall curves {each}, {against}: that is how they recall over longer distances."
    return (
        f"In the shipped recall curves, though, {each}, {against}: "
        f"{listing(label(cell) for cell in behind)} {'does' if len(behind) == 1 else 'do'} not recall further "
        "than the scan there. Being able to shut is not the same as having learned to."
    )


# ---------------------------------------------------------------------------
# watching a model learn one paragraph


def learning_sentences(step, reproduced, span, prompt_chars, found, checked, paragraph_chars):
    """The notice of the learning lesson, from the samples shown so far. found: the milestones reached
    (lab.instruments.learning.milestones); checked: the last evaluation at or before `step` (an event
    with train_loss and val_loss), or None; paragraph_chars: the whole paragraph's length, of which a
    sample gives back at most the `span` characters after the first `prompt_chars`."""
    so_far = (
        milestones_sentence(found, span, prompt_chars, paragraph_chars)
        or "nothing recognisable yet: watch for the first space."
    )
    held_out = (
        f" By step {checked['step']:,}, on the last tenth of the paragraph, which it never trains on, its loss "
        f"is **{checked['val_loss']:.2f} nats/char** against {checked['train_loss']:.2f} on what it trains on."
        if checked
        else ""
    )
    return (
        f"Each sample starts from the paragraph's first {count(prompt_chars, 'character')} and lets the model continue "
        f"greedily. So far: {so_far} At step {step:,} it gives back **{reproduced}** of the {count(span, 'character')} "
        "each sample writes before its first mistake." + held_out
    )


def memorised_answer(last_eval, parameters):
    """The answer to "has it learned to write English?", from the run's last evaluation (None: none yet)
    and its model's parameters (None: no run yet)."""
    size = f" and {parameters:,} parameters" if parameters else ""
    why = (
        "A model that had learned the language would predict text it has not seen nearly as well as the "
        f"text it trained on. With one short text{size}, copying is the easiest way to a low training loss."
    )
    if last_eval is None:
        return (
            "Not from writing it back alone: a model that gives back the one text it trained on may have "
            "memorised it. The test is the loss on the last tenth of the paragraph, which it never trains on. "
            + why
            + " Start a run to see both losses."
        )
    val, train = last_eval["val_loss"], last_eval["train_loss"]
    if val > train:
        return (
            f"No: it has memorised one text. On the last tenth of the paragraph, which it never trains on, its "
            f"loss at step {last_eval['step']:,} is {val:.2f} nats/char, {val - train:.2f} above the {train:.2f} it "
            f"pays on what it trains on. {why}"
        )
    return (
        f"Not from this run: at step {last_eval['step']:,} its loss on the held-out tenth ({val:.2f} nats/char) "
        f"is no higher than on what it trains on ({train:.2f}), so it has not simply copied its text; but one "
        f"paragraph cannot show that it has learned a language. {why}"
    )
