"""The memory race: one cell of each kind trained side by side on a toy task where memory decides, and
what its chart says in words.

On the Train page's text race the curves lie on top of each other for the first minutes: every cell
first learns which letters are common, and an RNN, with nothing but that to learn, often leads (the long
race of the bundled models shows where the gated cells pull ahead). Recalling the first of k = 20 symbols
separates them in a few hundred steps (the shipped probe, BENCHMARKS.md "Toy tasks"): a GRU or an LSTM
learns to shut its gates on the symbol and keep it, while an RNN's state is rewritten at every step and
the symbol fades, and the selective scan's gates, which read only the current symbol, cannot tell the
first symbol from the others.

    jobs = start_toy_race(*MEMORY_RACE, 60, key, "the memory race")  # {cell: run}, started or joined
    memory_verdict(race_curves(jobs, "elapsed"), chance)  # "After 40 s, the GRU leads: ..."

Glossary: k distance (steps between the symbol and the "?"), x the chart's axis (seconds or steps).
"""

import functools
import math
from dataclasses import dataclass

from lab.experiments.probe import AT_CHANCE, HOLDS, TOY_CELLS, TOY_TASKS, ProbeConfig, probe_run
from lab.instruments.race import race_verdict
from lab.nets.families import FAMILIES, keeps_with_gates
from lab.server.jobs import TrainingJob
from lab.server.shared_runs import experiment_key, join_runs, joinable, start_runs
from lab.words import count, listing

MEMORY_RACE = ("recall", 20)  # task and distance k: the gated cells solve it, the RNN and the scan stay at chance
# the steps each runner needs in its budget before the race can be called, measured on recall at k = 20
# (benchmarks/memory_race.py, BENCHMARKS.md "The memory race"): the learning rate anneals over the budget, so
# a race of 300 steps left the GRU at 23% (seed 0); of 400, the GRU answered 77-85% right under the seeds
# tried and the LSTM 35-58%, while the RNN and the scan stayed at chance
STEPS_TO_CALL = 400
# steps per second one training lane (a training process, its runs taking turns step by step) gives a race's
# runners on recall at k = 20, all of them together, on two cores: 146 for one student, 245 through a race
# thirty students pressed (benchmarks.class_scenarios, forecast_vs_outcome, 2026-12-07, once the class's charts
# were made once); other work on the cores takes its share first (lab.server.capacity.lane_share)
LANE_STEPS_PER_SECOND = 160
EVAL_EVERY = 25  # steps between accuracy points on the chart
EVAL_SEQUENCES = 256  # fresh sequences each accuracy is measured on (±3 points)


def toy_race_jobs(task, distance, seconds=None, steps=None, seed=0, **job_options):
    """One TrainingJob per toy cell (TOY_CELLS) on `task` at `distance`, each at the probe's parameter budget,
    for `seconds` of training (or `steps`, a budget that makes the race the same on any machine) ->
    {cell: job}, not started: start them together (lab.server.jobs.start_together). `job_options` go to
    TrainingJob (owner, in_process, budget, turns, ...)."""
    config = ProbeConfig(
        tasks=(task,),
        distances=(distance,),
        seconds=seconds,
        steps=steps or ProbeConfig().steps,
        eval_every=EVAL_EVERY,
        eval_sequences=EVAL_SEQUENCES,
        seed=seed,
    )
    jobs = {}
    for cell in TOY_CELLS:
        model, probe_task, train_config = probe_run(config, task, cell, distance)
        name = f"{FAMILIES[cell].name} · {TOY_TASKS[task].in_a_sentence}"  # in words: a queue's message names it
        jobs[cell] = TrainingJob(name, model, probe_task, train_config, **job_options)
    return jobs


@functools.lru_cache(maxsize=32)
def race_keys(task, distance, seconds):
    """The experiment keys (lab.server.shared_runs) of the toy race of these settings, its jobs built once."""
    return tuple(experiment_key(job) for job in toy_race_jobs(task, distance, seconds=seconds).values())


def race_in_progress(task, distance, seconds):
    """(steps each runner has taken, seconds it has trained) of the identical race training on this server now,
    which pressing would join; None where there is none."""
    runs = [joinable(key) for key in race_keys(task, distance, seconds)]
    if not all(runs) or not any(run.job.running for run in runs):
        return None
    last = [run.job.latest("step") for run in runs]
    if None in last:
        return 0, 0.0
    return min(e["step"] for e in last), max(e["elapsed"] for e in last)


def start_toy_race(task, distance, seconds, owner, together, **job_options):
    """The toy race's runs of `seconds`, for `owner`, all started at once (all or none) or joined where a
    classmate's identical race trains on this server (lab.server.shared_runs): a class pressing the button
    trains it once -> {cell: run}."""
    joined = join_runs(race_keys(task, distance, seconds), owner)  # nothing to build for a race already training
    if joined is not None:
        return dict(zip(TOY_CELLS, joined))
    jobs = toy_race_jobs(task, distance, seconds=seconds, owner=owner, **job_options)
    return dict(zip(jobs, start_runs([(job, job.name, None, None) for job in jobs.values()], owner, together)))


