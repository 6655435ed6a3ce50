"""The lesson where a fresh model learns the student's own paragraph, with its samples over training."""

import functools
import time

import pandas as pd
import streamlit as st

from lab.instruments.learning import (
    LEARN_MODEL,
    LEARN_RECIPE,
    LEARN_STEPS,
    REVEAL_SECONDS,
    SAMPLE_RATIO,
    StepSampler,
    milestones,
    sample_steps,
    samples_shown,
)
from lab.instruments.sampling import SamplingConfig, reproduced_prefix, sample_text
from lab.lessons.toys import learning_sentences, memorised_answer
from lab.nets.models import LMConfig, count_parameters
from lab.runs import start, training_run
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig
from lab.words import count
from ui.cell_labels import cell_label
from ui.lessons.common import check_yourself, notice, open_full_page
from ui.shared.boundary import fragment, redraw_by_itself
from ui.shared.coloured_text import visible_piece
from ui.shared.links import url_values
from ui.shared.plain_text import plain, preformatted, said, user_errors
from ui.shared.sessions import register_job, session_key, train_in_process

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
LEARN_MAX_SECONDS = 300  # LEARN_STEPS take seconds; this bounds a run on a crowded server


def start_learning(text):
    """A background run that memorises `text` in LEARN_STEPS steps, sampling it greedily at the steps
    of lab.instruments.learning.sample_steps (a sampler called after every step, writing only at those)."""
    if len(text) < LEARN_MIN_CHARS:
        raise ValueError(f"paragraph: has {count(len(text), 'character')}; type at least {LEARN_MIN_CHARS}")
    task = LMTask.from_text(text, "char")  # the last tenth is held out: the validation split
    config = TrainConfig(max_steps=LEARN_STEPS, max_seconds=LEARN_MAX_SECONDS, **LEARN_RECIPE)
    task.check(config)
    model_config = LMConfig(vocab_size=task.vocab_size, **LEARN_MODEL)
    learned_part = len(task.train_ids)  # one character per token: the characters it trains on
    sampling = SamplingConfig(strategy="greedy", max_new_tokens=min(learned_part - LEARN_PROMPT_CHARS, 200))

    previous = st.session_state.get("lessons_learn_job")
    if previous is not None:
        previous.stop()
    sample = functools.partial(sample_text, task.tokenizer, text[:LEARN_PROMPT_CHARS], sampling)
    name = "the lesson's run on your text"  # as the Train page lists it, in words
    job = training_run(
        name,
        model_config,
        task,
        config,
        sampler=StepSampler(sample, sample_steps(LEARN_STEPS)),
        sample_every_s=0,  # asked after every step: StepSampler writes at its steps only
        owner=session_key(),
        in_process=train_in_process(),
    )
    # the lesson's own paragraph is the same experiment for the whole class; a paragraph typed is its student's
    (job,) = start([(job, name, None, None)], session_key(), "the lesson's run", private=text != SONNET)
    register_job(job)
    st.session_state.lessons_learn_job, st.session_state.lessons_learn_for = job, text
    st.session_state.lessons_learn_span = sampling.max_new_tokens
    st.session_state.lessons_learn_replay_from = None  # set when its first sample arrives


def written_samples(job):
    """(step, text) of the run's samples, oldest first (StepSampler writes none between its steps)."""
    return [(e["step"], e["text"]) for e in job.events() if e["type"] == "sample" and e["text"] is not None]


def replayed_samples(job):
    """The samples the replay shows by now: the first as soon as it exists, then one every REVEAL_SECONDS."""
    samples = written_samples(job)
    if samples and st.session_state.get("lessons_learn_replay_from") is None:
        st.session_state.lessons_learn_replay_from = time.monotonic()
    if not samples:
        return samples
    watching = time.monotonic() - st.session_state.lessons_learn_replay_from
    return samples[: samples_shown(len(samples), watching)]


def learning_timeline(samples, text):
    """The samples shown, oldest first, each with how much of the paragraph it reproduces."""
    rows = []
    for step, sample in samples:
        continuation = sample[LEARN_PROMPT_CHARS:]
        rows.append(
            {
                "step": step,
                "characters reproduced": reproduced_prefix(continuation, text[LEARN_PROMPT_CHARS:]),
                "sample": continuation.replace("\n", " ↵ "),
            }
        )
    return pd.DataFrame(rows, columns=["step", "characters reproduced", "sample"])


def replay_running(job):
    """Whether the page must keep redrawing: the run trains, or the replay has samples still to show."""
    return job is not None and (job.running or len(replayed_samples(job)) < len(written_samples(job)))


