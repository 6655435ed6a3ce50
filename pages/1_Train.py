"""Train: pick a model family and a corpus, start a background run, watch the loss race live.

Widgets -> ui.train_view settings -> lab configs -> lab.server.jobs.TrainingJob; a
fragment polls the session's jobs every two seconds (less often on a busy server) and draws their events.
The settings are mirrored in the URL, so a link opens with the same settings.
"""

import copy
import functools
import hashlib
import time

import streamlit as st

from lab.data import read_text, split_text
from lab.instruments.race import long_race, plain_name, short_count, width_for_parameters
from lab.instruments.sampling import SamplingConfig, sample_text
from lab.nets.backends import default_backend
from lab.nets.cells import CELLS, ScanLayer
from lab.nets.cost import check_training_memory, training_memory_bytes
from lab.nets.models import build_model, config_to_dict
from lab.server.capacity import SERVER_BUDGET
from lab.server.jobs import TrainingJob
from lab.training.checkpoints import list_checkpoints, sanitize_name, why_not_resumable
from lab.training.presets import PRESETS
from lab.training.tasks import TASKS, corpus_split
from lab.training.train import resolve_device
from ui import train_view as tv
from ui.common import page_link, parameter_count, plain_convention, preset_label, setup_page, show_anchors
from ui.plain_text import plain, user_errors
from ui.sessions import TRAIN_IN_PROCESS, forget_jobs, register_job, room_check, session_jobs, session_key, user_dir

setup_page("Train")
st.title("🏋️ Train")
st.caption(
    "Train a recurrent language model in the background and watch its loss fall; a race trains four "
    "kinds of cell at once on one chart. Closing this browser tab stops your runs."
)
# on the first screen, above the settings: what Start does, the buttons and the live chart (a laptop's
# 768 pixels hold them; the settings, which a student changes less often, follow)
controls, live = st.container(), st.container()
st.divider()

# ---------------------------------------------------------------------------
# settings: URL at page load, then the session's own values

# a link within the session (a lesson's) brings settings other than those this page last wrote: read them
linked = st.query_params.to_dict() not in ({}, st.session_state.get("_train_query"))
if "train_settings" not in st.session_state or linked:
    st.session_state.train_settings, warnings = tv.values_from_query(st.query_params.to_dict())
    for warning in warnings:
        st.warning(plain(warning))
saved = st.session_state.train_settings
for name in tv.FIELDS:
    if tv.key(name) not in st.session_state or linked:  # first visit, a link, or a widget hidden in the last run
        st.session_state[tv.key(name)] = saved[name]


def apply_preset():
    """A new preset fills in its model, tokenizer and recipe; corpus and budget stay."""
    for name, value in tv.preset_values(st.session_state[tv.key("preset")]).items():
        st.session_state[tv.key(name)] = saved[name] = value


@st.cache_resource(max_entries=2, show_spinner=False)
def corpus_text(source):
    """(training text, validation text) of a named corpus."""
    return corpus_split(source)


@st.cache_resource(max_entries=4, show_spinner=False)
def lm_task(corpus_key, tokenizer, vocab_size, _split, kind="lm"):
    """One task per (corpus, tokenizer, kind: windows or n-gram samples), shared read-only by every
    session (each run gets a copy). Few entries: a 20 MB upload makes 160 MB of token ids."""
    options = {"vocab_size": vocab_size, "model_type": "bpe"} if tokenizer == "sentencepiece" else {}
    return TASKS[kind].from_split(*_split, tokenizer, **options)


