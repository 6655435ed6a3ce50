"""Text coloured token by token: HTML for st.html, every piece of text escaped.

Karpathy's pictures: each token of a text on a background coloured by a number,
one number per token (a unit's activation, a probability, an influence), with
the value in the token's tooltip. Presentation only; the numbers come from lab.

Glossary: T tokens.
"""

import colorsys
import html

import numpy as np

from lab.instruments.introspect import SIGMOID_GATES

_BOX = (
    "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9rem; "
    "line-height: 1.7; white-space: pre-wrap; word-break: break-word; padding: 0.6rem 0.7rem; "
    "border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; background: #fff; color: #111"
)
# a gallery card: smaller type, and a long text scrolls inside the card instead of stretching it
_COMPACT = "; font-size: 0.78rem; line-height: 1.55; max-height: 11rem; overflow-y: auto"
_LEGEND = "font-size:0.8rem; color:#555"


def _escape(text):
    return html.escape(text, quote=True)


def _box(spans, compact=False):
    return f'<div style="{_BOX}{_COMPACT if compact else ""}">{"".join(spans)}</div>'


def visible_piece(piece):
    """A token as an axis label: newline, space and tab made visible."""
    return piece.replace("\n", "↵").replace("\t", "⇥").replace(" ", "␣") or "∅"


def chart_piece(piece):
    """A token as text in a chart: plotly reads a few HTML tags (links among them) in its labels and
    hover text, so the piece is HTML-escaped as well as made visible."""
    return html.escape(visible_piece(piece))


def token_texts(tokenizer, token_ids):
    """Each token's own text (" the" for the subword "▁the"), for colouring token by token."""
    return [tokenizer.decode([i]) for i in token_ids]


def _span(text, colour, tooltip, extra_style=""):
    """One token on its colour. As short as it reads: a Sample page holds six texts of 300 tokens, and its bytes
    were 230 KB a visit, ten times another page's, most of them these spans' styles."""
    shown = _escape(text)
    if "\n" in text:  # keep the line break, and show that a newline token is there
        shown = shown.replace("\n", '<span style="opacity:0.45">↵</span>\n')
    return f'<span title="{_escape(tooltip)}" style="background:{colour}{extra_style}">{shown}</span>'


def _hex(rgb, alpha):
    """#rrggbbaa: a colour with its opacity in 9 characters."""
    return "#" + "".join(f"{round(c):02x}" for c in (*rgb, 255 * alpha))


def _legend(label, stops, after=""):
    """A legend line: `label`, one coloured cell per (colour, text) stop, then `after`."""
    cells = "".join(
        f'<span style="background-color:{colour}; padding:0 0.45rem; margin-right:2px">{_escape(text)}</span>'
        for colour, text in stops
    )
    return f'<div style="{_LEGEND}">{label} {cells}{after}</div>'


# ---------------------------------------------------------------------------
# probabilities of generated tokens


def prob_colour(p):
    """Background colour for a token probability: red (unlikely) -> yellow -> green (likely), at 55% opacity: the
    hue 120·p of a colour wheel at 75% saturation and 62% lightness."""
    p = min(max(float(p), 0.0), 1.0)
    return _hex([255 * c for c in colorsys.hls_to_rgb(round(120 * p) / 360, 0.62, 0.75)], 0.55)


def prob_html(prompt, token_texts, probs):
    """The prompt in grey, then every generated token on a background coloured by its probability."""
    spans = [f'<span style="color:#888">{_escape(prompt)}</span>'] if prompt else []
    spans += [_span(t, prob_colour(p), f"p = {p:.3f}") for t, p in zip(token_texts, probs)]
    return _box(spans)


def prob_legend_html():
    return _legend(
        "Background = the model's probability of the chosen token (untempered):",
        [(prob_colour(p), f"{p:g}") for p in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)],
        " · grey = your prompt · hover a token for its value",
    )


# ---------------------------------------------------------------------------
# one unit's activation


def activation_colour(value, vmin, vmax, diverging):
    """Blue (low/negative) -> white -> red (high/positive) for diverging ranges; white -> purple otherwise."""
    if diverging:
        bound = max(abs(vmin), abs(vmax), 1e-9)
        x = max(-1.0, min(1.0, value / bound))
        return _hex((214, 39, 40) if x > 0 else (31, 119, 180), abs(x) * 0.8)
    x = 0.0 if vmax <= vmin else max(0.0, min(1.0, (value - vmin) / (vmax - vmin)))
    return _hex((106, 27, 154), x * 0.8)


def gate_range(gate, values):
    """(vmin, vmax, diverging) for a gate: sigmoid gates on [0, 1], tanh on [-1, 1], c symmetric."""
    if gate in SIGMOID_GATES:
        return 0.0, 1.0, False
    if gate in ("n", "g", "h") and np.abs(values).max() <= 1.0 + 1e-6:
        return -1.0, 1.0, True
    bound = float(np.abs(values).max()) or 1.0  # cell state c, a scan's h: unbounded
    return -bound, bound, True


def activation_html(token_texts, values, gate, compact=False):
    """Each token on a background coloured by one unit's value at that step (`compact`: a gallery card)."""
    vmin, vmax, diverging = gate_range(gate, values)
    return _box(
        [
            _span(t, activation_colour(v, vmin, vmax, diverging), f"{gate} = {v:+.3f}")
            for t, v in zip(token_texts, values)
        ],
        compact,
    )


def activation_legend_html(gate, values):
    vmin, vmax, diverging = gate_range(gate, values)
    return _legend(
        f"{_escape(gate)} value:",
        [(activation_colour(v, vmin, vmax, diverging), f"{v:+.2g}") for v in np.linspace(vmin, vmax, 5)],
    )


# ---------------------------------------------------------------------------
# a selected span, and the influence of earlier tokens on one prediction

SPAN_COLOUR = _hex((255, 193, 7), 0.55)
INFLUENCE_RGB = (230, 81, 0)


def span_html(token_texts, start, end):
    """The text with tokens start..end-1 highlighted: the span whose units are sought."""
    return _box(
        [_span(t, SPAN_COLOUR if start <= n < end else "transparent", f"token {n}") for n, t in enumerate(token_texts)]
    )


def influence_colour(share):
    return _hex(INFLUENCE_RGB, 0.85 * min(max(float(share), 0.0), 1.0))


def influence_html(token_texts, influence, tail_tokens=40):
    """The tokens before the prediction on a background as strong as their influence on it (share of
    the largest), the predicted token framed, then up to `tail_tokens` tokens after it, faded (the
    model had not read them)."""
    target = influence.target
    spans = [
        _span(t, influence_colour(share), f"influence {share:.2f} of the largest (gradient norm {norm:.2e})")
        for t, share, norm in zip(token_texts[:target], influence.shares, influence.norms)
    ]
    spans.append(
        _span(
            token_texts[target],
            "transparent",
            f"predicted: p = {influence.probability:.3f}",
            "; outline: 2px solid #111; outline-offset: 1px",
        )
    )
    tail = token_texts[target + 1 :]
    shown = "".join(tail[:tail_tokens]) + ("…" if len(tail) > tail_tokens else "")
    spans.append(f'<span style="opacity:0.3">{_escape(shown)}</span>')
    return _box(spans)


def influence_legend_html():
    return _legend(
        "Background = how strongly that character drove the framed prediction (share of the largest):",
        [(influence_colour(s), f"{s:g}") for s in (0.0, 0.25, 0.5, 0.75, 1.0)],
    )
