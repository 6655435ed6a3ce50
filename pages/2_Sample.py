"""Sample: greedy, temperature, top-k and top-p side by side, every token coloured by
its probability; greedy's loops; stateful vs stateless generation (seeds 000, 001, 002, 004);
which earlier characters drove a generated one; the next-character bars as you type.

The model, prompt, length and random seed rerun the page; every other setting reruns its own part
(a fragment): the samples, the traced character, or the typing."""

import streamlit as st

from lab.instruments.prediction import MAX_INFLUENCE_TOKENS, TypingReader, next_tokens
from lab.instruments.sampling import (
    MAX_PROMPT_CHARS,
    STRATEGIES,
    default_strategy,
    encode_prompt,
    repetition_report,
)
from lab.words import count
from ui.app.frame import setup_page
from ui.sample.typing_box import bars_data, proposed_text, typing_box
from ui.sample.views import (
    DEFAULTS,
    latest_val_loss,
    repetition_markdown,
    strategy_config,
)
from ui.shared.cached_calls import cached_generation, cached_influence, checkpoint_key, reference_model
from ui.shared.checkpoint_picker import checkpoint_picker
from ui.shared.coloured_text import influence_html, influence_legend_html, prob_html, prob_legend_html, token_texts
from ui.shared.common import show_anchors
from ui.shared.links import Field, mirror_to_url, restore_from_url
from ui.shared.model_names import describe_checkpoint, model_title
from ui.shared.plain_text import piece_label, plain, user_errors
from ui.shared.samples import STRATEGY_TITLES, mean

setup_page("Sample")
st.title("💬 Sample")
st.caption(
    "One prompt, four ways to pick the next token. Every generated token sits on a background "
    "coloured by how likely the model found it; same random seed, same text."
)
show_anchors("uniform_char", "nanogpt_cpu", "leviathan")

# Widget bounds; lab.instruments.sampling.SamplingConfig checks the same rules again for any other path in.
BOUNDS = {
    "tokens": (1, MAX_INFLUENCE_TOKENS - MAX_PROMPT_CHARS),
    "seed": (0, 2**31 - 1),
    "temperature": (0.05, 5.0),
    "top_k": (1, 10_000),
    "top_p": (0.01, 1.0),
}
# the page's settings as they appear in a link: ?model=...&prompt=...&temperature=...
SETTINGS = {
    "model": (Field("text", "Model"), "sample_checkpoint"),
    "prompt": (Field("text", "Prompt", high=MAX_PROMPT_CHARS), "sample_prompt"),
    "tokens": (Field("int", "New tokens", *BOUNDS["tokens"]), "sample_tokens"),
    "seed": (Field("int", "Random seed", *BOUNDS["seed"]), "sample_seed"),
    "temperature": (Field("float", "Temperature", *BOUNDS["temperature"]), "sample_temperature_T"),
    "top_k": (Field("int", "Top-k k", *BOUNDS["top_k"]), "sample_top_k_k"),
    "top_k_temperature": (Field("float", "Top-k temperature", *BOUNDS["temperature"]), "sample_top_k_T"),
    "top_p": (Field("float", "Top-p p", *BOUNDS["top_p"]), "sample_top_p_p"),
    "top_p_temperature": (Field("float", "Top-p temperature", *BOUNDS["temperature"]), "sample_top_p_T"),
    "stateless": (Field("choice", "Stateless strategy", choices=tuple(STRATEGIES)), "sample_state_strategy"),
    "drove": (
        Field("choice", "Strategy of the prediction traced back", choices=tuple(STRATEGIES)),
        "sample_influence_strategy",
    ),
    "drove_token": (Field("int", "Generated token traced back", *BOUNDS["tokens"]), "sample_influence_token"),
    "typed": (Field("text", "Typed text", high=MAX_PROMPT_CHARS), "sample_typed"),
}
restore_from_url(SETTINGS, DEFAULTS)


