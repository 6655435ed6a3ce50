"""Train: pick a model family and a corpus, start a background run, watch the loss race live.

Widgets -> ui.train.settings (settings, their URL form, the lab configs) -> ui.train.runs (a
lab.server.jobs.TrainingJob per run, read into run logs) -> ui.train.chart; a fragment polls the
session's jobs every two seconds (less often on a busy server) and draws their events. The corpus
and its tokenized task come from ui.train.corpus. The settings are mirrored in the URL, so a link
opens with the same settings.
"""

import streamlit as st

from lab.instruments.race import long_race
from lab.nets.cells import CELLS, ScanLayer
from lab.nets.cost import check_training_memory, training_memory_bytes
from lab.nets.models import config_to_dict
from lab.server.capacity import server_budget
from lab.server.jobs import TrainingJob
from lab.training.checkpoints import list_checkpoints
from lab.training.presets import PRESETS
from ui.app.frame import setup_page
from ui.cell_labels import backend_label
from ui.shared.common import page_link, parameter_count, preset_label, show_anchors
from ui.shared.model_names import TOKENIZER_LABELS, run_title
from ui.shared.plain_text import plain, user_errors
from ui.shared.sessions import forget_jobs
from ui.train import chart, memory_race, runs
from ui.train import settings as ts
from ui.train.board_switch import show_on_board_switch
from ui.train.corpus import describe_task, load_task

setup_page("Train")
st.title("🏋️ Train")
st.caption(
    "Train a recurrent language model in the background and watch its loss fall; a race trains four "
    "kinds of cell at once on one chart. Closing this browser tab stops your runs."
)
# settings: URL at page load, then the session's own values
saved = ts.restore_settings()
F = ts.FIELDS
# the first screen holds the main settings, Start beside them and the live chart (a laptop's 768 pixels hold
# them); the other settings, which a student changes less often, wait in an expander under the chart
preset_col, cell_col, hidden_col, seconds_col = st.columns([2, 2, 1, 1])
with preset_col:
    st.selectbox(
        F["preset"].label,
        ts.TEXT_PRESETS,
        key=ts.key("preset"),
        on_change=ts.apply_preset,
        format_func=preset_label,
        help="A model family with its training recipe; it fills in the other fields, which you can then change.",
    )
fixed = ts.is_scan_markov({"preset": st.session_state[ts.key("preset")]})
cell_col.selectbox(F["cell"].label, list(CELLS), key=ts.key("cell"), format_func=ts.CELL_LABELS.get, disabled=fixed)
ts.number_input(hidden_col, "hidden", step=16, disabled=fixed)
ts.number_input(
    seconds_col,
    "seconds",
    step=10,
)
notices, controls, live = st.container(), st.container(), st.container()
more = st.expander("More settings: the model's shape, the corpus, the training recipe")

with more:
    model_col, data_col, train_col = st.columns(3, gap="large")
with model_col:
    st.subheader("Model")
    st.radio(
        F["backend"].label,
        F["backend"].choices,
        key=ts.key("backend"),
        format_func=backend_label,
        horizontal=True,
        disabled=fixed,
        help="How the same cell is computed. Step by step: the equations line by line, as the Gates page shows "
        "them. Fast: the same equations with hand-optimised loops, checked equal. Fused: PyTorch's own RNN, GRU "
        "and LSTM layers (cuDNN on a GPU).",
    )
    c1, c2 = st.columns(2)
    ts.number_input(c1, "emb", step=8)
    ts.number_input(c2, "layers", disabled=fixed)
    ts.number_input(c1, "dropout", step=0.05, format="%.2f")
    if fixed:
        st.caption("The selective-scan presets have a fixed architecture; only the width E and dropout change.")

