"""The seeds' model families as named presets (registry `PRESETS`).

A preset is a model config plus the tokenizer and training recipe its seed
used. Parameter counts are part of the specification: tests check every
`expected_params` exactly.

Scribe (seed 000) is specified by its equations and a table of counts. At
vocabulary 1000, with an untied output layer with bias, the embedding, the
weight matrices and the head of Scribe-alpha hold 1,073,128 parameters; the
published 1,075,688 leaves 2,560 = 5*H per layer (likewise for beta and gamma).
Two readings give 5*H: (a) one bias per gate (b_r, b_z, b_h: 3H) plus a
LayerNorm (gain and bias: 2H) after every recurrent layer; (b) five bias
vectors per layer and no LayerNorm. We choose (a) because it is what the seeds
write down: seed 001 A.2 gives exactly one bias per gate, and seed 002's model
normalises the recurrent output with LayerNorm before the head. Reading (b)
matches no equation in any seed (PyTorch's GRU has six bias vectors, not five).
"""

from dataclasses import dataclass, field

from lab.errors import LabError
from lab.nets.models import ClassifierConfig, LMConfig, ScanMarkovConfig
from lab.training.train import TrainConfig
from lab.words import count


@dataclass(frozen=True)
class Preset:
    name: str
    seed: str  # which design document it reproduces
    description: str
    model: object  # LMConfig | ClassifierConfig | ScanMarkovConfig
    tokenizer: str = "char"  # "char" or "sentencepiece" (lab.data.TOKENIZERS); "" for pixels
    tokenizer_options: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)  # the recipe: lab.training.train.TrainConfig fields
    seed_epochs: int = None  # the seed's epochs: what `python -m lab train --epochs` trains when given no number
    expected_params: int = None  # the seed's published count, checked by tests
    task: str = "lm"  # key of lab.training.tasks.TASKS: "lm" (windows of text) or "ngram" (seed 004's n-gram samples)
    steps_per_epoch: int = None  # the seed's own epoch when it is a fixed number of steps; None: one pass

    def train_config(self, **overrides):
        """The preset's recipe as a TrainConfig, with `overrides` (e.g. a budget) on top."""
        return TrainConfig(**{**self.train, **overrides})

    def epoch_budget(self, epochs):
        """TrainConfig budget fields for `epochs` of this seed's epochs (a pass over the training
        split, or seed 002's 200 batches)."""
        if self.steps_per_epoch:
            return {"max_steps": round(epochs * self.steps_per_epoch), "max_epochs": None}
        return {"max_steps": None, "max_epochs": epochs}


def _scribe(name, layers, hidden, embed, dropout, lr, epochs, params):
    return Preset(
        name=name,
        seed="000",
        description=f"Scribe subword GRU, {count(layers, 'layer')}, H={hidden}, E={embed} (SentencePiece vocab 1000)",
        model=LMConfig(
            cell="gru_seed",
            vocab_size=1000,
            embed_dim=embed,
            hidden_size=hidden,
            num_layers=layers,
            dropout=dropout,
            norm="every",
        ),
        tokenizer="sentencepiece",
        tokenizer_options={"vocab_size": 1000, "model_type": "bpe"},
        train={"lr": lr, "weight_decay": 0.01, "block_size": 64},
        seed_epochs=epochs,
        expected_params=params,
    )


def _astra(name, layers, hidden, embed, lr, description, dropout=0.1, weight_decay=0.01, batch_size=64):
    return Preset(
        name=name,
        seed="000/002",
        description=description,
        model=LMConfig(cell="gru_torch", embed_dim=embed, hidden_size=hidden, num_layers=layers, dropout=dropout),
        train={"lr": lr, "weight_decay": weight_decay, "batch_size": batch_size, "block_size": 64},
    )


PRESETS = {
    p.name: p
    for p in [
        _scribe("scribe-alpha", 2, 256, 128, 0.10, 2e-3, 10, 1_075_688),
        _scribe("scribe-beta", 3, 512, 256, 0.10, 1.5e-3, 15, 5_102_056),
        _scribe("scribe-gamma", 4, 768, 384, 0.15, 1e-3, 20, 14_439_400),
        # alpha's weight decay and batch size come from a sweep of 5-minute runs (benchmarks/astra_sweep.py,
        # BENCHMARKS-HISTORY.md): in 5 minutes it reads each character of 1 MB ~13 times and over-fits at weight decay
        # 0.01; B=32 gives it twice the steps for ~15% fewer tokens/s; dropout 0.1-0.2 did not help further
        _astra(
            "astra-alpha",
            1,
            256,
            64,
            3e-3,
            "Astra character GRU, small: trains usefully on 2 CPU cores in a minute",
            dropout=0.0,
            weight_decay=0.1,
            batch_size=32,
        ),
        _astra("astra-beta", 2, 384, 128, 2e-3, "Astra character GRU, medium: a few minutes on CPU"),
        _astra("astra-gamma", 3, 512, 192, 1.5e-3, "Astra character GRU, large: meant for a GPU"),
        # seed 002's recipe: AdamW lr 1e-3, weight decay 0.01, CosineAnnealingLR over 6 epochs of 200 batches of
        # 64 x 128 characters, clip 1.0. Its count is at Tiny Shakespeare's 65 characters (one bias per gate)
        Preset(
            name="leviathan-lstm",
            seed="002",
            description="Leviathan-LSTM: 3-layer character LSTM, E=768, H=1024 (the Leviathan notebook; GPU-sized)",
            model=LMConfig(cell="lstm", embed_dim=768, hidden_size=1024, num_layers=3, dropout=0.2, norm="last"),
            train={"lr": 1e-3, "weight_decay": 0.01, "batch_size": 64, "block_size": 128},
            seed_epochs=6,
            steps_per_epoch=200,
            expected_params=24_248_129,
        ),
        Preset(
            name="seq-cifar-gru",
            seed="003",
            description="The gate-bias study's sequential-CIFAR GRU: 1 layer, H=181, 1 pixel per step, 10 classes",
            model=ClassifierConfig(),
            tokenizer="",
            train={"lr": 5e-4, "min_lr": 1e-5, "weight_decay": 0.01, "batch_size": 128},
            seed_epochs=40,
            expected_params=101_732,
        ),
        # seed 004's recipe: mixed 2-5-gram samples, AdamW + cosine, batch 256, label smoothing 0.1, 10 epochs.
        # Contexts are at most 4 characters, so the positional table has 4 entries: a longer prompt at
        # sampling time reuses position 3's (trained) entry rather than untrained ones
        Preset(
            name="scan-markov",
            seed="004",
            description="The ScanMarkov design's model: gated linear recurrence over 1-4 characters of context (~340K "
            "parameters), trained on mixed 2-5-gram samples",
            model=ScanMarkovConfig(max_positions=4),
            task="ngram",
            train={"lr": 1e-3, "weight_decay": 0.01, "batch_size": 256, "block_size": 4, "label_smoothing": 0.1},
            seed_epochs=10,
        ),
        Preset(
            name="scan-markov-windows",
            seed="004",
            description="The lab's own ScanMarkov variant: the same gated scan trained on 16-character windows, "
            "every position predicting the next (2- to 17-grams at once)",
            model=ScanMarkovConfig(),
            train={"lr": 1e-3, "weight_decay": 0.01, "batch_size": 256, "block_size": 16, "label_smoothing": 0.1},
        ),
    ]
}


def get_preset(name):
    if name not in PRESETS:
        raise LabError(f"preset: unknown preset {name!r}; valid presets are {sorted(PRESETS)}")
    return PRESETS[name]
