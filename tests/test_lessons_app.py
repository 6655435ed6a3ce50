"""AppTest for the Lessons page: every lesson renders from a deep link (?lesson=<slug>), its control
changes the figure it computes, its answer sits behind a reveal, and its link carries the settings
to the full page. Also: the glossary on every page, Home's pointer, a missing bundled model, and a
link within the session that brings a page new settings.

Kept small for 2 CPU cores: the lessons read a 500-character passage and generate 120-200 tokens;
cached results are shared between the tests of one process.

Long (over 400 lines) because it has a test per lesson (ten), each a few lines over one opener.
"""

import json
import re
from pathlib import Path

import pytest
from helpers import preformatted_texts, without_errors
from streamlit.testing.v1 import AppTest

import ui.lessons
from lab.experiments.probe import TOY_CELLS
from lab.lessons.reading import SEEDS
from ui.cell_labels import cell_label
from ui.lessons import LESSONS
from ui.shared.common import PAGES
from ui.shared.model_names import bundled_title

ROOT = Path(__file__).resolve().parent.parent

APP = str(ROOT / "app.py")
LESSONS_PAGE = "pages/7_Lessons.py"
# the bundled models these pages open on; tests/conftest.py fails the tests when one is missing
NEEDED = ["char-rnn", "char-gru-seed", "char-gru-torch", "char-lstm", "char-scan", "scribe-alpha"]


def lesson(slug, **state):
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(LESSONS_PAGE)
    at.query_params["lesson"] = slug
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def metrics(at):
    return {m.label: m.value for m in at.metric}


def notice(at):
    texts = [m.value for m in at.markdown if m.value.startswith("#### What to notice")]
    assert len(texts) == 1
    return texts[0]


def answer(at):
    """The reveal holds the answer: an expander "Show the answer", collapsed, with text inside."""
    reveal = [e for e in at.main.expander if e.label == "Show the answer"]
    assert len(reveal) == 1 and not reveal[0].proto.expanded
    text = " ".join(m.value for m in reveal[0].markdown)
    assert len(text) > 80
    return text


def full_page_link(at):
    links = at.main.get("page_link")
    assert len(links) == 1
    return links[0].proto.page, dict(pair.split("=", 1) for pair in links[0].proto.query_string.split("&"))


def test_lessons_is_second_in_the_sidebar_and_home_sends_new_students_there():
    assert list(PAGES)[:2] == ["Home", "Lessons"]
    at = AppTest.from_file(APP, default_timeout=60).run()
    without_errors(at)
    assert "Start with the lessons" in " ".join(m.value for m in at.main.markdown)
    assert [link.proto.page for link in at.main.get("page_link")][0] == "Lessons"


@pytest.mark.parametrize("page", ["app.py", LESSONS_PAGE, "pages/4_Memory.py"])
def test_the_glossary_is_one_click_away_on_every_page(page):
    at = AppTest.from_file(APP, default_timeout=120)
    if page != "app.py":
        at.switch_page(page)
    at.run()
    glossary = [e for e in at.sidebar.expander if "Glossary" in e.label]
    assert len(glossary) == 1
    text = glossary[0].markdown[0].value
    for term in ("gate", "state", "BPTT", "nats/char", "convention", "chrono initialisation", "random seed"):
        assert f"**{term}**" in text


def test_the_url_names_the_lesson_and_a_bad_slug_is_ignored_with_a_warning():
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(LESSONS_PAGE).run()
    without_errors(at)
    first = next(iter(LESSONS))
    assert at.query_params["lesson"] == first
    assert at.header[0].value == f"1 · {LESSONS[first].title}"
    at = lesson("no-such-lesson")
    assert any("no-such-lesson" in w.value.replace("\\", "") for w in at.warning)
    assert at.header[0].value.endswith(LESSONS[first].title)
    # the next-lesson button moves on, and the URL follows
    at = lesson("vanilla-forgets", lessons_forget_steps=30)
    at.button(key="lessons_next").click().run()
    without_errors(at)
    assert at.query_params["lesson"] == "chars-or-subwords"


def step_tables(at):
    """The step-through's tables, as lists of rows (every table but the embedding charts)."""
    return [t.value.to_dict("list") for t in at.table]


