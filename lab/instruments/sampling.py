"""One seeded sampler for every model, the strategy a parameter (seeds 002, 004, 000).

Glossary: T time (tokens read so far), P prompt tokens, N new tokens, V vocabulary.

    config = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8)  # seed 002's favourite
    out = generate(model, tokenizer, "ROMEO:", config)
    out.text, out.pieces, out.probs, out.entropies

Stateful generation (the default) reads the prompt once, then feeds one token
per step and carries the recurrent state, so each new token costs O(1):

    prompt  R O M E O :      -> state, logits -> pick t1
    step             t1      -> state, logits -> pick t2        (state carried)

This is seed 004's generation for ScanMarkov: the prompt is embedded and composed into the latent
by the gated recurrence, the latent decoded, a character picked (seed 004: temperature + nucleus,
`default_strategy`), and that character composed into the latent in turn.

Stateless generation (`stateful=False`) resets the state before every step,
so each token is predicted from the previous token alone: the model collapses
to P(s_t | s_{t-1}), as seed 000 and seed 001 A.2 warn. ScanMarkov's state
includes its position, so stateless also puts it back at position 0.

Strategies (registry `STRATEGIES`), each (logits (V,), config, generator) -> id:
    greedy       argmax at every step; deterministic, loops (seed 002's "the sea")
    temperature  sample from softmax(logits / T)
    top_k        keep the k most likely tokens, then sample at temperature T (seed 002)
    top_p        nucleus: the smallest set with mass >= p, at temperature T (seed 004)

Randomness comes from one torch.Generator seeded with `config.seed`, never the
global RNG, and sampling happens on the CPU: the same seed and prompt give the
same text on every call.
"""

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Literal

import torch

from lab.errors import LabError
from lab.instruments.introspect import encode_text
from lab.nets.models import evaluating
from lab.schema import Names, PageRange, Seed, config, declare
from lab.words import count

MAX_NEW_TOKENS = 5000
MAX_TEMPERATURE = 1e6
# a prompt is read in one forward pass, so its length is bounded where it enters (the CLI, the pages)
MAX_PROMPT_CHARS = 1000
# the most tokens before a prediction that lab.instruments.prediction traces it back through (one forward and
# one backward pass over them); the Sample page traces any token it generates, so it offers at most the rest
# after the longest prompt
MAX_INFLUENCE_TOKENS = 2000


class SamplingError(LabError):
    """A model that cannot be sampled from; the message says why."""


START_TEXT = "\n"  # an empty prompt starts here: in a play every speech starts after a newline


# ---------------------------------------------------------------------------
# strategies: logits (V,) float32 on the CPU -> one token id


def _draw(weights, generator):
    """Index of one draw from non-negative weights (K,), normalised or not."""
    return int(torch.multinomial(weights, 1, generator=generator))


def greedy(logits, config, generator):
    """The most likely token; temperature does not change an argmax."""
    return int(logits.argmax())


def _tempered_softmax(logits, temperature):
    """softmax(logits / T), computed as softmax((logits - max) / T) in float64: the same
    distribution, but a tiny T (1e-45, 5e-324) divides values <= 0 by a non-zero number and gives
    -inf, never inf - inf or 0 / 0 = NaN (T in float32 would round to 0); it tends to greedy."""
    return torch.softmax((logits.double() - logits.max()) / temperature, -1)


def sample_temperature(logits, config, generator):
    """Sample from softmax(logits / T): T < 1 sharpens, T > 1 flattens."""
    return _draw(_tempered_softmax(logits, config.temperature), generator)


def sample_top_k(logits, config, generator):
    """Keep the k largest logits, renormalise at temperature T, sample among them."""
    values, indices = torch.topk(logits, min(config.top_k, logits.numel()))  # (k,), (k,)
    return int(indices[_draw(_tempered_softmax(values, config.temperature), generator)])


def mass_before(sorted_probs):
    """The probability mass above each token of a descending distribution: a token is in the nucleus if it
    is < p. Summed exactly as it reads (0, p1, p1 + p2, ...): cumsum(p) - p rounds p1 + p2 - p2 below p1, which
    let a second token into a nucleus of p = p1."""
    return torch.cat([sorted_probs.new_zeros(1), sorted_probs.cumsum(0)[:-1]])


def sample_top_p(logits, config, generator):
    """Nucleus sampling (Holtzman et al. 2020): the smallest set of most likely tokens
    whose probability at temperature T reaches p, renormalised."""
    probs, indices = _tempered_softmax(logits, config.temperature).sort(descending=True)  # (V,), (V,)
    nucleus = probs[mass_before(probs) < config.top_p]  # always holds the most likely token
    return int(indices[_draw(nucleus, generator)])


