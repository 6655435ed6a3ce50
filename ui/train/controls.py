"""The Train page's buttons beside its settings: Start, the race on text, the memory race, Stop, clearing
finished runs, and the chart's x axis, with what Start does said above them; under them, the switch that
posts the runs Start starts to the class board (ui.train.board_switch)."""

import streamlit as st

from lab.experiments.probe import TOY_CELLS
from lab.runs import is_training_run
from ui.shared.plain_text import user_errors
from ui.shared.sessions import forget_jobs
from ui.train import memory_race, runs
from ui.train import settings as ts
from ui.train.board_switch import show_on_board_switch

F = ts.FIELDS


def start_and_stop(controls, values, model_config, task, corpus_label, fixed):
    """The buttons in `controls` -> this session's running jobs (after Start, so that Stop is enabled at once)."""
    memory_line, outlook = memory_race.what_it_does(values["seconds"])
    # the forecast is said before the race starts, not after a minute of curves that cannot be told apart; in the
    # line, not in a box of its own, which on a busy server would push the live chart off a laptop's first screen
    forecast = "" if outlook.enough else f" ⏳ {outlook.sentence}"
    controls.caption(runs.what_start_does(values, model_config, fixed) + " " + memory_line + forecast)
    buttons = controls.container(horizontal=True, vertical_alignment="center")
    if buttons.button("▶ Start", key="train_start", type="primary", disabled=model_config is None):
        with user_errors("Starting the run"):
            runs.wait_for_first_steps([runs.start_run(values, model_config, task, corpus_label)])
    if buttons.button(
        "🏁 Race on text",
        key="train_race",
        disabled=model_config is None or fixed,
        help=f"Races {runs.racers()} at once on the corpus, each made as wide as it takes to have about as many "
        "parameters as the model set here: which learns fastest in the same seconds?",
    ):
        with user_errors("Starting the race"):
            runs.wait_for_first_steps(runs.start_race(values, model_config, task, corpus_label))
    if buttons.button(
        "🧠 Memory race",
        key="train_memory_race",
        help=f"Races {runs.racers(TOY_CELLS)}, small, on a task only a memory solves: which answers right first?",
    ):
        with user_errors("Starting the memory race"):
            runs.wait_for_first_steps(memory_race.start(values["seconds"]))
    jobs = runs.training_jobs() + list(memory_race.race_jobs().values())  # after Start, so that Stop is enabled at once
    running = [job for job in jobs if job.running]
    if buttons.button("■ Stop", key="train_stop", disabled=not running):
        for job in running:
            job.stop()
        for job in running:
            job.wait(timeout=10)
        st.rerun()  # redraw the buttons and the final chart
    if buttons.button("Clear finished runs", key="train_clear", disabled=not [j for j in jobs if not j.running]):
        forget_jobs(lambda job: is_training_run(job) and not job.running)
        memory_race.forget_if_ended()
        st.rerun()
    buttons.radio(
        F["x"].label,
        ["elapsed", "step"],
        key=ts.key("x"),
        horizontal=True,
        format_func={"elapsed": "seconds (a fair race)", "step": "training steps"}.get,
    )
    show_on_board_switch(buttons, controls)  # beside Start: the runs it posts are the ones these buttons start
    return running