with data_col:
    st.subheader("Data")
    st.radio(F["corpus"].label, list(ts.CORPUS_CHOICES), key=ts.key("corpus"), format_func=ts.CORPUS_CHOICES.get)
    st.radio(
        F["tokenizer"].label,
        ["char", "sentencepiece"],
        key=ts.key("tokenizer"),
        format_func=TOKENIZER_LABELS.get,
        horizontal=True,
        help="Characters: one token per character. Subwords: common pieces of words (byte-pair encoding, "
        "SentencePiece), learned from the corpus in about a second.",
    )
    if st.session_state[ts.key("tokenizer")] == "sentencepiece":
        ts.number_input(st, "vocab", step=100)
    upload = None
    if st.session_state[ts.key("corpus")] == "upload":
        upload = st.file_uploader("Your corpus (UTF-8 text, up to 20 MB)", type=["txt"], key="train_upload")

with train_col:
    st.subheader("Training")
    c1, c2 = st.columns(2)
    ts.number_input(c1, "lr", step=1e-4, format="%g")
    ts.number_input(c2, "wd", step=0.01, format="%g")
    ts.number_input(c1, "batch")
    ngram = PRESETS[st.session_state[ts.key("preset")]].task == "ngram"
    ts.number_input(
        c2,
        "block",
        disabled=ngram,
    )
    ts.number_input(c1, "smoothing", step=0.05, format="%.2f")
    ts.number_input(
        c2,
        "clip",
        step=0.1,
        format="%.2f",
    )
    ts.number_input(
        c1,
        "eval_every",
        step=10,
    )
    st.checkbox(
        F["stateful"].label,
        key=ts.key("stateful"),
        help="Consecutive windows with the hidden state carried from batch to batch (detached), "
        "instead of random windows from a zero state.",
    )
    st.text_input(
        F["name"].label,
        key=ts.key("name"),
        max_chars=64,
        placeholder=f"automatic: {run_title(ts.default_run_name(ts.widget_values(saved)) + '-1')}",
    )
    show_on_board_switch()

    show_anchors("nanogpt_cpu", "nanogpt_gpu", "uniform_char")
values = ts.mirror_settings(saved)

# ---------------------------------------------------------------------------
# the corpus and its tokenized task (cached), then the model it makes

with notices:  # what stops Start is said beside it
    task, corpus_label = load_task(values, upload)
with data_col:
    describe_task(values, task, ngram)

model_config = None
with notices:
    fused_problem = ts.fused_problem(values)
    if fused_problem:
        st.warning(fused_problem)
    elif task is not None:
        with user_errors("This model"):
            candidate = ts.model_config(values, task.vocab_size)
            convention = ScanLayer.convention if ts.is_scan_markov(values) else CELLS[values["cell"]].convention
            steps = task.sequence_length(ts.train_config(values))  # the window, or a ScanMarkov context
            need_mb = training_memory_bytes(candidate, values["batch"], steps) / 2**20
            st.caption(
                f"**{parameter_count(config_to_dict(candidate)):,} parameters** · about {need_mb:,.0f} MB "
                f"to train at B={values['batch']}, T={steps} · `{convention}`"
            )
            # refused here, before anything is built, with the limit and what to change (CostError)
            check_training_memory(candidate, values["batch"], steps)
            model_config = candidate

# ---------------------------------------------------------------------------
# start / stop

memory_line, outlook = memory_race.what_it_does(values["seconds"])
controls.caption(runs.what_start_does(values, model_config, fixed) + " " + memory_line)
if not outlook.enough:  # said before the race starts, not after a minute of curves that cannot be told apart
    controls.warning(outlook.sentence, icon="⏳")
buttons = controls.container(horizontal=True, vertical_alignment="center")
if buttons.button("▶ Start", key="train_start", type="primary", disabled=model_config is None):
    with user_errors("Starting the run"):
        runs.wait_for_first_steps([runs.start_run(values, model_config, task, corpus_label)])
if buttons.button(
    "🏁 Race on text",
    key="train_race",
    disabled=model_config is None or fixed,
    help="An RNN, a GRU, an LSTM and a selective scan at once on the corpus, each made as wide as it takes to "
    "have about as many parameters as the model set here: which learns fastest in the same seconds?",
):
    with user_errors("Starting the race"):
        runs.wait_for_first_steps(runs.start_race(values, model_config, task, corpus_label))