def race_curves(jobs, x="elapsed"):
    """{cell: job} -> {cell: (xs, accuracies)}: each runner's validation accuracy so far (as of this second, as
    every live view reads a running job: lab.server.jobs.SETTLE_SECONDS), against seconds ("elapsed") or steps
    ("step")."""
    curves = {}
    for cell, job in jobs.items():
        evals = job.events(kind="eval", settled=True)
        curves[cell] = ([e[x] for e in evals], [e["val_accuracy"] for e in evals])
    return curves


def memory_verdict(curves, chance, x="elapsed", distance=MEMORY_RACE[1], shipped=None):
    """Who leads the memory race and why, in words, from the runners' accuracy curves.

    curves: {cell: (xs, accuracies)} (race_curves), xs in seconds (x "elapsed") or steps (x "step"); chance:
    the accuracy of always giving the commonest answer; shipped: where the longer runs of this task at this
    distance ended ({cell: (accuracy, steps)}, the shipped probe's), or None. The runners are compared where
    all of them have data (lab.instruments.race.race_verdict)."""
    verdict = race_verdict(
        {cell: (xs, [1 - a for a in accuracies]) for cell, (xs, accuracies) in curves.items()},
        level_within=AT_CHANCE,
    )
    ends = long_runs_sentence(shipped, chance) if shipped else ""
    if verdict is None:
        return f"Too early to call: every runner needs two accuracy points, at overlapping times. {ends}".strip()
    when = f"{verdict.at:.0f} s" if x == "elapsed" else count(round(verdict.at), "step")
    right = {cell: 1 - error for cell, error in verdict.standings}
    standings = ", ".join(f"the {FAMILIES[cell].name} {right[cell]:.0%}" for cell in right)
    against = f"against {chance:.0%} for always giving the commonest answer"
    level = verdict.level
    leader = level[0]
    behind = verdict.trailing
    if right[leader] < chance + AT_CHANCE:
        sentence = (
            f"After {when}, no cell answers better than chance yet ({standings} right, {against}). To answer, a "
            f"cell must keep the first symbol through the {distance - 1} after it, and even the gated cells take "
            "a few hundred steps to learn that."
        )
    elif not behind:
        everyone = count(len(level), "runner")
        sentence = f"After {when}, all {everyone} are level ({standings} right, {against}): too close to call."
    else:
        who = (
            f"the {FAMILIES[leader].name} leads"
            if len(level) == 1
            else f"{listing(f'the {FAMILIES[c].name}' for c in level)} lead"
        )
        sentence = f"After {when}, {who}: {standings} right, {against}."
        sentence += " " + _why(level, [cell for cell, _ in behind], distance)
    return f"{sentence} {ends}".strip()


def _why(ahead, behind, distance):
    """Why the cells `ahead` lead those `behind`, from what their gates can do: said of the leaders by name,
    and of "the gated cells" only when every gated runner is among them (one trailing cannot be said to
    pull ahead)."""
    ungated_behind = [c for c in behind if not keeps_with_gates(c)]
    gated_behind = [c for c in behind if keeps_with_gates(c)]
    if not all(keeps_with_gates(c) for c in ahead):
        return (
            "A lead this early can change: a gated cell usually passes it once it learns to keep the first "
            "symbol through the others (where the longer runs end says which does)."
        )
    if not ungated_behind:
        return (
            "Every cell here has gates that read its state: the one that learns sooner to shut them on the "
            "first symbol leads."
        )
    by_reason = {}  # the scans share one reason: said once, for all of them
    for c in ungated_behind:
        by_reason.setdefault(FAMILIES[c].forgets_a_symbol_because, []).append(f"the {FAMILIES[c].name}")
    clauses = "; ".join(
        f"{listing(names)} {'each ' if len(names) > 1 else ''}{reason}" for reason, names in by_reason.items()
    )
    one = len(ahead) == 1
    leaders = "The gated cells" if not gated_behind else listing(f"the {FAMILIES[c].name}" for c in ahead)
    leaders = leaders[0].upper() + leaders[1:]
    it, its = ("it", "its") if one and gated_behind else ("they", "their")
    pull = "pulls" if one and gated_behind else "pull"
    learns = "learns" if it == "it" else "learn"
    said = (
        f"{leaders} {pull} ahead once {it} {learns} to keep the first symbol: {its} gates read the state, so "
        f"{it} can shut on the symbol and hold it through the {distance - 1} after it."
    )
    if gated_behind:
        names = listing(f"the {FAMILIES[c].name}" for c in gated_behind)
        has = "has" if len(gated_behind) == 1 else "have"
        said += f" {names[0].upper() + names[1:]} {has} such gates too but {has} not learned to use them yet."
        return said + f" The cells without them cannot: {clauses}."
    return said + f" The others cannot: {clauses}."


