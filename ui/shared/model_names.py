"""What a student reads for each model: one name per model, the same on every page, and one sentence that
says what it is, computed from its own file wherever it is shown.

The lab's own names stay what widgets, links and files hold: a bundled file's "char-lstm_latest", a
preset's "scribe-alpha", a run's "gru_torch-e64-h256x1-1" (ui.train.settings.default_run_name). The pages
show them through `model_title` and friends, never raw:

    char-lstm_latest                      -> Character LSTM
    scribe-alpha_latest                   -> Scribe-α
    yours: gru_torch-e64-h256x1-1_latest  -> yours: GRU (z keeps) · 256 units · run 1
"""

import re

from lab.instruments.race import short_count
from lab.nets.cost import parameter_count
from lab.nets.families import CELLS, FAMILIES
from lab.nets.models import config_from_dict
from lab.training.presets import PRESETS
from lab.words import a_or_an, count
from ui.cell_labels import cell_label

# each preset's name for students (lab.training.presets' keys stay the widgets' values and the links')
PRESET_TITLES = {
    "scribe-alpha": "Scribe-α",
    "scribe-beta": "Scribe-β",
    "scribe-gamma": "Scribe-γ",
    "astra-alpha": "Astra-α",
    "astra-beta": "Astra-β",
    "astra-gamma": "Astra-γ",
    "leviathan-lstm": "Leviathan",
    "seq-cifar-gru": "Pixel GRU",
    "scan-markov": "Four-character scan",
    "scan-markov-windows": "Window scan",
}
# the bundled files not named after a preset (scripts/build_checkpoints.py's recipes): one per cell family,
# named in its record
BUNDLED_TITLES = {f.bundled.removesuffix("_latest"): f"Character {f.name}" for f in FAMILIES.values() if f.bundled}
# lab.data's tokenizer kinds (the Train page's values, in links) -> what a student reads
TOKENIZER_LABELS = {"char": "characters", "sentencepiece": "subwords (SentencePiece)"}
# what "yours: " stands before (ui.shared.checkpoint_picker.YOURS, repeated here so that this module imports
# no page part)
YOURS = "yours: "
# what a model was trained on, by the corpus its file records (ui.train.settings.CORPUS_CHOICES' keys)
CORPORA = {
    "bundled": "the Shakespeare plays that come with this lab",
    "tiny-shakespeare": "Tiny Shakespeare",
}
_CELL = "|".join(sorted(CELLS, key=len, reverse=True))
_SCAN_PRESETS = [name for name, preset in PRESETS.items() if preset.model.family == "scan_markov"]
_SCAN_PRESET = "|".join(sorted(_SCAN_PRESETS, key=len, reverse=True))
# ui.train.settings.default_run_name's two forms, then "-N": a run named automatically
_LM_RUN = re.compile(rf"(?P<cell>{_CELL})-e(?P<emb>\d+)-h(?P<hidden>\d+)x(?P<layers>\d+)-(?P<n>\d+)")
_SCAN_RUN = re.compile(rf"(?P<preset>{_SCAN_PRESET})-e(?P<emb>\d+)-(?P<n>\d+)")
_VERSION = re.compile(r"(?P<name>.+)_v(?P<version>\d+)")


def run_title(name):
    """A run's name as a student reads it: an automatic one ("gru_torch-e64-h256x1-1") in words ("GRU (z
    keeps) · 256 units · run 1"), a name the student typed as it is; "_latest" dropped, "_v2" as "(version 2)"."""
    name = name.removesuffix("_latest")
    versioned = _VERSION.fullmatch(name)
    if versioned:
        return f"{run_title(versioned['name'])} (version {versioned['version']})"
    lm, scan = _LM_RUN.fullmatch(name), _SCAN_RUN.fullmatch(name)
    if lm:
        return f"{_model_words(lm['cell'], int(lm['hidden']), int(lm['layers']))} · run {lm['n']}"
    if scan:
        return f"{_scan_words(scan['preset'], scan['emb'])} · run {scan['n']}"
    return name


