"""The lesson of toy tasks that train in seconds (TensorFlow Playground for sequences): a task that
needs memory, the distance it must span, and one tiny cell of each kind side by side: the shipped results
of lab.experiments.probe over every distance, and a live run of them all at the chosen one."""

import streamlit as st

from lab.experiments.memory_race import start_toy_race
from lab.experiments.probe import TOY_CELLS, TOY_TASKS, ProbeConfig
from lab.lessons.toys import chance_words, gated_recall_words, live_toy_sentence, toy_sentences
from lab.words import count
from ui.cell_labels import cell_label, with_cell_labels
from ui.lessons.common import check_yourself, notice, open_full_page, shipped
from ui.shared.boundary import fragment
from ui.shared.links import Field
from ui.shared.live_refresh import live_refresh_seconds
from ui.shared.memory_charts import probe_figure
from ui.shared.plain_text import preformatted, said, user_errors
from ui.shared.sessions import register_job, session_key, train_in_process, watching_sessions
from ui.shared.shared_figures import run_key, shared_figure
from ui.shared.toy_results import RESULTS, cached_results, live_rows, shipped_results

DISTANCES = list(ProbeConfig.distances)
SETTINGS = {
    "task": (Field("choice", "Task", choices=tuple(TOY_TASKS)), "lessons_toy_task"),
    "distance": (Field("choice", "Distance", choices=tuple(str(k) for k in DISTANCES)), "lessons_toy_k"),
}
DEFAULTS = {"task": "recall", "distance": "20"}


def start_live_run(task, distance, seconds):
    """Every toy cell at once, each a TrainingJob of `seconds` where the runs train."""
    for job in st.session_state.get("lessons_toy_jobs", {}).values():
        job.stop()
    # all or none, as the Train page's races; joined where a classmate's identical run trains
    jobs = start_toy_race(task, distance, seconds, session_key(), "the cells", in_process=train_in_process())
    for job in jobs.values():
        register_job(job)
    st.session_state.lessons_toy_jobs, st.session_state.lessons_toy_for = jobs, (task, distance)


def live_view(results, task, distance):
    jobs = st.session_state.get("lessons_toy_jobs")
    shipped_rows = 0 if results is None else len(results)
    if jobs is None:
        figure = shared_figure(
            ("toy lesson", task, distance, shipped_rows), lambda: probe_figure(results, marked=distance)
        )
        st.plotly_chart(figure, key="lessons_toy_chart")
        st.info(f"Press **Train** to train all {len(TOY_CELLS)} cells from scratch at this distance, side by side.")
        return
    ran = st.session_state.lessons_toy_for
    live = live_rows(jobs, *ran)
    # the class's identical runs are shared (lab.runs): one figure for every page at the same evaluations
    read = tuple((cell, run_key(job), len(job.events(kind="eval", settled=True))) for cell, job in jobs.items())
    figure = shared_figure(
        ("toy lesson", task, distance, shipped_rows, ran, read),
        lambda: probe_figure(
            results, live_rows(jobs, *ran, at_evaluation=True) if ran == (task, distance) else None, marked=distance
        ),
    )
    st.plotly_chart(figure, key="lessons_toy_chart")
    if ran != (task, distance):
        st.info(
            f"The live run below trained {TOY_TASKS[ran[0]].in_a_sentence} at k = {ran[1]}: press Train to "
            "run this task and distance."
        )
    table = with_cell_labels(live)[["cell", "status", "steps", "accuracy", "chance"]]
    st.table(  # written out here rather than by a pandas Styler: a class redraws it thirty times over
        table.assign(
            accuracy=[f"{a:.1%}" if a == a else "not yet" for a in table["accuracy"]],
            chance=[chance_words(c) for c in table["chance"]],
        ),
        hide_index=True,
    )
    evaluated = [job.latest("eval", settled=True) for job in jobs.values()]
    trained = max((e["elapsed"] for e in evaluated if e), default=0)
    sentence = live_toy_sentence(live, trained, cell_label) if ran == (task, distance) else ""
    if sentence:
        st.markdown(sentence)
    for cell, job in jobs.items():
        if job.status == "failed":
            st.error(f"The {cell_label(cell)} run failed: {said(job.message)}")


