"""What the units learned: which units track a feature of the text, or fire on a span you chose.

Glossary: T time (tokens), H hidden units per layer, F features, L layers.

    trace = lab.instruments.introspect.trace_text(model, tokenizer, text)
    table = unit_correlations(trace)           # every (layer, gate, unit) x feature: Pearson r
    unit_gallery(table, k=6)                   # the k features with the unit that tracks each best
    top_units(trace, "in_brackets")            # the units of one gate that best track one feature
    span_units(trace, 40, 54)                  # the units that stand out while tokens 40..53 are read
    unit_order(trace.gate(0, "c"), "similarity")   # a heatmap's rows, similar units side by side

A "unit" is one coordinate of one gate (or state) of one layer: unit 45 of the LSTM's
cell state c is another unit than unit 45 of its forget gate f. Correlations are
Pearson's r over the tokens of a text; a feature constant on the text has none and
is left out. Karpathy, Johnson & Fei-Fei (2015) colour text by such units; LSTMVis
(Strobelt et al. 2018) lets a user select a span and ranks the units that fire on
it. `span_units` ranks by the correlation with the span itself (1 on the span, 0
elsewhere), so a span you select is read exactly like a feature of the text.

Over a short text any correlation is large: over two tokens every unit that moves has r = ±1. A
correlation singles out a unit only above `chance_correlation(T, m)`, the |r| that the strongest of
the m correlations compared reaches by chance alone once in 20 (each tested at 0.05 / m, Bonferroni;
the exact null distribution of Pearson's r). `tokens_needed(m)` is the shortest text on which a unit
that follows a feature with |r| = STRONG_CORRELATION stands out so.
"""

import functools
import math

import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.instruments.features import FEATURES, feature_matrix, feature_values
from lab.instruments.introspect import MAX_TRACE_TOKENS, encode_text, trace_chunks

TABLE_COLUMNS = ["feature", "layer", "gate", "unit", "correlation", "abs_correlation"]
UNIT_ORDERS = {
    "index": "unit 0 first, as the weights store them",
    "feature": "by |correlation| with the chosen feature: the units most tied to it on top, whether they rise "
    "or fall with it",
    "similarity": "similar units side by side (hierarchical clustering of their activations)",
}
# a column whose standard deviation is below this is constant: its correlation is 0, not rounding noise
_MIN_STD = 1e-10
SIGNIFICANCE = 0.05  # how often chance alone may put the strongest of the correlations compared above the bar
STRONG_CORRELATION = 0.5  # the |r| a text must be long enough to tell from chance (tokens_needed)


