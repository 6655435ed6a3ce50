"""The Train page's runs: starting one (or a race of one cell of each kind at equal size) in the background
through lab.runs, the one runner (started, or joined where a classmate asked for the same), reading each run's
events into a RunLog, and what the page shows under the chart: progress bars, samples, the runs table, where
runs were saved, and "Continue this run".
"""

import copy
import functools
import math
import time

import pandas as pd
import streamlit as st

from lab.experiments.probe import ProbeTask
from lab.instruments.race import short_count, width_for_parameters
from lab.instruments.sampling import SamplingConfig, sample_text
from lab.nets.backends import default_backend
from lab.nets.cost import check_training_memory
from lab.nets.families import text_racers
from lab.nets.models import config_to_dict
from lab.runs import is_training_run, start, training_run
from lab.server.pages_first import waiting_for_runs
from lab.training.checkpoints import sanitize_name, why_not_resumable
from lab.training.train import resolve_device
from lab.words import a_or_an, listing
from ui.cell_labels import cell_label
from ui.shared.board import post_to_board
from ui.shared.checkpoint_picker import yours
from ui.shared.common import parameter_count
from ui.shared.joined import shared_run_text
from ui.shared.model_names import config_title, model_title, run_title
from ui.shared.plain_text import plain, preformatted, said, user_errors
from ui.shared.sessions import register_job, room_check, session_jobs, session_key, train_in_process, user_dir
from ui.train import settings as train_settings
from ui.train.chart import legend_names
from ui.train.settings import CORPUS_CHOICES, FIELDS, default_run_name, is_scan_markov, train_config

RACE_CELLS = text_racers()  # the runners of the Race button


class RunLog:
    """What the page shows of one TrainingJob, updated from `job.events(since)`.

    Losses are kept per token (what the model minimises) and per character: a subword run's
    token carries several characters, so only nats per character compare it with a character run."""

    def __init__(self, job, label, params, cell, tokenizer, vocab, title=None):
        self.job, self.label, self.params, self.cell = job, label, params, cell
        self.title = title or label  # what the chart's legend calls it: "GRU · 256 units"
        self.other_runs = 0  # the most runs of other sessions seen training beside it (a busy server)
        self.tokenizer, self.vocab = tokenizer, vocab  # tokenizer kind and vocabulary size
        self.chars_per_token = job.task.chars_per_token
        self.cursor = 0
        self.steps = {"step": [], "elapsed": [], "loss": [], "nats_per_char": []}  # one entry per training step
        self.evals = {"step": [], "elapsed": [], "loss": [], "nats_per_char": []}
        self.last_step, self.error, self.done = None, None, None
        self.first_sample = self.sample = None  # {"step", "text"} events: how it wrote then and now

    def update(self):
        events = self.job.events(self.cursor, settled=True)  # as of this second: the class's pages agree
        self.cursor += len(events)
        for e in events:
            if e["type"] == "step":
                self.last_step = e
                for k, v in (
                    ("step", e["step"]),
                    ("elapsed", e["elapsed"]),
                    ("loss", e["train_loss"]),
                    ("nats_per_char", e["train_loss"] / self.chars_per_token),
                ):
                    self.steps[k].append(v)
            elif e["type"] == "eval":
                for k, v in (
                    ("step", e["step"]),
                    ("elapsed", e["elapsed"]),
                    ("loss", e["val_loss"]),
                    ("nats_per_char", e.get("val_nats_per_char", math.nan)),
                ):
                    self.evals[k].append(v)
            elif e["type"] == "sample":
                self.first_sample, self.sample = self.first_sample or e, e
            elif e["type"] == "error":
                self.error = e["message"]
            elif e["type"] == "done":
                self.done = e
        return self

    def row(self):
        """One line of the runs table."""
        job, last = self.job, self.last_step or {}
        pending = "…" if job.running else "–"  # a validation point comes within EVAL_SECONDS of the start

        def latest(values):
            return f"{values[-1]:.3f}" if values else pending

        return {
            "run": self.label,
            "cell": cell_label(self.cell),
            "params": self.params,
            "status": job.status,
            "steps": last.get("step", 0),
            "seconds": round(last.get("elapsed", 0.0), 1),
            "train nats/char": latest(self.steps["nats_per_char"]),
            "val nats/char": latest(self.evals["nats_per_char"]),
            "val loss/token": latest(self.evals["loss"]),
            # what the model pages list it as: its folder's path holds the session's secret key
            "saved as": model_title(yours(job.name)) if job.checkpoint_path else "",
        }