def test_step_through_shows_each_equation_with_the_cells_numbers_and_steps_on():
    at = lesson("step-through")
    without_errors(at)
    assert at.session_state["lessons_step_t"] == 1 and at.query_params["lesson"] == "step-through"
    # the GRU in both conventions: one table each of every number its equations read and write, in the order
    # they are computed, then the decision in both letters
    tables = step_tables(at)
    assert len(tables) == 3
    seed_update, torch_update, decision = tables
    assert list(seed_update) == ["unit", "h_{t−1}", "r_t", "z_t", "h̃_t", "h_t"]
    assert list(torch_update) == ["unit", "h_{t−1}", "r_t", "z_t", "n_t", "h_t"]
    assert seed_update["h_{t−1}"] == [0.0] * 5  # the first step starts from the zero state
    seed_gru = bundled_title("char-gru-seed")  # as every page names it
    shares = {row[0]: row[1:] for row in zip(*decision.values())}  # a row per share, a column per unit
    assert list(decision) == ["share", *(f"unit {u}" for u in range(5))]
    assert shares[f"{seed_gru}: z_t (overwrites)"] == tuple(seed_update["z_t"])
    assert shares["PyTorch: z_t (keeps)"] == tuple(torch_update["z_t"])
    for a, b in zip(shares[f"{seed_gru}: 1 − z_t (keeps)"], seed_update["z_t"]):
        assert a == pytest.approx(1 - b)
    for z, n, h_prev, h in zip(*(torch_update[c] for c in ("z_t", "n_t", "h_{t−1}", "h_t"))):
        assert h == pytest.approx((1 - z) * n + z * h_prev, abs=2e-3)  # the table's numbers obey the equation
    assert "unit 0: h_t = (1 − " in notice(at) and "0.43" in answer(at)
    assert full_page_link(at) == (
        "Gates",
        {"section": "unit", "model": "char-gru-seed_latest", "text": "To+be%2C+or+not+to+be", "unit": "0"},
    )
    # a step on: the numbers move, the state it starts from is the one the first step left, the URL follows
    at.button(key="lessons_step_next").click().run()
    without_errors(at)
    assert at.session_state["lessons_step_t"] == 2 and at.query_params["t"] == "2"
    second = step_tables(at)
    assert second[0]["h_{t−1}"] == seed_update["h_t"] and second[0]["h_t"] != seed_update["h_t"]
    assert second[2] != decision
    at.slider(key="lessons_step_t").set_value(19).run()
    assert "Step t = 19 of 19" in " ".join(m.value for m in at.markdown)
    assert at.button(key="lessons_step_next").disabled
    at.button(key="lessons_step_back").click().run()
    assert at.session_state["lessons_step_t"] == 18


@pytest.mark.parametrize(
    "cell, columns",
    [
        ("rnn", ["unit", "h_{t−1}", "h_t"]),
        ("lstm", ["unit", "h_{t−1}", "i_t", "f_t", "g_t", "o_t", "c_{t−1}", "c_t", "h_t"]),
        ("scan", ["unit", "e_t", "A_t", "B_t", "h_{t−1}", "h_t"]),
    ],
)
def test_step_through_opens_from_a_link_on_any_cell_and_step(cell, columns):
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page(LESSONS_PAGE)
    at.query_params.update({"lesson": "step-through", "cell": cell, "t": "3", "text": "Ham. To be"})
    at.run()
    without_errors(at)
    assert not at.warning
    assert at.session_state["lessons_step_t"] == 3 and at.session_state["lessons_step_cell"] == cell
    tables = step_tables(at)
    assert len(tables) == 1 and list(tables[0]) == columns  # one model: one table of all its numbers
    assert "Step t = 3 of 10" in " ".join(m.value for m in at.markdown)
    at.multiselect(key="lessons_step_units").set_value([7, 100]).run()
    assert step_tables(at)[-1]["unit"] == [7, 100]
    assert dict(at.query_params) == {"lesson": "step-through", "cell": cell, "t": "3", "text": "Ham. To be"}
    # a shorter text: the step stays on the text
    at.text_input(key="lessons_step_text").set_value("To").run()
    without_errors(at)
    assert at.session_state["lessons_step_t"] == 2


def test_every_lessons_settings_are_its_own():
    from ui.lessons import URL_SETTINGS

    names = [name for lesson in LESSONS.values() for name in lesson.settings]
    assert len(names) == len(set(names)) == len(URL_SETTINGS) and "lesson" not in names


