"""Every lesson's controls walked to their extremes and a value or two between, and each sentence that
compares, ranks or counts checked against the figures the page shows beside it (its table, its
metrics, its chart). The sentences' logic is checked over whole ranges in tests/test_lesson_claims.py;
this walk checks the wiring: that the page shows those sentences about the figures it drew.

One AppTest per lesson, walked in place (cached figures are shared within the process), to keep the
slow part small on 2 busy cores. The learning lesson's only control is its text: tests/test_lessons_app.py
runs it and checks its answer against the run's own losses.
"""

import base64
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from helpers import RNN_VERDICTS, vanilla_rnn_verdict, without_errors
from streamlit.testing.v1 import AppTest

from lab.experiments.ablation import LEARNED
from lab.experiments.probe import AT_CHANCE, TOY_CELLS, TOY_TASKS
from lab.lessons.toys import HOLDS
from lab.lessons.words import power
from lab.nets.families import keeps_with_gates
from lab.training.checkpoints import BUNDLED_DIR, load_checkpoint
from lab.words import count, listing
from ui.cell_labels import cell_label
from ui.shared.model_names import bundled_title

ROOT = Path(__file__).resolve().parent.parent
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan", "scribe-alpha"]


def lesson(slug, **state):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.switch_page("pages/7_Lessons.py")
    at.query_params["lesson"] = slug
    for key, value in state.items():
        at.session_state[key] = value
    return checked(at.run())


def checked(at):
    without_errors(at)
    page = " ".join(m.value for m in [*at.markdown, *at.caption])
    assert "Leviathan" not in page and "`" not in page  # no model it does not use, no code
    return at


def said(at):
    """The notice, its Markdown escapes undone: the words a student reads."""
    (text,) = [m.value for m in at.markdown if m.value.startswith("#### What to notice")]
    return re.sub(r"\\(.)", r"\1", text)


def answer(at):
    (reveal,) = [e for e in at.main.expander if e.label == "Show the answer"]
    return " ".join(m.value for m in reveal.markdown)


def metrics(at):
    return {m.label: m.value for m in at.metric}


def models_named(at):
    return " ".join(c.value for c in at.caption if c.value.startswith("The figures above come from")).replace("\\", "")


def test_next_token_at_every_rules_extremes_says_what_its_table_shows():
    vocabulary = load_checkpoint(BUNDLED_DIR / "char-gru-torch_latest.safetensors").tokenizer.vocab_size
    at = lesson("next-token")
    assert bundled_title("char-gru-torch") in models_named(at)  # the model it samples from, named as pages name it
    for strategy, widget, values in (
        ("temperature", "lessons_choose_T", [0.05, 2.0]),
        ("top_k", "lessons_choose_k", [1, vocabulary]),
        ("top_p", "lessons_choose_p", [0.05, 1.0]),
    ):
        at.radio(key="lessons_choose_strategy").set_value(strategy).run()
        slider = at.slider(key=widget)
        assert (slider.min, slider.max) == (values[0], values[1])  # top-k reaches the whole vocabulary
        for value in values:
            at.slider(key=widget).set_value(value)
            checked(at.run())
            assert at.slider(key=widget).value == value
            table, text = at.table[0].value, said(at)
            greedy, samples = table.iloc[0], table.iloc[1:]
            repeated = greedy["words in a repeated 4-word run"]
            assert f"{repeated:.0%} of its words sit in a run of 4 words that it writes more than once" in text
            assert ("and it ends in a loop" in text) == (greedy["ends in a loop"] == "yes")
            assert ("does not end in a loop" in text) == (greedy["ends in a loop"] == "no")
            entropy = "model's own entropy (nats)"  # before the rule: on greedy's very text, greedy's entropy
            for _, sample in samples[samples["characters the same as greedy's"] == 200].iterrows():
                assert abs(sample[entropy] - greedy[entropy]) < 1e-6, (strategy, value)
            if (strategy, value) == ("top_k", 1):  # exactly greedy, as the answer says: every sample on its text
                assert (samples["characters the same as greedy's"] == 200).all()
            g, shown = round(greedy["mean p(chosen)"], 3), samples["mean p(chosen)"].round(3)
            assert f"**{samples['mean p(chosen)'].mean():.3f}**" in text
            assert f"from {samples['mean p(chosen)'].min():.3f} to {samples['mean p(chosen)'].max():.3f}" in text
            n = len(samples)
            if (shown < g).all():
                assert f"lower than greedy's in all {n}" in text
            elif (shown > g).all():
                assert f"higher than greedy's in all {n}" in text
            elif (shown == g).all():
                assert f"the same as greedy's in all {n}" in text
            else:
                counts = [(k, w) for k, w in (((shown < g).sum(), "lower"), ((shown > g).sum(), "higher")) if k]
                k, what = counts[0] if counts else ((shown == g).sum(), "the same")
                assert f"{what} {'as' if what == 'the same' else 'than'} greedy's in {k} of {n}" in text
            assert f"{(samples['ends in a loop'] == 'yes').sum()} of {n} end in a loop" in text
            follows = samples["characters the same as greedy's"].tolist()
            assert ("exactly greedy's 200 characters" in text) == (min(follows) == 200)
            if min(follows) < 200:
                assert ", ".join(map(str, follows[:-1])) + f" and {follows[-1]} of its 200" in text
    assert (at.table[0].value["characters the same as greedy's"] < 200).any()  # p = 1: sampled, not greedy
    assert "the model's own uncertainty, before the rule" in " ".join(c.value for c in at.caption)