if buttons.button(
    "🧠 Memory race",
    key="train_memory_race",
    help="The same four cells, small, on a task only a memory solves: which answers right first?",
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
    forget_jobs(lambda job: isinstance(job, TrainingJob) and not job.running)
    memory_race.forget_if_ended()
    st.rerun()
buttons.radio(
    F["x"].label,
    ["elapsed", "step"],
    key=ts.key("x"),
    horizontal=True,
    format_func={"elapsed": "seconds (a fair race)", "step": "training steps"}.get,
)

# ---------------------------------------------------------------------------
# live view: redrawn every two seconds (five on a busy server) while a run of this session trains


# the bundled files' figures, read once per process: the live view below is redrawn every 2 s for every
# watching student, and building the long race's plotly figure alone took 35 ms of the interpreter they share


@st.cache_resource(show_spinner=False)
def long_race_chart():
    """The bundled character models' validation curves over their training (read from the files' headers):
    (plotly figure, caption, the curves), shared read-only by every session."""
    curves = long_race(list_checkpoints(None, include_versions=False))
    return chart.long_race_figure(curves), chart.long_race_caption(curves), curves


@st.cache_data(show_spinner=False)
def bundled_anchors():
    return chart.bundled_anchors(list_checkpoints(None, include_versions=False))


def waiting_for_first_point(logs):
    return any(log.job.running and log.last_step is None for log in logs)


def live_view(auto, x_axis, refresh):
    logs = runs.session_logs()
    n_running = server_budget().snapshot()[2]
    active = [log for log in logs if log.job.running]
    for log in active:  # how busy the server is while these train: what their step counts mean
        log.other_runs = max(log.other_runs, n_running - len(active))
    memory_race.view(x_axis)
    if memory_race.race_jobs() and not logs:
        return rerun_when_done(auto, [], refresh, n_running)
    kinds = {(log.tokenizer, log.vocab, log.job.extra.get("corpus")) for log in logs} or {
        (values["tokenizer"], task and task.vocab_size, corpus_label)
    }
    # drawn even before the first run, so the chart (and plotly.js) is ready when the first point comes
    x_span = values["seconds"] if x_axis == "elapsed" else 100
    anchors = chart.char_anchors(kinds, bundled_anchors())
    figure, caption, long_curves = long_race_chart()
    live_column, long_column = st.columns([3, 2])
    with live_column:
        st.plotly_chart(chart.race_figure(logs, x_axis, anchors, x_span), key="train_chart", width="stretch")
        verdict = chart.live_verdict(logs, x_axis, long_curves)
        if logs:
            st.caption(
                " ".join(filter(None, [verdict and f"**{plain(verdict)}**", plain(chart.steps_sentence(logs))]))
                + " Thin lines: loss on the batches it trains on; dashed with dots: on text it never trains on."
            )
    with long_column:
        st.plotly_chart(figure, key="train_long_race", width="stretch")
        st.caption(caption)
    st.caption(server_budget().sentence())
    runs.draw_progress_and_samples(logs)
    runs.draw_continue_controls(logs)
    if any(log.job.checkpoint_path for log in logs):
        with st.container(horizontal=True):
            for page in ("Sample", "Gates", "Checkpoints"):
                page_link(page, label=f"Open the {page} page")
    rerun_when_done(auto, logs, refresh, n_running)


def rerun_when_done(auto, logs, refresh, n_running):
    if auto and not (any(log.job.running for log in logs) or memory_race.running()):
        st.rerun()  # the last run ended: redraw the page once, without the refresh
    if auto and refresh < chart.live_refresh_seconds(n_running, waiting_for_first_point(logs)):
        st.rerun()  # the first points are drawn and the server is busy: redraw less often from now on


refresh = chart.live_refresh_seconds(
    server_budget().snapshot()[2], waiting_for_first_point(st.session_state.get("train_logs", {}).values())
)
with live:
    st.fragment(run_every=refresh if running else None)(live_view)(bool(running), values["x"], refresh)