F = tv.FIELDS
model_col, data_col, train_col = st.columns(3, gap="large")
with model_col:
    st.subheader("Model")
    st.selectbox(
        F["preset"].label,
        tv.TEXT_PRESETS,
        key=tv.key("preset"),
        on_change=apply_preset,
        format_func=preset_label,
        help="A model family with its training recipe; it fills in the fields below, which you can then change.",
    )
    fixed = tv.is_scan_markov({"preset": st.session_state[tv.key("preset")]})
    st.selectbox(F["cell"].label, list(CELLS), key=tv.key("cell"), format_func=tv.CELL_LABELS.get, disabled=fixed)
    st.radio(
        F["backend"].label,
        F["backend"].choices,
        key=tv.key("backend"),
        horizontal=True,
        disabled=fixed,
        help="reference: the equations line by line, as the lab writes them. fast: the same equations with "
        "hand-optimised loops, checked equal. fused: PyTorch's own RNN, GRU and LSTM (cuDNN on a GPU).",
    )
    c1, c2 = st.columns(2)
    c1.number_input(F["emb"].label, F["emb"].low, F["emb"].high, step=8, key=tv.key("emb"))
    c2.number_input(F["hidden"].label, F["hidden"].low, F["hidden"].high, step=16, key=tv.key("hidden"), disabled=fixed)
    c1.number_input(F["layers"].label, F["layers"].low, F["layers"].high, key=tv.key("layers"), disabled=fixed)
    c2.number_input(
        F["dropout"].label, F["dropout"].low, F["dropout"].high, step=0.05, format="%.2f", key=tv.key("dropout")
    )
    if fixed:
        st.caption("The selective-scan presets have a fixed architecture; only the width E and dropout change.")

with data_col:
    st.subheader("Data")
    st.radio(F["corpus"].label, list(tv.CORPUS_CHOICES), key=tv.key("corpus"), format_func=tv.CORPUS_CHOICES.get)
    st.radio(
        F["tokenizer"].label,
        ["char", "sentencepiece"],
        key=tv.key("tokenizer"),
        horizontal=True,
        help="char: one token per character. sentencepiece: BPE subwords trained on the corpus (~1 s).",
    )
    if st.session_state[tv.key("tokenizer")] == "sentencepiece":
        st.number_input(F["vocab"].label, F["vocab"].low, F["vocab"].high, step=100, key=tv.key("vocab"))
    upload = None
    if st.session_state[tv.key("corpus")] == "upload":
        upload = st.file_uploader("Your corpus (UTF-8 text, up to 20 MB)", type=["txt"], key="train_upload")

with train_col:
    st.subheader("Training")
    c1, c2 = st.columns(2)
    c1.number_input(F["lr"].label, F["lr"].low, F["lr"].high, step=1e-4, format="%g", key=tv.key("lr"))
    c2.number_input(F["wd"].label, F["wd"].low, F["wd"].high, step=0.01, format="%g", key=tv.key("wd"))
    c1.number_input(F["batch"].label, F["batch"].low, F["batch"].high, key=tv.key("batch"), help="Windows per batch.")
    ngram = PRESETS[st.session_state[tv.key("preset")]].task == "ngram"
    c2.number_input(
        F["block"].label,
        F["block"].low,
        F["block"].high,
        key=tv.key("block"),
        disabled=ngram,
        help="Time steps per window: how far back gradients flow (BPTT length).",
    )
    c1.number_input(
        F["smoothing"].label, F["smoothing"].low, F["smoothing"].high, step=0.05, format="%.2f", key=tv.key("smoothing")
    )
    c2.number_input(
        F["clip"].label,
        F["clip"].low,
        F["clip"].high,
        step=0.1,
        format="%.2f",
        key=tv.key("clip"),
        help="Clip the global gradient norm to this value: a gradient that grows through many "
        "steps (an exploding gradient) then cannot throw the weights far in one update.",
    )
    c1.number_input(
        F["seconds"].label,
        F["seconds"].low,
        F["seconds"].high,
        step=10,
        key=tv.key("seconds"),
        help="Wall-clock budget; the learning rate anneals over it (cosine).",
    )
    c2.number_input(
        F["eval_every"].label,
        F["eval_every"].low,
        F["eval_every"].high,
        step=10,
        key=tv.key("eval_every"),
        help="Training steps between validation passes.",
    )
    st.checkbox(
        F["stateful"].label,
        key=tv.key("stateful"),
        help="Consecutive windows with the hidden state carried from batch to batch (detached), "
        "instead of random windows from a zero state.",
    )
    st.text_input(
        F["name"].label,
        key=tv.key("name"),
        max_chars=64,
        placeholder=f"automatic: {tv.default_run_name(tv.widget_values(saved))}-1",
    )

show_anchors("nanogpt_cpu", "nanogpt_gpu", "uniform_char")
values = tv.widget_values(saved)
saved.update(values)
query = tv.query_from_values(values)
if st.query_params.to_dict() != query:
    st.query_params.from_dict(query)
