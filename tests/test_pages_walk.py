"""The pages' controls walked to their extremes, as tests/test_lessons_walk.py walks the lessons', and each
sentence that compares, ranks or counts checked against the numbers the page shows beside it (its chart,
its table, its form): the Memory page (the longest lag at both ends, a text too short for it, Steps T at
both ends, the models compared), the Gates page (a text of one and two characters, the default passage, the
longest text a character model reads and a longer one; the span at both ends of the text and over all of it)
and the Ablation page's live run at its smallest settings and at the largest of those its sentences read.

One AppTest per page, walked in place (cached figures are shared within the process), to keep the slow part
small on 2 busy cores. The sentences' logic over whole ranges is in tests/test_lesson_claims.py (Memory),
tests/test_gates_chance.py (Gates) and tests/test_ablation.py (the study's answer).
"""

import json
import math
import re
from pathlib import Path

from helpers import without_errors
from streamlit.testing.v1 import AppTest
from test_lessons_walk import numbers

from lab.experiments.ablation import AblationJob
from lab.experiments.ablation.conclusions import SIGNIFICANT
from lab.words import count, listing

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan"]
SHORT = "Ham:\nTo be, or not to be,--that is the question:--\nWhether 'tis"  # 60 characters


def opened(page, **state):
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page(page)
    for key, value in state.items():
        at.session_state[key] = value
    return without_errors(at.run())


def words(elements):
    """What elements show a student: their Markdown with ui.shared.plain_text.plain's escapes read."""
    return re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in elements))


def curves(at, key):
    """{trace name: (x, y)} of the chart with this key."""
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(key)]
    traces = json.loads(chart.proto.spec)["data"]
    return {t["name"]: (numbers(t["x"]), numbers(t["y"])) for t in traces if t.get("name") and "x" in t}


def shares_at(y, k):
    """A share the chart draws at lag k: a log axis has no 0, so the line ends (NaN) where none is left."""
    value = y[k - 1]
    return 0.0 if value != value else value


# ---------------------------------------------------------------------------
# Memory