top = st.columns([1.2, 2, 1, 1])
with top[0]:
    checkpoint = checkpoint_picker("sample_checkpoint", default_name=DEFAULTS["model"])
with top[1]:
    prompt = st.text_area(
        "Prompt",
        key="sample_prompt",
        height=68,
        max_chars=MAX_PROMPT_CHARS,
        help="Any text made of characters the model knows; empty starts a new line.",
    )
with top[2]:
    n_tokens = st.number_input("New tokens", *BOUNDS["tokens"], step=50, key="sample_tokens")
with top[3]:
    seed = st.number_input(
        "Random seed",
        *BOUNDS["seed"],
        step=1,
        key="sample_seed",
        help="Seeds the sampler's own generator: the same random seed gives the same text.",
    )
mirror_to_url(SETTINGS, DEFAULTS)
if checkpoint is None:
    st.stop()
last_eval = latest_val_loss(checkpoint)
st.caption(
    f"{plain(describe_checkpoint(model_title(st.session_state.sample_checkpoint), checkpoint))} "
    f"Vocabulary {checkpoint.tokenizer.vocab_size}"
    + (
        f" · validation {last_eval['val_nats_per_char']:.3f} nats/char (see the anchors above)"
        if last_eval and "val_nats_per_char" in last_eval
        else ""
    )
)

if default_strategy(checkpoint.config.family) == "top_p":
    st.info(
        "A selective scan over a short context (like the Four-character scan) generates like this: it "
        "composes the prompt into one latent, character by character, through its gated recurrence; "
        "decodes the latent; picks the next "
        "character with temperature and nucleus sampling (the top-p column, its own default); and "
        "composes that character into the latent before the next one. It was trained on contexts of "
        "1 to 4 characters, so the latent is mostly the last few characters."
    )
st.html(prob_legend_html())
prompt_ok = False
with user_errors("Sampling"):
    encode_prompt(checkpoint.tokenizer, prompt)  # names unknown characters before anything runs
    prompt_ok = True
if not prompt_ok:
    st.stop()
# True once the whole page has run: a later run of one part alone is a fragment's (see samples())
st.session_state.sample_page_done = False


def sampling_config(strategy, stateful=True):
    """The SamplingConfig of one column's strategy from the widgets' current values."""
    return strategy_config({name: st.session_state.get(key) for name, (_, key) in SETTINGS.items()}, strategy, stateful)


def generated(checkpoint, prompt, config):
    """lab.instruments.sampling.generate, cached across sessions per (model, prompt, settings)."""
    return cached_generation(*checkpoint_key(checkpoint), prompt, config)


def coloured_generation(checkpoint, prompt, generation, entropy_help):
    st.html(prob_html(prompt, token_texts(checkpoint.tokenizer, generation.token_ids), generation.probs))
    metric_cols = st.columns(2)
    metric_cols[0].metric("entropy (nats)", f"{mean(generation.entropies):.2f}", help=entropy_help)
    metric_cols[1].metric("mean p(chosen)", f"{mean(generation.probs):.2f}")