def training_jobs():
    """This session's language-model runs (other pages register jobs of their own: ablations, and the toy
    tasks' runs of the memory race and of a lesson, which have no text to score per character)."""
    return [job for job in session_jobs() if is_training_run(job) and not isinstance(job.task, ProbeTask)]


def make_sampler(tokenizer):
    """A short top-k sample, run by the training thread between steps (see TrainingJob)."""
    config = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8, max_new_tokens=120)
    return functools.partial(sample_text, tokenizer, "", config)


def unused_run_name(base, taken=None):
    """base-1, base-2, ...: the first name that no run or checkpoint of this session has (`taken`: those
    names), so a new run never takes over an older run's `_latest`, and that no run shows as (its plain
    name, ui.shared.model_names.run_title: runs of other widths or embeddings can read alike)."""
    if taken is None:
        taken = {job.name for job in training_jobs()} | {p.name.rsplit("_", 1)[0] for p in user_dir().glob("*_*")}
    shown = {run_title(name) for name in taken}
    return next(
        name
        for name in (f"{base}-{n}" for n in range(1, len(taken) + 2))
        if name not in taken and run_title(name) not in shown
    )


def new_run(run_values, run_model_config, task, corpus_label):
    """A run of these settings on `task`, checked and built but not started -> (its TrainingJob, what the
    page's RunLog needs of it): a bad setting is refused here, before any run of a race starts."""
    run_config = train_config(run_values)
    task.check(run_config)  # a corpus too short for one window is a DataError here, not in the thread
    check_training_memory(run_model_config, run_values["batch"], task.sequence_length(run_config))
    name = sanitize_name(run_values["name"].strip() or unused_run_name(default_run_name(run_values)))
    job = training_run(
        name,
        run_model_config,
        copy.copy(task),
        run_config,
        checkpoint_dir=user_dir(),
        extra={"preset": run_values["preset"], "corpus": corpus_label},
        sampler=make_sampler(task.tokenizer),
        owner=session_key(),
        in_process=train_in_process(),
        resumable=why_not_resumable(run_model_config, run_config) is None,  # so it can be continued
        room=room_check(),
    )
    cell = "scan" if is_scan_markov(run_values) else run_values["cell"]
    shown = (parameter_count(config_to_dict(run_model_config)), cell, run_values["tokenizer"], task.vocab_size)
    return job, (*shown, run_title(name))


def show_started(job, shown):
    """A started run, in this session's list, on the page, and on the class board if its student's switch
    is on."""
    register_job(job)
    post_to_board(job)
    params, cell, tokenizer, vocab, title = shown
    label = run_title(job.name)
    if label == job.name:  # a name the student typed, perhaps for an earlier run too: numbered
        label = f"{job.name} #{len(training_jobs())}"
    st.session_state.setdefault("train_logs", {})[id(job)] = RunLog(
        job, label, params, cell, tokenizer, vocab, title=title
    )


def start_run(run_values, run_model_config, task, corpus_label):
    """A run of these settings on `task`, started in the background for this session (or joined, where a
    classmate's run of the same settings trains here: lab.server.shared_runs) -> its run."""
    job, shown = new_run(run_values, run_model_config, task, corpus_label)
    # queued for the server's budget; a CapacityError (too large ever to fit) is shown by user_errors
    (run,) = start([asked_for(job)], session_key(), "this run", private=is_own_text(corpus_label))
    show_started(run, shown)
    return run


def asked_for(job):
    """What lab.server.shared_runs needs of a run this student asks for: the job, and the name, folder and
    quota their own copy is saved under."""
    return job, job.name, user_dir(), room_check()


def is_own_text(corpus_label):
    """A run on the student's own text (an upload) is theirs alone: never joined from another space."""
    return corpus_label not in CORPUS_CHOICES


def race_values(values, model_config, cell):
    """The page's settings for one runner of the race: its cell, and the width that gives it about as
    many parameters as the model on the page, so that the race compares cells, not sizes."""
    width = width_for_parameters(model_config, cell, parameter_count(config_to_dict(model_config)))
    return {**values, "cell": cell, "hidden": width, "backend": default_backend(cell, resolve_device()), "name": ""}