def pick_distribution(logits, config):
    """The distribution (V,) float64 over token ids that `config`'s strategy draws from, given the
    model's logits (V,): one-hot on the argmax for greedy; softmax(logits / T) for temperature; that,
    renormalised over the k likeliest for top-k and over the nucleus for top-p (the same rules as
    the samplers above, written as one vector so that a lesson can reason about what a rule expects)."""
    logits = logits.double()
    if config.strategy == "greedy":
        return torch.nn.functional.one_hot(logits.argmax(), logits.numel()).double()
    probs = _tempered_softmax(logits, config.temperature)  # (V,)
    order = probs.argsort(descending=True, stable=True)
    if config.strategy == "top_k":
        keep = order[: min(config.top_k, logits.numel())]
    elif config.strategy == "top_p":
        sorted_probs = probs[order]
        keep = order[mass_before(sorted_probs) < config.top_p]
    else:
        keep = order
    kept = torch.zeros_like(probs)
    kept[keep] = probs[keep]
    return kept / kept.sum()


STRATEGIES = {"greedy": greedy, "temperature": sample_temperature, "top_k": sample_top_k, "top_p": sample_top_p}
# the strategy a model family's seed samples with: seed 004 generates with temperature + nucleus;
# every other family with seed 002's favourite, top-k
FAMILY_STRATEGIES = {"scan_markov": "top_p"}


def default_strategy(family):
    return FAMILY_STRATEGIES.get(family, "top_k")


STRATEGY_LABELS = {  # for legends: str.format over the config's fields
    "greedy": "greedy",
    "temperature": "temperature T={temperature:g}",
    "top_k": "top-k k={top_k}, T={temperature:g}",
    "top_p": "top-p p={top_p:g}, T={temperature:g}",
}


@config
class SamplingConfig:
    """How to pick each next token. Fields a strategy does not use are ignored.

    Each field is declared once, here, with its bounds, default and description: the `sample` command's
    options, the Sample page's widgets and its URL are made from these declarations
    (lab.schema.declared_settings; tests/test_one_declaration.py walks every field through all three)."""

    strategy: declare(
        Literal[tuple(STRATEGIES)],
        "How each next token is picked: greedy, temperature, top_k or top_p",
    ) = "top_k"
    # above ~1e3 every distribution is uniform to float64's precision
    temperature: declare(
        float,
        "Softmax temperature T: the logits are divided by it before sampling, below 1 sharpening and above 1 "
        "flattening the distribution (greedy ignores it)",
        Names(url="temperature", label="Temperature", page=PageRange(0.05, 5.0, "a number box needs a least value")),
        gt=0,
        le=MAX_TEMPERATURE,
    ) = 0.8  # seed 002's favourite, with top-k 20
    top_k: declare(
        int,
        "Top-k: the k most likely tokens kept (at most the vocabulary), then sampled at temperature T",
        Names(url="top_k", label="Top-k k", page=PageRange(1, 10_000, "a number box needs a largest value")),
        ge=1,
    ) = 20
    top_p: declare(
        float,
        "Top-p: the smallest set of most likely tokens whose probability reaches p, then sampled at temperature T",
        Names(url="top_p", label="Top-p p", page=PageRange(0.01, 1.0, "a number box needs a least value")),
        gt=0,
        le=1,
    ) = 0.9
    max_new_tokens: declare(
        int,
        "New tokens to generate",
        Names(
            cli="length",
            url="tokens",
            label="New tokens",
            page=PageRange(
                1, MAX_INFLUENCE_TOKENS - MAX_PROMPT_CHARS, "the page traces any generated token back to the prompt"
            ),
        ),
        ge=1,
        le=MAX_NEW_TOKENS,
    ) = 300
    seed: declare(
        Seed,
        "Random seed of the sampler's own generator: the same random seed and prompt give the same text",
        Names(
            url="seed",
            label="Random seed",
            page=PageRange(0, 2**53 - 1, "a browser's number box counts exactly so far"),
        ),
    ) = 0
    # a switch on by default is offered by the name that turns it off (lab.train_command's options)
    stateful: declare(
        bool,
        "Stateful generation: the hidden state carried from token to token; stateless, it is reset before every "
        "token, so each token is predicted from the previous one alone (seed 001)",
        Names(cli="stateless"),
    ) = True

    @property
    def label(self):
        """A short legend, e.g. "top-k k=20, T=0.8" or "greedy (stateless)"."""
        label = STRATEGY_LABELS[self.strategy].format(**asdict(self))
        return label if self.stateful else label + " (stateless)"