st.session_state._train_query = query

# ---------------------------------------------------------------------------
# the corpus and its tokenized task (cached), then the model it makes

task, corpus_label = None, values["corpus"]
with data_col:
    if values["corpus"] == "upload":
        if upload is None:
            st.info("Upload a .txt file to train on it.")
        else:
            with user_errors("Reading your corpus"):
                data = upload.getvalue()
                text = read_text(data)
                corpus_label = f"upload:{upload.name}"
                with st.spinner("Tokenizing…"):
                    task = lm_task(
                        f"upload:{hashlib.sha256(data).hexdigest()}",
                        values["tokenizer"],
                        values["vocab"],
                        split_text(text),
                        PRESETS[values["preset"]].task,
                    )
    else:
        failed = st.session_state.get("train_corpus_error")
        if not (failed and failed[0] == values["corpus"]):
            spinner = (
                "Downloading Tiny Shakespeare…" if values["corpus"] == "tiny-shakespeare" else "Loading the corpus…"
            )
            try:
                with st.spinner(spinner):
                    text = corpus_text(values["corpus"])
            except (ValueError, OSError) as e:  # DataError: offline, or a corrupt download
                # kept, so that a failed download is not tried again on every rerun
                failed = st.session_state.train_corpus_error = (
                    values["corpus"],
                    f"Getting the corpus did not work: {plain(e)}",
                )
        if failed and failed[0] == values["corpus"]:
            st.error(failed[1])
            if st.button("Try the download again", key="train_retry"):
                del st.session_state.train_corpus_error
                st.rerun()
        else:
            with st.spinner("Tokenizing…"), user_errors("Tokenizing the corpus"):
                task = lm_task(
                    values["corpus"], values["tokenizer"], values["vocab"], text, PRESETS[values["preset"]].task
                )
    if ngram:
        st.caption(
            "This preset trains on mixed 2–5-gram samples: a context of 1 to 4 characters "
            "and the character after it, from every place in the text. The preset “"
            f"{preset_label('scan-markov-windows')}” is the lab's own variant: 16-character windows, "
            "every position predicting."
        )
    if task is not None:
        st.caption(
            f"{len(task.train_ids) + len(task.val_ids):,} tokens ({values['tokenizer']}, vocabulary "
            f"{task.vocab_size:,}, {task.chars_per_token:.2f} characters per token): "
            f"{len(task.train_ids):,} to train on, {len(task.val_ids):,} to validate"
            f"{' (four whole plays it never trains on)' if values['corpus'] == 'bundled' else ' (the last 10%)'}."
        )

model_config = None
with model_col:
    fused_problem = tv.fused_problem(values)
    if fused_problem:
        st.warning(fused_problem)
    elif task is not None:
        with user_errors("This model"):
            candidate = tv.model_config(values, task.vocab_size)
            convention = ScanLayer.convention if tv.is_scan_markov(values) else CELLS[values["cell"]].convention
            fused = " [fused torch.nn]" if values["backend"] == "fused" and not fixed else ""
            steps = task.sequence_length(tv.train_config(values))  # the window, or a ScanMarkov context
            need_mb = training_memory_bytes(candidate, values["batch"], steps) / 2**20
            st.caption(
                f"**{parameter_count(config_to_dict(candidate)):,} parameters** · about {need_mb:,.0f} MB "
                f"to train at B={values['batch']}, T={steps} · `{plain_convention(convention)}{fused}`"
            )
            # refused here, before anything is built, with the limit and what to change (CostError)
            check_training_memory(candidate, values["batch"], steps)
            model_config = candidate

# ---------------------------------------------------------------------------
# start / stop


def training_jobs():
    """This session's language-model runs (other pages register jobs of their own, e.g. ablations)."""
    return [job for job in session_jobs() if isinstance(job, TrainingJob)]


def make_sampler(tokenizer):
    """A short top-k sample, run by the training thread between steps (see TrainingJob)."""
    config = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8, max_new_tokens=120)
    return functools.partial(sample_text, tokenizer, "", config)


