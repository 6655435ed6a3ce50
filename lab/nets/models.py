"""The seeds' model families over the recurrent cells, with one contract.

Glossary: B batch, T time, E embedding, H hidden, V vocabulary, C classes.

Every model answers

    logits, loss, state = model(idx, targets=None, state=None, trace=None)

so one trainer, one sampler and one introspection path serve them all. `loss`
is None without targets; `state` is explicit and can be carried; `trace` is a
list with one dict per recurrent layer, filled with gate activations and the
layer's input "x".

Families (registry `MODEL_FAMILIES`, keyed by the config's `family`):
    lm            embedding -> stacked cells -> dropout -> LayerNorm -> linear (seeds 000, 002)
    classifier    pixel sequence -> cells -> final state -> linear (seed 003)
    scan_markov   seed 004's ScanMarkov: positional embedding, gated scan, tied decoder
"""

import copy
import dataclasses
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import Field

from lab.errors import LabError
from lab.nets.backends import check_cell, default_backend, default_scan_mode, make_layer, to_reference_layer
from lab.nets.cells import SCAN_MODES, RecurrentStack, ScanLayer
from lab.nets.cost import check_model_size
from lab.nets.families import CELLS, FAMILIES
from lab.nets.randomness import Dropout, initialise, seeded_build
from lab.schema import CLASSROOM, Fraction, Names, PageRange, PositiveInt, config, declare

NORMS = ("every", "last")


ScanMode = Literal[tuple(SCAN_MODES)]
# chrono initialisation's T_max: the longest dependency its keep gates are drawn to span. Up to a million
# steps (the lab's sequences are at most 4096); past 2**63 PyTorch's arithmetic raises OverflowError
ChronoTmax = Optional[Annotated[int, Field(ge=3, le=10**6)]]
# an initial keep-gate bias: sigmoid(±30) is 1 or 0 in float32, so nothing beyond means more
KeepBias = Annotated[float, Field(ge=-30, le=30)]


@config
class LMConfig:
    """A recurrent language model (character or subword)."""

    family: ClassVar[str] = "lm"
    cell: str = "gru_torch"  # a family's id (lab.nets.families.FAMILIES): rnn, gru_seed, gru_torch, lstm, ...
    backend: str = "fast"  # key of lab.nets.backends.BACKENDS: "reference", "fast" or "fused" (torch.nn)
    vocab_size: PositiveInt = 65  # set from the tokenizer when training
    # the sizes and rates a student sets, each declared once: the command line's options, the Train page's
    # widgets and its URL read them (lab.schema.declared_settings); "emb", not "embed": Streamlit reserves ?embed=
    embed_dim: declare(
        int,
        "The token embedding's width E",
        Names(url="emb", label="Embedding width E", page=PageRange(1, 2048, CLASSROOM)),
        ge=1,
    ) = 64
    hidden_size: declare(
        int,
        "Recurrent units per layer H",
        Names(url="hidden", label="Hidden units H", page=PageRange(1, 4096, CLASSROOM)),
        ge=1,
    ) = 256
    num_layers: declare(
        int, "Stacked recurrent layers", Names(url="layers", label="Layers", page=PageRange(1, 8, CLASSROOM)), ge=1
    ) = 1
    dropout: declare(
        float,
        "Dropout between layers and before the head, while training",
        Names(url="dropout", label="Dropout", page=PageRange(0.0, 0.9, "a number box needs a largest value below 1")),
        ge=0,
        lt=1,
    ) = 0.0
    embed_dropout: declare(float, "Dropout on the token embeddings, while training", ge=0, lt=1) = 0.0  # AWD-LSTM's
    weight_dropout: declare(
        float, "DropConnect on each layer's hidden-to-hidden weights, one mask per sequence, while training", ge=0, lt=1
    ) = 0.0
    norm: Literal[NORMS] = "last"  # "last": one LayerNorm before the head (seed 002); "every": after every layer
    keep_bias: KeepBias = 1.0  # initial keep-gate bias: retention sigmoid(1) = 0.73 (seed 003); LSTM forget bias
    # (finite, as every float in a config: inf or NaN would shut every keep gate from step 1)
    chrono_tmax: ChronoTmax = None  # chrono initialisation of keep gates, b ~ log U[1, T_max-1]
    scan_mode: ScanMode = "parallel"  # cells run as a scan: "parallel" (associative) or "sequential" loop

    def __post_init__(self):
        check_cell(self.cell, self.backend)
        if self.weight_dropout and not FAMILIES[self.cell].gates_read_state:
            raise LabError(
                f"weight_dropout: the {FAMILIES[self.cell].name} has no hidden-to-hidden weight matrix to drop; "
                "use dropout instead"
            )


