"""The lessons of the Lessons page: one screen each, on the bundled models.

Every lesson follows one shape: the question in a sentence or two; one
experiment driven by one or two controls; what to notice, written around the
figures just computed (never canned numbers); a check-yourself question with
its answer behind a reveal; and a link that opens the full instrument page with
the same settings (ui.links reads them from the URL).

Presentation only: the numbers come from `lab` (lab.memory, lab.sampling,
lab.scans, lab.train, lab.experiments.ablation), through the cached calls of
ui.inspect_views where those exist. Widget keys start with "lessons_". A lesson whose bundled model is
missing says so and stops; the other lessons still work.
"""
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.checkpoints import BUNDLED_DIR, CheckpointError
from lab.data import DataError
from lab.experiments.ablation import epoch_rows, load_results
from lab.models import LMConfig, build_model
from lab.memory import (bias_time_constants, constant_gate_retention, gradient_decay_per_step, keep_gate_biases,
                        state_reset_curve)
from lab.sampling import SamplingConfig, generate, repetition_report, reproduced_prefix, sample_text
from lab.scans import race_scans
from lab.train import LMTask, TrainConfig, TrainingJob
from ui import inspect_views as views
from ui.coloured_text import prob_html, prob_legend_html, token_texts, visible_piece
from ui.common import TRAIN_IN_PROCESS, cached_checkpoint, page_link, plain, register_job, session_key, user_errors

MODELS_DIR = BUNDLED_DIR  # where the lessons find their models (a test points it elsewhere)
PASSAGE = ("Ham.\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
           "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"
           "And by opposing end them?--To die,--to sleep,--\nNo more; and by a sleep to say we end\n"
           "The heartache, and the thousand natural shocks\nThat flesh is heir to,--'tis a consummation\n")
PROMPT = "ROMEO.\n"
CHAR_MODELS = ["char-gru-torch_latest", "char-gru-seed_latest", "char-lstm_latest", "char-rnn_latest",
               "char-scan_latest"]
SUBWORD_MODEL = "scribe-alpha_latest"
# the documents the lab grew from, named as a student meets them, each with where it comes from
SOURCES = {
    "scribe": "**the Scribe design**: the design note of the Scribe subword GRUs, the family of the bundled "
              "scribe-alpha",
    "equations": "**the equations appendix**: the note that writes out the RNN, GRU and LSTM equations this "
                 "lab implements",
    "leviathan": "**the Leviathan notebook**: a 24-million-parameter character LSTM trained on Shakespeare, whose "
                 "notes also work out how fast a GRU's memory decays",
    "gate_bias": "**the gate-bias study**: a GRU reading small images one pixel per step, trained with and "
                 "without its gate biases",
    "scan": "**the ScanMarkov design**: a Mamba-style scan trained on character n-grams, the source of the "
            "scan cell",
}


# ---------------------------------------------------------------------------
# the parts every lesson has


def bundled(name):
    """The bundled checkpoint `name`, or None after a message saying what is missing and how to get it."""
    path = MODELS_DIR / f"{name}.safetensors"
    if not path.is_file():
        st.warning(f"This lesson needs the bundled model **{plain(name)}**, which is missing from this "
                   "installation. Regenerate the bundled models with `python scripts/build_checkpoints.py` "
                   "(or choose another model above, if there is a choice).", icon="📦")
        return None
    try:
        return cached_checkpoint(str(path), path.stat().st_mtime)
    except (CheckpointError, OSError) as e:
        st.error(f"Could not load the bundled model {plain(name)}: {plain(e)}")
        return None


def sources(*keys):
    st.caption("Where this comes from: " + "; ".join(SOURCES[k] for k in keys) + ".")


def notice(markdown):
    st.markdown("#### What to notice\n" + markdown)


def check_yourself(question, answer):
    st.markdown(f"#### Check yourself\n{question}")
    with st.expander("Show the answer"):
        st.markdown(answer)


def open_full_page(page, label, **settings):
    """A link to the instrument page with this lesson's settings in its URL."""
    page_link(page, label=label, query_params={k: str(v) for k, v in settings.items()})


def model_choice(key, names, default, label="Model"):
    if st.session_state.get(key) not in names:
        st.session_state[key] = default
    return st.selectbox(label, names, key=key, format_func=lambda n: n.removesuffix("_latest"))


@st.cache_data(max_entries=32, show_spinner="Reading the text with the state reset every k tokens…")
def cached_reset_curve(path, mtime, text, resets=None):
    """lab.memory.state_reset_curve of a checkpoint (resets: a tuple, or None for 1, 2, 4, ..., full)."""
    checkpoint = cached_checkpoint(path, mtime)
    return state_reset_curve(checkpoint.model, checkpoint.tokenizer, text, None if resets is None else list(resets))


@st.cache_data(max_entries=16, show_spinner="Timing both scans on this machine…")
def cached_race(hidden, measurement):
    """lab.scans.race_scans at one width; `measurement` counts the student's re-measurements."""
    return race_scans(SCAN_LENGTHS, hidden=hidden, repeats=3)


# ---------------------------------------------------------------------------
# 1 · the state is the memory