def test_state_is_memory_measures_the_collapse_and_samples_both_ways():
    at = lesson("state-is-memory")
    without_errors(at)
    reset, carried = (
        float(metrics(at)[k].split()[0]) for k in ("state reset every token", "state carried through the passage")
    )
    assert reset - carried > 0.5
    assert f"**{reset:.2f} nats/char**" in notice(at) and f"**{carried:.2f}**" in notice(at)
    boxes = [h.proto.body for h in at.main.html if "white-space: pre-wrap" in h.proto.body]
    assert len(boxes) == 2 and boxes[0] != boxes[1]  # stateful and stateless samples
    assert "bigram" in answer(at)
    assert full_page_link(at) == (
        "Sample",
        {"model": "char-gru-torch_latest", "prompt": "ROMEO%3A%0A", "seed": "0", "stateless": "top_k"},
    )
    at.selectbox(key="lessons_state_model").set_value("char-rnn_latest").run()
    without_errors(at)
    assert float(metrics(at)["state carried through the passage"].split()[0]) != carried
    assert full_page_link(at)[1]["model"] == "char-rnn_latest"


def test_choosing_the_next_token_control_changes_the_measured_figures():
    at = lesson("next-token")
    without_errors(at)
    table = at.table[0].value
    assert table["sample"].tolist() == ["greedy"] + [f"temperature T=1, seed {s}" for s in range(SEEDS)]
    assert f"**{table['mean p(chosen)'][0]:.3f}**" in notice(at)
    at.slider(key="lessons_choose_T").set_value(0.3).run()
    without_errors(at)
    colder = at.table[0].value
    assert colder["sample"][1] == "temperature T=0.3, seed 0"
    assert colder["mean p(chosen)"][1:].mean() > table["mean p(chosen)"][1:].mean()  # colder: likelier tokens
    assert colder["mean p(chosen)"][0] == table["mean p(chosen)"][0]  # greedy did not move
    assert full_page_link(at) == (
        "Sample",
        {"model": "char-gru-torch_latest", "prompt": "ROMEO%3A%0A", "tokens": "200", "seed": "0", "temperature": "0.3"},
    )
    at.radio(key="lessons_choose_strategy").set_value("top_k").run()
    at.slider(key="lessons_choose_k").set_value(1).run()
    without_errors(at)
    top1 = at.table[0].value
    assert (top1["mean p(chosen)"] == top1["mean p(chosen)"][0]).all()  # top-1 is greedy, whatever the seed
    assert full_page_link(at)[1]["top_k"] == "1"
    assert "greedy" in answer(at)


def test_keep_or_overwrite_turns_a_bias_into_a_half_life_and_reads_the_trained_biases():
    at = lesson("keep-or-overwrite")
    without_errors(at)
    assert metrics(at)["kept per step σ(b)"] == "0.731"
    assert metrics(at)["half-life"] == "2.2 steps"  # ln 0.5 / ln sigmoid(1)
    at.slider(key="lessons_keep_bias").set_value(4.0).run()
    without_errors(at)
    assert metrics(at)["kept per step σ(b)"] == "0.982"
    assert "σ(4) = **0.982**" in notice(at)
    assert full_page_link(at) == (
        "Memory",
        {"section": "analytic", "biases": "-1%2C+0%2C+1%2C+2%2C+4%2C+6.2%2C+4", "lag": "128"},
    )
    learned = at.table[0].value
    # the cell in plain words, not the lab's name for it (gru_torch)
    assert set(learned["cell"]) == {"GRU (z keeps)"}
    assert learned["layer"].tolist() == list(range(1, len(learned) + 1))  # layers counted from 1, as every page
    at.selectbox(key="lessons_keep_model").set_value("scribe-alpha_latest").run()
    without_errors(at)
    learned = at.table[0].value
    assert learned["cell"].tolist() == ["GRU (z overwrites)", "GRU (z overwrites)"]
    layer = int(re.search(r"in its layer (\d+)", notice(at)).group(1))  # the layer with the longest memories
    bias = learned.loc[learned["layer"] == layer, "median keep bias"].item()  # layers counted from 1 on both
    assert "−b_z" in notice(at) and f"{bias:.2f}" in notice(at)
    assert "Long memories live in a few units" in notice(at)  # the spread over units, not the median alone
    assert "Negative" in answer(at)