@st.fragment
def samples(checkpoint, prompt):
    """The four strategies side by side, each with its settings: a setting reruns this part only."""
    columns = st.columns(4)
    with columns[0]:
        st.subheader(STRATEGY_TITLES["greedy"])
        st.caption("argmax at every step: deterministic, and prone to loops.")
    with columns[1]:
        st.subheader(STRATEGY_TITLES["temperature"])
        st.number_input(
            "T",
            *BOUNDS["temperature"],
            step=0.1,
            key="sample_temperature_T",
            help="softmax(logits / T): below 1 sharpens, above 1 flattens.",
        )
    with columns[2]:
        st.subheader(STRATEGY_TITLES["top_k"])
        k_cols = st.columns(2)
        k_cols[0].number_input("k", *BOUNDS["top_k"], step=1, key="sample_top_k_k")
        k_cols[1].number_input("T", *BOUNDS["temperature"], step=0.1, key="sample_top_k_T")
    with columns[3]:
        st.subheader(STRATEGY_TITLES["top_p"])
        p_cols = st.columns(2)
        p_cols[0].number_input("p", *BOUNDS["top_p"], step=0.05, key="sample_top_p_p")
        p_cols[1].number_input("T", *BOUNDS["temperature"], step=0.1, key="sample_top_p_T")
    by_strategy = None
    with user_errors("Sampling"):
        by_strategy = {s: generated(checkpoint, prompt, sampling_config(s)) for s in STRATEGIES}
    if by_strategy is None:
        return
    for column, (strategy, generation) in zip(columns, by_strategy.items()):
        with column:
            coloured_generation(
                checkpoint,
                prompt,
                generation,
                "Entropy of the model's next-token distribution, averaged over the steps.",
            )
            if strategy == "greedy":
                report = repetition_report(generation.continuation)
                st.markdown(
                    "**Repetition report** (a greedy sampler's typical loop: “And then the sea…”, again and again)"
                )
                st.markdown(repetition_markdown(report))

    mirror_to_url(SETTINGS, DEFAULTS)
    drawn_elsewhere = [  # the samples the other tabs drew, and those these settings make now
        (st.session_state.get(drawn), sampling_config(st.session_state[strategy]))
        for drawn, strategy in (
            ("sample_compared", "sample_state_strategy"),
            ("sample_traced", "sample_influence_strategy"),
        )
    ]
    if st.session_state.sample_page_done and any(drawn != now for drawn, now in drawn_elsewhere):
        st.rerun()  # this part alone ran, and changed a sample another tab shows: the whole page follows


@st.fragment
def stateful_or_stateless(checkpoint, prompt):
    """One strategy's sample with the state carried and with it reset before every token: its choice reruns
    this part only."""
    st.markdown(
        "Stateless generation resets the hidden state before every token, so the model sees only the "
        "previous token: it collapses from $P(s_t \\mid s_1, \\dots, s_{t-1})$ to $P(s_t \\mid s_{t-1})$ "
        "(a recurrent cell computes $h_t = f(x_t, h_{t-1})$: resetting $h_{t-1}$ throws away everything "
        "before $x_t$)."
    )
    strategy_for_state = st.selectbox(
        "Strategy (settings and random seed from its column in the first tab)",
        list(STRATEGIES),
        format_func=STRATEGY_TITLES.get,
        key="sample_state_strategy",
    )
    pair = None
    st.session_state.sample_compared = sampling_config(strategy_for_state)
    with user_errors("Sampling"):
        pair = [
            generated(checkpoint, prompt, sampling_config(strategy_for_state, stateful=stateful))
            for stateful in (True, False)
        ]
    if pair is not None:
        state_cols = st.columns(2)
        for column, generation, title in zip(
            state_cols,
            pair,
            ("Stateful: the state carries the whole prefix", "Stateless: the state is reset before every token"),
        ):
            with column:
                st.markdown(f"**{title}** · {generation.strategy}")
                coloured_generation(
                    checkpoint,
                    prompt,
                    generation,
                    "Mean entropy of the model's next-token distribution: higher when it knows less about "
                    "what comes next.",
                )
    mirror_to_url(SETTINGS, DEFAULTS)