def unused_run_name(base):
    """base-1, base-2, ...: the first name that no run or checkpoint of this session has, so a new run
    never takes over an older run's `_latest`."""
    taken = {job.name for job in training_jobs()} | {p.name.rsplit("_", 1)[0] for p in user_dir().glob("*_*")}
    return next(f"{base}-{n}" for n in range(1, len(taken) + 2) if f"{base}-{n}" not in taken)


def start_run(run_values, run_model_config):
    train_config = tv.train_config(run_values)
    task.check(train_config)  # a corpus too short for one window is a DataError here, not in the thread
    check_training_memory(run_model_config, run_values["batch"], task.sequence_length(train_config))
    name = sanitize_name(run_values["name"].strip() or unused_run_name(tv.default_run_name(run_values)))
    model = build_model(run_model_config)
    job = TrainingJob(
        name,
        model,
        copy.copy(task),
        train_config,
        checkpoint_dir=user_dir(),
        extra={"preset": run_values["preset"], "corpus": corpus_label},
        sampler=make_sampler(task.tokenizer),
        owner=session_key(),
        in_process=TRAIN_IN_PROCESS,
        resumable=why_not_resumable(run_model_config, train_config) is None,  # so it can be continued
        room=room_check(),
    )
    job.start()  # queued for the server's budget; a CapacityError (too large ever to fit) is shown by user_errors
    register_job(job)
    n = len(training_jobs())
    cell = "scan-markov" if tv.is_scan_markov(run_values) else f"{run_values['cell']}/{run_values['backend']}"
    st.session_state.setdefault("train_logs", {})[id(job)] = tv.RunLog(
        job,
        f"{name} #{n}",
        parameter_count(config_to_dict(run_model_config)),
        cell,
        run_values["tokenizer"],
        task.vocab_size,
        title=plain_name(run_model_config),
    )
    return job


def race_values(cell):
    """The page's settings for one runner of the race: its cell, and the width that gives it about as
    many parameters as the model on the page, so that the race compares cells, not sizes."""
    width = width_for_parameters(model_config, cell, parameter_count(config_to_dict(model_config)))
    return {**values, "cell": cell, "hidden": width, "backend": default_backend(cell, resolve_device()), "name": ""}


def start_race():
    """One run per family, at equal parameter counts: the four race on one chart."""
    jobs = []
    for cell in tv.RACE_CELLS:
        run_values = race_values(cell)
        jobs.append(start_run(run_values, tv.model_config(run_values, task.vocab_size)))
    return jobs


def what_start_does():
    """One line above the buttons: the model Start trains and what the race trains, in plain words."""
    if model_config is None:
        return "Start waits for the settings below: see the message there."
    params = short_count(parameter_count(config_to_dict(model_config)))
    where = "your text" if values["corpus"] == "upload" else tv.CORPUS_CHOICES[values["corpus"]].split(" (")[0]
    line = f"**Start** trains a {plain_name(model_config)} ({params} parameters) on {where} for {values['seconds']} s."
    if not fixed:
        line += (
            f" **Race** trains an RNN, a GRU, an LSTM and a selective scan of about {params} parameters each, "
            "side by side. Change the settings below the chart."
        )
    return line


def wait_for_first_steps(jobs):
    """The first step takes ~0.1-0.3 s: waiting for it (at most a second or two) lets the chart
    below show the first loss points in this very run instead of two seconds later."""
    deadline = time.monotonic() + 1.5
    while any(job.running and not job.events() for job in jobs) and time.monotonic() < deadline:
        time.sleep(0.02)


controls.markdown(what_start_does())
buttons = controls.container(horizontal=True, vertical_alignment="center")
if buttons.button("▶ Start", key="train_start", type="primary", disabled=model_config is None):
    with user_errors("Starting the run"):
        wait_for_first_steps([start_run(values, model_config)])
if buttons.button(
    "🏁 Race RNN · GRU · LSTM · scan",
    key="train_race",
    disabled=model_config is None or fixed,
    help="Four runs at once, one per cell family, each made as wide as it takes to have about as many "
    "parameters as the model set below: which learns fastest in the same seconds?",
):
    with user_errors("Starting the race"):
        wait_for_first_steps(start_race())
