"""Numbers and lists in a student's words, with the precision that keeps a figure true: a keep factor
of σ(8) = 0.99966 is not "1.000", and a half-life is written the same way wherever it appears."""

import math

from lab.errors import LabError


def share_kept(x):
    """A keep factor in [0, 1] with enough decimals that both it and what it loses (1 − x) show two
    significant digits, at least three decimals: 0.731, 0.99966, 0.119."""
    if not 0 <= x <= 1 or math.isnan(x):
        raise LabError(f"share: must be in [0, 1], got {x!r}")
    decimals = 3
    for part in (x, 1 - x):
        if 0 < part < 1:
            decimals = max(decimals, 1 - math.floor(math.log10(part)))
    decimals = min(decimals, 12)  # beyond float64's reach for 1 − x
    return f"{x:.{decimals}f}"


def beside(x, threshold, decimals=2):
    """`x` beside a rule's `threshold`, with the fewest decimals (at least `decimals`) at which it still
    rounds to the side of the threshold it is on: an R² of 0.8996 beside "R² ≥ 0.9" is "0.8996", never
    "0.90"; a factor of 0.99996 beside 1 is "0.99996", never "1.000"."""
    if math.isnan(x) or math.isinf(x):
        return f"{x}"
    for d in range(decimals, 13):
        shown = f"{x:.{d}f}"
        if (float(shown) >= threshold) == (x >= threshold):
            return shown
    return repr(x)


def steps(x):
    """A number of steps (a time constant, a half-life) with its noun: one decimal below 10, whole steps
    with thousands separators above ("0.3 steps", "2.2 steps", "47 steps", "2,067 steps"), "for ever" when
    infinite. Never "1 steps": a figure below 10 keeps its decimal ("1.0 steps" reads right) and a whole
    one is at least 10."""
    if math.isinf(x):
        return "for ever"
    return f"{x:.1f} steps" if x < 9.95 else f"{x:,.0f} steps"


def steps_figure(x):
    """The same figure without its noun, for a table column that names the unit: "2.2", "2,067"."""
    return steps(x).removesuffix(" steps")


def power(x):
    """A small or large factor in scientific notation the way a student writes it: 1.8 × 10⁻⁸; plain
    decimals between 0.001 and 1000."""
    if x == 0 or math.isinf(x) or math.isnan(x):
        return f"{x:g}"
    if 1e-3 <= abs(x) < 1e3:
        return f"{x:.3g}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPTS)}"


SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