@config
class ClassifierConfig:
    """A sequence classifier reading the final state (seed 003: pixels in, class out)."""

    family: ClassVar[str] = "classifier"
    cell: str = "gru_torch"
    backend: str = "fused"  # seed 003 trains nn.GRU for speed
    input_size: PositiveInt = 1  # features per time step (1 grey pixel)
    hidden_size: PositiveInt = 181  # H = 181 gives seed 003's 101,732 parameters
    num_layers: PositiveInt = 1
    num_classes: PositiveInt = 10
    dropout: Fraction = 0.0
    keep_bias: KeepBias = 1.0  # seed 003 baseline: update-gate bias +1
    chrono_tmax: ChronoTmax = None
    scan_mode: ScanMode = "parallel"

    def __post_init__(self):
        check_cell(self.cell, self.backend)


@config
class ScanMarkovConfig:
    """Seed 004's ScanMarkov model: a character model over a selective scan."""

    family: ClassVar[str] = "scan_markov"
    cell: ClassVar[str] = "scan"  # its one recurrent layer, so every config names its cell
    vocab_size: PositiveInt = 65
    embed_dim: PositiveInt = 128  # token and positional embedding width (= scan width)
    gate_hidden: PositiveInt = 512  # gate MLP 128 -> 512 -> 256
    decoder_hidden: PositiveInt = 512  # decoder MLP 128 -> 512 -> 128
    max_positions: PositiveInt = 16  # positional table; later positions reuse the last entry
    dropout: Fraction = 0.0
    scan_mode: ScanMode = "parallel"


def _loss(logits, targets, label_smoothing):
    if targets is None:
        return None
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), label_smoothing=label_smoothing)


def _stacked_layers(c, input_size):
    """c.num_layers layers of c.cell, the first reading `input_size` features, each next its hidden state."""
    return [
        make_layer(c.cell, n, c.hidden_size, c.backend, c.keep_bias, c.chrono_tmax, c.scan_mode)
        for n in [input_size] + [c.hidden_size] * (c.num_layers - 1)
    ]


def embedding(count, dim):
    """nn.Embedding(count, dim), drawn N(0, 1) as PyTorch draws it, except on the meta device (the
    shapes-only skeleton a checkpoint loads into), where nothing is drawn: PyTorch's normal_ there
    imports its compiler stack, 1.1 s of the first checkpoint a server loads."""
    weight = torch.empty(count, dim)
    if not weight.is_meta:
        nn.init.normal_(weight)
    return nn.Embedding.from_pretrained(weight, freeze=False)


class RecurrentLM(nn.Module):
    """embedding -> stacked cells -> dropout -> LayerNorm -> linear to vocabulary.

    idx (B, T) token ids -> logits (B, T, V). With norm="every" a LayerNorm also
    sits between layers (Scribe's reading, see lab.training.presets).
    """

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config
        c = config
        self.embedding = embedding(c.vocab_size, c.embed_dim)
        self.rnn = RecurrentStack(
            _stacked_layers(c, c.embed_dim),
            c.dropout,
            norm_between_layers=c.norm == "every",
            weight_dropout=c.weight_dropout,
        )
        self.embed_dropout = Dropout(c.embed_dropout)
        self.dropout = Dropout(c.dropout)
        self.ln_f = nn.LayerNorm(c.hidden_size)
        self.head = nn.Linear(c.hidden_size, c.vocab_size)

    def forward(self, idx, targets=None, state=None, trace=None, label_smoothing=0.0):
        x = self.embed_dropout(self.embedding(idx))  # (B, T, E)
        x, state = self.rnn(x, state, trace)  # (B, T, H)
        logits = self.head(self.ln_f(self.dropout(x)))  # (B, T, V)
        return logits, _loss(logits, targets, label_smoothing), state


class SequenceClassifier(nn.Module):
    """x (B, T, input_size) -> cells -> last output h_T -> linear -> logits (B, C)."""

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        c = config
        self.rnn = RecurrentStack(_stacked_layers(c, c.input_size), c.dropout)
        self.head = nn.Linear(c.hidden_size, c.num_classes)

    def forward(self, x, targets=None, state=None, trace=None, label_smoothing=0.0):
        out, state = self.rnn(x, state, trace)  # (B, T, H)
        logits = self.head(out[:, -1])  # (B, C)
        return logits, _loss(logits, targets, label_smoothing), state


