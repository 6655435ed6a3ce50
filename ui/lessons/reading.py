"""Lessons on how a model reads and writes text: the state is the memory, choosing the next
token, characters or subwords."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.instruments.sampling import SamplingConfig
from lab.lessons.reading import (
    SEEDS,
    low_temperature_answer,
    next_token_sentences,
    reset_labels,
    sample_row,
    state_memory_sentences,
    subword_sentences,
)
from lab.words import count
from ui.cell_labels import cell_colour, checkpoint_cell
from ui.lessons.common import (
    CHAR_MODELS,
    PASSAGE,
    PROMPT,
    SUBWORD_MODEL,
    background,
    bundled,
    cached_reset_curve,
    check_yourself,
    model_choice,
    notice,
    open_full_page,
    uses,
)
from ui.shared.cached_calls import cached_generation, checkpoint_key
from ui.shared.coloured_text import prob_html, prob_legend_html, token_texts, visible_piece
from ui.shared.model_names import bundled_title
from ui.shared.plain_text import plain, preformatted, user_errors
from ui.shared.samples import STRATEGY_TITLES, mean

# ---------------------------------------------------------------------------
# the state is the memory


STATE_TOKENS = 120  # each sample's length


def state_is_memory():
    background("scribe", "equations")
    name = model_choice("lessons_state_model", CHAR_MODELS + [SUBWORD_MODEL], CHAR_MODELS[0])
    checkpoint = bundled(name)
    if checkpoint is None:
        return
    key = checkpoint_key(checkpoint)
    curve = None
    with user_errors("Reading the passage"):
        curve = cached_reset_curve(*key, PASSAGE)
    if curve is None:
        return
    losses = curve["nats_per_char"].to_numpy()
    reset, carried = losses[0], losses[-1]
    ticks, hovers = reset_labels(curve["reset_every"].tolist(), curve["full"].tolist())
    left, right = st.columns([2, 1])
    with left:
        fig = go.Figure(
            go.Scatter(
                x=curve["reset_every"],
                y=losses,
                mode="lines+markers",
                text=hovers,
                hovertemplate="%{text}: %{y:.3f} nats/char<extra></extra>",
                line=dict(color=cell_colour(checkpoint_cell(checkpoint))),
            )
        )
        fig.update_layout(
            height=320,
            margin=dict(l=60, r=10, t=10, b=40),
            yaxis_title="nats per character",
            xaxis=dict(
                type="log",
                title="state reset to zero every k tokens (log scale)",
                tickvals=list(curve["reset_every"][:-1]),
                ticktext=ticks[:-1],
            ),
        )
        # the full read's point is labelled on the chart: its tick would collide with the last power of 2
        fig.add_annotation(
            x=np.log10(curve["reset_every"].iloc[-1]), y=carried, text=hovers[-1], showarrow=True, ay=-30
        )
        st.plotly_chart(fig, key="lessons_state_chart")
    with right:
        st.metric("state reset every token", f"{reset:.3f} nats/char")
        st.metric(
            "state carried through the passage",
            f"{carried:.3f} nats/char",
            delta=f"{carried - reset:+.3f}",
            delta_color="inverse",
        )
    config = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8, max_new_tokens=STATE_TOKENS)
    samples = {}
    with user_errors("Sampling"):
        for stateful in (True, False):
            samples[stateful] = cached_generation(
                *key, PROMPT, SamplingConfig(**{**vars(config), "stateful": stateful})
            )
    if len(samples) == 2:
        columns = st.columns(2)
        for column, stateful in zip(columns, (True, False)):
            generation = samples[stateful]
            with column:
                st.markdown(
                    "**Stateful**: the state carried" if stateful else "**Stateless**: reset before every token"
                )
                st.html(prob_html(PROMPT, token_texts(checkpoint.tokenizer, generation.token_ids), generation.probs))
        uses((name, checkpoint))
        notice(
            state_memory_sentences(
                plain(bundled_title(name)),
                curve["reset_every"].tolist(),
                losses.tolist(),
                mean(samples[True].probs),
                mean(samples[False].probs),
                STATE_TOKENS,
            )
        )
    check_yourself(
        "Suppose a model's curve were flat: the same nats/char with the state reset every token as "
        "with it carried. What would that tell you about the model?",
        "That it never uses its state: whatever its size, it predicts from the previous token alone, "
        "like a table of bigram counts. The drop from left to right of the curve is exactly what the "
        "recurrent memory is worth on this text.",
    )
    open_full_page(
        "Sample",
        "Open the Sample page with this model (stateful vs stateless side by side)",
        model=name,
        prompt=PROMPT,
        seed=0,
        stateless="top_k",
    )


# ---------------------------------------------------------------------------
# choosing the next token

KNOBS = {  # strategy -> (config field, label, widget key, min, max (None: the model's vocabulary), step, default)
    "temperature": ("temperature", "Temperature T", "lessons_choose_T", 0.05, 2.0, 0.05, 1.0),
    "top_k": ("top_k", "Top-k: candidates kept k", "lessons_choose_k", 1, None, 1, 5),
    "top_p": ("top_p", "Top-p: probability mass p", "lessons_choose_p", 0.05, 1.0, 0.05, 0.5),
}
CHOOSE_TOKENS = 200
CHOOSE_FORMATS = {
    "mean p(chosen)": "{:.3f}",
    "model's own entropy (nats)": "{:.2f}",
    "words in a repeated 4-word run": "{:.0%}",
}


def choosing_the_next_token():
    name = CHAR_MODELS[0]
    checkpoint = bundled(name)
    if checkpoint is None:
        return
    cols = st.columns(2)
    strategy = cols[0].radio(
        "Strategy", list(KNOBS), format_func=STRATEGY_TITLES.get, horizontal=True, key="lessons_choose_strategy"
    )
    field, label, widget, low, high, step, default = KNOBS[strategy]
    value = cols[1].slider(label, low, high or checkpoint.tokenizer.vocab_size, default, step, key=widget)
    greedy_config = SamplingConfig(strategy="greedy", max_new_tokens=CHOOSE_TOKENS)
    configs = [  # top-k and top-p at T = 1: the rule alone changes what is picked
        SamplingConfig(strategy=strategy, max_new_tokens=CHOOSE_TOKENS, seed=seed, **{"temperature": 1.0, field: value})
        for seed in range(SEEDS)
    ]
    key = checkpoint_key(checkpoint)
    runs = []
    with user_errors("Sampling"):
        runs = [cached_generation(*key, PROMPT, config) for config in [greedy_config, *configs]]
    if not runs:
        return
    greedy, samples = runs[0], runs[1:]
    rows = [sample_row(greedy, greedy.continuation, "greedy")] + [
        sample_row(g, greedy.continuation, f"{configs[0].label}, seed {s}") for s, g in enumerate(samples)
    ]
    st.table(pd.DataFrame(rows).style.format(CHOOSE_FORMATS), hide_index=True)
    st.caption(
        "The entropy column is the model's own uncertainty, before the rule: the same model gives the same "
        "distribution whatever the rule, and only the rule's pick differs (so it moves only because the text "
        "does). The last column counts the characters a sample shares with greedy's text before they first differ."
    )
    st.html(prob_legend_html())
    columns = st.columns(2)
    for column, (title, generation) in zip(columns, (("greedy", greedy), (f"{configs[0].label}, seed 0", samples[0]))):
        with column:
            st.markdown(f"**{plain(title)}**")
            st.html(prob_html(PROMPT, token_texts(checkpoint.tokenizer, generation.token_ids), generation.probs))
    uses((name, checkpoint))
    notice(next_token_sentences(rows[0], rows[1:], plain(configs[0].label), len(greedy.continuation)))
    check_yourself(
        "At temperature T = 0.05, what text does the temperature sampler write, and why?", low_temperature_answer()
    )
    open_full_page(
        "Sample",
        "Open the Sample page with these settings (all four strategies side by side)",
        model=name,
        prompt=PROMPT,
        tokens=CHOOSE_TOKENS,
        seed=0,
        **{{"temperature": "temperature", "top_k": "top_k", "top_p": "top_p"}[strategy]: value},
        **({"top_k_temperature": 1.0} if strategy == "top_k" else {}),
        **({"top_p_temperature": 1.0} if strategy == "top_p" else {}),
    )


# ---------------------------------------------------------------------------
# characters or subwords

SENTENCE = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"


def characters_or_subwords():
    background("scribe")
    text = st.text_area("A sentence", SENTENCE, max_chars=1000, height=80, key="lessons_tokens_text")
    char_model, subword_model = bundled(CHAR_MODELS[0]), bundled(SUBWORD_MODEL)
    if char_model is None or subword_model is None:
        return
    read = {}
    with user_errors("Tokenising"):
        for label, checkpoint in (("characters", char_model), ("subwords", subword_model)):
            curve = cached_reset_curve(*checkpoint_key(checkpoint), text, (None,))
            ids = checkpoint.tokenizer.encode(text)
            read[label] = (ids, [checkpoint.tokenizer.id_to_piece(i) for i in ids], curve.iloc[0])
    if len(read) < 2:
        return
    for label, (ids, pieces, _) in read.items():
        st.markdown(f"**{label}**: {count(len(ids), 'step')}")
        preformatted(" | ".join(visible_piece(p) for p in pieces))
    (n_c, _, char_row), (n_s, _, sub_row) = [(len(ids), p, row) for ids, p, row in read.values()]
    char_name, sub_name = bundled_title(CHAR_MODELS[0]), bundled_title(SUBWORD_MODEL)
    metrics = st.columns(4)
    metrics[0].metric("character steps", n_c)
    metrics[1].metric("subword steps", n_s)
    metrics[2].metric(f"{char_name}, nats/char", f"{char_row['nats_per_char']:.3f}")
    metrics[3].metric(f"{sub_name}, nats/char", f"{sub_row['nats_per_char']:.3f}")
    uses((CHAR_MODELS[0], char_model), (SUBWORD_MODEL, subword_model))
    notice(
        subword_sentences(
            len(text),
            char_name,
            sub_name,
            (n_c, char_row["nats_per_token"], char_row["nats_per_char"]),
            (n_s, sub_row["nats_per_token"], sub_row["nats_per_char"]),
        )
    )
    check_yourself(
        "Why compare the two models in nats per character and not in nats per token?",
        "Because their tokens differ in size. A subword model's token holds several characters, so "
        "predicting one is harder and its loss per token is higher even when it predicts the text "
        "better. Total nats over the same text, divided by its characters, puts both on one scale.",
    )
    open_full_page(
        "Sample",
        f"Open the Sample page on {bundled_title(SUBWORD_MODEL)} with this sentence as the prompt",
        model=SUBWORD_MODEL,
        prompt=text[:1000],
    )