def state_is_memory():
    sources("scribe", "equations")
    name = model_choice("lessons_state_model", CHAR_MODELS + [SUBWORD_MODEL], CHAR_MODELS[0])
    checkpoint = bundled(name)
    if checkpoint is None:
        return
    key = views.checkpoint_key(checkpoint)
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
        fig = go.Figure(go.Scatter(x=curve["reset_every"], y=losses, mode="lines+markers", text=labels,
                                   hovertemplate="reset every %{text} tokens: %{y:.3f} nats/char<extra></extra>",
                                   line=dict(color=views.CELL_COLOURS.get(views.checkpoint_cell(checkpoint)))))
        fig.update_layout(height=320, margin=dict(l=60, r=10, t=10, b=40), yaxis_title="nats per character",
                          xaxis=dict(type="log", title="state reset to zero every k tokens (log scale)",
                                     tickvals=list(curve["reset_every"][:-1]), ticktext=labels[:-1]))
        # the full read's point is labelled on the chart: its tick would collide with the last power of 2
        fig.add_annotation(x=np.log10(curve["reset_every"].iloc[-1]), y=carried, text=labels[-1], showarrow=True,
                           ay=-30)
        st.plotly_chart(fig, key="lessons_state_chart")
    with right:
        st.metric("state reset every token", f"{reset:.3f} nats/char")
        st.metric("state carried through the passage", f"{carried:.3f} nats/char",
                  delta=f"{carried - reset:+.3f}", delta_color="inverse")
    config = SamplingConfig(strategy="top_k", top_k=20, temperature=0.8, max_new_tokens=120)
    samples = {}
    with user_errors("Sampling"):
        for stateful in (True, False):
            items = tuple(vars(SamplingConfig(**{**vars(config), "stateful": stateful})).items())
            samples[stateful] = views.cached_generation(*key, PROMPT, items)
    if len(samples) == 2:
        columns = st.columns(2)
        for column, stateful in zip(columns, (True, False)):
            generation = samples[stateful]
            with column:
                st.markdown("**Stateful**: the state carried" if stateful else "**Stateless**: reset before every token")
                st.html(prob_html(PROMPT, token_texts(checkpoint.tokenizer, generation.token_ids), generation.probs))
        notice(f"Reset before every token, {plain(name.removesuffix('_latest'))} predicts from the previous "
               f"token alone and pays **{reset:.2f} nats/char**: that is $P(s_t \\mid s_{{t-1}})$, the collapse "
               f"the Scribe design warns about. Carried through the whole passage "
               f"({curve['reset_every'].iloc[-1]} tokens) it pays **{carried:.2f}**, "
               f"{(reset - carried) / reset:.0%} less. Half of that gain is there once the state lives "
               f"**{halfway} tokens**: the last few tokens carry most of what helps, the rest of the curve is the "
               "longer memory.\n\nThe samples say the same in text: the stateful one gives its own tokens a mean "
               f"probability of {views.mean(samples[True].probs):.2f}, the stateless one "
               f"{views.mean(samples[False].probs):.2f} (same random seed, same top-k).")
    check_yourself("Suppose a model's curve were flat: the same nats/char with the state reset every token as "
                   "with it carried. What would that tell you about the model?",
                   "That it never uses its state: whatever its size, it predicts from the previous token alone, "
                   "like a table of bigram counts. The drop from left to right of the curve is exactly what the "
                   "recurrent memory is worth on this text.")
    open_full_page("Sample", "Open the Sample page with this model (stateful vs stateless side by side)",
                   model=name, prompt=PROMPT, seed=0, stateless="top_k")


# ---------------------------------------------------------------------------
# 2 · choosing the next token

KNOBS = {  # strategy -> (config field, label, widget key, min, max, step, default)
    "temperature": ("temperature", "Temperature T", "lessons_choose_T", 0.05, 2.0, 0.05, 1.0),
    "top_k": ("top_k", "Top-k: candidates kept k", "lessons_choose_k", 1, 65, 1, 5),
    "top_p": ("top_p", "Top-p: probability mass p", "lessons_choose_p", 0.05, 1.0, 0.05, 0.5),
}
CHOOSE_TOKENS = 200