class ScanMarkov(nn.Module):
    """Seed 004's ScanMarkov model, architecture as published:

        e_t = embed(token_t) + pos_embed(t)                     128
        [A_t, B_t] = sigmoid(gate(e_t))                         gate 128 -> 512 (GELU) -> 256
        h_t = A_t * h_{t-1} + B_t * e_t                         lab.nets.cells.ScanLayer
        logits_t = embed.weight @ decode(LayerNorm(h_t)) + b    decoder 128 -> 512 (GELU) -> 128, tied

    Logits come out at every position, so a window of T characters trains all
    2..(T+1)-gram contexts at once; seed 004's mixed 2-5-gram training is T = 4.
    The state is (h, position of the next token): positions past the table
    reuse its last entry (our choice; the seed does not say). The output bias
    (V values) is ours too; the published count "~340K" leaves room for it.
    """

    def __init__(self, config: ScanMarkovConfig):
        super().__init__()
        self.config = config
        c = config
        self.embedding = embedding(c.vocab_size, c.embed_dim)
        self.pos_embedding = embedding(c.max_positions, c.embed_dim)
        self.scan = ScanLayer(c.embed_dim, c.embed_dim, gate_hidden=c.gate_hidden, scan_mode=c.scan_mode)
        self.ln = nn.LayerNorm(c.embed_dim)
        self.decoder = nn.Sequential(
            nn.Linear(c.embed_dim, c.decoder_hidden), nn.GELU(), nn.Linear(c.decoder_hidden, c.embed_dim)
        )
        self.dropout = Dropout(c.dropout)
        self.out_bias = nn.Parameter(torch.zeros(c.vocab_size))

    def reset_parameters(self, generator=None):
        for child in self.children():
            initialise(child, generator)
        nn.init.zeros_(self.out_bias)

    def forward(self, idx, targets=None, state=None, trace=None, label_smoothing=0.0):
        h, start = state if state is not None else (None, 0)
        T = idx.size(1)
        pos = torch.arange(start, start + T, device=idx.device).clamp(max=self.config.max_positions - 1)
        e = self.embedding(idx) + self.pos_embedding(pos)  # (B, T, E)
        if trace is not None:
            trace[0]["x"] = e  # the scan's input, as RecurrentStack records each layer's
        hs, h = self.scan(e, h, None if trace is None else trace[0])  # (B, T, E)
        z = self.decoder(self.dropout(self.ln(hs)))  # (B, T, E)
        logits = F.linear(z, self.embedding.weight, self.out_bias)  # (B, T, V)
        return logits, _loss(logits, targets, label_smoothing), (h, start + T)


MODEL_FAMILIES = {
    "lm": (LMConfig, RecurrentLM),
    "classifier": (ClassifierConfig, SequenceClassifier),
    "scan_markov": (ScanMarkovConfig, ScanMarkov),
}


def build_model(config, seed=None):
    """Instantiate the model for a config dataclass; CostError (a ValueError) first when it
    has more parameters than this server allows (lab.nets.cost), so nothing huge is ever allocated.
    With `seed`, its initial weights are a function of the seed alone (lab.nets.randomness.seeded_build);
    without, they come from torch's generator as it stands (a file's weights replace them)."""
    check_model_size(config)
    model_class = MODEL_FAMILIES[config.family][1]
    return model_class(config) if seed is None else seeded_build(lambda: model_class(config), seed)


def config_to_dict(config):
    return {"family": config.family, **dataclasses.asdict(config)}


LEGACY_BACKENDS = {
    "scratch": "fast"
}  # checkpoints saved before the reference/fast split name the fast kernels "scratch"


def config_from_dict(data):
    """Rebuild a config from `config_to_dict` output; unknown families or fields raise LabError."""
    data = dict(data)
    if isinstance(data.get("backend"), str) and data["backend"] in LEGACY_BACKENDS:  # a list is not hashable
        data["backend"] = LEGACY_BACKENDS[data["backend"]]
    family = data.pop("family", None)
    if not isinstance(family, str) or family not in MODEL_FAMILIES:  # a list from JSON is not even hashable
        raise LabError(f"family: unknown model family {family!r}; valid families are {sorted(MODEL_FAMILIES)}")
    return MODEL_FAMILIES[family][0](**data)  # lab.schema checks every field's type and bounds


@contextmanager
def evaluating(model):
    """Eval mode (no dropout) for the block, then the caller's training mode again."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def recurrent_layers(model):
    """The model's recurrent layers, in order."""
    return [model.scan] if isinstance(model, ScanMarkov) else list(model.rnn.layers)


def conventions(model):
    """One line per distinct cell convention used by the model."""
    return sorted({FAMILIES[layer.cell].convention for layer in recurrent_layers(model)})