def test_why_the_rnn_forgets_fits_a_decay_per_step_that_moves_with_training():
    at = lesson("vanilla-forgets", lessons_forget_steps=40)
    without_errors(at)
    trained = metrics(at)
    assert set(trained) == {f"{bundled_title(m)}: per step g" for m in ("char-rnn", "char-gru-torch", "char-lstm")}
    factors = {label.split(":")[0]: float(g) for label, g in trained.items()}
    assert all(0 < g < 1 for g in factors.values())
    fastest, slowest = min(factors, key=factors.get), max(factors, key=factors.get)
    said = notice(at)  # the sentence names the cells the figure shows losing fastest and keeping most
    assert f"**{fastest}** loses fastest, g = {factors[fastest]:.3f}" in said
    assert f"**{slowest}** keeps the most, g = {factors[slowest]:.3f}" in said
    at.toggle(key="lessons_forget_trained").set_value(False).run()
    without_errors(at)
    assert metrics(at) != trained
    assert full_page_link(at) == ("Memory", {"section": "gradients", "steps": "40"})
    assert "0.990" in answer(at)


def test_characters_or_subwords_counts_steps_and_compares_nats_per_char():
    at = lesson("chars-or-subwords", lessons_tokens_text="To be, or not to be.")
    without_errors(at)
    first = metrics(at)
    assert first["character steps"] == "20" and int(first["subword steps"]) < 20
    at.text_area(key="lessons_tokens_text").set_value("Whether 'tis nobler in the mind to suffer").run()
    without_errors(at)
    second = metrics(at)
    subword = f"{bundled_title('scribe-alpha')}, nats/char"
    assert second["character steps"] == "41" and second[subword] != first[subword]
    assert f"**{second['subword steps']}**" in notice(at)
    assert full_page_link(at)[1]["model"] == "scribe-alpha_latest"
    assert "per token" in answer(at)


def test_characters_the_subword_model_cannot_read_give_an_error_not_a_traceback():
    at = lesson("chars-or-subwords", lessons_tokens_text="Snow ☃ man")
    assert not at.exception
    assert "Tokenising did not work" in " ".join(e.value for e in at.error)


def test_a_recurrence_you_can_scan_agrees_and_is_timed_at_the_chosen_width():
    at = lesson("scan")
    without_errors(at)
    race = at.table[0].value
    assert race["length T"].tolist() == ui.lessons.scanning.SCAN_LENGTHS
    assert (race["largest difference"] < 1e-5).all()
    assert "H = 64 units" in notice(at)
    at.select_slider(key="lessons_scan_hidden").set_value(8).run()
    without_errors(at)
    narrow = at.table[0].value
    assert "H = 8 units" in notice(at) and not narrow["loop (ms)"].equals(race["loop (ms)"])
    at.button(key="lessons_scan_again").click().run()
    assert not at.table[0].value["loop (ms)"].equals(narrow["loop (ms)"])  # measured anew
    assert full_page_link(at) == ("Gates", {"model": "char-scan_latest"})
    assert "h_{t-1}" in answer(at)


def test_the_gate_bias_study_is_read_with_what_it_shows_and_what_it_cannot():
    from lab.experiments.ablation import (
        SHIPPED_DIR,
        arm_title,
        compare_with_baseline,
        gap_verdict,
        load_results,
        verdict_rule,
    )
    from lab.experiments.ablation import answer as study_answer

    study = load_results(SHIPPED_DIR)
    at = lesson("gate-biases")
    without_errors(at)
    accuracy = metrics(at)
    assert set(accuracy) == {f"{arm_title(arm)}: final test accuracy" for arm in study["summary"]}
    # one verdict rule, stated once, in the Ablation page's plain words (issue 51): its answer, not the statistics'
    read = re.sub(r"\\(.)", r"\1", notice(at))  # the file's words made inert (ui.shared.plain_text.plain), read
    assert f"**What the study says.** {study_answer(study)}" in read
    assert read.count(verdict_rule()) == 1
    for jargon in ("chrono", "ablated", "Welch", "p = ", "log U"):
        assert jargon not in read + answer(at), jargon
    assert "the luck of the seeds" not in read  # the random seeds, in the student's words
    learned = max(s["val_accuracy_mean"] for s in study["summary"].values()) >= 0.5
    assert ("What it means" if learned else "What it cannot show") in notice(at)
    at.radio(key="lessons_study_metric").set_value("z_mean").run()
    without_errors(at)
    gates = metrics(at)
    assert float(gates["usual start: final mean update gate z (keeps)"]) > float(
        gates["held at 0: final mean update gate z (keeps)"]
    )  # the +1 bias keeps more, as the study found
    (ablated,) = [c for c in compare_with_baseline(study) if c["arm"] == "ablated"]
    summary = study["summary"]
    verdict, _ = gap_verdict(
        study["dataset"]["n_test"],
        summary["ablated"]["val_accuracy_mean"],
        summary["baseline"]["val_accuracy_mean"],
        ablated,
    )
    assert answer(at).startswith("For" if verdict == "real" else "No.") and "by the rule above" in answer(at).lower()
    assert full_page_link(at) == ("Ablation", {"section": "live", "seeds": "3"})