def choosing_the_next_token():
    sources("leviathan")
    checkpoint = bundled(CHAR_MODELS[0])
    if checkpoint is None:
        return
    cols = st.columns(2)
    strategy = cols[0].radio("Strategy", list(KNOBS), format_func=views.STRATEGY_TITLES.get, horizontal=True,
                             key="lessons_choose_strategy")
    field, label, widget, low, high, step, default = KNOBS[strategy]
    value = cols[1].slider(label, low, high, default, step, key=widget)
    common = {"max_new_tokens": CHOOSE_TOKENS, "seed": 0}
    configs = {"greedy": SamplingConfig(strategy="greedy", **common),
               "chosen": SamplingConfig(strategy=strategy, **{field: value}, **common)}
    key = views.checkpoint_key(checkpoint)
    runs = {}
    with user_errors("Sampling"):
        for which, config in configs.items():
            generation = views.cached_generation(*key, PROMPT, tuple(vars(config).items()))
            runs[which] = (generation, repetition_report(generation.continuation))
    if len(runs) < 2:
        return
    table = pd.DataFrame([{"strategy": generation.strategy, "mean p(chosen)": views.mean(generation.probs),
                           "mean entropy (nats)": views.mean(generation.entropies),
                           "words in a repeated 4-word run": report["repeat_share"],
                           "longest repeated passage (chars)": report["longest_repeat_chars"],
                           "ends in a loop": report["ends_in_cycle"]}
                          for generation, report in runs.values()])
    st.dataframe(table.style.format({"mean p(chosen)": "{:.3f}", "mean entropy (nats)": "{:.2f}",
                                     "words in a repeated 4-word run": "{:.0%}"}),
                 hide_index=True, width="stretch")
    st.html(prob_legend_html())
    columns = st.columns(2)
    for column, (generation, _) in zip(columns, runs.values()):
        with column:
            st.markdown(f"**{plain(generation.strategy)}**")
            st.html(prob_html(PROMPT, token_texts(checkpoint.tokenizer, generation.token_ids), generation.probs))
    (greedy, g_report), (chosen, c_report) = runs.values()
    loop = (f"and it ends by repeating a {g_report['cycle_period']}-character loop "
            f"{g_report['cycle_repeats']:.1f} times" if g_report["ends_in_cycle"] else "though it does not end in a loop")
    notice(f"Greedy always takes the likeliest token: mean p(chosen) **{views.mean(greedy.probs):.2f}**, "
           f"{g_report['repeat_share']:.0%} of its words sit in a 4-word run it has already written, {loop}. "
           f"**{plain(chosen.strategy)}** gives its tokens a mean probability of **{views.mean(chosen.probs):.2f}**, "
           f"with {c_report['repeat_share']:.0%} of its words in a repeated run and a longest repeated passage of "
           f"{c_report['longest_repeat_chars']} characters (greedy: {g_report['longest_repeat_chars']}).\n\n"
           "Move the slider: the more freedom the sampler gets (higher T, larger k or p), the lower the mean "
           "p(chosen) goes, the fewer loops, and past some point the more misspelt words. The model is the "
           "same in every run; only the rule that turns its probabilities into a choice changes.")
    check_yourself("At temperature T = 0.05, what text does the temperature sampler write, and why?",
                   "Almost exactly greedy's text. Dividing the logits by a tiny T multiplies the gaps between them, "
                   "so after the softmax the likeliest token holds nearly all the probability and is drawn almost "
                   "every time. (Top-k with k = 1 and top-p with a tiny p are exactly greedy.)")
    open_full_page("Sample", "Open the Sample page with these settings (all four strategies side by side)",
                   model=CHAR_MODELS[0], prompt=PROMPT, tokens=CHOOSE_TOKENS, seed=0,
                   **{{"temperature": "temperature", "top_k": "top_k", "top_p": "top_p"}[strategy]: value},
                   **({"top_k_temperature": 1.0} if strategy == "top_k" else {}),
                   **({"top_p_temperature": 1.0} if strategy == "top_p" else {}))


# ---------------------------------------------------------------------------
# 3 · keep or overwrite

KEEP_MODELS = ["char-gru-torch_latest", "char-gru-seed_latest", "char-lstm_latest", SUBWORD_MODEL]
KEEP_LAGS = 64


def keep_or_overwrite():
    sources("leviathan", "gate_bias")
    cols = st.columns(2)
    bias = cols[0].slider("Keep-gate bias b", -2.0, 8.0, 1.0, 0.1, key="lessons_keep_bias",
                          help="The bias of the factor that keeps, with every input at zero.")
    with cols[1]:
        name = model_choice("lessons_keep_model", KEEP_MODELS, KEEP_MODELS[0], "Trained model to compare")
    implied = bias_time_constants([bias]).iloc[0]
    metrics = st.columns(3)
    metrics[0].metric("kept per step σ(b)", f"{implied['retention']:.4f}")
    metrics[1].metric("time constant 1 / (1 − σ(b))", f"{implied['tau']:.1f} steps")
    metrics[2].metric("half-life", f"{implied['half_life']:.1f} steps")
    checkpoint = bundled(name)
    if checkpoint is None:
        return
    learned = keep_gate_biases(checkpoint.model)
    measured = None
    with user_errors("Measuring retention"):
        measured = views.cached_retention(*views.checkpoint_key(checkpoint), PASSAGE, KEEP_LAGS)[0]
    if measured is None:
        return
    first = learned.iloc[0]
    lags = measured.lags
    curves = [(f"{name.removesuffix('_latest')} · layer 0 measured ({measured.keep_gate})", measured.cell, lags,
               measured.median)]
    reference = (f"a gate held at σ({bias:g}) = {implied['retention']:.3f}", lags,
                 constant_gate_retention(implied["retention"], lags))
    st.plotly_chart(views.decay_figure(curves, reference, log_y=True), key="lessons_keep_chart")
    st.dataframe(learned.style.format({c: "{:.3f}" for c in ("bias_median", "bias_q10", "bias_q90", "retention")}
                                      | {"half_life": "{:.1f}"}),
                 hide_index=True, width="stretch")
    half = measured.half_life
    where = (f"keeps half or less after **{half} step{'s' if half > 1 else ''}**" if half is not None
             else f"still keeps more than half after {KEEP_LAGS} steps")
    seed_note = (" In the equations appendix's convention z overwrites, so the factor that keeps is 1 − z and its bias is "
                 "−b_z: the table shows −b_z." if first["cell"] == "gru_seed" else "")
    notice(f"A keep factor of σ({bias:g}) = **{implied['retention']:.3f}** multiplies the old memory every step, "
           f"so k steps keep σ(b)^k: a time constant of {implied['tau']:.1f} steps and half gone after "
           f"**{implied['half_life']:.1f}**. Since τ = 1 + e^b, above b ≈ 1 each step up in b multiplies the "
           "time constant by about e: memory time grows exponentially with the bias.\n\n"
           f"{plain(name.removesuffix('_latest'))} learned a median keep bias of **{first['bias_median']:.2f}** in its first layer "
           f"(10–90% of units: {first['bias_q10']:.2f} to {first['bias_q90']:.2f}), which alone would keep "
           f"{first['retention']:.2f} per step, a half-life of {first['half_life']:.1f} steps.{seed_note} Measured "
           f"on the passage, where the inputs and the state move the gate too, its median unit keeps "
           f"{measured.median[0]:.2f} after one step and {where}.")
    check_yourself("The gate-bias study starts its PyTorch-convention GRU with b_z = +1. In the equations appendix's convention "
                   "(the `gru_seed` cell), which sign of b_z makes a unit remember longer?",
                   "Negative. In the equations appendix's convention z says how much to overwrite (h = (1 − z)·h + z·h̃), so the "
                   "factor that keeps is 1 − σ(b_z) = σ(−b_z). In PyTorch's convention z keeps, and +1 means "
                   "remember more. Same letter, opposite meaning: that is why the lab keeps two GRU cells.")
    open_full_page("Memory", "Open the Memory page with this bias in its table",
                   biases=f"-1, 0, 1, 2, 4, 6.2, {bias:g}", lag=KEEP_LAGS)