def to_reference(model):
    """`model` computed by the reference cells of lab/nets/cells.py (same function, same weights):
    the model itself when it already is, else a copy whose fast or fused layers are replaced.
    Introspection runs this, so a trace is the readable code's own."""
    if all(type(layer) is CELLS[layer.cell] for layer in recurrent_layers(model)):
        return model
    twin = copy.deepcopy(model)
    for l, layer in enumerate(twin.rnn.layers):
        twin.rnn.layers[l] = to_reference_layer(layer)
    return twin


def for_device(model, device):
    """A copy of a language model computed the fastest measured way on `device` (the backend and, for
    the scan, the loop or the parallel form): the same function and weights. A model trained on a GPU
    with cuDNN is shipped so for CPUs."""
    config = model.config
    if config.family != "lm":
        return model
    fastest = dataclasses.replace(
        config, backend=default_backend(config.cell, device), scan_mode=default_scan_mode(device)
    )
    p, reference_model = next(model.parameters()), to_reference(model)
    twin = build_model(fastest).to(p.device, p.dtype)
    twin.load_state_dict(
        {k: v for k, v in reference_model.state_dict().items() if not k.startswith("rnn.layers.")}, strict=False
    )  # the embedding, norms and head; the layers below
    for layer, reference in zip(twin.rnn.layers, reference_model.rnn.layers):
        if hasattr(layer, "load_reference"):  # a torch.nn layer
            layer.load_reference(reference)
        else:  # the fast and reference cells share their parameters' names
            layer.load_state_dict(reference.state_dict())
    return twin.train(model.training)


# float32 weights above this outgrow a CPU's caches (a 2-core cloud VM's L3 holds 32 MB): sampling one token at a time
# then reads them all from memory at every token, and int8 weights read a quarter of the bytes
INT8_SAMPLING_BYTES = 64 << 20


def for_sampling(model):
    """The model that generates text one token at a time on a CPU: `model` itself, or where its float32 weights
    outgrow the caches (INT8_SAMPLING_BYTES), with the torch.nn LSTM's and the output layer's matrices in int8
    (PyTorch's dynamic quantization; the activations stay float). The Leviathan-LSTM samples about 16x faster so
    on 2 cores, and its loss moves by 0.002 nats/char (BENCHMARKS.md). Smaller models are returned as they are; a
    cell with no torch.nn kernel keeps its float32 matrices (only its output layer turns int8)."""
    on_cpu = next(model.parameters()).device.type == "cpu"  # a GPU reads its weights fast enough
    if not on_cpu or sum(p.numel() * 4 for p in model.parameters()) <= INT8_SAMPLING_BYTES:
        return model
    model = for_device(model, "cpu").eval()  # the LSTM's torch.nn kernel, which quantize_dynamic converts
    with warnings.catch_warnings():  # torch.ao.quantization says it is deprecated (for torchao, which has no LSTM)
        warnings.simplefilter("ignore")
        try:
            from torch.ao.quantization import quantize_dynamic
        except ImportError:  # a PyTorch without it: the float32 weights, slower
            return model
        return quantize_dynamic(model, {nn.LSTM, nn.Linear}, dtype=torch.qint8)


@dataclass
class ModelSummary:
    """Seed 002's model summary: parameter breakdown, total, size, and cell convention."""

    name: str
    family: str
    conventions: list
    rows: list  # (parameter name, shape, count)
    total: int
    size_mb: float  # float32 bytes / 2**20, as seed 002 reports

    def format(self):
        width = max([len(r[0]) for r in self.rows] + [20])
        lines = [
            "=" * (width + 40),
            f"{self.name or self.family} MODEL SUMMARY",
            "=" * (width + 40),
            f"Family           : {self.family}",
        ]
        lines += [f"Cell convention  : {c}" for c in self.conventions]
        lines += [
            f"Trainable params : {self.total:,}",
            f"Model size       : {self.size_mb:.2f} MB",
            "",
            "PARAMETER BREAKDOWN",
            "-" * (width + 40),
        ]
        lines += [f"{name:{width}s}  {str(tuple(shape)):>16s}  {count:>12,}" for name, shape, count in self.rows]
        lines.append("=" * (width + 40))
        return "\n".join(lines)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def model_summary(model, name=""):
    rows = [(n, tuple(p.shape), p.numel()) for n, p in model.named_parameters() if p.requires_grad]
    total = sum(r[2] for r in rows)
    return ModelSummary(
        name=name,
        family=model.config.family,
        conventions=conventions(model),
        rows=rows,
        total=total,
        size_mb=total * 4 / 2**20,
    )