@dataclass
class Generation:
    """A prompt, its continuation, and what the model thought at every new token."""

    text: str  # prompt + continuation
    prompt: str
    token_ids: list  # (N,) the new tokens
    pieces: list  # (N,) the new tokens as tokenizer pieces, for display
    probs: list  # (N,) probability of each chosen token under the model (untempered, unfiltered)
    entropies: list  # (N,) entropy in nats of the model's distribution at each step (untempered)
    strategy: str  # the config's label

    @property
    def continuation(self):
        return self.text[len(self.prompt) :]


def encode_prompt(tokenizer, prompt):
    """Prompt -> token ids, at least one.

    An empty prompt starts from START_TEXT ("\\n") when the vocabulary has it,
    else from token 0; the start token is not part of the returned text.
    Characters the vocabulary lacks, or more than MAX_PROMPT_CHARS, raise ValueError naming them.
    """
    if len(prompt) > MAX_PROMPT_CHARS:
        raise LabError(f"prompt: has {count(len(prompt), 'character')}, more than the limit of {MAX_PROMPT_CHARS:,}")
    if prompt:
        return encode_text(tokenizer, prompt, "prompt")
    return tokenizer.encode(START_TEXT) if not tokenizer.unknown(START_TEXT) else [0]


# ---------------------------------------------------------------------------
# feeds: how the model reads the tokens so far, context (1, T) -> (logits (V,), state)


def _stateful(model, context, state):
    """Read the prompt once (state None: nothing read yet), then only the newest token."""
    logits, _, state = model(context if state is None else context[:, -1:], state=state)
    return logits[0, -1], state


def _stateless(model, context, state):
    """Forget everything: the newest token alone, from the zero state (position 0)."""
    logits, _, _ = model(context[:, -1:])
    return logits[0, -1], None


def _rerun_prefix(model, context, state):
    """The slow reference: the whole prefix again from the zero state, O(T) per token."""
    logits, _, _ = model(context)
    return logits[0, -1], None


def _generate(model, tokenizer, prompt, config, feed):
    prompt_ids = encode_prompt(tokenizer, prompt)
    pick = STRATEGIES[config.strategy]
    generator = torch.Generator().manual_seed(config.seed)  # CPU generator: the same text on any device
    P, N = len(prompt_ids), config.max_new_tokens
    steps = []  # (V,) untempered logits of every step
    with evaluating(model), torch.inference_mode():
        tokens = torch.empty(1, P + N, dtype=torch.long, device=next(model.parameters()).device)  # (1, P+N)
        tokens[0, :P] = torch.tensor(prompt_ids)
        state = None
        for t in range(P, P + N):
            logits, state = feed(model, tokens[:, :t], state)  # a view: no copy of the prefix
            logits = logits.to("cpu", torch.float32, copy=True)  # (V,), a copy, not a view that keeps (1, T, V) alive
            if not torch.isfinite(logits).all():  # NaN or inf weights, or activations that overflow float32
                raise SamplingError(
                    f"the model's probabilities are not finite at token {t - P + 1} (its weights "
                    "have diverged or overflow); it cannot generate text: retrain it with a "
                    "smaller learning rate"
                )
            steps.append(logits)
            tokens[0, t] = pick(logits, config, generator)
        new_ids = tokens[0, P:].tolist()
        log_probs = torch.log_softmax(torch.stack(steps), -1)  # (N, V), the model's own distribution
        chosen = log_probs.gather(1, torch.tensor(new_ids)[:, None]).exp()[:, 0]  # (N,)
        entropies = torch.special.entr(log_probs.exp()).sum(-1)  # (N,) nats
    return Generation(
        text=prompt + tokenizer.decode(new_ids),
        prompt=prompt,
        token_ids=new_ids,
        pieces=[tokenizer.id_to_piece(i) for i in new_ids],
        probs=chosen.tolist(),
        entropies=entropies.tolist(),
        strategy=config.label,
    )


def generate(model, tokenizer, prompt, config=None):
    """Continue `prompt` with any lab model (character, subword or ScanMarkov).

    model: logits, loss, state = model(idx (1, T), state=...); tokenizer: lab.data
    tokenizer; prompt: str (may be empty, see encode_prompt); config: SamplingConfig.
    Runs in eval mode without gradients and restores the model's training mode.
    Returns a Generation with N = config.max_new_tokens new tokens.
    """
    config = config or SamplingConfig()
    return _generate(model, tokenizer, prompt, config, _stateful if config.stateful else _stateless)