# ---------------------------------------------------------------------------
# 4 · why the vanilla RNN forgets

FORGET_MODELS = ["char-rnn_latest", "char-gru-torch_latest", "char-lstm_latest"]
FORGET_FIT = 30  # steps back over which the decay per step is fitted


def why_the_rnn_forgets():
    sources("equations", "leviathan")
    cols = st.columns(2)
    steps = cols[0].slider("Steps T read before the loss", 20, 200, 100, 10, key="lessons_forget_steps")
    trained = cols[1].toggle("Trained models (off: the same models at initialisation)", True,
                             key="lessons_forget_trained")
    curves, factors = [], {}
    for name in FORGET_MODELS:
        checkpoint = bundled(name)
        if checkpoint is None:
            continue
        with user_errors(f"Gradients of {name}"):
            norms = views.cached_gradient(*views.checkpoint_key(checkpoint), PASSAGE[: steps + 1],
                                          fresh_seed=None if trained else 0)
            label = name.removesuffix("_latest")
            curves.append((label, views.checkpoint_cell(checkpoint), norms))
            factors[label] = gradient_decay_per_step(norms, FORGET_FIT)
    if not curves:
        return
    st.plotly_chart(views.gradient_figure(curves, "trained" if trained else "at initialisation (torch seed 0)",
                                          views.log_range(*[c[2] for c in curves])), key="lessons_forget_chart")
    metrics = st.columns(len(factors))
    for column, (label, g) in zip(metrics, factors.items()):
        column.metric(f"{label}: per step g", f"{g:.3f}", help=f"g^50 = {g**50:.1e}")
    slowest, fastest = max(factors, key=factors.get), min(factors, key=factors.get)
    notice(f"Over the last {FORGET_FIT} steps each curve falls by a roughly constant factor g per step, so "
           f"k steps back it is about g^k of its value at the loss: the picture of a product of one factor per "
           f"step. **{fastest}** loses fastest, g = {factors[fastest]:.2f}: 50 steps back its gradient is "
           f"g^50 = **{factors[fastest] ** 50:.1e}** of what it was, so training barely learns to use anything "
           f"that far back. **{slowest}** keeps the most, g = {factors[slowest]:.2f}, g^50 = "
           f"{factors[slowest] ** 50:.1e}.\n\nThe vanilla RNN squashes its whole state through tanh and one "
           "matrix every step, and that factor is usually below 1. A gated cell has a path where the factor is "
           "its keep gate, which training can push towards 1. Flip the toggle: at initialisation the curves "
           "differ too, so part of the gap is the cell, part is what training did.")
    check_yourself("A gradient is multiplied by 0.7 per step back. How much of it is left 50 steps back, and "
                   "what keep factor would leave 60% after 50 steps?",
                   "0.7^50 ≈ 1.8 × 10⁻⁸: nothing a float32 gradient step can act on. To keep 60% after 50 steps "
                   "the factor must be 0.6^(1/50) ≈ 0.990: a keep gate near 1, which is what gating offers and "
                   "the vanilla RNN lacks.")
    open_full_page("Memory", "Open the Memory page with T = " + str(steps), steps=steps)


# ---------------------------------------------------------------------------
# 5 · characters or subwords

SENTENCE = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"