def start_race(values, model_config, task, corpus_label):
    """One run per kind of cell, at equal parameter counts, racing on one chart. All start or none:
    each is checked and built first, then the budget admits them as one (a cap or a full budget that
    would leave one out refuses or queues them all, lab.server.jobs.start_together)."""
    runs = []
    for cell in RACE_CELLS:
        run_values = race_values(values, model_config, cell)
        runs.append(new_run(run_values, train_settings.model_config(run_values, task.vocab_size), task, corpus_label))
    started = start([asked_for(job) for job, _ in runs], session_key(), "the race", is_own_text(corpus_label))
    for run, (_, shown) in zip(started, runs):
        show_started(run, shown)
    return started


def racers(cells=RACE_CELLS):
    """The runners of a race in words: "a vanilla RNN, a GRU (z keeps), an LSTM and a selective scan"."""
    return listing(a_or_an(cell_label(cell)) for cell in cells)


def what_start_does(values, model_config, fixed):
    """The line above the buttons: the model Start trains and what the text race trains, in plain words."""
    if model_config is None:
        return "Start waits for the settings: see the message above."
    params = short_count(parameter_count(config_to_dict(model_config)))
    where = "your text" if values["corpus"] == "upload" else CORPUS_CHOICES[values["corpus"]].split(" (")[0]
    what = config_title(model_config, values["preset"])
    line = f"**Start** trains a {what} ({params} parameters) on {where} for {values['seconds']} s."
    if not fixed:
        line += (
            f" **Race on text**: {racers()}, {params} parameters each: who learns the easy part first; the "
            "long race beside it shows which cell leads after longer training."
        )
    return line


def wait_for_first_steps(jobs):
    """The first step takes ~0.1-0.3 s: waiting for it (at most a second or two) lets the chart
    below show the first loss points in this very run instead of two seconds later."""
    deadline = time.monotonic() + 1.5
    with waiting_for_runs():  # the page draws nothing meanwhile: the runs need not step aside for it
        while any(job.running and not job.events() for job in jobs) and time.monotonic() < deadline:
            time.sleep(0.02)


def session_logs():
    """This session's runs, each RunLog read up to its job's latest events (oldest first)."""
    logs_by_id = st.session_state.setdefault("train_logs", {})
    jobs = training_jobs()
    for stale in set(logs_by_id) - {id(job) for job in jobs}:  # cleared runs
        del logs_by_id[stale]
    logs = []
    for job in jobs:
        if id(job) not in logs_by_id:  # a run started elsewhere in this session
            config = job.model.config
            logs_by_id[id(job)] = RunLog(
                job,
                run_title(job.name),
                parameter_count(config_to_dict(config)),
                getattr(config, "cell", ""),
                job.task.tokenizer.kind,
                job.task.tokenizer.vocab_size,
                title=run_title(job.name),
            )
        logs.append(logs_by_id[id(job)].update())
    return logs


def starting_text(job, now=None):
    """What a run without its first step yet is doing, in plain words, with the seconds it has waited:
    on a Ray cluster the wait is for a free CPU and a fresh worker process that loads PyTorch, which for
    a class's first runs can take a minute (BENCHMARKS.md), so the page says so rather than look stuck."""
    waited = f"{(now or time.time()) - job.started_at:.0f} s"
    if job.status == "queued" and job.ray_address is not None:
        return (
            f"waiting for the cluster: a free CPU, then a fresh worker that loads PyTorch (a class's first runs "
            f"can take a minute) · {waited}"
        )
    return f"starting… {waited}"