def test_memory_says_what_its_charts_show_at_every_longest_lag_steps_and_text():
    at = opened("pages/4_Memory.py", memory_section="units")
    for lag, text in ((8, None), (256, None), (16, None), (256, SHORT)):
        if text is not None:
            at.text_area(key="memory_text").set_value(text)
        at.slider(key="memory_max_lag").set_value(lag).run()
        text = at.session_state["memory_text"]
        said = words(m for m in at.markdown if m.value.startswith("**What the chart shows.**"))
        lines = curves(without_errors(at), "memory_spread_chart")
        followed = min(lag, len(text) - 1)  # a character model: one token per character
        assert {x[-1] for x, _ in lines.values()} == {followed}, lag  # the chart ends where the sentence says
        why = (
            f"the longest lag is set to {count(lag, 'token')}"
            if followed == lag
            else f"the text is too short to follow a unit for more than {count(followed, 'token')}"
        )
        if followed < 10:  # lag 8: nothing followed for 10 tokens, and never read as none
            assert "no unit" not in said and f"is not measured here: {why}." in said, said
            continue
        share_10 = {name: shares_at(y, 10) for name, (_, y) in lines.items()}
        found = re.search(r"units: in (.+?), layer (\d+), (\d+) of its ([\d,]+) units \((\d+\.\d)%\)", said)
        named = next(n for n in lines if n.startswith(f"{found[1]} · layer {found[2]} "))
        assert share_10[named] == max(share_10.values())  # the layer with the most long memories
        assert f"{100 * share_10[named]:.1f}" == found[5]
        units = int(found[4].replace(",", ""))
        assert int(found[3]) == round(share_10[named] * units)
        assert ("a few units" in said) == (share_10[named] <= 0.2)
        if followed >= 100:
            kept = shares_at(lines[named][1], 100)
            assert (f"{round(kept * units)} ({kept:.1%}) after 100" if kept else "none after 100") in said
        else:  # 16 by the longest lag, 59 by the text: said as what stopped it
            assert f"not followed for 100 tokens ({why})" in said, said
        table = at.table[0].value
        assert len(table) == len(lines)  # one row per line of the chart, the same numbers
        assert {round(s, 6) for s in table["share keeping more than half after 10 tokens"]} == {
            round(s, 6) for s in share_10.values()
        }

    at.radio(key="memory_section").set_value("gradients").run()
    for steps, text in ((10, None), (400, None), (400, SHORT)):
        if text is not None:
            at.text_area(key="memory_text").set_value(text)
        at.slider(key="memory_grad_steps").set_value(steps).run()
        text = at.session_state["memory_text"]
        shorter = [c.value for c in without_errors(at).caption if "so T is shorter" in c.value]
        assert bool(shorter) == (len(text) < steps + 1)
        if shorter:
            assert f"The text has only {count(len(text), 'character')}" in shorter[0]
        for chart in ("memory_grad_trained", "memory_grad_fresh"):  # T steps back, or as many as the text has
            assert {len(x) for x, _ in curves(at, chart).values()} == {min(steps, len(text) - 1)}

    at.radio(key="memory_section").set_value("reach").run()
    for chosen in (None, ["char-lstm_latest"]):
        if chosen is not None:
            at.multiselect(key="memory_reach_checkpoints").set_value(chosen).run()
        said = words(m for m in without_errors(at).markdown if m.value.startswith("**What the chart shows.**"))
        travels = {}
        for name, (x, y) in curves(at, "memory_reach_chart").items():
            above = [k for k, kept in zip(x, y) if kept == kept and kept > 0.01]
            travels[name] = (above[-1] if above else 0, len(x))
        soonest, furthest = min(travels, key=lambda n: travels[n][0]), max(travels, key=lambda n: travels[n][0])

        def how_far(name):  # the bundled models here read characters: k counts them
            k, measured = travels[name]
            if k >= measured:
                return f"still keeps more than 1% of it after all {count(measured, 'character')} measured"
            if k == 0:
                return "keeps less than 1% of it one character later"
            return f"keeps more than 1% of it for {count(k, 'character')}"

        if len(travels) == 1:  # one model: said of it alone, never "every model here" nor "they do not differ"
            assert f"Change one token: the {soonest} {how_far(soonest)}." in said.replace("**", ""), said
            assert "every model" not in said and "differ" not in said
        elif travels[soonest][0] == travels[furthest][0]:
            assert f"every model here {how_far(soonest)}" in said, said
        else:  # every model tied at either end named, the verb agreeing
            ends = []
            for end in (travels[soonest][0], travels[furthest][0]):
                tied = [name for name in travels if travels[name][0] == end]
                keeps = how_far(tied[0]) if len(tied) == 1 else how_far(tied[0]).replace("keeps", "keep", 1)
                ends.append(f"the {listing(tied)} {keeps}")
            assert ", ".join(ends) in said.replace("**", ""), said
        assert len(travels) == (len(chosen) if chosen else 5)


# ---------------------------------------------------------------------------
# Gates


def cards(at):
    """The gallery's cards: (|r|, its caption)."""
    return [(abs(float(c.value.split()[2])), c.value) for c in at.caption if c.value.startswith("r = ")]


def units(at):
    """The span's table of units (the page's other table is its anchors')."""
    return [t.value for t in at.table if "|r|" in t.value.columns]


