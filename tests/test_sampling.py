"""The seeded sampler: strategies as defined, stateful vs stateless, every model family, loop detection."""

import math

import pytest
import torch

from lab.data import CharTokenizer, SentencePieceTokenizer, load_bundled_corpus
from lab.instruments.sampling import (
    MAX_NEW_TOKENS,
    MAX_PROMPT_CHARS,
    STRATEGIES,
    SamplingConfig,
    SamplingError,
    default_strategy,
    encode_prompt,
    generate,
    generate_by_rerunning_prefix,
    mass_before,
    pick_distribution,
    repetition_report,
    sample_top_p,
)
from lab.nets.models import LMConfig, ScanMarkovConfig, build_model

TEXT = load_bundled_corpus()[20000:26000]  # Hamlet I.3: speeches, names, a stage direction
PROMPT = "Laer.\nMy necessaries are embark'd"

# seed 002's greedy sample from Leviathan-LSTM, verbatim: it falls into a loop
SEED_002_GREEDY = """And then the sea that we have seen the seas
And see the sea to the sea to the season of the sea
That thou hast so stand to the sea to the seas,
And then the sea that the state of the season,
And then the sea that the state of the season,
And then the sea that the state of the season,
And then the sea"""
# seed 002's temperature-0.8 sample from the same model: no loop
SEED_002_TEMPERATURE = """And then we have a son a friar.

AUTOLYCUS:
I am too: move have from me after, some refuge unto
the cause of me of brother.

KING EDWARD IV:
What send the world hath still she devil that royalty.

PAULINA:
No; for I have say, I do see him; that he
weeping made them at your father's good much.

KING E"""


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(TEXT)


def small_lm(vocab_size, cell="gru_torch", seed=0):
    torch.manual_seed(seed)
    return build_model(LMConfig(cell=cell, vocab_size=vocab_size, embed_dim=16, hidden_size=32))


class Recorder(torch.nn.Module):
    """Wraps a model and records what the sampler asked it: inputs, states and last logits."""

    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, []

    def forward(self, idx, targets=None, state=None, trace=None, label_smoothing=0.0):
        logits, loss, new_state = self.model(idx, targets, state, trace, label_smoothing)
        self.calls.append({"idx": idx.clone(), "state_in": state, "logits": logits[0, -1].clone()})
        return logits, loss, new_state


def test_greedy_takes_the_argmax_at_every_step(tok):
    model = Recorder(small_lm(tok.vocab_size))
    out = generate(model, tok, PROMPT, SamplingConfig(strategy="greedy", max_new_tokens=40))
    assert [int(c["logits"].argmax()) for c in model.calls] == out.token_ids


def test_top_k_never_leaves_the_k_best(tok):
    model = Recorder(small_lm(tok.vocab_size))
    out = generate(model, tok, PROMPT, SamplingConfig(strategy="top_k", top_k=3, temperature=2.0, max_new_tokens=150))
    for call, token in zip(model.calls, out.token_ids):
        assert token in torch.topk(call["logits"], 3).indices.tolist()
    assert len(set(out.token_ids)) > 3  # it did sample, not always the argmax


def test_top_p_stays_inside_the_nucleus(tok):
    p, T = 0.5, 1.5
    model = Recorder(small_lm(tok.vocab_size))
    out = generate(model, tok, PROMPT, SamplingConfig(strategy="top_p", top_p=p, temperature=T, max_new_tokens=150))
    for call, token in zip(model.calls, out.token_ids):
        probs = torch.softmax(call["logits"].double() / T, -1)
        mass_above = probs[probs > probs[token]].sum()  # mass of the tokens ranked before it
        assert mass_above < p + 1e-6


def test_tiny_temperature_gives_the_greedy_text(tok):
    model = small_lm(tok.vocab_size)
    greedy = generate(model, tok, PROMPT, SamplingConfig(strategy="greedy", max_new_tokens=60))
    cold = generate(model, tok, PROMPT, SamplingConfig(strategy="temperature", temperature=1e-4, max_new_tokens=60))
    assert cold.text == greedy.text