def characters_or_subwords():
    sources("scribe")
    text = st.text_area("A sentence", SENTENCE, max_chars=1000, height=80, key="lessons_tokens_text")
    char_model, subword_model = bundled(CHAR_MODELS[0]), bundled(SUBWORD_MODEL)
    if char_model is None or subword_model is None:
        return
    read = {}
    with user_errors("Tokenising"):
        for label, checkpoint in (("characters", char_model), ("subwords", subword_model)):
            curve = cached_reset_curve(*views.checkpoint_key(checkpoint), text, (None,))
            ids = checkpoint.tokenizer.encode(text)
            read[label] = (ids, [checkpoint.tokenizer.id_to_piece(i) for i in ids], curve.iloc[0])
    if len(read) < 2:
        return
    for label, (ids, pieces, _) in read.items():
        st.markdown(f"**{label}**: {len(ids)} steps")
        st.code(" | ".join(visible_piece(p) for p in pieces), language=None, wrap_lines=True)
    (n_c, _, char_row), (n_s, _, sub_row) = [(len(ids), p, row) for ids, p, row in read.values()]
    metrics = st.columns(4)
    metrics[0].metric("character steps", n_c)
    metrics[1].metric("subword steps", n_s)
    metrics[2].metric("char GRU, nats/char", f"{char_row['nats_per_char']:.3f}")
    metrics[3].metric("scribe-alpha, nats/char", f"{sub_row['nats_per_char']:.3f}")
    gap = sub_row["nats_per_char"] - char_row["nats_per_char"]
    verdict = ("the two predict it about equally well (within 0.02 nats/char)" if abs(gap) < 0.02 else
               f"{'scribe-alpha' if gap < 0 else 'the character GRU'} predicts it better by {abs(gap):.2f} nats/char")
    notice(f"The character model reads these {len(text)} characters in **{n_c} steps**; scribe-alpha in "
           f"**{n_s}**, {len(text) / n_s:.1f} characters per step. Its state has to carry a sentence across "
           f"{n_s} updates instead of {n_c}: that is the Scribe design's case for subwords.\n\n"
           f"Per token, scribe-alpha's loss is {sub_row['nats_per_token']:.2f} nats against the character "
           f"model's {char_row['nats_per_token']:.2f}: each of its tokens holds more text, so each is harder. "
           f"Per character, the fair comparison, the character GRU pays **{char_row['nats_per_char']:.2f}** and "
           f"scribe-alpha **{sub_row['nats_per_char']:.2f}** on this text: {verdict}. Type "
           "another sentence: words scribe-alpha knows whole cost it few steps; rare words break into pieces.")
    check_yourself("Why compare the two models in nats per character and not in nats per token?",
                   "Because their tokens differ in size. A subword model's token holds several characters, so "
                   "predicting one is harder and its loss per token is higher even when it predicts the text "
                   "better. Total nats over the same text, divided by its characters, puts both on one scale.")
    open_full_page("Sample", "Open the Sample page on scribe-alpha with this sentence as the prompt",
                   model=SUBWORD_MODEL, prompt=text[:1000])


# ---------------------------------------------------------------------------
# 6 · a recurrence you can scan

SCAN_LENGTHS = [16, 64, 256, 1024, 2048]
SCAN_WIDTHS = [8, 64, 512, 2048]


def a_recurrence_you_can_scan():
    sources("scan")
    st.latex(r"h_t = A_t \odot h_{t-1} + B_t \odot e_t")
    cols = st.columns([2, 1])
    hidden = cols[0].select_slider("Units H (the width of h)", SCAN_WIDTHS, 64, key="lessons_scan_hidden")
    if cols[1].button("Measure again", key="lessons_scan_again"):
        st.session_state.lessons_scan_measurement = st.session_state.get("lessons_scan_measurement", 0) + 1
    race = cached_race(hidden, st.session_state.get("lessons_scan_measurement", 0))
    fig = go.Figure([go.Scatter(x=race["T"], y=race[column], mode="lines+markers", name=name)
                     for column, name in (("sequential_ms", "loop (scan_sequential)"),
                                          ("parallel_ms", "parallel scan (scan_parallel)"))])
    fig.update_layout(height=320, margin=dict(l=60, r=10, t=10, b=40), legend=dict(orientation="h", y=-0.25),
                      xaxis=dict(type="log", title="sequence length T", tickvals=SCAN_LENGTHS),
                      yaxis=dict(type="log", title="best of 3, milliseconds", dtick=1))
    st.plotly_chart(fig, key="lessons_scan_chart")
    st.dataframe(race.style.format({"max_abs_diff": "{:.1e}", "sequential_ms": "{:.2f}", "parallel_ms": "{:.2f}",
                                    "speedup": "{:.2f}×"}), hide_index=True, width="stretch")
    worst = race["max_abs_diff"].max()
    wins = race.loc[race["speedup"] > 1, "T"].tolist()
    longest = race.iloc[-1]
    longest_T = int(longest["T"])
    if not wins:
        verdict = (f"the loop wins at every length measured: at T = {longest_T} the parallel scan takes "
                   f"{1 / longest['speedup']:.1f}× as long")
    elif len(wins) == len(race):
        verdict = f"the parallel scan wins at every length, {longest['speedup']:.1f}× faster at T = {longest_T}"
    else:
        verdict = (f"the parallel scan wins at T = {', '.join(map(str, wins))} and the loop at the other lengths "
                   f"(at T = {longest_T}: {longest['speedup']:.2f}× the loop's speed)")
    notice(f"Both ways give the same $h_t$: the largest difference over every T is **{worst:.1e}**, float32 "
           f"rounding (the lesson's bar: 1e-5). With H = {hidden} units, on this server's CPU, **{verdict}**.\n\n"
           "Why it goes both ways on a CPU: the loop pays a fixed cost for each of its T steps, and the parallel "
           "scan does log₂T rounds over the whole sequence, about log₂T times more arithmetic. With few units the "
           "fixed cost per step dominates and the scan wins; with many units, arithmetic on a few cores dominates "
           "and the loop wins. On a GPU each round spreads over thousands of cores, while the loop's T steps "
           "must wait for each other: the scan wins, which is why Mamba-style models use it. It works only "
           "because $A_t$ and $B_t$ depend on the input, never on $h$: a GRU's gates read $h_{t-1}$, so it "
           "cannot be scanned. These timings were measured on a shared machine; press *Measure again* to see "
           "how much they move.")
    check_yourself("Why can a GRU not be computed with this parallel scan?",
                   "Its gates $z_t$ and $r_t$, and its candidate, depend on $h_{t-1}$, so $h_t$ is a nonlinear "
                   "function of $h_{t-1}$. The scan needs $h_t = A_t h_{t-1} + B_t$ with $A_t$ and $B_t$ known "
                   "before the recurrence runs, so that steps can be combined in any grouping (the operator is "
                   "associative). The selective scan's gates read only the input $e_t$.")
    open_full_page("Gates", "Open the Gates page on the bundled scan model (its A and B gates)",
                   model="char-scan_latest")