jobs = training_jobs()  # drawn after Start was handled, so that Stop is enabled at once
running = [job for job in jobs if job.running]
if buttons.button("■ Stop", key="train_stop", disabled=not running):
    for job in running:
        job.stop()
    for job in running:
        job.wait(timeout=10)
    st.rerun()  # redraw the buttons and the final chart
if buttons.button("Clear finished runs", key="train_clear", disabled=not [j for j in jobs if not j.running]):
    forget_jobs(lambda job: isinstance(job, TrainingJob) and not job.running)
    st.rerun()
buttons.radio(
    F["x"].label,
    ["elapsed", "step"],
    key=tv.key("x"),
    horizontal=True,
    format_func={"elapsed": "seconds (a fair race)", "step": "training steps"}.get,
)

# ---------------------------------------------------------------------------
# live view: redrawn every two seconds (five on a busy server) while a run of this session trains


@st.cache_data(show_spinner=False)
def bundled_long_race():
    """The bundled character models' validation curves over their training (read from the files' headers)."""
    return long_race(list_checkpoints(None, include_versions=False))


def waiting_for_first_point(logs):
    return any(log.job.running and log.last_step is None for log in logs)


def live_view(auto, x_axis, refresh):
    logs_by_id = st.session_state.setdefault("train_logs", {})
    jobs = training_jobs()
    for stale in set(logs_by_id) - {id(job) for job in jobs}:  # cleared runs
        del logs_by_id[stale]
    logs = []
    for job in jobs:
        if id(job) not in logs_by_id:  # a run started elsewhere in this session
            config = job.model.config
            logs_by_id[id(job)] = tv.RunLog(
                job,
                job.name,
                parameter_count(config_to_dict(config)),
                "",
                job.task.tokenizer.kind,
                job.task.tokenizer.vocab_size,
                title=plain_name(config),
            )
        logs.append(logs_by_id[id(job)].update())
    used, capacity, n_running, n_queued = SERVER_BUDGET.snapshot()
    active = [log for log in logs if log.job.running]
    for log in active:  # how busy the server is while these train: what their step counts mean
        log.other_runs = max(log.other_runs, n_running - len(active))
    st.caption(
        f"This server's training budget (all users): {used:,.0f} of {capacity:,.0f} MB in use by "
        f"{n_running} runs, {n_queued} waiting."
    )
    kinds = {(log.tokenizer, log.vocab, log.job.extra.get("corpus")) for log in logs} or {
        (values["tokenizer"], task and task.vocab_size, corpus_label)
    }
    # drawn even before the first run, so the chart (and plotly.js) is ready when the first point comes
    x_span = values["seconds"] if x_axis == "elapsed" else 100
    anchors = tv.char_anchors(kinds, tv.bundled_anchors(list_checkpoints(None, include_versions=False)))
    live_column, long_column = st.columns([3, 2])
    with live_column:
        st.plotly_chart(tv.race_figure(logs, x_axis, anchors, x_span), key="train_chart", width="stretch")
        verdict = tv.live_verdict(logs, x_axis)
        if logs:
            st.caption(
                " ".join(filter(None, [verdict and f"**{plain(verdict)}**", plain(tv.steps_sentence(logs))]))
                + " Thin lines: loss on the batches it trains on; dashed with dots: on text it never trains on."
            )
    with long_column:
        curves = bundled_long_race()
        st.plotly_chart(tv.long_race_figure(curves), key="train_long_race", width="stretch")
        st.caption(tv.long_race_caption(curves))
    tv.draw_progress_and_samples(logs)
    tv.draw_continue_controls(logs)
    if any(log.job.checkpoint_path for log in logs):
        with st.container(horizontal=True):
            for page in ("Sample", "Gates", "Checkpoints"):
                page_link(page, label=f"Open the {page} page")
    if auto and not active:
        st.rerun()  # the last run ended: redraw the page once, without the refresh
    if auto and refresh < tv.live_refresh_seconds(n_running, waiting_for_first_point(logs)):
        st.rerun()  # the first points are drawn and the server is busy: redraw less often from now on


refresh = tv.live_refresh_seconds(
    SERVER_BUDGET.snapshot()[2], waiting_for_first_point(st.session_state.get("train_logs", {}).values())
)
with live:
    st.fragment(run_every=refresh if running else None)(live_view)(bool(running), values["x"], refresh)
