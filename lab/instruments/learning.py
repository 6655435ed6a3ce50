"""Watching a fresh model learn one paragraph: the model and recipe, samples taken at steps spread
evenly on a log scale, a replay that shows them at a reading pace, and the milestones a reader looks
for in them (the first space, the first real word, the first whole line, and every character a sample
writes given back word for word: what was compared said exactly, never "the whole paragraph" when a
sample writes only its first 200 characters).

A small GRU memorises a sonnet in a hundred-odd steps, a few seconds on a CPU: far too fast to read
live. So the run samples at steps 1, 2, 3, 4, 6, 8, 11, ... (each about √2 times the last: the early
steps, where most changes, get as many samples as the late ones) and the samples are shown one every
REVEAL_SECONDS, never before they exist.
"""

import re

from lab.words import count, listing

LEARN_MODEL = dict(cell="gru_torch", embed_dim=32, hidden_size=128)
# lr 2e-3 rather than 1e-2: at 1e-2 this model gives a sonnet back word for word by step ~60, so that
# the first 30 s of a replay would already end on the memorised text
LEARN_RECIPE = dict(lr=2e-3, batch_size=16, block_size=32, eval_interval=20, eval_windows=8)
LEARN_STEPS = 300  # a sonnet is memorised well before: the last samples show it held
SAMPLE_RATIO = 2**0.5
REVEAL_SECONDS = 2.5  # one sample shown every this many seconds: time to read 200 characters


def sample_steps(last_step, ratio=SAMPLE_RATIO):
    """The steps a run samples at: 1 and then each about `ratio` times the last, up to `last_step`,
    which is always the last one (the model as it ends)."""
    steps, x = [], 1.0
    while round(x) < last_step:
        if not steps or round(x) > steps[-1]:
            steps.append(round(x))
        x *= ratio
    return steps + [last_step]


class StepSampler:
    """A TrainingJob sampler that writes a sample only at `steps`: TrainingJob calls it after every
    step when sample_every_s is 0, and it returns None at the steps between (no sample)."""

    def __init__(self, sample, steps):
        self.sample, self.steps, self.calls = sample, frozenset(steps), 0

    def __call__(self, model):
        self.calls += 1
        return self.sample(model) if self.calls in self.steps else None


def samples_shown(available, seconds_watching, every=REVEAL_SECONDS):
    """How many of the `available` samples the replay shows after `seconds_watching`: the first at
    once, then one more every `every` seconds."""
    return min(available, 1 + int(seconds_watching // every))


WORD = re.compile(r"[A-Za-z']{3,}")
MILESTONES = {  # what each milestone is, in words (the last one's words say what it compared: milestone_words)
    "space": "the first space",
    "word": "the first word of your paragraph",
    "line": "the first whole line of it",
    "copied": "every character a sample writes, word for word",
}


def milestones(samples, text, span):
    """{milestone: the first step whose sample shows it, or None}, for MILESTONES' keys.

    samples: [(step, continuation)] oldest first, each continuation the model's greedy text after the
    prompt; text: the paragraph after the prompt; span: how many characters each sample writes.
    A word is 3 letters or more, found whole in the sample (not inside a longer one); a line is one
    of the paragraph's lines of 10 characters or more, ending where the paragraph's does, and never the
    first, which the prompt begins (the model wrote only its end: not a whole line); "copied" is the
    sample's first `span` characters equal to the paragraph's (all of them, when it is shorter)."""
    words = set(WORD.findall(text))
    lines = [line + "\n" for line in text.split("\n")[1:-1] if len(line) >= 10]
    compared = min(span, len(text))

    def shows(kind, sample):
        if kind == "space":
            return " " in sample
        if kind == "word":
            return any(word in words for word in WORD.findall(sample))
        if kind == "line":
            return any(line in sample for line in lines)
        return len(sample) >= compared and sample[:compared] == text[:compared]

    found = dict.fromkeys(MILESTONES)
    for step, sample in samples:
        for kind in MILESTONES:
            if found[kind] is None and shows(kind, sample):
                found[kind] = step
    return found


def milestone_words(kind, span, prompt_chars, paragraph_chars):
    """A milestone in words. "copied" says exactly what was compared: the `span` characters after the
    paragraph's first `prompt_chars` (the prompt), out of its `paragraph_chars`; "the whole paragraph"
    only where that is all of it."""
    if kind != "copied":
        return MILESTONES[kind]
    last = min(prompt_chars + span, paragraph_chars)
    if prompt_chars == 0 and last == paragraph_chars:
        return "the whole paragraph word for word"
    if last == paragraph_chars:
        return f"all of your paragraph after its first {count(prompt_chars, 'character')} word for word"
    return (
        f"all a sample writes, characters {prompt_chars + 1:,} to {last:,} of your paragraph's "
        f"{paragraph_chars:,}, word for word"
    )


def milestones_sentence(found, span, prompt_chars, paragraph_chars):
    """The milestones reached, in words: "the first space at step 2, ..."; "" when none is. span,
    prompt_chars, paragraph_chars: what the samples were compared with (milestone_words)."""
    reached = [
        f"{milestone_words(kind, span, prompt_chars, paragraph_chars)} at step {step:,}"
        for kind, step in found.items()
        if step is not None
    ]
    if not reached:
        return ""
    return listing(reached) + "."
