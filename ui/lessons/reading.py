"""Lessons on how a model reads and writes text: the state is the memory, choosing the next
token, characters or subwords."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.instruments.sampling import SamplingConfig, repetition_report
from ui.cached_calls import cached_generation, checkpoint_key
from ui.cell_labels import CELL_COLOURS, checkpoint_cell
from ui.coloured_text import prob_html, prob_legend_html, token_texts, visible_piece
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
)
from ui.plain_text import plain, preformatted, user_errors
from ui.sample_views import STRATEGY_TITLES, mean

# ---------------------------------------------------------------------------
# the state is the memory


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
    halfway = curve.loc[curve["nats_per_char"] <= (reset + carried) / 2, "reset_every"].iloc[0]
    left, right = st.columns([2, 1])
    with left:
        labels = [f"{k}" if not full else f"never ({k} tokens)" for k, full in zip(curve["reset_every"], curve["full"])]
        fig = go.Figure(
            go.Scatter(
                x=curve["reset_every"],
                y=losses,
                mode="lines+markers",
                text=labels,
                hovertemplate="reset every %{text} tokens: %{y:.3f} nats/char<extra></extra>",
                line=dict(color=CELL_COLOURS.get(checkpoint_cell(checkpoint))),
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
                ticktext=labels[:-1],
            ),
        )
        # the full read's point is labelled on the chart: its tick would collide with the last power of 2
        fig.add_annotation(
            x=np.log10(curve["reset_every"].iloc[-1]), y=carried, text=labels[-1], showarrow=True, ay=-30
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
    config = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8, max_new_tokens=120)
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
        notice(
            f"Reset before every token, {plain(name.removesuffix('_latest'))} predicts from the previous "
            f"token alone and pays **{reset:.2f} nats/char**: that is $P(s_t \\mid s_{{t-1}})$, the collapse "
            f"that a stateless model suffers. Carried through the whole passage "
            f"({curve['reset_every'].iloc[-1]} tokens) it pays **{carried:.2f}**, "
            f"{(reset - carried) / reset:.0%} less. Half of that gain is there once the state lives "
            f"**{halfway} tokens**: the last few tokens carry most of what helps, the rest of the curve is the "
            "longer memory.\n\nThe samples say the same in text: the stateful one gives its own tokens a mean "
            f"probability of {mean(samples[True].probs):.2f}, the stateless one "
            f"{mean(samples[False].probs):.2f} (same random seed, same top-k)."
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

KNOBS = {  # strategy -> (config field, label, widget key, min, max, step, default)
    "temperature": ("temperature", "Temperature T", "lessons_choose_T", 0.05, 2.0, 0.05, 1.0),
    "top_k": ("top_k", "Top-k: candidates kept k", "lessons_choose_k", 1, 65, 1, 5),
    "top_p": ("top_p", "Top-p: probability mass p", "lessons_choose_p", 0.05, 1.0, 0.05, 0.5),
}
CHOOSE_TOKENS = 200


def choosing_the_next_token():
    background("leviathan")
    checkpoint = bundled(CHAR_MODELS[0])
    if checkpoint is None:
        return
    cols = st.columns(2)
    strategy = cols[0].radio(
        "Strategy", list(KNOBS), format_func=STRATEGY_TITLES.get, horizontal=True, key="lessons_choose_strategy"
    )
    field, label, widget, low, high, step, default = KNOBS[strategy]
    value = cols[1].slider(label, low, high, default, step, key=widget)
    common = {"max_new_tokens": CHOOSE_TOKENS, "seed": 0}
    configs = {
        "greedy": SamplingConfig(strategy="greedy", **common),
        "chosen": SamplingConfig(strategy=strategy, **{field: value}, **common),
    }
    key = checkpoint_key(checkpoint)
    runs = {}
    with user_errors("Sampling"):
        for which, config in configs.items():
            generation = cached_generation(*key, PROMPT, config)
            runs[which] = (generation, repetition_report(generation.continuation))
    if len(runs) < 2:
        return
    table = pd.DataFrame(
        [
            {
                "strategy": generation.strategy,
                "mean p(chosen)": mean(generation.probs),
                "mean entropy (nats)": mean(generation.entropies),
                "words in a repeated 4-word run": report["repeat_share"],
                "longest repeated passage (chars)": report["longest_repeat_chars"],
                "ends in a loop": "yes" if report["ends_in_cycle"] else "no",
            }
            for generation, report in runs.values()
        ]
    )
    st.table(
        table.style.format(
            {"mean p(chosen)": "{:.3f}", "mean entropy (nats)": "{:.2f}", "words in a repeated 4-word run": "{:.0%}"}
        ),
        hide_index=True,
    )
    st.html(prob_legend_html())
    columns = st.columns(2)
    for column, (generation, _) in zip(columns, runs.values()):
        with column:
            st.markdown(f"**{plain(generation.strategy)}**")
            st.html(prob_html(PROMPT, token_texts(checkpoint.tokenizer, generation.token_ids), generation.probs))
    (greedy, g_report), (chosen, c_report) = runs.values()
    loop = (
        f"and it ends by repeating a {g_report['cycle_period']}-character loop {g_report['cycle_repeats']:.1f} times"
        if g_report["ends_in_cycle"]
        else "though it does not end in a loop"
    )
    notice(
        f"Greedy always takes the likeliest token: mean p(chosen) **{mean(greedy.probs):.2f}**, "
        f"{g_report['repeat_share']:.0%} of its words sit in a 4-word run it has already written, {loop}. "
        f"**{plain(chosen.strategy)}** gives its tokens a mean probability of **{mean(chosen.probs):.2f}**, "
        f"with {c_report['repeat_share']:.0%} of its words in a repeated run and a longest repeated passage of "
        f"{c_report['longest_repeat_chars']} characters (greedy: {g_report['longest_repeat_chars']}).\n\n"
        "Move the slider: the more freedom the sampler gets (higher T, larger k or p), the lower the mean "
        "p(chosen) goes, the fewer loops, and past some point the more misspelt words. The model is the "
        "same in every run; only the rule that turns its probabilities into a choice changes."
    )
    check_yourself(
        "At temperature T = 0.05, what text does the temperature sampler write, and why?",
        "Almost exactly greedy's text. Dividing the logits by a tiny T multiplies the gaps between them, "
        "so after the softmax the likeliest token holds nearly all the probability and is drawn almost "
        "every time. (Top-k with k = 1 and top-p with a tiny p are exactly greedy.)",
    )
    open_full_page(
        "Sample",
        "Open the Sample page with these settings (all four strategies side by side)",
        model=CHAR_MODELS[0],
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
        st.markdown(f"**{label}**: {len(ids)} steps")
        preformatted(" | ".join(visible_piece(p) for p in pieces))
    (n_c, _, char_row), (n_s, _, sub_row) = [(len(ids), p, row) for ids, p, row in read.values()]
    metrics = st.columns(4)
    metrics[0].metric("character steps", n_c)
    metrics[1].metric("subword steps", n_s)
    metrics[2].metric("char GRU, nats/char", f"{char_row['nats_per_char']:.3f}")
    metrics[3].metric("scribe-alpha, nats/char", f"{sub_row['nats_per_char']:.3f}")
    gap = sub_row["nats_per_char"] - char_row["nats_per_char"]
    verdict = (
        "the two predict it about equally well (within 0.02 nats/char)"
        if abs(gap) < 0.02
        else f"{'scribe-alpha' if gap < 0 else 'the character GRU'} predicts it better by {abs(gap):.2f} nats/char"
    )
    notice(
        f"The character model reads these {len(text)} characters in **{n_c} steps**; scribe-alpha in "
        f"**{n_s}**, {len(text) / n_s:.1f} characters per step. Its state has to carry a sentence across "
        f"{n_s} updates instead of {n_c}: fewer steps for its memory to bridge, which is the case for subwords.\n\n"
        f"Per token, scribe-alpha's loss is {sub_row['nats_per_token']:.2f} nats against the character "
        f"model's {char_row['nats_per_token']:.2f}: each of its tokens holds more text, so each is harder. "
        f"Per character, the fair comparison, the character GRU pays **{char_row['nats_per_char']:.2f}** and "
        f"scribe-alpha **{sub_row['nats_per_char']:.2f}** on this text: {verdict}. Type "
        "another sentence: words scribe-alpha knows whole cost it few steps; rare words break into pieces."
    )
    check_yourself(
        "Why compare the two models in nats per character and not in nats per token?",
        "Because their tokens differ in size. A subword model's token holds several characters, so "
        "predicting one is harder and its loss per token is higher even when it predicts the text "
        "better. Total nats over the same text, divided by its characters, puts both on one scale.",
    )
    open_full_page(
        "Sample",
        "Open the Sample page on scribe-alpha with this sentence as the prompt",
        model=SUBWORD_MODEL,
        prompt=text[:1000],
    )
