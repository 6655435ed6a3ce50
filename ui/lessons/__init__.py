"""The lessons of the Lessons page: each on a page of its own, on the bundled models.

Every lesson follows one shape: the question in a sentence or two; one
experiment driven by one or two controls; what to notice, written around the
figures just computed (never canned numbers); a check-yourself question with
its answer behind a reveal; and a link that opens the full instrument page with
the same settings (ui.shared.links reads them from the URL).

Presentation only: the numbers come from `lab` (lab.instruments: stepping, memory, sampling, scans;
lab.experiments: probe, ablation; lab.training.train), through the cached calls of ui.shared.cached_calls
where those exist. Widget keys start with "lessons_". The lessons live in a few modules by theme;
what they share is in ui.lessons.common.
"""

from dataclasses import dataclass, field
from typing import Callable

import streamlit as st

from ui.lessons import stepping, toy_tasks
from ui.lessons.learning import watch_it_learn
from ui.lessons.memory import gate_biases_over_1024_steps, keep_or_overwrite, why_the_rnn_forgets
from ui.lessons.reading import characters_or_subwords, choosing_the_next_token, state_is_memory
from ui.lessons.scanning import a_recurrence_you_can_scan


@dataclass(frozen=True)
class Lesson:
    title: str
    question: str  # one or two sentences, in the student's words
    show: Callable[[], None]  # draws the experiment, what to notice, the check and the link
    settings: dict = field(
        default_factory=dict
    )  # its settings in a link: URL name -> (ui.shared.links.Field, widget key)
    defaults: dict = field(default_factory=dict)  # URL name -> value, for each of `settings`


LESSONS = {  # slug (the ?lesson= of a link) -> lesson, in teaching order
    "step-through": Lesson(
        "One step of a recurrent cell, step by step",
        "A recurrent cell reads one token and turns its old state into a new one through a few equations. What "
        "numbers do those equations actually produce, gate by gate, in a trained model?",
        stepping.one_step,
        stepping.SETTINGS,
        stepping.DEFAULTS,
    ),
    "state-is-memory": Lesson(
        "The state is the memory",
        "A recurrent model carries a hidden state from token to token. How much worse does it predict a text "
        "when that state is wiped every few tokens?",
        state_is_memory,
    ),
    "next-token": Lesson(
        "Choosing the next token",
        "The model gives a probability to every possible next token. Does it matter how we pick one from them?",
        choosing_the_next_token,
    ),
    "keep-or-overwrite": Lesson(
        "Keep or overwrite",
        "A gated cell multiplies its memory by a keep factor every step. How long does a memory last for a "
        "given gate bias, and what did the trained models learn?",
        keep_or_overwrite,
    ),
    "vanilla-forgets": Lesson(
        "Why the vanilla RNN forgets",
        "Training adjusts the weights by how much each step influenced the loss. How fast does that influence "
        "fade with distance, in an RNN, a GRU and an LSTM?",
        why_the_rnn_forgets,
    ),
    "chars-or-subwords": Lesson(
        "Characters or subwords",
        "A model can read text one character at a time, or in word pieces. What does each choice cost, in steps "
        "and in loss?",
        characters_or_subwords,
    ),
    "scan": Lesson(
        "A recurrence you can scan",
        "When the gates do not look at the state, the recurrence can be computed all at once instead of step "
        "by step. Is that the same answer, and is it faster?",
        a_recurrence_you_can_scan,
    ),
    "gate-biases": Lesson(
        "Do gate biases matter over 1024 steps?",
        "A GRU reading an image pixel by pixel must remember across 1024 steps. Does it help to start its "
        "update gate biased towards keeping?",
        gate_biases_over_1024_steps,
    ),
    "learn-your-text": Lesson(
        "Watch it learn your text",
        "What does a recurrent model do, step by step, while it learns? Give it one paragraph and watch its samples.",
        watch_it_learn,
    ),
    "toy-tasks": Lesson(
        "Toy tasks that train in seconds",
        "A memory has to last from the token that matters to the question asked about it. How far can each "
        "cell carry one, trained from scratch on a task that needs nothing else?",
        toy_tasks.toy_tasks,
        toy_tasks.SETTINGS,
        toy_tasks.DEFAULTS,
    ),
}


# every lesson's settings, for the page's link (each URL name belongs to one lesson)
URL_SETTINGS = {name: setting for lesson in LESSONS.values() for name, setting in lesson.settings.items()}
URL_DEFAULTS = {name: value for lesson in LESSONS.values() for name, value in lesson.defaults.items()}


def show_lesson(slug):
    lesson = LESSONS[slug]
    number = list(LESSONS).index(slug) + 1
    st.header(f"{number} · {lesson.title}")
    st.markdown(f"**The question.** {lesson.question}")
    lesson.show()