def test_keep_or_overwrite_at_every_bias_shows_the_same_numbers_in_its_metrics_and_sentences():
    at = lesson("keep-or-overwrite")
    for bias in (-2.0, 1.0, 2.4, 2.5, 8.0):
        at.slider(key="lessons_keep_bias").set_value(bias).run()
        shown, text = metrics(checked(at)), said(at)
        kept, half = shown["kept per step σ(b)"], shown["half-life"]
        assert f"σ({bias:g}) = **{kept}**" in text and f"**{half}**" in text
        assert f"= {shown['time constant 1 / (1 − σ(b))']}" in text
        ratio = (1 + math.exp(bias + 1)) / (1 + math.exp(bias))
        assert f"multiplies τ by **{ratio:.2f}**" in text
        assert ("close to e" in text) == (ratio >= 0.95 * math.e)
    assert (kept, half) == ("0.99966", "2,067 steps")  # at b = 8: not "1.000", not "2066.6"
    for model in ("char-gru-torch_latest", "char-gru-seed_latest", "char-lstm_latest", "scribe-alpha_latest"):
        at.selectbox(key="lessons_keep_model").set_value(model).run()
        text, learned = said(checked(at)), at.table[0].value
        assert bundled_title(model) in models_named(at)
        layer = int(re.search(r"in its layer (\d+)", text).group(1))
        row = learned[learned["layer"] == layer].iloc[0]
        assert f"**{row['median keep bias']:.2f}**" in text
        assert f"would keep {row['kept per step at the median bias']} per step, a half-life of " in text
        assert f"{row['half-life (steps)']} steps" in text  # the table and the sentence, one precision


def test_why_the_rnn_forgets_names_the_cell_its_metrics_rank_at_every_length():
    at = lesson("vanilla-forgets")
    for steps, trained in ((20, True), (20, False), (100, True), (200, True)):
        at.slider(key="lessons_forget_steps").set_value(steps)
        at.toggle(key="lessons_forget_trained").set_value(trained)
        checked(at.run())
        text = said(at)
        g = {label.split(":")[0]: float(value) for label, value in metrics(at).items()}
        low, high = min(g.values()), max(g.values())
        fastest = [label for label, value in g.items() if value == low]
        if low < high:
            assert f"fastest, g = {low:.3f}" in text and f"the most, g = {high:.3f}" in text
            assert all(label in text.split("fastest")[0].split("**")[-2] for label in fastest)
        else:
            assert f"All {len(g)} lose at the same rate to three decimals, g = {low:.3f}" in text
        span = min(steps, 30)
        assert (f"Over all {count(steps, 'step')}" in text) == (steps <= 30)
        assert all(int(k) < steps for k in re.findall(r"(\d+) steps back", text))  # never past the text
        verdict = vanilla_rnn_verdict(g, bundled_title("char-rnn"))  # the same rule as tests/test_lesson_claims.py
        assert [phrase for phrase in RNN_VERDICTS if phrase in text] == [verdict]
        assert f"g^{span - 1} = **" in text
        assert ("fresh, untrained copies" in models_named(at)) == (not trained)
    assert f"0.7^50 ≈ {power(0.7**50)}" in answer(at) and f"0.6^(1/50) ≈ {0.6 ** (1 / 50):.3f}" in answer(at)