def draw_progress_and_samples(logs):
    """Under the chart: a progress bar per running run, each run's first and latest samples, the
    runs table, and where finished runs were saved."""
    # what the chart calls them; `names`, the same made inert for the progress bars and titles below, which
    # are Markdown (a run's title may be the name its student typed)
    titles = {id(log): name for log, name in zip(logs, legend_names(logs))}
    names = {key: plain(title) for key, title in titles.items()}
    active = [log for log in logs if log.job.running]
    for log in logs:
        shared = shared_run_text(log.job)
        if shared:
            st.caption(f"**{names[id(log)]}** · {shared}")
    for log in active:
        last = log.last_step
        if log.job.queue_position:
            st.progress(
                0.0,
                text=f"**{names[id(log)]}** · waiting for this server's training budget: number "
                f"{log.job.queue_position} in the queue",
            )
            continue
        if last is None:
            st.progress(0.0, text=f"**{names[id(log)]}** · {starting_text(log.job)}")
            continue
        st.progress(
            min(1.0, last["progress"]),
            text=f"**{names[id(log)]}** · step {last['step']:,} · train loss {last['train_loss']:.3f} · "
            f"{last['tokens_per_s']:,.0f} tokens/s · ETA {format_eta(last['eta'])}",
        )
    shown = active or logs[-1:]
    for column, log in zip(st.columns(len(shown)) if shown else [], shown):
        with column:
            st.markdown(f"**Samples** · {names[id(log)]}")
            if log.sample is None:
                st.caption("The first sample comes after the first step.")
                continue
            if log.first_sample is not log.sample:  # how it wrote at the start, to compare with now
                st.caption(f"At step {log.first_sample['step']:,}")
                preformatted(log.first_sample["text"])
            st.caption(f"At step {log.sample['step']:,}" + (" (the latest)" if log.job.running else ""))
            preformatted(log.sample["text"])
    if not logs:
        return
    st.dataframe(
        pd.DataFrame([{**log.row(), "run": titles[id(log)]} for log in logs]),  # a table: plain text
        hide_index=True,
        width="stretch",
        column_config={"params": st.column_config.NumberColumn(format="%d")},
    )
    for log in logs:
        job = log.job
        if job.status == "failed":
            st.error(f"{plain(log.label)} failed: {said(job.message)}")
            if job.result is not None and job.result.steps > 0 and job.checkpoint_path is None:
                # the save failed (a full disk, say): the weights are still in the job, so try again
                if st.button("Try saving it again", key=f"train_resave_{id(job)}"):
                    with user_errors("Saving"):
                        job.save()
                        st.rerun()  # the run is saved now: drawn again without its failure
        elif job.checkpoint_path is not None:
            why = f" ({job.message})" if job.message != job.status else ""
            # what the pickers list it as, never its file: the folder's path holds the session's secret key
            st.success(
                f"{plain(log.label)} {job.status}{said(why)} and was saved: the Sample and Gates pages list it as "
                f"“{plain(model_title(yours(job.name)))}”."
            )


MORE_SECONDS = 60  # what "Continue this run" offers at first: a minute more


def draw_continue_controls(logs):
    """Under the runs table: "Continue this run" for each run that ended and was saved with its training
    state (lab.server.jobs.TrainingJob.continuation). Only a name's newest run offers it: continuing an older
    one would save versions that interleave with its successor's."""
    newest = {log.job.name: log for log in logs}
    for log in logs:
        job = log.job
        if job.status not in ("finished", "stopped") or job.checkpoint_path is None or newest[job.name] is not log:
            continue
        if not job.resumable:
            st.caption(f"{plain(log.label)} cannot be continued: {why_not_resumable(job.model.config, job.config)}.")
            continue
        if not job.checkpoint_path.is_file():  # deleted on the Checkpoints page
            st.caption(f"{plain(log.label)} cannot be continued: its saved file was deleted.")
            continue
        with st.container(horizontal=True, vertical_alignment="bottom"):
            more = st.number_input(
                f"More seconds for {plain(log.label)}",
                FIELDS["seconds"].low,
                FIELDS["seconds"].high,
                value=MORE_SECONDS,
                key=f"train_more_{id(job)}",
            )
            if st.button(
                "Continue this run",
                key=f"train_continue_{id(job)}",
                help="It goes on from where it ended: the same weights, optimizer state and stream of "
                "batches, and saves the next version of its checkpoint. Its learning rate follows "
                "the cosine over the new total time, so it rises again at first, then anneals.",
            ):
                with user_errors("Continuing the run"):
                    continued = job.continuation(float(more))
                    continued.start()  # queued for the server's budget, like a new run
                    register_job(continued)
                    st.session_state.setdefault("train_logs", {})[id(continued)] = RunLog(
                        continued,
                        f"{run_title(job.name)}, continued from step {continued.resume.step:,}",
                        log.params,
                        log.cell,
                        log.tokenizer,
                        log.vocab,
                        title=log.title,
                    )
                    st.rerun()  # the whole page: its Stop button and the live chart's refresh


def format_eta(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "…"
    seconds = int(round(seconds))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