def test_watch_it_learn_trains_on_the_paragraph_given_and_replays_its_samples_at_a_reading_pace(monkeypatch):
    monkeypatch.setattr(ui.lessons.learning, "LEARN_STEPS", 40)  # a short run: the same code, fewer samples
    at = lesson("learn-your-text")
    without_errors(at)
    assert any("Press **Start**" in i.value for i in at.info)
    assert full_page_link(at) == (
        "Train",
        {
            "cell": "gru_torch",
            "emb": "32",
            "hidden": "128",
            "lr": "0.002",
            "batch": "16",
            "block": "32",
            "seconds": "30",
            "corpus": "upload",
        },
    )
    at.button(key="lessons_learn_start").click().run()
    without_errors(at)
    first_job = at.session_state["lessons_learn_job"]
    assert first_job.wait(120) == "finished"
    written = [e["step"] for e in first_job.events() if e["type"] == "sample" and e["text"] is not None]
    assert written == ui.lessons.learning.sample_steps(40)  # at its log-spaced steps, and only there
    at.run()
    without_errors(at)
    shown = at.table[0].value
    assert 1 <= len(shown) < len(written)  # the replay shows them one at a time, not all at once
    at.session_state["lessons_learn_replay_from"] -= 1000  # as if the student had watched for minutes
    at.run()
    timeline = at.table[0].value
    assert timeline["step"].tolist() == written
    assert f"At step {timeline['step'].iloc[-1]} it gives back **{timeline['characters reproduced'].iloc[-1]}**" in (
        notice(at)
    )
    assert "the first space at step" in notice(at).lower() and "never trains on" in notice(at)
    last = [e for e in first_job.events() if e["type"] == "eval"][-1]  # the answer reads the run's own losses
    assert f"{last['val_loss']:.2f} nats/char" in answer(at)
    assert answer(at).startswith("No: it has memorised") == (last["val_loss"] > last["train_loss"])
    # another paragraph: the run shown is marked as the old one until a new run learns the new text
    other = ui.lessons.common.PASSAGE * 2
    at.text_area(key="lessons_learn_text").set_value(other).run()
    assert any("earlier version" in i.value for i in at.info)
    at.button(key="lessons_learn_start").click().run()
    second_job = at.session_state["lessons_learn_job"]
    assert second_job is not first_job and second_job.wait(120) == "finished"
    samples = [e["text"] for e in second_job.events() if e["type"] == "sample" and e["text"] is not None]
    assert samples and all(s.startswith(other[: ui.lessons.learning.LEARN_PROMPT_CHARS]) for s in samples)
    at.run()
    assert not at.table[0].value["sample"].equals(timeline["sample"])


def chart_data(at, key):
    """The traces of the plotly chart whose key ends with `key`: [(name, x, y), ...]."""
    charts = [c for c in at.get("plotly_chart") if c.proto.id.endswith(key)]
    assert len(charts) == 1
    return [(t.get("name"), t["x"], t["y"]) for t in json.loads(charts[0].proto.spec)["data"]]