def numbers(values):
    """A chart's data as a list: Plotly writes a numpy array as its bytes in base 64."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def test_the_state_lesson_reads_its_curve_for_every_model_and_labels_its_points_in_words():
    at = lesson("state-is-memory")
    for model in ("char-gru-torch_latest", "char-rnn_latest", "scribe-alpha_latest"):
        at.selectbox(key="lessons_state_model").set_value(model).run()
        text = said(checked(at))
        (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("lessons_state_chart")]
        trace = json.loads(chart.proto.spec)["data"][0]
        ks, losses, hovers = numbers(trace["x"]), numbers(trace["y"]), trace["text"]
        assert not any("every never" in h for h in hovers) and hovers[-1].startswith("state never reset")
        reset, carried = losses[0], losses[-1]
        assert f"**{reset:.2f} nats/char**" in text and f"**{carried:.2f}**" in text
        if round(carried, 2) < round(reset, 2):
            k = next(k for k, loss in zip(ks, losses) if loss <= (reset + carried) / 2)
            share = (reset - losses[ks.index(k)]) / (reset - carried)
            assert f"once the state lives **{k} token" in text
            assert f"**{share:.0%}** of that gain" in text or share >= 1
        assert "most of" not in text
        assert bundled_title(model) in models_named(at)


def test_the_scan_race_says_which_way_wins_at_the_lengths_its_table_shows():
    at = lesson("scan")
    # {H: the scan's speed-up at the longest T}, as each table showed it: the default width's first
    last = {at.select_slider(key="lessons_scan_hidden").value: at.table[0].value["speed-up of the scan"].iloc[-1]}
    for width in (8, 2048):
        at.select_slider(key="lessons_scan_hidden").set_value(width).run()
        race, text = at.table[0].value, said(checked(at))
        last[width] = race["speed-up of the scan"].iloc[-1]
        wins = race.loc[race["speed-up of the scan"] > 1, "length T"].tolist()
        if not wins:
            assert "the loop wins at every length" in text
        elif len(wins) == len(race):
            assert "the parallel scan wins at every length" in text
        else:
            assert "the parallel scan wins at T = " + ", ".join(map(str, wins[:-1])) in text
        assert f"H = {count(width, 'unit')}" in text and "random numbers" in text
        assert ("Both ways give the same" in text) == (race["largest difference"].max() < 1e-5)
    # the widths compared from the two tables' timings (lesson 7 once said "few units favour the scan" always)
    speeds = [last[H] for H in sorted(last)]
    assert listing(f"{last[H]:.2f}× with H = {H:,}" for H in sorted(last)) in text and len(last) == 3
    assert ("fewer units favour the scan" in text) == all(a > b for a, b in zip(speeds, speeds[1:]))
    assert ("more units favour the scan" in text) == all(a < b for a, b in zip(speeds, speeds[1:]))
    assert "b_t = B_t \\odot e_t" in answer(at)  # B_t is the gate, b_t what a step writes


def test_one_step_says_what_each_cell_does_with_what_it_does_not_keep():
    at = lesson("step-through")
    for cell, does in (
        ("rnn", "moving by **"),
        ("gru", "of its old state and takes the rest from its candidate"),
        ("lstm", "of its cell state c and adds i_t ⊙ g_t on top"),
        ("scan", "of its old state and adds B_t ⊙ e_t on top"),
    ):
        at.selectbox(key="lessons_step_cell").set_value(cell).run()
        for step in (1, 19):
            at.slider(key="lessons_step_t").set_value(step).run()
            assert does in said(checked(at))
        assert bundled_title("char-" + {"gru": "gru-seed"}.get(cell, cell)) in models_named(at)
    h = (1 - 0.9) * (-0.2) + 0.9 * 0.5  # the answer's arithmetic, both conventions
    assert f"= {h:.2f}: it keeps 90%" in answer(at) and (1 - 0.1) * 0.5 + 0.1 * (-0.2) == h


def test_characters_or_subwords_compares_what_its_metrics_show_for_any_text():
    at = lesson("chars-or-subwords")
    for text in ("To be.", "Zephyrs quixotically vex jabberwocky", "And so to bed. " * 60):
        at.text_area(key="lessons_tokens_text").set_value(text[:1000]).run()
        shown, words = metrics(checked(at)), said(at)
        chars, subwords = int(shown["character steps"]), int(shown["subword steps"])
        assert ("fewer steps for its memory" in words) == (subwords < chars)
        char, sub = bundled_title("char-gru-torch"), bundled_title("scribe-alpha")  # as every page names them
        c, s = float(shown[f"{char}, nats/char"]), float(shown[f"{sub}, nats/char"])
        if abs(s - c) > 0.021:
            assert f"{sub if s < c else char} predicts it better" in words
        elif abs(s - c) < 0.019:
            assert "about equally well" in words


def test_the_gate_bias_study_says_which_arms_learned_from_the_accuracies_it_shows():
    at = lesson("gate-biases")
    for metric in ("val_accuracy", "val_loss", "z_mean"):
        at.radio(key="lessons_study_metric").set_value(metric).run()
        checked(at)
    at.radio(key="lessons_study_metric").set_value("val_accuracy").run()
    accuracy = {label.split(":")[0]: float(v.rstrip("%")) / 100 for label, v in metrics(at).items()}
    text = said(at)
    learned = [arm for arm, a in accuracy.items() if a >= LEARNED - 5e-4]
    assert ("Every arm reached" in text) == (len(learned) == len(accuracy))
    assert ("What it cannot show" in text) == (not learned)
    assert "360 test images" in text


def test_toy_tasks_read_the_shipped_table_at_every_task_and_distance():
    shipped = pd.read_csv(BUNDLED_DIR / "memory_probe.csv")
    at = lesson("toy-tasks")
    for task in TOY_TASKS:
        at.radio(key="lessons_toy_task").set_value(task).run()
        for distance in ("5", "200"):
            at.select_slider(key="lessons_toy_k").set_value(distance).run()
            text = said(checked(at))
            here = shipped[(shipped["task"] == task) & (shipped["distance"] == int(distance))]
            beating = [cell_label(r["cell"]) for _, r in here.iterrows() if r["accuracy"] >= r["chance"] + AT_CHANCE]
            assert (f"At k = {distance}, no cell beats chance" in text) == (not beating)
            for cell, runs in shipped[shipped["task"] == task].groupby("cell"):
                line = next(x for x in text.split("\n") if x.startswith(f"- **{cell_label(cell)}**"))
                held = runs.sort_values("distance")["accuracy"].fillna(0).ge(HOLDS).tolist()
                assert ("at no distance measured" in line) == (not any(held))
    # the answer's reading of the scan, in the shipped curves: brackets held at every distance, the first
    # symbol recalled now and then over a few steps and not over many
    scan = shipped[shipped["cell"] == "scan"].set_index(["task", "distance"])["accuracy"]
    assert (scan["brackets"] >= HOLDS).all() and "Counting brackets is a sum" in answer(at)
    recall_chance = shipped.loc[(shipped["task"] == "recall") & (shipped["distance"] == 50), "chance"].iloc[0]
    assert scan["recall", 5] > scan["recall", 20] and scan["recall", 50] < recall_chance + AT_CHANCE
    # and the gated cells' reach on recall, against the scan's, as the shipped curves show it
    reach, gated = (
        {},
        [cell for cell in TOY_CELLS if keeps_with_gates(cell)],
    )  # the runners whose gates read their state
    for cell in (*gated, "scan"):
        runs = shipped[(shipped["task"] == "recall") & (shipped["cell"] == cell)].sort_values("distance")
        held = runs["accuracy"].fillna(0).ge(HOLDS).tolist() + [False]
        reach[cell] = ([0] + runs["distance"].tolist())[held.index(False)]
        where = f"up to k = {reach[cell]}" if reach[cell] else "at no distance"
        assert f"the {cell_label(cell)} holds {where}" in answer(at), cell
    further = all(reach[cell] > reach["scan"] for cell in gated)
    assert ("that is how they recall over longer distances" in answer(at)) == further
