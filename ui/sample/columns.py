"""The Sample page's first three tabs, each a fragment (a setting reruns its own part only): the four
strategies side by side, one strategy stateful against stateless, and which earlier characters drove a
generated one."""

import streamlit as st

from lab.instruments.sampling import STRATEGIES, encode_prompt, repetition_report
from ui.sample.settings import mirror, number_box, sampling_config
from ui.sample.views import repetition_markdown
from ui.shared.boundary import fragment
from ui.shared.cached_calls import cached_generation, cached_generation_html, cached_influence, checkpoint_key
from ui.shared.coloured_text import influence_html, influence_legend_html, token_texts
from ui.shared.plain_text import piece_label, user_errors
from ui.shared.samples import STRATEGY_TITLES, mean


def generated(checkpoint, prompt, config):
    """lab.instruments.sampling.generate, cached across sessions per (model, prompt, settings)."""
    return cached_generation(*checkpoint_key(checkpoint), prompt, config)


def coloured_generation(checkpoint, prompt, config, generation, entropy_help):
    st.html(cached_generation_html(*checkpoint_key(checkpoint), prompt, config))
    metric_cols = st.columns(2)
    metric_cols[0].metric("entropy (nats)", f"{mean(generation.entropies):.2f}", help=entropy_help)
    metric_cols[1].metric("mean p(chosen)", f"{mean(generation.probs):.2f}")


@fragment
def samples(checkpoint, prompt):
    """The four strategies side by side, each with its settings: a setting reruns this part only."""
    columns = st.columns(4)
    with columns[0]:
        st.subheader(STRATEGY_TITLES["greedy"])
        st.caption("argmax at every step: deterministic, and prone to loops.")
    with columns[1]:
        st.subheader(STRATEGY_TITLES["temperature"])
        number_box(st, "temperature", "T", step=0.1)
    with columns[2]:
        st.subheader(STRATEGY_TITLES["top_k"])
        k_cols = st.columns(2)
        number_box(k_cols[0], "top_k", "k", step=1)
        number_box(k_cols[1], "top_k_temperature", "T", step=0.1)
    with columns[3]:
        st.subheader(STRATEGY_TITLES["top_p"])
        p_cols = st.columns(2)
        number_box(p_cols[0], "top_p", "p", step=0.05)
        number_box(p_cols[1], "top_p_temperature", "T", step=0.1)
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
                sampling_config(strategy),
                generation,
                "Entropy of the model's next-token distribution, averaged over the steps.",
            )
            if strategy == "greedy":
                report = repetition_report(generation.continuation)
                st.markdown(
                    "**Repetition report** (a greedy sampler's typical loop: “And then the sea…”, again and again)"
                )
                st.markdown(repetition_markdown(report))

    mirror()
    drawn_elsewhere = [  # the samples the other tabs drew, and those these settings make now
        (st.session_state.get(drawn), sampling_config(st.session_state[strategy]))
        for drawn, strategy in (
            ("sample_compared", "sample_state_strategy"),
            ("sample_traced", "sample_influence_strategy"),
        )
    ]
    if st.session_state.sample_page_done and any(drawn != now for drawn, now in drawn_elsewhere):
        st.rerun()  # this part alone ran, and changed a sample another tab shows: the whole page follows


@fragment
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
    configs = [sampling_config(strategy_for_state, stateful=stateful) for stateful in (True, False)]
    with user_errors("Sampling"):
        pair = [generated(checkpoint, prompt, config) for config in configs]
    if pair is not None:
        state_cols = st.columns(2)
        for column, config, generation, title in zip(
            state_cols,
            configs,
            pair,
            ("Stateful: the state carries the whole prefix", "Stateless: the state is reset before every token"),
        ):
            with column:
                st.markdown(f"**{title}** · {generation.strategy}")
                coloured_generation(
                    checkpoint,
                    prompt,
                    config,
                    generation,
                    "Mean entropy of the model's next-token distribution: higher when it knows less about "
                    "what comes next.",
                )
    mirror()


@fragment
def drivers(checkpoint, prompt):
    """Which earlier tokens drove one generated token (characters or subwords: the tokenizer's unit, as the
    slider and the caption say it): its slider reruns this part only."""
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
    unit = checkpoint.tokenizer.unit  # "character", "subword": what one token of this model is
    nth = drove_cols[1].select_slider(
        f"The generated {unit}",
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
            f"{influence.probability:.3f} (untempered). Each earlier {unit} is coloured by the gradient of "
            "that log-probability with respect to its embedding: how much nudging it would move the "
            "prediction."
        )
    mirror()
