"""lab.instruments.learning, the "watch it learn your text" lesson's lab side: the sample steps and their replay span
30 s and more, the sampler writes at those steps only, the milestones are read from the samples, and
the lesson's model has not yet memorised its default paragraph at the step the replay shows after 30 s
(counted in steps, so it holds on any machine)."""

import torch

from lab.instruments.learning import (
    LEARN_MODEL,
    LEARN_RECIPE,
    LEARN_STEPS,
    REVEAL_SECONDS,
    StepSampler,
    milestones,
    milestones_sentence,
    sample_steps,
    samples_shown,
)
from lab.instruments.sampling import SamplingConfig, reproduced_prefix, sample_text
from lab.nets.models import LMConfig, build_model
from lab.training.tasks import LMTask
from lab.training.train import TrainConfig, train
from ui.lessons.learning import LEARN_PROMPT_CHARS, SONNET


def test_the_samples_are_spread_on_a_log_scale_and_their_replay_lasts_over_30_seconds():
    steps = sample_steps(LEARN_STEPS)
    assert steps[:7] == [1, 2, 3, 4, 6, 8, 11] and steps[-1] == LEARN_STEPS
    assert steps == sorted(set(steps))
    assert all(1.2 < b / a < 1.6 for a, b in zip(steps[6:-2], steps[7:-1]))  # about √2 apart once past the first
    assert (len(steps) - 1) * REVEAL_SECONDS >= 30  # the last sample comes 30 s or more after the first
    assert sample_steps(1) == [1] and sample_steps(5) == [1, 2, 3, 4, 5]


def test_the_replay_shows_one_sample_more_every_few_seconds_never_one_not_yet_written():
    assert samples_shown(10, 0.0) == 1
    assert samples_shown(10, REVEAL_SECONDS * 3.5) == 4
    assert samples_shown(2, 60.0) == 2  # training is behind the replay: it waits
    steps = sample_steps(LEARN_STEPS)
    assert samples_shown(len(steps), 10_000) == len(steps)  # at the end, the last: the step LEARN_STEPS


def test_the_sampler_writes_at_its_steps_and_nothing_between():
    sampler = StepSampler(lambda model: f"sample of {model}", [1, 3])
    assert [sampler("m") for _ in range(4)] == ["sample of m", None, "sample of m", None]


def test_milestones_are_the_first_steps_whose_samples_show_them():
    text = "Shall I compare thee to a summer's day?\nThou art more lovely\n"
    samples = [(1, "aaaaaaaa"), (2, "a ae ae a"), (8, "ath thee a"), (20, "x day?\nThou art more lovely\nz")]
    found = milestones([*samples, (40, text)], text, span=len(text))
    # "ath" is no word of the text, "thee" is
    assert found == {"space": 2, "word": 8, "line": 20, "copied": 40}
    assert milestones_sentence(found, len(text), 0, len(text)).startswith(
        "the first space at step 2, the first word of your paragraph at step 8"
    )
    assert milestones_sentence(found, len(text), 0, len(text)).endswith("the whole paragraph word for word at step 40.")
    assert milestones([(1, "aaa")], text, span=len(text)) == dict.fromkeys(found)
    # the first line is begun by the prompt: its end written back is not "the first whole line" (issue 51)
    after_prompt = text[8:]
    assert milestones([(3, after_prompt.split("\n")[0] + "\n")], after_prompt, span=5)["line"] is None
    assert milestones_sentence(dict.fromkeys(found), len(text), 0, len(text)) == ""


def test_after_30_seconds_of_replay_the_lessons_paragraph_is_not_yet_memorised():
    torch.manual_seed(0)
    task = LMTask.from_text(SONNET, "char")
    shown = sample_steps(LEARN_STEPS)[: samples_shown(len(sample_steps(LEARN_STEPS)), 30)]
    steps = shown[-1]  # the step of the sample on screen 30 s into the replay
    model = build_model(LMConfig(vocab_size=task.vocab_size, **LEARN_MODEL))
    train(model, task, TrainConfig(max_steps=steps, max_seconds=None, **{**LEARN_RECIPE, "eval_interval": steps}))
    span = min(len(task.train_ids) - LEARN_PROMPT_CHARS, 200)
    sample = sample_text(
        task.tokenizer, SONNET[:LEARN_PROMPT_CHARS], SamplingConfig(strategy="greedy", max_new_tokens=span), model
    )
    given_back = reproduced_prefix(sample[LEARN_PROMPT_CHARS:], SONNET[LEARN_PROMPT_CHARS:])
    assert given_back < span / 2, f"memorised by step {steps}: the replay's second half shows a finished text"
