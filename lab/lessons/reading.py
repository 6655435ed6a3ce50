"""What the reading lessons say: the state is the memory (the loss with the state reset every k
tokens), choosing the next token (greedy against a sampler, over several random seeds), characters
or subwords (steps and loss of two tokenisations). Each sentence is chosen from the figures shown."""

import numpy as np

from lab.instruments.sampling import pick_distribution, repetition_report, reproduced_prefix
from lab.words import count, listing

# ---------------------------------------------------------------------------
# the state is the memory


def reset_labels(reset_every, full):
    """Each point of the reset curve in words, for the chart: (tick, hover), e.g. ("4", "state reset
    every 4 tokens") and ("never", "state never reset: 356 tokens read in one pass")."""
    ticks, hovers = [], []
    for k, whole in zip(reset_every, full):
        ticks.append("never" if whole else f"{k}")
        hovers.append(
            f"state never reset: {count(k, 'token')} read in one pass"
            if whole
            else f"state reset every {count(k, 'token')}"
        )
    return ticks, hovers


def state_memory_sentences(name, reset_every, losses, stateful_p, stateless_p, tokens):
    """The notice of the state-is-memory lesson. reset_every, losses: the curve (nats/char), the last
    point the whole passage read with the state carried; stateful_p, stateless_p: the mean probability
    each sample gives its own tokens; tokens: how many tokens each sample has."""
    reset, carried = losses[0], losses[-1]
    n = reset_every[-1]
    first = (
        f"Reset before every token, {name} predicts from the previous token alone and pays **{reset:.2f} "
        "nats/char**: that is $P(s_t \\mid s_{t-1})$, the collapse that a stateless model suffers."
    )
    if round(carried, 2) < round(reset, 2):
        gain = reset - carried
        k = next(k for k, loss in zip(reset_every, losses) if loss <= (reset + carried) / 2)
        share = (reset - losses[list(reset_every).index(k)]) / gain
        where = f"once the state lives **{count(k, 'token')}** ({k / n:.0%} of the passage)"
        rest = (
            f"All of that gain is already there {where}: on this passage the longer memory adds nothing."
            if share >= 1
            else f"**{share:.0%}** of that gain is there {where}; the other {1 - share:.0%} comes from the longer "
            f"memory, out to {count(n, 'token')}."
        )
        less = f"{gain / reset:.0%} less"
        second = f" Carried through the whole passage ({count(n, 'token')}) it pays **{carried:.2f}**, {less}. {rest}"
    else:
        second = (
            f" Carried through the whole passage ({count(n, 'token')}) it pays **{carried:.2f}**, no less: on this "
            "passage the model gains nothing from its memory."
        )
    agrees = round(stateful_p, 2) > round(stateless_p, 2)
    samples = (
        f"\n\nOne pair of samples ({count(tokens, 'token')} each, the same random seed, the same top-k): the "
        f"stateful one gives its own tokens a mean probability of {stateful_p:.2f}, the stateless one "
        f"{stateless_p:.2f}. "
        + (
            "The stateful one is the more confident, as the curve leads you to expect."
            if agrees
            else "Here the stateful one is not the more confident: one pair of samples is a small test, "
            "and the curve, over the whole passage, is the better measure."
        )
    )
    return first + second + samples


# ---------------------------------------------------------------------------
# choosing the next token

SEEDS = 5  # samples per setting: one sample of a few hundred tokens is mostly luck


def sample_row(generation, greedy_text, label):
    """One row of the next-token table: what a generation did, and how long it follows greedy's text."""
    report = repetition_report(generation.continuation)
    return {
        "sample": label,
        "mean p(chosen)": float(np.mean(generation.probs)),
        "model's own entropy (nats)": float(np.mean(generation.entropies)),
        "words in a repeated 4-word run": report["repeat_share"],
        "longest repeated passage (chars)": report["longest_repeat_chars"],
        "ends in a loop": "yes" if report["ends_in_cycle"] else "no",
        "characters the same as greedy's": reproduced_prefix(generation.continuation, greedy_text),
    }


