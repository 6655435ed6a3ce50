"""What the Sample page shows beside its samples: the page's default settings and the sampling settings
of each column, a checkpoint's last validation loss and the repetition report in words
(lab.instruments.sampling computes them). The strategies' titles, which the reading lessons show too,
are ui.shared.samples'."""

from lab.instruments.sampling import SamplingConfig
from lab.schema import declared_settings
from lab.words import count

SAMPLING = declared_settings(SamplingConfig)  # each sampling setting as declared: its bounds, default and names
# the Sample page's settings before a student changes any (its link leaves them out): the sampler's declared
# defaults; ui.app.warm_up samples with them before the server opens
DEFAULTS = {
    "model": "char-gru-torch_latest",
    "prompt": "ROMEO:\n",
    "tokens": SAMPLING["max_new_tokens"].default,
    "seed": SAMPLING["seed"].default,
    "temperature": SAMPLING["temperature"].default,
    "top_k": SAMPLING["top_k"].default,
    "top_k_temperature": SAMPLING["temperature"].default,
    "top_p": SAMPLING["top_p"].default,
    "top_p_temperature": SAMPLING["temperature"].default,
    "stateless": SAMPLING["strategy"].default,
    "drove": SAMPLING["strategy"].default,
    "drove_token": 40,
    "typed": "But, soft! what light through yonder window br",
}


def strategy_config(settings, strategy, stateful=True):
    """The SamplingConfig of one column of the Sample page: `settings` maps the page's setting names
    (those of DEFAULTS) to their values."""
    by_strategy = {
        "greedy": {},
        "temperature": {"temperature": settings["temperature"]},
        "top_k": {"top_k": settings["top_k"], "temperature": settings["top_k_temperature"]},
        "top_p": {"top_p": settings["top_p"], "temperature": settings["top_p_temperature"]},
    }[strategy]
    common = {"max_new_tokens": int(settings["tokens"]), "seed": int(settings["seed"])}
    return SamplingConfig(strategy=strategy, stateful=stateful, **common, **by_strategy)


def repetition_markdown(report):
    """lab.instruments.sampling.repetition_report as a few Markdown lines."""

    def quoted(text, limit=60):
        text = text if len(text) <= limit else text[:limit] + "…"
        return "`" + text.replace("`", "'").replace("\n", "↵") + "`"

    lines = []
    if report["ends_in_cycle"]:
        lines.append(
            f"- **ends in a loop**: a period of {count(report['cycle_period'], 'character')}, repeated "
            f"{report['cycle_repeats']:.1f}× at the end: {quoted(report['cycle'])}"
        )
    else:
        lines.append("- does not end in a loop")
    if report["top_line_count"] > 1:
        lines.append(f"- most repeated line ({report['top_line_count']}×): {quoted(report['top_line'])}")
    lines.append(f"- longest repeated passage: {count(report['longest_repeat_chars'], 'character')}")
    lines.append(f"- {report['repeat_share']:.0%} of the words sit in a 4-word sequence that occurs twice or more")
    return "\n".join(lines)