@pytest.mark.parametrize("strategy", ["temperature", "top_k", "top_p"])
@pytest.mark.parametrize("temperature", [1e-45, 5e-324, 1e-300])  # logits / T overflowed to inf - inf = NaN
def test_a_vanishing_temperature_tends_to_greedy_instead_of_failing(tok, strategy, temperature):
    model = small_lm(tok.vocab_size)
    greedy = generate(model, tok, PROMPT, SamplingConfig(strategy="greedy", max_new_tokens=30))
    cold = generate(model, tok, PROMPT, SamplingConfig(strategy=strategy, temperature=temperature, max_new_tokens=30))
    assert cold.text == greedy.text


def diverged(model, poison):
    """NaN or inf weights; or, for a finite poison, finite weights whose logits overflow float32."""
    with torch.no_grad():
        if math.isfinite(poison):
            model.ln_f.bias.fill_(poison)
            model.head.weight.fill_(poison)
        else:
            model.head.weight.mul_(poison)
    return model


@pytest.mark.parametrize("poison", [math.nan, math.inf, 1e30])  # NaN weights, inf weights, logits that overflow
@pytest.mark.parametrize("strategy", ["greedy", "top_p"])
def test_a_diverged_model_is_refused_with_a_clear_error(tok, poison, strategy):
    model = diverged(small_lm(tok.vocab_size), poison)
    with pytest.raises(SamplingError, match="probabilities are not finite at token 1"):
        generate(model, tok, PROMPT, SamplingConfig(strategy=strategy, max_new_tokens=5))


