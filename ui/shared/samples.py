"""A sample as the Sample page and the reading lessons show it: each sampling strategy's title, and the
mean of a sample's per-token figures (entropy, the chosen token's probability)."""

import numpy as np

STRATEGY_TITLES = {"greedy": "Greedy", "temperature": "Temperature", "top_k": "Top-k", "top_p": "Top-p (nucleus)"}


def mean(values):
    return float(np.mean(values)) if len(values) else float("nan")