def long_runs_sentence(shipped, chance):
    """Where the lab's longer runs of this task ended: {cell: (accuracy, steps)} -> a sentence."""
    solved = [(cell, steps) for cell, (accuracy, steps) in shipped.items() if accuracy >= HOLDS]
    stuck = [cell for cell, (accuracy, _) in shipped.items() if accuracy < chance + AT_CHANCE]
    between = [(cell, acc) for cell, (acc, _) in shipped.items() if chance + AT_CHANCE <= acc < HOLDS]
    longest = max(steps for _, steps in shipped.values())
    parts = [f"the {FAMILIES[c].name} solved it in {count(int(s), 'step')}" for c, s in solved]
    parts += [f"the {FAMILIES[c].name} reached {a:.0%}" for c, a in between]
    if stuck:
        parts.append(f"{listing(f'the {FAMILIES[c].name}' for c in stuck)} stayed at chance")
    return f"In this lab's longer runs (up to {count(int(longest), 'step')} each), {listing(parts)}."


# ---------------------------------------------------------------------------
# can this server call the race in its time?


@dataclass(frozen=True)
class Forecast:
    steps_each: int  # about how many steps each runner takes in the race's time
    enough: bool  # whether that is STEPS_TO_CALL or more
    sentence: str


def _joined_forecast(seconds, steps, elapsed):
    """The forecast for a student who joins a race already training: its runners' own pace so far."""
    joined = f"The memory race: the same race is training here for classmates, {elapsed:.0f} s in; you join it"
    if steps == 0 or elapsed <= 0:
        return Forecast(0, True, f"{joined}, and it is taking its first steps.")
    pace = steps / elapsed  # steps a second each runner takes, as measured
    steps_each = math.floor(pace * seconds)
    if steps >= STEPS_TO_CALL:
        return Forecast(steps_each, True, f"{joined}: each runner has taken {count(steps, 'step')}, enough to call it.")
    if steps_each < STEPS_TO_CALL:
        return Forecast(
            steps_each,
            False,
            f"{joined}: at its pace so far, {pace:.1f} steps a second, each runner ends at about "
            f"{count(steps_each, 'step')}, short of the ~{STEPS_TO_CALL} that decide it. Give it about "
            f"{math.ceil(STEPS_TO_CALL / pace)} s.",
        )
    wait = math.ceil((STEPS_TO_CALL - steps) / pace)
    return Forecast(
        steps_each,
        True,
        f"{joined}: each runner has taken {steps:,} of the ~{count(STEPS_TO_CALL, 'step')} that decide it, "
        f"{pace:.1f} a second, so it should be called in about {wait} s.",
    )


def forecast(
    seconds,
    runs_training,
    lanes,
    share=1.0,
    runners=len(TOY_CELLS),
    steps_per_lane_second=LANE_STEPS_PER_SECOND,
    in_progress=None,
):
    """About how many steps each of a race's `runners` takes in `seconds` on this server, and whether that
    is enough to call the race, in words, before it starts.

    `in_progress`: (steps, seconds) of the identical race training here now (race_in_progress), which pressing
    joins: then what it has done is measured, not estimated, and its own steps a second carry it on.

    The server computes `lanes` steps at a time (lab.server.capacity.step_lanes), each lane at `share` of its
    quiet speed (lab.server.capacity.lane_share: what other work leaves it), its runs taking turns, so the
    race's runners share the lanes with the `runs_training` runs already there: each gets
    lanes / (runs + runners) of a lane's steps, and never more than one lane's."""
    if in_progress is not None:
        return _joined_forecast(seconds, *in_progress)
    each = min(1.0, lanes / (runs_training + runners))
    steps_each = math.floor(steps_per_lane_second * share * each * seconds)
    others = [f"the {count(runs_training, 'run')} training now"] if runs_training else []
    if share < 1:  # other programs keep the cores busy
        others.append("other work on its processors")
    beside = f" beside {' and '.join(others)}" if others else ""
    said = f"each runner should take about {count(steps_each, 'step')} in {seconds} s on this server{beside}"
    if steps_each >= STEPS_TO_CALL:
        return Forecast(steps_each, True, f"The memory race: {said}, and about {STEPS_TO_CALL} decide it.")
    needed = math.ceil(seconds * STEPS_TO_CALL / max(steps_each, 1))
    busy = bool(others)
    why = (
        f"Too busy to call the memory race in {seconds} s" if busy else f"{seconds} s is too short for the memory race"
    )
    return Forecast(
        steps_each,
        False,
        f"{why}: {said}, and it takes about {STEPS_TO_CALL} for the gated cells to pull ahead. Give it about "
        f"{needed} s" + (", or start it when the server is less busy." if busy else "."),
    )
