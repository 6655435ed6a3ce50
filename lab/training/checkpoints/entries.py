"""Every entry of a checkpoint's header, declared: what lab.training.checkpoints.format writes, and
nothing else. Each model refuses unknown fields (nested ones too), takes its types strictly (a
string is no number, True is no 1) and bounds every number, so that what loads can be summarised,
sampled and drawn without an overflow; every string that reaches a page or a terminal is printable
(lab.schema.Text). The model configs and the tokenizers are declared where they live
(lab.nets.models, lab.data.tokenizers); lab.training.checkpoints.header reads a header through all of them.
"""

from datetime import datetime
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, create_model, model_validator

from lab.errors import LabError
from lab.schema import MAX_SECONDS, STRICT, Name, PathText, Seconds, Seed, Text, printable_text
from lab.training.tasks import NgramTask
from lab.training.train import MAX_STEPS

FORMAT = "rnnlab-checkpoint"
FORMAT_VERSION = "1"  # the version this lab writes, the one it reads
MAX_ELAPSED_SECONDS = MAX_SECONDS
MAX_LOSS = 1e6  # nats: a uniform guess over a million tokens costs 14, a diverged run's finite loss a few hundred
MAX_HISTORY = 5_000  # evaluations in a run's history (a bundled 650,000-step run has 472): a longer one is thinned

Count = Annotated[int, Field(ge=0, le=MAX_STEPS)]  # steps, and what is counted like them
Loss = Annotated[float, Field(ge=0, le=MAX_LOSS)]  # cross-entropy in nats (per token, or per character)
Accuracy = Annotated[float, Field(ge=0, le=1)]
Epochs = Annotated[float, Field(ge=0, le=MAX_STEPS)]  # an epoch takes one step at least
Unit = Annotated[float, Field(ge=0, le=1)]


class _Figures(BaseModel):
    """The validation figures an evaluation reports (lab.training.tasks), in a history entry and in the
    metrics of a bundled model's file."""

    model_config = STRICT
    val_loss: Loss = None
    val_nats_per_char: Loss = None
    val_accuracy: Accuracy = None


# seed 004's n-gram task reports a loss and an accuracy at every context length n
Figures = create_model(
    "Figures",
    __base__=_Figures,
    **{
        f"val_{name}_n{n}": (kind, None)
        for n in range(NgramTask.n_min, NgramTask.n_max + 1)
        for name, kind in (("loss", Loss), ("accuracy", Accuracy))
    },
)


class Event(Figures):
    """One evaluation of a run's history (lab.training.train's "eval" event; the ablation's epochs)."""

    step: Count
    type: Literal["eval"] = None
    epoch: Epochs = None
    elapsed: Seconds = None
    train_loss: Loss = None
    train_loss_last: Loss = None  # the ablation's: the last step's, beside the epoch's mean


def _train_config(value):
    """A saved TrainConfig, checked by TrainConfig itself (its fields, their bounds, its rules)."""
    from lab.training.train import TrainConfig

    try:
        TrainConfig(**value)
    except LabError as e:
        raise ValueError(str(e)) from None  # a plain ValueError: the refusal then names train_config too
    return value


class Plateau(BaseModel):
    """scripts/build_checkpoints.py's early stopping, in an unfinished build's file."""

    model_config = STRICT
    best: Optional[Loss]  # None before the first evaluation
    best_step: Count
    since_best: Count


class Metrics(Figures):
    """A checkpoint's `metrics`: its run (lab.training.train.run_metrics), and what the bundled models'
    build and the ablation add."""

    # fail_fast: a crafted history is refused at its first bad evaluation, not after building an error for each
    history: Annotated[list[Event], Field(max_length=MAX_HISTORY, fail_fast=True)] = None
    steps: Count = None
    elapsed: Seconds = None
    reason: Text = None  # why the run ended
    corpus: PathText = None  # a name, or a file's path
    train_config: Annotated[dict[str, Any], AfterValidator(_train_config)] = None
    best_step: Count = None
    val_loss_in_order: Loss = None
    val_nats_per_char_in_order: Loss = None
    weights: Literal["float16"] = None  # stored as
    float32_val_nats_per_char: Loss = None
    frozen_bias_check: Optional[Text] = None  # the ablation's
    done: bool = None  # an unfinished build's
    plateau: Plateau = None