def test_the_cli_refuses_to_sample_a_diverged_checkpoint(tok, tmp_path, capsys):
    from lab.__main__ import main
    from lab.training.checkpoints import save_checkpoint

    model = diverged(small_lm(tok.vocab_size), 1e30)  # finite weights, as a lr 1e6 run's 1e21, infinite logits
    path = save_checkpoint(tmp_path, "diverged", model, tok)
    assert main(["sample", str(path), "--prompt", PROMPT]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the model's probabilities are not finite") and len(err.splitlines()) == 1


def test_same_seed_same_text_other_seed_other_text_global_rng_untouched(tok):
    model = small_lm(tok.vocab_size)
    rng = torch.get_rng_state()
    a, b, c = (
        generate(model, tok, PROMPT, SamplingConfig(strategy="temperature", seed=s, max_new_tokens=80))
        for s in (7, 7, 8)
    )
    assert a.text == b.text and a.text != c.text
    assert torch.equal(torch.get_rng_state(), rng)


def test_stateless_predicts_from_the_previous_token_alone(tok):
    inner = small_lm(tok.vocab_size)
    model = Recorder(inner)
    config = SamplingConfig(strategy="greedy", max_new_tokens=30)
    stateful = generate(inner, tok, PROMPT, config)
    stateless = generate(model, tok, PROMPT, SamplingConfig(strategy="greedy", max_new_tokens=30, stateful=False))
    assert stateless.text != stateful.text
    assert stateless.strategy == "greedy (stateless)"
    for call in model.calls:  # one token, zero state, every step
        assert call["idx"].shape == (1, 1) and call["state_in"] is None
    previous = [tok.encode(PROMPT)[-1]] + stateless.token_ids[:-1]
    assert [c["idx"].item() for c in model.calls] == previous


def test_stateful_reads_the_prompt_once_then_one_token_per_step(tok):
    model = Recorder(small_lm(tok.vocab_size))
    generate(model, tok, PROMPT, SamplingConfig(max_new_tokens=5))
    assert [c["idx"].shape[1] for c in model.calls] == [len(PROMPT), 1, 1, 1, 1]
    assert model.calls[0]["state_in"] is None and all(c["state_in"] is not None for c in model.calls[1:])


@pytest.mark.parametrize("cell", ["gru_torch", "scan"])
def test_rerunning_the_prefix_gives_the_same_greedy_tokens(tok, cell):
    model = small_lm(tok.vocab_size, cell)
    config = SamplingConfig(strategy="greedy", max_new_tokens=25)
    assert (
        generate_by_rerunning_prefix(model, tok, "Laer.\n", config).token_ids
        == generate(model, tok, "Laer.\n", config).token_ids
    )


def test_generation_record_and_training_mode(tok):
    model = small_lm(tok.vocab_size).train()
    out = generate(model, tok, PROMPT, SamplingConfig(strategy="top_p", max_new_tokens=50))
    assert model.training
    assert out.text == PROMPT + out.continuation and out.prompt == PROMPT
    assert out.continuation == "".join(out.pieces) == tok.decode(out.token_ids)
    assert len(out.token_ids) == len(out.probs) == len(out.entropies) == 50
    assert all(0 < p <= 1 for p in out.probs)
    assert all(0 <= h <= math.log(tok.vocab_size) + 1e-5 for h in out.entropies)


@pytest.mark.parametrize(
    "config",
    [
        SamplingConfig(strategy="temperature", temperature=0.05),
        SamplingConfig(strategy="temperature", temperature=2.0),
        SamplingConfig(strategy="top_k", top_k=1),
        SamplingConfig(strategy="top_k", top_k=3, temperature=1.5),
        SamplingConfig(strategy="top_p", top_p=0.05),
        SamplingConfig(strategy="top_p", top_p=1.0),
    ],
)
def test_the_entropy_recorded_is_the_models_own_whatever_the_rule(tok, config):
    """Lesson 3's column "model's own entropy": the untempered model's, before the rule. On the same text a
    rule's sample has greedy's entropy at every step, up to and including the step where it first picks
    otherwise (its distribution was read on the same prefix), and it is never the rule's own distribution's."""
    model = small_lm(tok.vocab_size)
    greedy = generate(model, tok, PROMPT, SamplingConfig(strategy="greedy", max_new_tokens=30))
    out = generate(model, tok, PROMPT, SamplingConfig(**{**vars(config), "max_new_tokens": 30}))
    same = next((i for i, (a, b) in enumerate(zip(out.token_ids, greedy.token_ids)) if a != b), 29)
    assert out.entropies[: same + 1] == pytest.approx(greedy.entropies[: same + 1], abs=1e-6)
    assert out.probs[:same] == pytest.approx(greedy.probs[:same], abs=1e-6)
    assert greedy.entropies[0] > 0.5  # an untrained model is unsure: a rule's own entropy would be near 0 at
    # T = 0.05 or k = 1, and the same column would differ between rules


def test_empty_prompt_starts_from_a_newline(tok):
    model = Recorder(small_lm(tok.vocab_size))
    out = generate(model, tok, "", SamplingConfig(max_new_tokens=10))
    assert model.calls[0]["idx"].tolist() == [tok.encode("\n")]
    assert out.prompt == "" and out.text == out.continuation and len(out.token_ids) == 10


def test_unknown_prompt_characters_are_named(tok):
    with pytest.raises(ValueError, match="'€'.*'😀'|'😀'.*'€'"):
        generate(small_lm(tok.vocab_size), tok, "ROMEO € 😀", SamplingConfig(max_new_tokens=5))


@pytest.mark.parametrize(
    "field, value",
    [
        ("strategy", "beam"),
        ("top_k", 0),
        ("top_k", 2.5),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("temperature", 0),
        ("temperature", -1.0),
        ("max_new_tokens", 0),
        ("max_new_tokens", MAX_NEW_TOKENS + 1),
        ("stateful", "yes"),
    ],
)
def test_bad_parameters_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        SamplingConfig(**{field: value})


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        SamplingConfig(strategy="beam")
    assert all(name in str(error.value) for name in STRATEGIES)


@pytest.mark.parametrize("stateful", [True, False])
def test_scan_markov_samples(tok, stateful):
    torch.manual_seed(0)
    model = build_model(
        ScanMarkovConfig(vocab_size=tok.vocab_size, embed_dim=16, gate_hidden=32, decoder_hidden=32, max_positions=8)
    )
    recorder = Recorder(model)
    out = generate(recorder, tok, PROMPT, SamplingConfig(strategy="top_p", max_new_tokens=30, stateful=stateful))
    assert len(out.token_ids) == 30 and out.text.startswith(PROMPT)
    if not stateful:  # state None: ScanMarkov starts again at position 0
        assert all(c["state_in"] is None for c in recorder.calls)


def test_subword_model_samples():
    sp = SentencePieceTokenizer.train(TEXT, vocab_size=150)
    model = small_lm(sp.vocab_size)
    out = generate(model, sp, PROMPT, SamplingConfig(strategy="top_k", max_new_tokens=30))
    assert out.text == PROMPT + sp.decode(out.token_ids) and len(out.pieces) == 30
    assert all(isinstance(p, str) and p for p in out.pieces)
    empty = generate(model, sp, "", SamplingConfig(max_new_tokens=5))
    assert len(empty.token_ids) == 5


def test_repetition_report_finds_seed_002s_loop():
    r = repetition_report(SEED_002_GREEDY)
    assert r["top_line"] == "And then the sea that the state of the season," and r["top_line_count"] == 3
    assert r["ends_in_cycle"] and r["cycle_period"] == len("And then the sea that the state of the season,\n")
    assert r["cycle_repeats"] > 3
    assert r["repeat_share"] > 0.5
    assert "And then the sea that the state of the season,\nAnd then the sea" in r["longest_repeat"]


def test_repetition_report_on_text_without_loops():
    r = repetition_report(SEED_002_TEMPERATURE)
    assert not r["ends_in_cycle"] and r["cycle_period"] is None
    assert r["top_line_count"] == 1 and r["repeat_share"] < 0.1 and r["longest_repeat_chars"] < 15
    assert repetition_report("")["repeat_share"] == 0.0


def test_scan_markov_generates_as_seed_004_describes(tok):
    """Embed and compose the prompt's characters one at a time, decode, pick with temperature +
    nucleus, compose the new character: generate() (which reads the prompt in one parallel scan)
    picks the same characters."""
    torch.manual_seed(1)
    model = build_model(
        ScanMarkovConfig(vocab_size=tok.vocab_size, embed_dim=16, gate_hidden=32, decoder_hidden=32, max_positions=4)
    ).eval()
    config = SamplingConfig(
        strategy=default_strategy("scan_markov"), temperature=0.8, top_p=0.9, max_new_tokens=25, seed=5
    )
    assert config.strategy == "top_p" and default_strategy("lm") == "top_k"
    generator, state, picked = torch.Generator().manual_seed(config.seed), None, []
    with torch.no_grad():
        for i in tok.encode(PROMPT):  # the prompt composed into the latent one character at a time
            logits, _, state = model(torch.tensor([[i]]), state=state)
        for _ in range(config.max_new_tokens):
            picked.append(sample_top_p(logits[0, -1], config, generator))  # decode, then nucleus at T
            logits, _, state = model(torch.tensor([[picked[-1]]]), state=state)  # compose the new character
    assert generate(model, tok, PROMPT, config).token_ids == picked


def test_a_prompt_over_the_limit_is_refused_before_it_is_read():
    tokenizer = CharTokenizer.from_text("ab")
    assert len(encode_prompt(tokenizer, "a" * MAX_PROMPT_CHARS)) == MAX_PROMPT_CHARS
    with pytest.raises(ValueError, match=r"^prompt: has 100,000 characters, more than the limit of 1,000$"):
        encode_prompt(tokenizer, "a" * 100_000)


def test_a_nucleus_of_exactly_the_likeliest_tokens_probability_holds_that_token_alone():
    """Hypothesis' example: with p = p1 exactly, cumsum(p) - p rounded the mass above the second token below p1."""
    logits = torch.tensor([0.0] * 9 + [2.0, 3.0])
    first = torch.softmax(logits.double(), -1).max().item()
    kept = pick_distribution(logits, SamplingConfig(strategy="top_p", top_p=first))
    assert kept.max().item() == 1.0 and int(kept.argmax()) == 10
    assert mass_before(torch.tensor([0.5, 0.3, 0.2])).tolist() == pytest.approx([0.0, 0.5, 0.8])