def _chance_of_at_least(r, df):
    """P(|r| >= r) for Pearson's r of two independent normal variables over df + 2 samples: the
    two-sided tail of Student's t with df degrees of freedom at t = r sqrt(df / (1 - r^2)), by its
    finite series (Abramowitz & Stegun 26.7.3 and 26.7.4, with sin(theta) = r, cos(theta)^2 = 1 - r^2).
    Exact for every df, and cheap: no statistics library is imported for it."""
    if r >= 1.0:
        return 0.0
    cos2, term, total = 1.0 - r * r, 1.0, 1.0
    if df % 2 == 0:  # A = r (1 + 1/2 cos^2 + 1.3/(2.4) cos^4 + ... up to cos^(df-2))
        for k in range(1, df // 2):
            term *= cos2 * (2 * k - 1) / (2 * k)
            total += term
        inside = r * total
    else:  # A = 2/pi (theta + r cos (1 + 2/3 cos^2 + 2.4/(3.5) cos^4 + ... up to cos^(df-3)))
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2 / math.pi * (math.asin(r) + (r * math.sqrt(cos2) * total if df > 1 else 0.0))
    return max(0.0, 1.0 - inside)


@functools.lru_cache(maxsize=256)
def chance_correlation(n_tokens, n_compared, significance=SIGNIFICANCE):
    """The |r| over `n_tokens` tokens that the strongest of `n_compared` correlations reaches by chance
    alone with probability `significance` (each at significance / n_compared): a correlation singles out
    a unit only above it. 1.0 under three tokens, where every r that exists is ±1. A text's tokens
    are not independent draws, so this is the least a finding needs, not a guarantee."""
    if n_tokens < 3:
        return 1.0
    df, target = n_tokens - 2, significance / max(1, n_compared)
    low, high = 0.0, 1.0  # the tail falls as r grows: bisect for the r where it equals the target
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if _chance_of_at_least(middle, df) > target else (low, middle)
    return high


@functools.lru_cache(maxsize=64)
def tokens_needed(n_compared, strength=STRONG_CORRELATION, significance=SIGNIFICANCE):
    """The fewest tokens over which a correlation of |r| = `strength` stands out from the strongest of
    `n_compared` correlations of chance (chance_correlation(n, n_compared) <= strength)."""
    target = significance / max(1, n_compared)
    low, high = 3, 4
    while _chance_of_at_least(strength, high - 2) > target:  # the tail falls as the text grows
        low, high = high, 2 * high
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if _chance_of_at_least(strength, middle - 2) > target else (low, middle)
    return low


class CorrelationSums:
    """Running sums for the Pearson correlation of every column of x (units, H) with every column
    of y (features, F), fed chunk by chunk, so that a text longer than one trace is measured exactly.
    The sums are taken around the first chunk's means, which keeps them exact in float64."""

    def __init__(self):
        self.n = 0

    def add(self, x, y):
        """x: (T, H) unit values, y: (T, F) feature values over the same T tokens."""
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if self.n == 0:
            self.x_shift, self.y_shift = x.mean(0), y.mean(0)
            self.sx, self.sxx = np.zeros(x.shape[1]), np.zeros(x.shape[1])  # (H,)
            self.sy, self.syy = np.zeros(y.shape[1]), np.zeros(y.shape[1])  # (F,)
            self.sxy = np.zeros((y.shape[1], x.shape[1]))  # (F, H)
        x, y = x - self.x_shift, y - self.y_shift
        self.n += len(x)
        self.sx += x.sum(0)
        self.sxx += (x**2).sum(0)
        self.sy += y.sum(0)
        self.syy += (y**2).sum(0)
        self.sxy += y.T @ x
        return self

    def correlation(self):
        """(F, H) Pearson r; 0 where a unit or a feature is constant."""
        n = self.n
        var_x = np.maximum(self.sxx - self.sx**2 / n, 0.0)  # (H,) n times the variance
        var_y = np.maximum(self.syy - self.sy**2 / n, 0.0)  # (F,)
        cov = self.sxy - np.outer(self.sy, self.sx) / n  # (F, H)
        varies = np.outer(var_y > n * _MIN_STD**2, var_x > n * _MIN_STD**2)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = cov / np.sqrt(np.outer(var_y, var_x))
        return np.where(varies, np.clip(r, -1.0, 1.0), 0.0)


def pearson(x, y):
    """Pearson correlation of each column of x (T, H) with y (T,) -> (H,); 0 for a constant column."""
    return CorrelationSums().add(x, np.asarray(y, np.float64)[:, None]).correlation()[0]


def _table(sums_by_gate, features):
    """{(layer, gate): CorrelationSums} -> the long DataFrame of TABLE_COLUMNS."""
    frames = []
    for (layer, gate), sums in sums_by_gate.items():
        r = sums.correlation()  # (F, H)
        F, H = r.shape
        frames.append(
            pd.DataFrame(
                {
                    "feature": np.repeat(features, H),
                    "layer": layer,
                    "gate": gate,
                    "unit": np.tile(np.arange(H), F),
                    "correlation": r.ravel(),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    table["abs_correlation"] = table["correlation"].abs()
    return table[TABLE_COLUMNS]


def _varying(token_texts, features):
    """The features (of `features`, None: all) that are not constant on these tokens."""
    features = list(FEATURES) if features is None else list(features)
    return [f for f in features if np.ptp(feature_values(token_texts, f)) > 0]


def unit_correlations(trace, features=None):
    """Pearson r of every unit of every gate of every layer with every feature that varies on the
    traced text (features: names in lab.instruments.features.FEATURES, None: all). One row per feature and unit:
    feature, layer, gate, unit, correlation, abs_correlation. ValueError when no feature varies."""
    features = _varying(trace.token_texts, features)
    if not features:
        raise LabError("text: no feature of the text varies on it; use a longer text")
    y = feature_matrix(trace.token_texts, features)  # (T, F)
    sums = {
        (l, g): CorrelationSums().add(values, y) for l, gates in enumerate(trace.layers) for g, values in gates.items()
    }
    return _table(sums, features)


def unit_correlations_over(model, tokenizer, text, features=None, chunk_tokens=MAX_TRACE_TOKENS):
    """unit_correlations over a text of any length (a validation split): the model reads it in one
    pass, the state carried (lab.instruments.introspect.trace_chunks), and only running sums are kept."""
    token_texts = [tokenizer.decode([i]) for i in encode_text(tokenizer, text, "text")]
    features = _varying(token_texts, features)
    if not features:
        raise LabError("text: no feature of the text varies on it; use a longer text")
    y = feature_matrix(token_texts, features)  # (T, F) over the whole text: context features need it all
    sums, start = {}, 0
    for chunk in trace_chunks(model, tokenizer, text, chunk_tokens):
        T = len(chunk.token_ids)
        for l, gates in enumerate(chunk.layers):
            for g, values in gates.items():
                sums.setdefault((l, g), CorrelationSums()).add(values, y[start : start + T])
        start += T
    return _table(sums, features)


def strongest_per_feature(table):
    """The row of each feature's strongest unit (largest |r|), strongest feature first."""
    best = table.loc[table.groupby("feature", sort=False)["abs_correlation"].idxmax()]
    return best.sort_values("abs_correlation", ascending=False, kind="stable").reset_index(drop=True)


def unit_gallery(table, k=6):
    """Karpathy's gallery: up to k rows of `table`, one per feature, each feature with the unit that
    tracks it most strongly, strongest first, and no unit twice (a unit that tracks two features
    is shown for the one it tracks best, and the other feature gets its next best unit)."""
    ranked = table.sort_values("abs_correlation", ascending=False, kind="stable")
    taken_features, taken_units, rows = set(), set(), []
    for row in ranked.itertuples(index=False):
        unit = (row.layer, row.gate, row.unit)
        if row.feature in taken_features or unit in taken_units:
            continue
        taken_features.add(row.feature)
        taken_units.add(unit)
        rows.append(row)
        if len(rows) == k:
            break
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def rank_units(trace, signal, k=5, layers=None):
    """The k units (over every gate of `layers`, None: all) whose activation best tracks a per-token
    signal (T,), by |Pearson r|: DataFrame with layer, gate, unit, correlation, abs_correlation."""
    y = np.asarray(signal, np.float64)[:, None]  # (T, 1)
    layers = range(len(trace.layers)) if layers is None else layers
    table = _table(
        {(l, g): CorrelationSums().add(trace.gate(l, g), y) for l in layers for g in trace.gate_names[l]}, ["signal"]
    )
    table = table.sort_values("abs_correlation", ascending=False, kind="stable").head(k)
    return table.drop(columns="feature").reset_index(drop=True)


def top_units(trace, feature, layer=0, gate="h", k=5):
    """The k units of one gate whose activation best tracks a feature, by |Pearson r|.

    Returns a DataFrame (k rows): unit, correlation (signed), abs_correlation.
    ValueError when the feature is constant on this text (no correlation exists).
    """
    values = trace.gate(layer, gate)  # (T, H)
    y = feature_values(trace.token_texts, feature)  # (T,)
    if np.ptp(y) == 0:
        raise LabError(
            f"feature: {feature!r} ({FEATURES[feature].description}) is constant on this text; "
            "choose a text where it varies"
        )
    r = pearson(values, y)  # (H,)
    units = np.argsort(-np.abs(r), kind="stable")[:k]
    return pd.DataFrame({"unit": units, "correlation": r[units], "abs_correlation": np.abs(r[units])})


def span_mask(n_tokens, start, end):
    """1 on tokens start..end-1, 0 elsewhere -> (T,); ValueError unless 0 <= start < end <= T and
    some token lies outside the span (a span that is the whole text stands out from nothing)."""
    if not 0 <= start < end <= n_tokens:
        raise LabError(f"span: tokens {start}..{end - 1} must lie inside the text's tokens 0..{n_tokens - 1}")
    if end - start == n_tokens:
        raise LabError(f"span: tokens {start}..{end - 1} are the whole text: leave some of it outside the span")
    mask = np.zeros(n_tokens)
    mask[start:end] = 1.0
    return mask


def span_units(trace, start, end, k=5, layers=None):
    """LSTMVis's pattern selection: the k units that stand out while tokens start..end-1 are read,
    ranked by |r| with the span (1 inside, 0 outside; the point-biserial correlation, which is the
    difference of the means inside and outside in units of the unit's spread). Adds the mean value
    inside and outside the span. -> DataFrame: layer, gate, unit, correlation, abs_correlation,
    mean_inside, mean_outside."""
    mask = span_mask(len(trace.token_ids), start, end)
    found = rank_units(trace, mask, k=k, layers=layers)
    values = [trace.gate(l, g)[:, u] for l, g, u in zip(found.layer, found.gate, found.unit)]
    found["mean_inside"] = [float(v[mask == 1].mean()) for v in values]
    found["mean_outside"] = [float(v[mask == 0].mean()) for v in values]
    return found


def unit_order(values, order="index", signal=None):
    """The order of a heatmap's rows: a permutation (H,) of the units of one gate, values (T, H).

    order (registry UNIT_ORDERS): "index" 0..H-1; "feature" by |Pearson r| with `signal` (T,), largest
    first, so the units most tied to a feature sit on top, however many rows are shown; "similarity"
    the leaf order of an average-linkage clustering of the units by correlation
    distance 1 - r, so units that rise and fall together sit side by side (a constant unit is
    uncorrelated with every other).
    """
    if order not in UNIT_ORDERS:
        raise LabError(f"order: unknown unit order {order!r}; valid orders are {list(UNIT_ORDERS)}")
    H = values.shape[1]
    if order == "index" or H < 2:
        return np.arange(H)
    if order == "feature":
        if signal is None or np.ptp(signal) == 0:
            raise LabError(
                "order: the feature is constant on this text, so it cannot order the units; "
                "choose another feature or order"
            )
        return np.argsort(-np.abs(pearson(values, signal)), kind="stable")
    # imported here, for this order only: scipy's clustering package takes a second or more to import
    # on a busy CPU, which every first visit to a page that reads units would otherwise wait for
    from scipy.cluster.hierarchy import leaves_list, linkage

    x = np.asarray(values, np.float64)
    x = x - x.mean(0)
    norms = np.sqrt((x**2).sum(0))
    z = x / np.where(norms > _MIN_STD, norms, np.inf)  # (T, H) unit-norm columns, constant ones all 0
    distance = np.clip(1.0 - z.T @ z, 0.0, 2.0)  # (H, H)
    condensed = distance[np.triu_indices(H, 1)]  # the upper triangle, as scipy's pdist orders it
    return leaves_list(linkage(condensed, method="average"))