# ---------------------------------------------------------------------------
# 7 · do gate biases matter over 1024 steps?

STUDY_METRICS = {  # epoch_rows column -> (label, format, what a higher value means)
    "val_accuracy": ("test accuracy", "{:.1%}", "better"),
    "val_loss": ("test loss (nats)", "{:.3f}", "worse"),
    "z_mean": ("mean update gate z (keeps)", "{:.3f}", "more memory kept per step"),
}


@st.cache_data(max_entries=4, show_spinner=False)
def cached_study(path, mtime):
    return load_results(path)


def gate_biases_over_1024_steps():
    sources("gate_bias")
    path = MODELS_DIR / "ablation" / "results.json"
    if not path.is_file():
        st.warning("This lesson reads the shipped gate-bias study (`checkpoints/ablation/results.json`), which is "
                   "missing from this installation. Run it again with `python -m lab ablation`.", icon="📦")
        return
    study = None
    try:
        study = cached_study(str(path), path.stat().st_mtime)
    except (DataError, OSError) as e:
        st.error(f"Could not read the gate-bias study: {plain(e)}")
    if study is None:
        return
    d, config, summary = study["dataset"], study["config"], study["summary"]
    st.markdown(f"**What was run.** A one-layer GRU in PyTorch's convention (H = {config['hidden_size']}) reads "
                f"{plain(d['title'])} one grey pixel per step, **{d['sequence_length']} steps** per image, and names "
                f"the digit. Two arms, {len(config['seeds'])} random seeds each, {config['epochs']} epochs over "
                f"{d['n_train']} training images: **baseline**, every bias learnable with the update-gate bias "
                "starting at +1; **ablated**, the reset and update biases held at 0.")
    metric = st.radio("Follow", list(STUDY_METRICS), format_func=lambda m: STUDY_METRICS[m][0], horizontal=True,
                      key="lessons_study_metric")
    label, fmt, higher = STUDY_METRICS[metric]
    epochs = pd.DataFrame(epoch_rows(study)).dropna(subset=[metric])
    by_epoch = epochs.groupby(["arm", "epoch"], sort=False)[metric].agg(["mean", "std"]).reset_index()
    fig = go.Figure([go.Scatter(x=g["epoch"], y=g["mean"], mode="lines+markers", name=f"{arm} (mean of seeds)",
                                error_y=dict(type="data", array=g["std"].fillna(0), visible=True))
                     for arm, g in by_epoch.groupby("arm", sort=False)])
    if metric == "val_accuracy":
        fig.add_hline(y=1 / d["num_classes"], line_dash="dot", annotation_text="chance")
    fig.update_layout(height=320, margin=dict(l=60, r=10, t=10, b=40), xaxis_title="epoch", yaxis_title=label,
                      legend=dict(orientation="h", y=-0.25))
    st.plotly_chart(fig, key="lessons_study_chart")
    final = epochs[epochs["epoch"] == epochs["epoch"].max()].groupby("arm", sort=False)[metric]
    means, stds = final.mean(), final.std()
    columns = st.columns(len(means))
    for column, arm in zip(columns, means.index):
        column.metric(f"{arm}: final {label}", fmt.format(means[arm]), help=f"± {fmt.format(stds[arm])} across seeds")
    gap = means.get("baseline", np.nan) - means.get("ablated", np.nan)
    spread = stds.max()
    tells = ("larger than the spread between random seeds, so the arms do differ here" if abs(gap) > 2 * spread else
             "no larger than the spread between random seeds: this study cannot tell the arms apart on it")
    accuracy = {arm: summary[arm]["val_accuracy_mean"] for arm in summary}
    notice(f"After {config['epochs']} epochs the baseline's {label} is **{fmt.format(means['baseline'])}** and the "
           f"ablated arm's **{fmt.format(means['ablated'])}** (higher: {higher}). The gap, "
           f"{fmt.format(abs(gap))}, is {tells} (largest standard deviation across seeds {fmt.format(spread)}).\n\n"
           f"**What it shows.** The biases change the gates: the update gate keeps "
           f"{summary['baseline']['z_mean_final']:.2f} per step on average in the baseline and "
           f"{summary['ablated']['z_mean_final']:.2f} in the ablated arm. **What it cannot show.** Whether that "
           f"matters for the task: both arms reach only "
           + " and ".join(f"{v:.0%}" for v in accuracy.values())
           + f" test accuracy against a chance level of {1 / d['num_classes']:.0%}. {config['epochs']} short "
           "epochs leave both near the start of learning, where neither is likely to use a memory "
           f"{d['sequence_length']} steps long yet; a longer run, and more random seeds, would answer the question.")
    check_yourself("The ablated arm scores a little higher than the baseline. Can you conclude that the gate "
                   "biases hurt?",
                   f"No. With {len(config['seeds'])} random seeds per arm a gap within the spread between seeds "
                   f"can be luck, and both arms sit not far above chance after {config['epochs']} epochs: the "
                   "models have barely started to learn, so the study says nothing yet about what the biases do "
                   "to a trained model's memory.")
    open_full_page("Ablation", "Open the Ablation page, with three random seeds per arm for its live run", seeds=3)