def sample_text(tokenizer, prompt, config, model):
    """generate(...)'s text, arguments in the order functools.partial fixes them: a picklable
    sampler for lab.server.jobs.TrainingJob, `partial(sample_text, tokenizer, prompt, config)`."""
    return generate(model, tokenizer, prompt, config).text


def generate_by_rerunning_prefix(model, tokenizer, prompt, config=None):
    """The naive baseline, for the benchmark only: every step re-reads the whole
    prefix from the zero state (O(T) per token, O(N^2) in all). It computes the
    same distributions as stateful generation, so greedy gives the same tokens;
    `benchmarks/sampling.py` measures what carrying the state saves."""
    return _generate(model, tokenizer, prompt, config or SamplingConfig(), _rerun_prefix)


def reproduced_prefix(generated, reference):
    """How many characters of `reference` `generated` gives back before its first mistake: what a
    model trained on one text has memorised of it, read from a greedy sample of that text."""
    n = 0
    for a, b in zip(generated, reference):
        if a != b:
            break
        n += 1
    return n


# ---------------------------------------------------------------------------
# loops in generated text


def _longest_repeat(text):
    """Longest substring that occurs at least twice (occurrences may overlap).

    Binary search on the length: if a substring of length m repeats, so does
    its prefix of length m - 1. O(N log N) substring hashes.
    """

    def repeat_of_length(m):
        seen = set()
        for i in range(len(text) - m + 1):
            s = text[i : i + m]
            if s in seen:
                return s
            seen.add(s)
        return ""

    lo, hi, best = 1, len(text) - 1, ""
    while lo <= hi:
        mid = (lo + hi) // 2
        found = repeat_of_length(mid)
        if found:
            best, lo = found, mid + 1
        else:
            hi = mid - 1
    return best


def _tail_cycle(text, min_chars):
    """Smallest period p such that the text ends in a run covering >= 2 periods and
    >= min_chars characters. Returns (p, length of the periodic tail) or (None, 0)."""
    n = len(text)
    for p in range(1, n // 2 + 1):
        run = 0  # trailing characters equal to the character p before them
        while run < n - p and text[n - 1 - run] == text[n - 1 - run - p]:
            run += 1
        if run >= p and run + p >= min_chars:
            return p, run + p
    return None, 0


def repetition_report(text, n=4, min_cycle_chars=20):
    """How loopy a text is, e.g. greedy output that repeats a line (seed 002's
    "And then the sea that the state of the season," three times).

    text: str; n: words per n-gram; min_cycle_chars: the shortest tail that counts
    as a cycle. Returns a dict of plain values:
        longest_repeat, longest_repeat_chars   longest substring seen twice (may overlap)
        top_line, top_line_count               most frequent non-empty line
        top_ngram, top_ngram_count             most frequent n-word sequence
        repeat_share                           share of words inside an n-gram that occurs >= 2 times
        ends_in_cycle, cycle_period            whether the text ends by repeating a period of
        cycle, cycle_start, cycle_repeats      cycle_period characters; the first period of that
                                               periodic tail, where it starts, how many periods it spans
    """
    lines = Counter(line for line in text.split("\n") if line.strip())
    top_line, top_line_count = lines.most_common(1)[0] if lines else ("", 0)
    words = text.split()
    grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
    counts = Counter(grams)
    top_ngram, top_ngram_count = counts.most_common(1)[0] if counts else ("", 0)
    covered = [False] * len(words)
    for i, gram in enumerate(grams):
        if counts[gram] >= 2:
            covered[i : i + n] = [True] * n
    period, tail = _tail_cycle(text, min_cycle_chars)
    longest = _longest_repeat(text)
    return {
        "longest_repeat": longest,
        "longest_repeat_chars": len(longest),
        "top_line": top_line,
        "top_line_count": top_line_count,
        "top_ngram": top_ngram,
        "top_ngram_count": top_ngram_count,
        "repeat_share": sum(covered) / len(words) if words else 0.0,
        "ends_in_cycle": period is not None,
        "cycle_period": period,
        "cycle": text[len(text) - tail : len(text) - tail + period] if period else "",
        "cycle_start": len(text) - tail if period else None,
        "cycle_repeats": tail / period if period else 0.0,
    }