def learning_view(text, auto):
    job = st.session_state.get("lessons_learn_job")
    if job is None:
        st.info("Press **Start** to train a fresh model on the paragraph above.")
        return
    if st.session_state.get("lessons_learn_for") != text:
        st.info("The run below learned an earlier version of the paragraph: press Start to learn this one.")
    learned = st.session_state.lessons_learn_for
    events = job.events()
    steps = [e for e in events if e["type"] == "step"]
    if job.queue_position:
        st.progress(0.0, text=f"waiting for this server's training budget: number {job.queue_position} in the queue")
    elif steps:
        last = steps[-1]
        st.progress(
            min(1.0, last["step"] / LEARN_STEPS),
            text=f"training: step {last['step']:,} of {LEARN_STEPS} · train loss {last['train_loss']:.3f}"
            + (" · done" if not job.running else ""),
        )
    shown = replayed_samples(job)
    timeline = learning_timeline(shown, learned)
    if shown:
        st.markdown(
            f"**Sample {len(shown)} of {len(sample_steps(LEARN_STEPS))}**, at step {shown[-1][0]:,}: greedy "
            f"from “{plain(visible_piece(learned[:LEARN_PROMPT_CHARS]))}”"
        )
        preformatted(shown[-1][1])
    st.table(timeline, hide_index=True)  # every sample in view, whole: the newest is not scrolled away
    if job.status == "failed":
        st.error(f"The run failed: {said(job.message)}")
    if auto and not replay_running(job):
        redraw_by_itself()  # the replay has shown its last sample: redraw once, without the refresh
    if timeline.empty:
        return
    notice(what_to_notice(timeline, shown, learned, [e for e in events if e["type"] == "eval"]))


def what_to_notice(timeline, shown, learned, evals):
    """The notice, written from the samples shown so far (never from ones the replay has not reached)."""
    step, reproduced = timeline["step"].iloc[-1], timeline["characters reproduced"].iloc[-1]
    span = st.session_state.lessons_learn_span
    prompt = LEARN_PROMPT_CHARS
    found = milestones([(s, sample[prompt:]) for s, sample in shown], learned[prompt:], span)
    checked = [e for e in evals if e["step"] <= step]
    return learning_sentences(step, reproduced, span, prompt, found, checked[-1] if checked else None, len(learned))


def has_it_learned():
    """The check-yourself answer, from the current run (its last evaluation and its model's size), if any."""
    job = st.session_state.get("lessons_learn_job")
    if job is None:
        return memorised_answer(None, None)
    evals = [e for e in job.events() if e["type"] == "eval"]
    return memorised_answer(evals[-1] if evals else None, count_parameters(job.model))


def watch_it_learn():
    steps = sample_steps(LEARN_STEPS)
    layers = LMConfig(vocab_size=1, **LEARN_MODEL).num_layers
    st.caption(
        f"A live run on this server: a fresh {cell_label(LEARN_MODEL['cell'])} with {count(layers, 'layer')} "
        f"of {count(LEARN_MODEL['hidden_size'], 'unit')} trains for {count(LEARN_STEPS, 'step')} "
        f"on your paragraph alone. It writes a greedy sample at steps {', '.join(map(str, steps[:7]))}, … "
        f"(each about {SAMPLE_RATIO:.1f} times the last: closer together early on), and they are shown here "
        f"one every {REVEAL_SECONDS:g} s, so that you can read each."
    )
    text = st.text_area(
        "Your paragraph (at least 400 characters)", SONNET, max_chars=2000, height=140, key="lessons_learn_text"
    )
    if st.button("▶ Start", key="lessons_learn_start", type="primary"):
        with user_errors("Starting the run"):
            start_learning(text)
    job = st.session_state.get("lessons_learn_job")
    watching = replay_running(job)
    fragment(run_every=1.0 if watching else None)(learning_view)(text, watching)
    check_yourself(
        "Suppose that by the end every sample gives back, word for word, all it writes of your paragraph. Has the "
        "model learned to write English?",
        has_it_learned(),
    )
    open_full_page(
        "Train",
        "Open the Train page with this model and recipe (upload your text there)",
        cell=LEARN_MODEL["cell"],
        emb=LEARN_MODEL["embed_dim"],
        hidden=LEARN_MODEL["hidden_size"],
        **url_values(LEARN_RECIPE, ("lr", "batch", "block")),
        seconds=30,
        corpus="upload",
    )