class Dataset(BaseModel):
    """The ablation's sequence dataset (lab.experiments.ablation.runner)."""

    model_config = STRICT
    name: Name
    title: Text
    sequence_length: Annotated[int, Field(ge=1, le=10**6)]
    input_size: Annotated[int, Field(ge=1, le=10**6)]
    n_train: Count
    n_test: Count
    num_classes: Annotated[int, Field(ge=1, le=10**6)]
    image_size: Annotated[int, Field(ge=1, le=10**4)] = None


class Extra(BaseModel):
    """A checkpoint's `extra`: where it came from."""

    model_config = STRICT
    preset: Name = None
    corpus: PathText = None
    bundled: bool = None
    uploaded: Name = None  # the file name it was uploaded as
    experiment: Name = None
    arm: Name = None
    seed: Seed = None
    dataset: Dataset = None
    arm_description: Text = None


class AdamWSettings(BaseModel):
    """AdamW's settings as lab.training.train saves them. A resumed run restores them, so each is checked:
    amsgrad, maximize, capturable or differentiable would make it train differently or not at all."""

    model_config = STRICT
    lr: Unit
    initial_lr: Unit = None
    betas: Annotated[
        tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]], Field(strict=False)
    ]
    eps: Annotated[float, Field(gt=0, le=1e-3)]
    weight_decay: Unit
    amsgrad: Literal[False] = False
    maximize: Literal[False] = False
    capturable: Literal[False] = False
    differentiable: Literal[False] = False
    foreach: Optional[bool] = None
    fused: Optional[bool] = None
    decoupled_weight_decay: Literal[True] = True


RandomGenerator = Literal["torch", "data", "cuda"]  # dropout (CPU, CUDA) and the batch sampler


class TrainingStateHeader(BaseModel):
    """The JSON half of a resumable checkpoint's TrainingState (the tensors are checked on loading)."""

    model_config = STRICT
    step: Count
    elapsed: Seconds
    train_loss: Optional[Loss]  # None when the last step's was not finite
    hyperparameters: AdamWSettings
    optimizer: Annotated[list[Name], Field(max_length=10_000)]  # parameter names, distinct
    rng: Annotated[list[RandomGenerator], Field(max_length=3)]
    optimizer_start: Count = 0  # the step the optimizer's moments began at (absent before warm-ups existed)

    @model_validator(mode="after")
    def _names_are_distinct_and_complete(self):
        if len(set(self.optimizer)) != len(self.optimizer):
            raise ValueError("optimizer names a parameter twice")
        if not {"torch", "data"} <= set(self.rng):
            raise ValueError(f"rng must name the generators 'torch' and 'data', got {self.rng}")
        if self.optimizer_start > self.step:
            raise ValueError(f"optimizer_start ({self.optimizer_start}) is after the run's step ({self.step})")
        return self


def _timestamp(text):
    datetime.fromisoformat(text)  # a ValueError names what is wrong
    return text


JsonText = Annotated[str, Field(max_length=2**28)]  # an entry in JSON, decoded and checked by its own model


class Metadata(BaseModel):
    """The header's entries: safetensors metadata, a string each (the JSON ones checked on their own)."""

    model_config = STRICT
    format: Literal[FORMAT]
    format_version: Literal[FORMAT_VERSION]
    name: Annotated[str, Field(max_length=64), printable_text()]  # lab.training.checkpoints.sanitize_name's
    version: Annotated[str, Field(pattern=r"^[0-9]{1,9}$")]
    timestamp: Annotated[str, Field(max_length=40), printable_text(), AfterValidator(_timestamp)]
    lab_version: Annotated[str, Field(max_length=40, pattern=r"^[0-9A-Za-z.+-]+$")]
    config: JsonText
    conventions: JsonText
    tokenizer: JsonText
    metrics: JsonText
    extra: JsonText
    training_state: JsonText = None  # a resumable checkpoint's


# one line per cell convention of the model
CONVENTIONS = TypeAdapter(Annotated[list[Text], Field(max_length=64)], config=ConfigDict(strict=True))