def test_gates_at_every_length_of_text_and_every_end_of_the_span_calls_a_finding_only_above_its_bar():
    at = opened("pages/3_Gates.py")
    passage = at.session_state["gates_text"]
    for text in ("a", "ab", passage, (passage * 20)[:2000], (passage * 30)[:4000]):
        at.text_area(key="gates_text").set_value(text).run()
        assert not at.exception, [e.value for e in at.exception]
        errors = words(at.error)
        if len(text) > 2000:  # the box takes 4,000 characters; a character model reads 2,000 of them at most
            assert errors == "Tracing did not work: text: is 4,000 tokens long, more than the limit of 2,000"
            continue
        if len(text) == 1:  # one character: no feature varies, no span can leave text outside it
            assert "no feature of the text varies on it" in errors
            assert words(at.info) == "Type a longer text to select a span of it."
            continue
        assert not errors, errors
        stated = re.search(  # the gallery's bar, in whichever of its two sentences the length calls for
            r"With ([\d,]+) characters, a correlation cannot single out a unit: among the ([\d,]+) correlations "
            r"compared, chance alone reaches \|r\| = (\d\.\d\d)"
            r"|Over these ([\d,]+) characters, chance alone puts the strongest of the ([\d,]+) correlations compared "
            r"at up to \|r\| = (\d\.\d\d)",
            words([*at.warning, *at.caption]),
        )
        n, bar = [g for g in stated.groups() if g][0::2]
        assert int(n.replace(",", "")) == len(text), words([*at.warning, *at.caption])
        bar = float(bar)
        assert cards(at)
        for r, caption in cards(at):  # each card's claim follows from the two numbers it prints
            assert ("within chance" in caption) == (r <= bar), (text[:20], r, bar, caption)
        assert all(round(r, 2) == 1.0 for r, _ in cards(at)) == (len(text) == 2)  # two tokens: every r is ±1
        for span in ((0, 0), (len(text) - 1, len(text) - 1), (0, len(text) - 1)):
            at.select_slider(key="gates_span").set_range(*span).run()
            heading = words(m for m in without_errors(at).markdown if m.value.startswith("**The units that fire on"))
            assert f"“{text[span[0] : span[1] + 1].replace(chr(10), '↵')}”" in heading or span[1] - span[0] > 40
            if span == (0, len(text) - 1):  # the whole text: nothing outside to stand out from
                assert "This span is the whole text" in words(at.info) and not units(at)
                continue
            (found,) = units(at)
            # the span's own bar: its sentence comes after the gallery's (a caption, or a warning on a short text)
            sentence = next(e.value for e in reversed([*at.caption, *at.warning]) if "correlations compared" in e.value)
            span_bar, too_few = float(re.search(r"\|r\| = (\d\.\d\d)", sentence)[1]), "cannot single out" in sentence
            strongest = found["|r|"].max()
            assert list(found["|r|"]) == sorted(found["|r|"], reverse=True)  # "ranked by the correlation"
            none = [c.value for c in at.caption if c.value.startswith("No unit stands out")]
            assert bool(none) == (not too_few and strongest <= span_bar)
            assert too_few == (len(text) == 2)
            if none:
                assert f"the strongest, |r| = {strongest:.2f}, is within chance" in none[0]


# ---------------------------------------------------------------------------
# Ablation: the live run


def accuracy_of(cell):
    """A shown accuracy, "15.8% ± 1.0" or "15.8%" -> 15.8."""
    return float(cell.split("%")[0])


def live_run(at, size, n_train, n_test, epochs, batch, seeds):
    """Set the live run's form, train both arms, and return the page once it shows the results."""
    at.selectbox(key="ablation_size").set_value(size)
    for key, value in (("train", n_train), ("test", n_test), ("epochs", epochs), ("batch", batch), ("seeds", seeds)):
        at.number_input(key=f"ablation_{key}").set_value(value)
    without_errors(at.button(key="FormSubmitter:ablation_live_form-Train both arms").click().run())
    job = at.session_state["ablation_job"]
    assert isinstance(job.job, AblationJob) and job.wait(600) == "finished", job.message
    return without_errors(at.run())


