"""A study's config, and the one table of command-line options that both builds `python -m lab ablation`'s
parser and writes the command line that reruns a config, so the two cannot drift apart."""

import shlex
from dataclasses import dataclass
from typing import Annotated, Literal, Optional

from pydantic import Field

from lab.data import SEQUENCE_DATASETS
from lab.errors import LabError
from lab.nets.backends import BACKENDS, check_cell
from lab.schema import Device, PositiveInt, PositiveNumber, Seed, config
from lab.training.train import DEVICES

from .model import ARMS, BACKEND_HELP, DEFAULT_BACKEND, get_arm

Seeds = Annotated[tuple[Seed, ...], Field(strict=False)]  # a list from JSON or argparse is a tuple here
Limit = Optional[PositiveInt]


@config
class AblationConfig:
    """One study: every arm trained once per seed with the same data and recipe."""

    dataset: Literal[tuple(SEQUENCE_DATASETS)] = "digits"  # "digits" (offline) or "cifar10" (download)
    size: Annotated[int, Field(ge=2, le=64)] = 32  # digits only: size x size images, T = size**2 steps (32: 1024)
    root: Optional[str] = None  # CIFAR-10 folder (default <cache dir>/cifar10)
    download: bool = False  # CIFAR-10 only: fetch the 170 MB archive when it is missing
    arms: Annotated[tuple[str, ...], Field(strict=False, min_length=1)] = ("baseline", "ablated")  # keys of ARMS
    seeds: Annotated[Seeds, Field(min_length=1)] = (0, 1, 2)  # one run per arm and seed; mean ± std over seeds
    epochs: PositiveInt = 40  # seed 003 trains 40 epochs
    backend: str = DEFAULT_BACKEND  # lab.nets.backends.BACKENDS; the default is torch.nn.GRU, as seed 003
    hidden_size: PositiveInt = 181  # H; 181 gives seed 003's 101,732 parameters (change only for quick demos)
    lr: PositiveNumber = 5e-4  # seed 003: 1e-3 spiked, 5e-4 converged
    min_lr: Annotated[float, Field(ge=0)] = 1e-5  # cosine floor (seed 003's CosineAnnealingLR eta_min), <= lr
    weight_decay: Annotated[float, Field(ge=0)] = 0.01  # AdamW's decoupled decay
    batch_size: PositiveInt = 128  # seed 003
    grad_clip: PositiveNumber = 1.0  # global gradient-norm clipping (lab.training.train's default)
    limit_train: Limit = None  # keep only the first N training sequences (quick runs)
    limit_test: Limit = None  # keep only the first N test sequences
    gate_batch: PositiveInt = 32  # the first G test sequences are traced for gate statistics every epoch
    checkpoint_seeds: Optional[Seeds] = None  # seeds whose final model is saved, per arm; None: the first
    device: Device = "auto"  # lab.training.train.resolve_device: "auto" (CUDA when available), "cpu" or "cuda"

    def __post_init__(self):
        for name in self.arms:
            get_arm(name)
        if len(set(self.arms)) != len(self.arms):
            raise LabError(f"arms: {list(self.arms)} lists an arm twice")
        if len(set(self.seeds)) != len(self.seeds):
            raise LabError(f"seeds: {list(self.seeds)} lists a seed twice")
        check_cell("gru_torch", self.backend)
        if self.min_lr > self.lr:
            raise LabError(f"min_lr: must be at most lr ({self.lr:g}), got {self.min_lr!r}")

    @property
    def saved_seeds(self):
        return self.checkpoint_seeds if self.checkpoint_seeds is not None else self.seeds[:1]


@dataclass(frozen=True)
class Option:
    """One AblationConfig field on the command line: --field-name, its argparse type, and its help."""

    field: str
    help: str
    type: Optional[type] = None  # None: a string, or a flag for a bool field
    nargs: Optional[str] = None  # "+" for the tuple fields
    choices: Optional[tuple] = None
    always: bool = False  # written into the rerun command even at its default value

    @property
    def flag(self):
        return "--" + self.field.replace("_", "-")


OPTIONS = (
    Option(
        "dataset",
        "digits: scikit-learn's digits upsampled, offline (default); cifar10: grayscale CIFAR-10, "
        "1024 steps (needs --download the first time)",
        choices=tuple(SEQUENCE_DATASETS),
        always=True,
    ),
    Option("epochs", "epochs per run (default %(default)s, as seed 003)", int, always=True),
    Option(
        "seeds",
        "random seeds, one run per arm and seed (default 0 1 2); results are mean ± std over seeds",
        int,
        "+",
        always=True,
    ),
    Option("arms", "arms to train (default baseline ablated)", nargs="+", choices=tuple(ARMS), always=True),
    Option("backend", BACKEND_HELP, choices=BACKENDS),
    Option("download", "cifar10: download the 170 MB archive if missing"),
    Option("root", "cifar10: data folder (default <cache dir>/cifar10)"),
    Option("size", "digits: image side, T = size**2 steps (default %(default)s -> 1024)", int),
    Option("limit_train", "use only the first N training sequences", int),
    Option("limit_test", "use only the first N test sequences", int),
    Option("batch_size", "sequences per batch (default %(default)s)", int),
    Option("lr", "peak learning rate (default %(default)s)", float),
    Option("min_lr", "cosine floor (default %(default)s)", float),
    Option("weight_decay", "AdamW weight decay (default %(default)s)", float),
    Option("grad_clip", "global gradient-norm clipping (default %(default)s)", float),
    Option("hidden_size", "H (default %(default)s = seed 003's 101,732 parameters)", int),
    Option("gate_batch", "test sequences traced for gate statistics (default %(default)s)", int),
    Option("checkpoint_seeds", "seeds whose final models are saved (default: the first seed)", int, "+"),
    Option("device", "default auto: CUDA if available", choices=DEVICES),
)
OUT_FLAG = "--out"  # the study's folder, where results and checkpoints go and a resumed study continues


def add_arguments(parser, out_default):
    """Every AblationConfig field as an option of `parser`, defaults from AblationConfig, plus --out."""
    default = AblationConfig()
    for option in OPTIONS:
        value = getattr(default, option.field)
        if isinstance(value, bool):
            parser.add_argument(option.flag, action="store_true", help=option.help)
            continue
        parser.add_argument(
            option.flag,
            type=option.type,
            nargs=option.nargs,
            choices=option.choices,
            default=list(value) if isinstance(value, tuple) else value,
            help=option.help,
        )
    parser.add_argument(
        OUT_FLAG,
        default=out_default,
        help=f"folder for results and checkpoints; rerun the same command to continue a study (default {out_default})",
    )


def config_from_args(args):
    return AblationConfig(**{option.field: getattr(args, option.field) for option in OPTIONS})


def cli_command(config, out_dir=None):
    """The `python -m lab ablation` command line that reruns `config` (recorded in results.json)."""
    default = AblationConfig()
    parts = ["python -m lab ablation"]
    for option in OPTIONS:
        value = getattr(config, option.field)
        if value == getattr(default, option.field) and not option.always:
            continue
        if isinstance(value, bool):
            parts.append(option.flag)
        else:
            values = value if isinstance(value, tuple) else (value,)
            parts.append(" ".join([option.flag, *(shlex.quote(str(v)) for v in values)]))
    if out_dir is not None:
        parts.append(f"{OUT_FLAG} {shlex.quote(str(out_dir))}")
    return " ".join(parts)
