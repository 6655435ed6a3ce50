"""The lesson where a fresh model learns the student's own paragraph, with its samples over training."""

import functools

import pandas as pd
import streamlit as st

from lab.jobs import TrainingJob
from lab.models import LMConfig, build_model
from lab.sampling import SamplingConfig, reproduced_prefix, sample_text
from lab.tasks import LMTask
from lab.train import TrainConfig
from ui.coloured_text import visible_piece
from ui.common import TRAIN_IN_PROCESS, plain, register_job, session_key, user_errors
from ui.lessons.common import check_yourself, notice, open_full_page

SONNET = (
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n"
    "Sometime too hot the eye of heaven shines,\nAnd often is his gold complexion dimm'd;\n"
    "And every fair from fair sometime declines,\nBy chance or nature's changing course untrimm'd;\n"
    "But thy eternal summer shall not fade,\nNor lose possession of that fair thou ow'st;\n"
    "Nor shall death brag thou wander'st in his shade,\nWhen in eternal lines to time thou grow'st:\n"
)
LEARN_PROMPT_CHARS = 8  # every sample starts from the paragraph's first characters
LEARN_MIN_CHARS = 400  # the held-out last tenth must hold one training window (block + 1 characters)
# a model and recipe that memorise a paragraph in seconds on one busy CPU core
LEARN_MODEL = dict(cell="gru_torch", embed_dim=32, hidden_size=128)
LEARN_RECIPE = dict(lr=1e-2, batch_size=16, block_size=32, eval_interval=20, eval_windows=8)  # device: auto


def start_learning(text, seconds):
    """A background run that memorises `text`, sampling it greedily every 1.5 s (TrainingJob's sampler)."""
    if len(text) < LEARN_MIN_CHARS:
        raise ValueError(f"paragraph: has {len(text)} characters; type at least {LEARN_MIN_CHARS}")
    task = LMTask.from_text(text, "char")  # the last tenth is held out: the validation split
    config = TrainConfig(max_steps=None, max_seconds=seconds, **LEARN_RECIPE)
    task.check(config)
    model = build_model(LMConfig(vocab_size=task.vocab_size, **LEARN_MODEL))
    learned_part = len(task.train_ids)  # one character per token: the characters it trains on
    sampling = SamplingConfig(strategy="greedy", max_new_tokens=min(learned_part - LEARN_PROMPT_CHARS, 200))

    previous = st.session_state.get("lessons_learn_job")
    if previous is not None:
        previous.stop()
    sampler = functools.partial(sample_text, task.tokenizer, text[:LEARN_PROMPT_CHARS], sampling)
    job = TrainingJob(
        "lesson-learn",
        model,
        task,
        config,
        sampler=sampler,
        sample_every_s=1.5,
        owner=session_key(),
        in_process=TRAIN_IN_PROCESS,
    )
    job.start()
    register_job(job)
    st.session_state.lessons_learn_job, st.session_state.lessons_learn_for = job, text
    st.session_state.lessons_learn_span = sampling.max_new_tokens


def learning_timeline(job, text):
    """The run's samples, oldest first, each with how much of the paragraph it reproduces."""
    rows = []
    for event in job.events():
        if event["type"] == "sample":
            continuation = event["text"][LEARN_PROMPT_CHARS:]
            rows.append(
                {
                    "step": event["step"],
                    "characters reproduced": reproduced_prefix(continuation, text[LEARN_PROMPT_CHARS:]),
                    "sample": continuation.replace("\n", " ↵ "),
                }
            )
    return pd.DataFrame(rows, columns=["step", "characters reproduced", "sample"])


def learning_view(text):
    job = st.session_state.get("lessons_learn_job")
    if job is None:
        st.info("Press **Start** to train a fresh model on the paragraph above.")
        return
    if st.session_state.get("lessons_learn_for") != text:
        st.info("The run below learned an earlier version of the paragraph: press Start to learn this one.")
    learned = st.session_state.lessons_learn_for
    events = job.events()
    steps = [e for e in events if e["type"] == "step"]
    evals = [e for e in events if e["type"] == "eval"]
    if job.queue_position:
        st.progress(0.0, text=f"waiting for this server's training budget: number {job.queue_position} in the queue")
    elif steps:
        last = steps[-1]
        st.progress(
            min(1.0, last["progress"]),
            text=f"step {last['step']:,} · train loss {last['train_loss']:.3f}"
            + (" · done" if not job.running else ""),
        )
    timeline = learning_timeline(job, learned)
    samples = [e["text"] for e in events if e["type"] == "sample"]
    if samples:
        st.markdown(
            f"**Latest sample** (step {timeline['step'].iloc[-1]}), greedy from "
            f"“{plain(visible_piece(learned[:LEARN_PROMPT_CHARS]))}”"
        )
        st.code(samples[-1], language=None, wrap_lines=True)
    st.dataframe(
        timeline, hide_index=True, width="stretch", column_config={"sample": st.column_config.TextColumn(width="large")}
    )
    if job.status == "failed":
        st.error(f"The run failed: {plain(job.message)}")
    if timeline.empty or not steps:
        return
    first, last = timeline.iloc[0], timeline.iloc[-1]
    span = st.session_state.lessons_learn_span
    held_out = (
        f" On the last tenth of the paragraph, which it never trained on, its loss is "
        f"**{evals[-1]['val_loss']:.2f} nats/char** against {steps[-1]['train_loss']:.2f} on what it "
        "trained on."
        if evals
        else ""
    )
    notice(
        f"Every sample starts from the paragraph's first {LEARN_PROMPT_CHARS} characters and lets the model "
        f"continue greedily. At step {first['step']} it gives back **{first['characters reproduced']}** "
        f"characters of your text before its first mistake; at step {last['step']}, "
        f"**{last['characters reproduced']}** of the {span} each sample writes. Read the samples top to bottom and "
        "watch when spaces, short words and then whole lines appear." + held_out
    )


def watch_it_learn():
    st.caption(
        "A live run on this server's CPU: a fresh one-layer GRU (PyTorch's convention, 128 units) "
        "trains on your paragraph alone, and every 1.5 s the training thread writes a greedy sample."
    )
    text = st.text_area(
        "Your paragraph (at least 400 characters)", SONNET, max_chars=2000, height=140, key="lessons_learn_text"
    )
    cols = st.columns([2, 1])
    seconds = cols[0].slider("Training time (seconds)", 5, 60, 20, 5, key="lessons_learn_seconds")
    job = st.session_state.get("lessons_learn_job")
    if cols[1].button("▶ Start", key="lessons_learn_start", type="primary"):
        with user_errors("Starting the run"):
            start_learning(text, seconds)
            job = st.session_state.lessons_learn_job
    running = job is not None and job.running
    st.fragment(run_every=1.0 if running else None)(learning_view)(text)
    check_yourself(
        "By the end the model writes your paragraph back almost word for word. Has it learned to write English?",
        "No: it has memorised one text. The loss on the last tenth of the paragraph, which it never "
        "trained on, stays far above its training loss: a model that had learned the language would "
        "predict unseen text too. With one short text and tens of thousands of parameters, copying is the "
        "easiest way to a low training loss.",
    )
    open_full_page(
        "Train",
        "Open the Train page with this model and recipe (upload your text there)",
        cell=LEARN_MODEL["cell"],
        emb=LEARN_MODEL["embed_dim"],
        hidden=LEARN_MODEL["hidden_size"],
        lr=LEARN_RECIPE["lr"],
        batch=LEARN_RECIPE["batch_size"],
        block=LEARN_RECIPE["block_size"],
        seconds=seconds,
        corpus="upload",
    )