# ---------------------------------------------------------------------------
# 8 · watch it learn your text

SONNET = ("Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
          "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n"
          "Sometime too hot the eye of heaven shines,\nAnd often is his gold complexion dimm'd;\n"
          "And every fair from fair sometime declines,\nBy chance or nature's changing course untrimm'd;\n"
          "But thy eternal summer shall not fade,\nNor lose possession of that fair thou ow'st;\n"
          "Nor shall death brag thou wander'st in his shade,\nWhen in eternal lines to time thou grow'st:\n")
LEARN_PROMPT_CHARS = 8  # every sample starts from the paragraph's first characters
LEARN_MIN_CHARS = 400  # the held-out last tenth must hold one training window (block + 1 characters)
# a model and recipe that memorise a paragraph in seconds on one busy CPU core
LEARN_MODEL = dict(cell="gru_torch", embed_dim=32, hidden_size=128)
LEARN_RECIPE = dict(lr=1e-2, batch_size=16, block_size=32, eval_interval=20, eval_windows=8, device="cpu")


def start_learning(text, seconds):
    """A background run that memorises `text`, sampling it greedily every 1.5 s (TrainingJob's sampler)."""
    if len(text) < LEARN_MIN_CHARS:
        raise ValueError(f"paragraph: has {len(text)} characters; type at least {LEARN_MIN_CHARS}")
    task = LMTask.from_text(text, "char")  # the last tenth is held out: the validation split
    config = TrainConfig(max_steps=None, max_seconds=seconds, **LEARN_RECIPE)
    task.check(config)
    model = build_model(LMConfig(vocab_size=task.vocab_size, **LEARN_MODEL))
    learned_part = len(task.train_ids)  # one character per token: the characters it trains on
    sampling = SamplingConfig(strategy="greedy", max_new_tokens=min(learned_part - LEARN_PROMPT_CHARS, 200))

    previous = st.session_state.get("lessons_learn_job")
    if previous is not None:
        previous.stop()
    sampler = functools.partial(sample_text, task.tokenizer, text[:LEARN_PROMPT_CHARS], sampling)
    job = TrainingJob("lesson-learn", model, task, config, sampler=sampler, sample_every_s=1.5,
                      owner=session_key(), in_process=TRAIN_IN_PROCESS)
    job.start()
    register_job(job)
    st.session_state.lessons_learn_job, st.session_state.lessons_learn_for = job, text
    st.session_state.lessons_learn_span = sampling.max_new_tokens


def learning_timeline(job, text):
    """The run's samples, oldest first, each with how much of the paragraph it reproduces."""
    rows = []
    for event in job.events():
        if event["type"] == "sample":
            continuation = event["text"][LEARN_PROMPT_CHARS:]
            rows.append({"step": event["step"], "characters reproduced":
                         reproduced_prefix(continuation, text[LEARN_PROMPT_CHARS:]),
                         "sample": continuation.replace("\n", " ↵ ")})
    return pd.DataFrame(rows, columns=["step", "characters reproduced", "sample"])