@st.cache_resource(max_entries=64, show_spinner=False)
def shipped_words(path, mtime, task, distance):
    """What the page says of the shipped curves of one task at one distance -> (each cell's metric: label, value,
    help; the paragraph on them): the same for every visit, made once (thirty students pressing Train rerun it)."""
    rows = cached_results(path, mtime, task)
    metrics = []
    for cell in TOY_CELLS:
        row = rows[(rows["cell"] == cell) & (rows["distance"] == distance)]
        shown = "not trained" if row.empty or row["skipped"].iloc[0] else f"{row['accuracy'].iloc[0]:.0%}"
        metrics.append(
            (f"{cell_label(cell)}, shipped", shown, None if row.empty else count(int(row["steps"].iloc[0]), "step"))
        )
    first = rows.iloc[0]
    paragraph = (
        f"The shipped curves (each cell ~{first['param_budget']:,} parameters, up to "
        f"{count(first['steps_budget'], 'step')} of {count(first['batch_size'], 'fresh sequence')}, stopped early "
        f"once {first['solved']:.0%} right; a cell at chance at two distances in a row was not trained "
        f"further):\n\n{toy_sentences(rows, distance, cell_label)}"
    )
    recall = gated_recall_words(cached_results(path, mtime, "recall"), cell_label)
    return metrics, paragraph, recall


def toy_tasks():
    st.caption(
        "Where this comes from: the memory probe of this lab, after TensorFlow Playground's "
        "experiments that train while you watch; the adding problem is Hochreiter and Schmidhuber's (1997)."
    )
    for name, (_, key) in SETTINGS.items():
        st.session_state.setdefault(key, DEFAULTS[name])
    cols = st.columns([3, 2])
    task = cols[0].radio(
        "Task", list(TOY_TASKS), format_func=lambda t: TOY_TASKS[t].title, horizontal=True, key="lessons_toy_task"
    )
    distance = int(
        cols[1].select_slider(
            "Distance k (steps the memory must span)", [str(k) for k in DISTANCES], key="lessons_toy_k"
        )
    )
    spec = TOY_TASKS[task]
    st.markdown(f"**The task.** At the “?”: {spec.question} An example at k = {distance}:")
    preformatted(spec.example(distance))
    path = shipped(RESULTS)
    rows = shipped_results(path, task)
    said_of_shipped = rows is not None and shipped_words(str(path), path.stat().st_mtime, task, distance)
    cols = st.columns([2, 1])
    seconds = cols[0].slider(
        f"Live run: seconds of training (all {len(TOY_CELLS)} cells at once)", 5, 45, 20, 5, key="lessons_toy_seconds"
    )
    if cols[1].button("▶ Train", key="lessons_toy_start", type="primary"):
        with user_errors("Starting the run"):
            start_live_run(task, distance, seconds)
    jobs = st.session_state.get("lessons_toy_jobs", {})
    running = any(job.running for job in jobs.values())
    waiting = running and not any(job.latest("eval") for job in jobs.values())
    refresh = live_refresh_seconds(watching_sessions(), waiting) if running else None
    fragment(run_every=refresh)(live_view)(rows, task, distance)
    if said_of_shipped:
        metrics, paragraph, _ = said_of_shipped
        for column, (label, shown, steps) in zip(st.columns(len(TOY_CELLS)), metrics):
            column.metric(label, shown, help=steps)
        notice(
            f"{paragraph}\n\nThe live run trains the same {len(TOY_CELLS)} models from scratch for {seconds} s on "
            "this server's shared CPU: compare its steps with the shipped runs' (hover a point for its steps), and "
            "watch which cell gets off chance first."
        )
    check_yourself(
        "The selective scan's gates A_t and B_t read only the current token, never the state. Which "
        "of these tasks suits such a cell over any distance, and which does not suit it even over a "
        "few steps?",
        "Counting brackets is a sum: with A = 1 (keep everything) and B·e = +1 for “(”, −1 for “)” and "
        "0 for a distractor, h_t is the depth, exactly, however far back the brackets are; look how far "
        "the scan's bracket curve goes. Recalling the first symbol is not a sum: the first symbol looks "
        "the same to the gates as every distractor after it, so the scan cannot keep it and shut the "
        "others out; all it can do is let older tokens fade more, which picks out the first one now and "
        "then over a few steps and not over many. Parity is not a sum it can read either: the answer "
        "flips with every 1, and a count of 1s (0, 1, 2, 3, ...) is not something its linear readout "
        "can turn into even, odd, even, odd. A GRU or an LSTM has gates that read the state, so it can "
        "shut once the first symbol is stored. " + (said_of_shipped[2] if said_of_shipped else ""),
    )
    open_full_page(
        "Memory",
        "Open the Memory page on this task (train one cell at distances you choose)",
        section="probe",
        probe_task=task,
    )