def _model_words(cell, hidden, layers):
    width = count(hidden, "unit") if layers == 1 else f"{count(layers, 'layer')} of {count(hidden, 'unit')}"
    return f"{cell_label(cell)} · {width}"


def _scan_words(preset, width):
    return f"{PRESET_TITLES[preset]} · {width} wide"


def config_title(config, preset):
    """The model a run of these settings trains, as its run's name reads without the run's number
    ("GRU (z keeps) · 256 units"); `preset`: the Train page's preset (a fixed-architecture scan's name)."""
    if config.family == "scan_markov":
        return _scan_words(preset, config.embed_dim)
    return _model_words(config.cell, config.hidden_size, config.num_layers)


def bundled_title(name):
    """A bundled model's name for students ("char-lstm_latest" -> "Character LSTM")."""
    base = name.removesuffix("_latest")
    return PRESET_TITLES.get(base) or BUNDLED_TITLES.get(base) or run_title(base)


def model_title(listed):
    """A picker's value (ui.shared.checkpoint_picker.listed_name: a bundled name, or "yours: NAME") as a student
    reads it; also for a name that is no longer there (a stale link)."""
    if listed.startswith(YOURS):
        return YOURS + run_title(listed.removeprefix(YOURS))
    return bundled_title(listed)


def option_title(info):
    """A picker's option: a bundled model by its name and its parameters ("Leviathan · 24.3M": the largest take a
    moment to load when first picked; short, as a picker is a narrow column, and the sentence under it says
    "24.3M parameters"), a student's file as info_title names it."""
    if not info.bundled:
        return info_title(info)
    return f"{info_title(info)} · {short_count(parameter_count(config_from_dict(info.config)))}"


def info_title(info):
    """A listed checkpoint's name for students (lab.training.checkpoints.CheckpointInfo)."""
    return bundled_title(info.name) if info.bundled else YOURS + run_title(info.name)


def what_it_is(config, tokenizer_kind, corpus, sized=True):
    """A model in a few words, from its config: "a character LSTM of 5.1M parameters (2 layers of 640
    units), trained on the Shakespeare plays that come with this lab"; without its size where `sized` is
    False (a preset's kind, whose size the settings beside it change)."""
    params = f" of {short_count(parameter_count(config))} parameters" if sized else ""
    if config.family == "scan_markov":
        what = f"a selective scan{params} that reads up to {count(config.max_positions, 'character')} of context"
    elif config.family == "classifier":
        what = f"a {cell_label(config.cell)}{params} that reads an image one pixel per step and names it"
    else:
        reads = {"char": "character ", "sentencepiece": "subword "}.get(tokenizer_kind, "")
        cell = f"{reads}{cell_label(config.cell)}"
        layers = count(config.hidden_size, "unit")
        if config.num_layers > 1:
            layers = f"{count(config.num_layers, 'layer')} of {layers}"
        what = f"{a_or_an(cell)}{params} ({layers})" if sized else a_or_an(cell)
    if corpus in CORPORA:
        return f"{what}, trained on {CORPORA[corpus]}"
    return f"{what}, trained on a text of your own" if corpus else what


def describe_info(info):
    """ "Scribe-α: a subword GRU (z overwrites) of 1.1M parameters (2 layers of 256 units), trained on …":
    a listed checkpoint named and explained, from its header."""
    what = what_it_is(config_from_dict(info.config), info.tokenizer_kind, info.metrics.get("corpus"))
    return f"{info_title(info)}: {what}."


def describe_checkpoint(title, checkpoint):
    """The same sentence for a loaded lab.training.checkpoints.Checkpoint shown under `title`."""
    kind = checkpoint.tokenizer.kind if checkpoint.tokenizer is not None else ""
    return f"{title}: {what_it_is(checkpoint.config, kind, checkpoint.metrics.get('corpus'))}."