@st.fragment
def drivers(checkpoint, prompt):
    """Which earlier characters drove one generated character: its slider reruns this part only."""
    drove_cols = st.columns([1, 3])
    traced_strategy = drove_cols[0].selectbox(
        "From the column", list(STRATEGIES), format_func=STRATEGY_TITLES.get, key="sample_influence_strategy"
    )
    config = sampling_config(traced_strategy)
    generation = None
    with user_errors("Sampling"):
        generation = generated(checkpoint, prompt, config)
    if generation is None:
        return
    st.session_state.sample_traced = config
    prompt_ids = encode_prompt(checkpoint.tokenizer, prompt)  # an empty prompt starts from "\n"
    ids = prompt_ids + generation.token_ids
    st.session_state.sample_influence_token = min(st.session_state.sample_influence_token, len(generation.token_ids))
    nth = drove_cols[1].select_slider(
        "The generated character",
        options=range(1, len(generation.token_ids) + 1),
        key="sample_influence_token",
        format_func=lambda n: f"{n}: {piece_label(generation.pieces[n - 1])}",
    )
    influence = None
    with user_errors("Tracing the influence"):
        influence = cached_influence(*checkpoint_key(checkpoint), tuple(ids), len(prompt_ids) + nth - 1)
    if influence is not None:
        st.html(influence_legend_html())
        st.html(influence_html(token_texts(checkpoint.tokenizer, ids), influence))
        st.caption(
            f"The model gave the framed “{piece_label(generation.pieces[nth - 1])}” a probability of "
            f"{influence.probability:.3f} (untempered). Each earlier character is coloured by the gradient of "
            "that log-probability with respect to its embedding: how much nudging it would move the "
            "prediction."
        )
    mirror_to_url(SETTINGS, DEFAULTS)


@st.fragment
def typing(checkpoint):
    """The next character as you type, the state carried: each key press reruns this part only."""
    proposal, n = proposed_text("sample_typing_box"), None
    if proposal is not None:
        if proposal[1] != st.session_state.get("_sample_typing_applied"):
            st.session_state._sample_typing_applied = proposal[1]  # each key press once
            st.session_state.sample_typed = proposal[0][:MAX_PROMPT_CHARS]
        if st.session_state.sample_typed == proposal[0]:
            n = proposal[1]
    typed = st.session_state.sample_typed
    reader_key = checkpoint_key(checkpoint)
    if st.session_state.get("sample_typing_reader", (None,))[0] != reader_key:  # one reader per session and model
        model = reference_model(*reader_key)  # shared by every session: a reader holds only its state
        st.session_state.sample_typing_reader = (reader_key, TypingReader(model, checkpoint.tokenizer))
    reader = st.session_state.sample_typing_reader[1]
    probs = None
    with user_errors("Reading"):
        probs = reader.read(typed)
    bars = [] if probs is None else bars_data(next_tokens(probs, checkpoint.tokenizer, k=5))
    if probs is None:
        note = "Nothing read: take out the characters named above to see what comes next."
    elif reader.new_tokens == len(reader.ids):
        note = f"Read all {count(len(reader.ids), 'token')} from the zero state: a new text, or an edit before its end."
    else:
        note = (
            f"Read {count(reader.new_tokens, 'new token')} from the carried state "
            f"({len(reader.ids)} read since the start): one step per new character, however long the text."
        )
    typing_box(
        typed,
        n=n,
        bars=bars,
        keep=keep_rows(reader) if probs is not None else [],
        note=note,
        max_chars=MAX_PROMPT_CHARS,
        key="sample_typing_box",
        label="Your text: the likeliest next tokens follow each key press",
    )
    st.caption(
        "Green: the likeliest next tokens after your text (click one to type it). Blue: how much of its memory "
        "each layer keeps at your last character, averaged over its units."
    )
    mirror_to_url(SETTINGS, DEFAULTS)


def keep_rows(reader):
    """Each recurrent layer's keep gate at the last token read, as the typing box's blue bars."""
    return [
        {"label": f"layer {l + 1} keeps", "value": keep}
        if keep is not None
        else {"label": f"layer {l + 1}: no keep gate (a vanilla RNN overwrites its state at every step)", "value": None}
        for l, keep in enumerate(reader.keep)
    ]


# one tab on the screen at a time: the page stays within three laptop screens, its point (four ways to pick the
# next token, side by side) on the first
four_ways, state, drove, typed = st.tabs(
    ["Four ways to pick the next token", "Stateful vs stateless", "What drove a character?", "Type and watch"]
)
with four_ways:
    samples(checkpoint, prompt)
with state:
    stateful_or_stateless(checkpoint, prompt)
with drove:
    drivers(checkpoint, prompt)
with typed:
    typing(checkpoint)
st.session_state.sample_page_done = True