def test_toy_tasks_show_every_toy_cell_against_distance_and_train_them_live():
    at = lesson("toy-tasks", lessons_toy_seconds=5)
    without_errors(at)
    shipped = metrics(at)
    assert list(shipped) == [f"{cell_label(c)}, shipped" for c in TOY_CELLS]
    recall = chart_data(at, "lessons_toy_chart")
    # a curve per cell, from the shipped table, named as the pages name cells
    cells = [name.rsplit(" (", 1)[0] for name, _, _ in recall if not name.startswith("chance")]  # and chance's line
    assert cells == [cell_label(c) for c in TOY_CELLS]
    assert "At k = 20" in notice(at) and all(cell_label(c) in notice(at) for c in TOY_CELLS)
    example = preformatted_texts(at)[0]
    assert "→" in example and example.count(" ") > 20  # an example sequence of 21 tokens
    at.radio(key="lessons_toy_task").set_value("brackets").run()
    without_errors(at)
    assert chart_data(at, "lessons_toy_chart") != recall and at.query_params["task"] == "brackets"
    at.select_slider(key="lessons_toy_k").set_value("5").run()
    assert "At k = 5" in notice(at) and at.query_params["distance"] == "5"
    assert "Counting brackets is a sum" in answer(at)
    assert full_page_link(at) == ("Memory", {"section": "probe", "probe_task": "brackets"})
    # the live run: every toy cell at once, each a job of its own that reports its accuracy
    at.button(key="lessons_toy_start").click().run()
    without_errors(at)
    jobs = at.session_state["lessons_toy_jobs"]
    assert list(jobs) == list(TOY_CELLS) and all(job.wait(120) == "finished" for job in jobs.values())
    at.run()
    live = at.table[0].value
    assert live["cell"].tolist() == [cell_label(c) for c in TOY_CELLS] and (live["steps"] > 0).all()
    assert live["accuracy"].map(lambda shown: 0 <= float(shown.rstrip("%")) <= 100).all()  # as shown: "47.3%"
    live_chart = [name for name, _, _ in chart_data(at, "lessons_toy_chart") if not name.startswith("chance")]
    assert len(live_chart) == 2 * len(TOY_CELLS)  # the shipped curves and the live points
    at.radio(key="lessons_toy_task").set_value("parity").run()
    assert any("press Train to run this task" in i.value for i in at.info)


def test_watch_it_learn_asks_for_a_longer_paragraph():
    at = lesson("learn-your-text", lessons_learn_text="Too short to learn from.")
    at.button(key="lessons_learn_start").click().run()
    assert not at.exception
    assert "at least 400" in " ".join(e.value for e in at.error)
    assert "lessons_learn_job" not in at.session_state


@pytest.mark.parametrize("slug", list(LESSONS))
def test_a_missing_bundled_model_gives_a_clear_message(slug, monkeypatch, tmp_path):
    monkeypatch.setattr(ui.lessons.common, "MODELS_DIR", tmp_path)
    at = lesson(slug, lessons_forget_steps=20)
    assert not at.exception, [e.value for e in at.exception]
    if slug not in ("scan", "learn-your-text"):  # these two need no bundled model
        assert any("missing from this installation" in w.value for w in at.warning)
    assert not at.error


def test_a_link_within_the_session_brings_its_settings_to_a_page_already_visited():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/4_Memory.py").run()
    at.radio(key="memory_section").set_value("gradients").run()
    assert at.session_state["memory_grad_steps"] == 100
    at.slider(key="memory_grad_steps").set_value(60).run()  # the student's own choice stays on later runs
    at.radio(key="memory_section").set_value("units").run()
    at.run()
    assert at.session_state["memory_grad_steps"] == 60
    at.query_params.clear()
    at.query_params.update({"section": "gradients", "steps": "30"})  # as a lesson's page_link opens the page
    at.run()
    assert not at.exception
    assert at.session_state["memory_grad_steps"] == 30 and at.slider(key="memory_grad_steps").value == 30


def test_a_link_within_the_session_brings_its_settings_to_the_train_page_too():
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/1_Train.py").run()
    assert at.session_state["train_hidden"] == 256  # the default preset's
    at.run()  # later runs keep the page's own settings
    assert at.session_state["train_hidden"] == 256
    at.query_params.clear()
    at.query_params["hidden"] = "128"  # as the last lesson's page_link opens the page
    at.query_params["cell"] = "lstm"
    at.run()
    assert not at.exception
    assert at.session_state["train_hidden"] == 128 and at.session_state["train_cell"] == "lstm"