def learning_view(text):
    job = st.session_state.get("lessons_learn_job")
    if job is None:
        st.info("Press **Start** to train a fresh model on the paragraph above.")
        return
    if st.session_state.get("lessons_learn_for") != text:
        st.info("The run below learned an earlier version of the paragraph: press Start to learn this one.")
    learned = st.session_state.lessons_learn_for
    events = job.events()
    steps = [e for e in events if e["type"] == "step"]
    evals = [e for e in events if e["type"] == "eval"]
    if job.queue_position:
        st.progress(0.0, text=f"waiting for this server's training budget: number {job.queue_position} in the queue")
    elif steps:
        last = steps[-1]
        st.progress(min(1.0, last["progress"]), text=f"step {last['step']:,} · train loss {last['train_loss']:.3f}"
                                                     + (" · done" if not job.running else ""))
    timeline = learning_timeline(job, learned)
    samples = [e["text"] for e in events if e["type"] == "sample"]
    if samples:
        st.markdown(f"**Latest sample** (step {timeline['step'].iloc[-1]}), greedy from "
                    f"“{plain(visible_piece(learned[:LEARN_PROMPT_CHARS]))}”")
        st.code(samples[-1], language=None, wrap_lines=True)
    st.dataframe(timeline, hide_index=True, width="stretch",
                 column_config={"sample": st.column_config.TextColumn(width="large")})
    if job.status == "failed":
        st.error(f"The run failed: {plain(job.message)}")
    if timeline.empty or not steps:
        return
    first, last = timeline.iloc[0], timeline.iloc[-1]
    span = st.session_state.lessons_learn_span
    held_out = (f" On the last tenth of the paragraph, which it never trained on, its loss is "
                f"**{evals[-1]['val_loss']:.2f} nats/char** against {steps[-1]['train_loss']:.2f} on what it "
                "trained on." if evals else "")
    notice(f"Every sample starts from the paragraph's first {LEARN_PROMPT_CHARS} characters and lets the model "
           f"continue greedily. At step {first['step']} it gives back **{first['characters reproduced']}** "
           f"characters of your text before its first mistake; at step {last['step']}, "
           f"**{last['characters reproduced']}** of the {span} each sample writes. Read the samples top to bottom and "
           "watch when spaces, short words and then whole lines appear." + held_out)


def watch_it_learn():
    st.caption("A live run on this server's CPU: a fresh one-layer GRU (PyTorch's convention, 128 units) "
               "trains on your paragraph alone, and every 1.5 s the training thread writes a greedy sample.")
    text = st.text_area("Your paragraph (at least 400 characters)", SONNET, max_chars=2000, height=140,
                        key="lessons_learn_text")
    cols = st.columns([2, 1])
    seconds = cols[0].slider("Training time (seconds)", 5, 60, 20, 5, key="lessons_learn_seconds")
    job = st.session_state.get("lessons_learn_job")
    if cols[1].button("▶ Start", key="lessons_learn_start", type="primary"):
        with user_errors("Starting the run"):
            start_learning(text, seconds)
            job = st.session_state.lessons_learn_job
    running = job is not None and job.running
    st.fragment(run_every=1.0 if running else None)(learning_view)(text)
    check_yourself("By the end the model writes your paragraph back almost word for word. Has it learned to "
                   "write English?",
                   "No: it has memorised one text. The loss on the last tenth of the paragraph, which it never "
                   "trained on, stays far above its training loss: a model that had learned the language would "
                   "predict unseen text too. With one short text and tens of thousands of parameters, copying is the "
                   "easiest way to a low training loss.")
    open_full_page("Train", "Open the Train page with this model and recipe (upload your text there)",
                   cell=LEARN_MODEL["cell"], emb=LEARN_MODEL["embed_dim"], hidden=LEARN_MODEL["hidden_size"],
                   lr=LEARN_RECIPE["lr"], batch=LEARN_RECIPE["batch_size"], block=LEARN_RECIPE["block_size"],
                   seconds=seconds, corpus="upload")


@dataclass(frozen=True)
class Lesson:
    title: str
    question: str  # one or two sentences, in the student's words
    show: Callable[[], None]  # draws the experiment, what to notice, the check and the link


LESSONS = {  # slug (the ?lesson= of a link) -> lesson, in teaching order
    "state-is-memory": Lesson(
        "The state is the memory",
        "A recurrent model carries a hidden state from token to token. How much worse does it predict a text "
        "when that state is wiped every few tokens?", state_is_memory),
    "next-token": Lesson(
        "Choosing the next token",
        "The model gives a probability to every possible next token. Does it matter how we pick one from them?",
        choosing_the_next_token),
    "keep-or-overwrite": Lesson(
        "Keep or overwrite",
        "A gated cell multiplies its memory by a keep factor every step. How long does a memory last for a "
        "given gate bias, and what did the trained models learn?", keep_or_overwrite),
    "vanilla-forgets": Lesson(
        "Why the vanilla RNN forgets",
        "Training adjusts the weights by how much each step influenced the loss. How fast does that influence "
        "fade with distance, in an RNN, a GRU and an LSTM?", why_the_rnn_forgets),
    "chars-or-subwords": Lesson(
        "Characters or subwords",
        "A model can read text one character at a time, or in word pieces. What does each choice cost, in steps "
        "and in loss?", characters_or_subwords),
    "scan": Lesson(
        "A recurrence you can scan",
        "When the gates do not look at the state, the recurrence can be computed all at once instead of step "
        "by step. Is that the same answer, and is it faster?", a_recurrence_you_can_scan),
    "gate-biases": Lesson(
        "Do gate biases matter over 1024 steps?",
        "A GRU reading an image pixel by pixel must remember across 1024 steps. Does it help to start its "
        "update gate biased towards keeping?", gate_biases_over_1024_steps),
    "learn-your-text": Lesson(
        "Watch it learn your text",
        "What does a recurrent model do, step by step, while it learns? Give it one paragraph and watch its "
        "samples.", watch_it_learn),
}


def show_lesson(slug):
    lesson = LESSONS[slug]
    number = list(LESSONS).index(slug) + 1
    st.header(f"{number} · {lesson.title}")
    st.markdown(f"**The question.** {lesson.question}")
    lesson.show()