def test_the_live_ablation_says_what_its_table_shows_at_its_smallest_and_largest_settings(monkeypatch, tmp_path):
    """Smallest: one AdamW step of one random seed per arm, 10 test images. Largest of what the sentences read:
    360 test images, 3 random seeds (Welch's test), batch 128; two epochs (twenty, and 1,437 training images of
    1,024 steps, take minutes to hours on this CPU and change only the counts said, checked here at 2)."""
    monkeypatch.setenv("RNNLAB_ABLATION_DIR", str(tmp_path))  # no shipped study: only the live run's sentences
    at = opened("pages/6_Ablation.py", ablation_section="live")
    for size, n_train, n_test, epochs, batch, seeds in ((8, 16, 10, 1, 16, 1), (8, 16, 360, 2, 128, 3)):
        live_run(at, size, n_train, n_test, epochs, batch, seeds)
        shown = words([*at.markdown, *at.caption])
        steps = math.ceil(n_train / batch)
        seeds_said = f"random seed{'s' if seeds > 1 else ''} {', '.join(map(str, range(seeds)))}."
        sequences = f"{count(n_train, 'training sequence')} / {count(n_test, 'test sequence')}"
        assert f"{sequences} of **{count(size * size, 'step')}**" in shown
        assert (
            f"{count(epochs, 'epoch')} of {count(steps, 'AdamW step')} (batch {batch}" in shown and seeds_said in shown
        )
        (table,) = [t.value for t in at.table if "test accuracy" in t.value.columns]
        table = table.set_index("arm")
        assert table["random seeds"].tolist() == [seeds, seeds]
        for arm in ("baseline", "ablated"):  # the mean shown is the mean of the seeds shown
            by_seed = [accuracy_of(a) for a in table.loc[arm, "per random seed"].split(", ")]
            assert abs(accuracy_of(table.loc[arm, "test accuracy"]) - sum(by_seed) / seeds) < 0.051
        base, ablated = (accuracy_of(table.loc[arm, "test accuracy"]) for arm in ("baseline", "ablated"))
        assert f"Status: **finished** · {count(2 * seeds * epochs * steps, 'step')}" in shown  # every step of every run
        checks = words(at.success)  # the ablated arm's biases, held at 0: checked in every one of its runs
        assert all(f"ablated, random seed {s}: " in checks for s in range(seeds)) and "baseline, random" not in checks

        (said,) = [words([m]) for m in at.markdown if m.value.startswith("**The answer.**")]
        (study,) = [words([m]) for m in at.markdown if m.value.startswith("**What this study says:**")]
        assert f"baseline {base:.1f}%" in study and f"ablated {ablated:.1f}%" in study
        guessing = re.search(r"no arm names its ([\d,]+) test images better than guessing could \((\d+\.\d)%", said)
        if guessing:  # both arms at or under what guessing reaches, as the sentence says
            assert int(guessing[1].replace(",", "")) == n_test
            assert max(base, ablated) <= float(guessing[2]) and float(guessing[2]) > 10
            assert "no arm is above chance yet" in study
            continue
        found = re.search(
            r"named (\d+\.\d)% of the test images correctly, against (\d+\.\d)% with the usual start", said
        )
        assert found and (float(found[1]), float(found[2])) == (ablated, base), said
        gap = float(re.search(r"(\d+\.\d) points", said.split("usual start")[1])[1])
        assert abs(gap - abs(ablated - base)) < 0.11  # each accuracy shown to a tenth of a point
        under = re.search(r"under the (\d+\.\d) that ([\d,]+) test images can tell apart", said)
        p = re.search(r"p = (\d\.\d\d)", study)
        if under:
            assert gap < float(under[1]) + 0.05 and int(under[2].replace(",", "")) == n_test
            # the conclusion beside it reads the same test images and the same smallest difference they resolve
            assert re.search(rf"with {count(n_test, 'test image')},? a difference under {under[1]} points", study), (
                study
            )
        elif seeds == 1:
            assert "which a single random seed on a side cannot tell from luck" in said
        else:  # Welch's test of the seeds decides, as the conclusion's p says
            assert ("no more than the luck of the random seeds makes" in said) == (float(p[1]) >= SIGNIFICANT)
        assert bool(p) == (seeds > 1)