def next_token_sentences(greedy, samples, rule, length):
    """The notice of the next-token lesson. greedy: its sample_row; samples: the rows of the chosen
    rule, one per random seed; rule: its label; length: the characters each sample wrote."""
    g = greedy["mean p(chosen)"]
    loop = "and it ends in a loop" if greedy["ends in a loop"] == "yes" else "though it does not end in a loop"
    first = (
        f"Greedy always takes the likeliest token: mean p(chosen) **{g:.3f}**, "
        f"{greedy['words in a repeated 4-word run']:.0%} of its words sit in a run of 4 words that it writes more "
        f"than once (every time, the first included), {loop}."
    )
    means = [row["mean p(chosen)"] for row in samples]
    shown = [round(m, 3) for m in means]  # as the table shows them
    lower, higher = sum(m < round(g, 3) for m in shown), sum(m > round(g, 3) for m in shown)
    n = len(samples)
    if lower == n:
        versus = f"lower than greedy's in all {n}"
    elif higher == n:
        versus = f"higher than greedy's in all {n}"
    elif lower == higher == 0:
        versus = f"the same as greedy's in all {n}"
    else:
        parts = [(k, what) for k, what in ((lower, "lower"), (higher, "higher"), (n - lower - higher, "the same")) if k]
        (k, what), rest = parts[0], parts[1:]
        versus = listing(
            [f"{what} {'as' if what == 'the same' else 'than'} greedy's in {k} of {n}"]
            + [f"{w} in {j}" for j, w in rest]
        )
    follows = [row["characters the same as greedy's"] for row in samples]
    path = (
        f"Every one writes exactly greedy's {count(length, 'character')}."
        if min(follows) == length
        else f"They write the same text as greedy for {listing(str(f) for f in follows)} of its "
        f"{count(length, 'character')} before they first differ; after one different pick the text reads another "
        "context and goes its own way."
    )
    loops = sum(row["ends in a loop"] == "yes" for row in samples)
    seeds = "one sample" if n == 1 else f"{n} samples (random seeds 0 to {n - 1})"
    second = (
        f"**{rule}**, over {seeds}: mean p(chosen) **{np.mean(means):.3f}**"
        + (f", from {min(means):.3f} to {max(means):.3f} across the random seeds" if n > 1 else "")
        + f"; {versus}. {loops} of {n} end in a loop. {path}"
    )
    third = (
        "At any single step, more freedom (a higher T, a larger k or p) can only lower the probability the "
        "rule expects its pick to have. Over a whole sample, though, each pick changes the text the next "
        "one reads, so one sample's mean p(chosen) can move either way from one setting to the next: "
        "compare settings by the spread over the random seeds, not by one sample. The model is the same in every "
        "run; only the rule that turns its probabilities into a choice changes."
    )
    return f"{first} {second}\n\n{third}"


def expected_pick_probability(logits, config):
    """The probability the model gives, on average, to the token `config`'s rule picks at one step:
    sum_i q_i p_i, with p the model's softmax and q the rule's pick distribution. More freedom never
    raises it (tests/test_lesson_claims.py checks this over T, k and p), which is why the lesson can say so."""
    p = np.asarray(pick_distribution(logits, config))
    model = np.exp(logits.double().numpy() - logits.double().numpy().max())
    return float(p @ (model / model.sum()))


# ---------------------------------------------------------------------------
# characters or subwords

LEVEL = 0.02  # nats/char: closer than this, two models predict a text about equally well
FEW_CHARS = 100  # below this many characters a gap in loss describes the text more than the models


def subword_sentences(n_chars, char_name, sub_name, char, sub):
    """The notice of the characters-or-subwords lesson. char, sub: (steps, nats_per_token, nats_per_char)
    of the character and the subword model over the same text of n_chars characters."""
    (n_c, c_tok, c_char), (n_s, s_tok, s_char) = char, sub
    per_step = n_chars / n_s
    memory = (
        f"Its state has to carry the text across {n_s} updates instead of {n_c}: fewer steps for its memory "
        "to bridge, which is the case for subwords."
        if n_s < n_c
        else f"Here it takes no fewer steps ({n_s} against {n_c}): subwords save steps only on words the "
        "tokenizer knows whole."
    )
    harder = (
        "each of its tokens holds more text, so each is harder to predict"
        if s_tok > c_tok and per_step > 1
        else "here that is no higher than the character model's"
        if s_tok <= c_tok
        else "each token is harder to predict"
    )
    gap = s_char - c_char
    verdict = (
        f"the two predict it about equally well (within {LEVEL} nats/char)"
        if abs(gap) < LEVEL
        else f"{sub_name if gap < 0 else char_name} predicts it better by {abs(gap):.2f} nats/char"
    )
    if n_chars < FEW_CHARS:
        verdict += (
            f", though on fewer than {count(FEW_CHARS, 'character')} a gap tells you about these few characters "
            "more than about the two models"
        )
    return (
        f"The character model reads these {count(n_chars, 'character')} in **{count(n_c, 'step')}**; {sub_name} in "
        f"**{n_s}**, {per_step:.1f} characters per step. {memory}\n\n"
        f"Per token, {sub_name}'s loss is {s_tok:.2f} nats against the character model's {c_tok:.2f}: {harder}. "
        f"Per character, the fair comparison, {char_name} pays **{c_char:.2f}** and {sub_name} **{s_char:.2f}** "
        f"on this text: {verdict}. Type another sentence: words {sub_name} knows whole cost it one step; rare "
        "words break into pieces."
    )


def low_temperature_answer(temperature=0.05, clear=0.5, tied=0.05):
    """The answer to "at a tiny temperature, what text does the sampler write?", with the runner-up's
    chance computed for a clear lead (a logit gap of `clear`) and a near tie (a gap of `tied`)."""

    def runner_up(gap):  # the second of two tokens, at this temperature: 1 / (1 + e^(gap / T))
        return 1 / (1 + np.exp(gap / temperature))

    return (
        f"Greedy's text for as long as the likeliest token clearly leads. Dividing the logits by T = "
        f"{temperature:g} multiplies every gap between them by {1 / temperature:g}: where the leader is "
        f"{clear:g} ahead of the runner-up, the runner-up's chance between the two falls to "
        f"{runner_up(clear):.3%}. But where two tokens are nearly tied, {tied:g} apart, the gap becomes only "
        f"{tied / temperature:g} and the runner-up still wins {runner_up(tied):.0%} of the draws between the two. "
        "One such pick is enough: from there the text reads another context and goes its own way. Set T to "
        f"{temperature:g} and read the last column of the table: how far each sample follows greedy. (Top-k "
        "with k = 1 is exactly greedy, and so is top-p whenever p is at most the likeliest token's probability.)"
    )
