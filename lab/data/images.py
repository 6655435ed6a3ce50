"""Images as pixel sequences (seed 003): CIFAR-10 (downloaded) or scikit-learn's digits (offline),
each image read one pixel per time step. torchvision and scikit-learn are imported inside the
functions that need them, so importing lab.data stays light.

Glossary: L pixels per sequence (32 * 32 = 1024 for CIFAR-10)."""

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lab.data.text import DataError, default_cache_dir
from lab.errors import LabError


class FlattenSequence:
    """Image tensor (C, H, W) -> sequence (H*W, C), pixels in row-major order."""

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        return img.flatten(1).t().contiguous()  # (C, H*W) -> (H*W, C)

    def __repr__(self) -> str:
        return "FlattenSequence()"


def cifar10_transform():
    """PIL image -> (1024, 1) sequence of grayscale pixels in [-1, 1]."""
    from torchvision import transforms

    return transforms.Compose(
        [
            transforms.Grayscale(1),
            transforms.ToTensor(),  # (1, 32, 32) in [0, 1]
            transforms.Normalize((0.5,), (0.5,)),  # -> [-1, 1]
            FlattenSequence(),  # -> (1024, 1)
        ]
    )


def load_cifar10(root: str | os.PathLike, train: bool, download: bool = False) -> torch.utils.data.Dataset:
    """CIFAR-10 from root/cifar-10-batches-py; items are ((1024, 1) float, int label)."""
    from torchvision.datasets import CIFAR10

    try:
        return CIFAR10(root, train=train, download=download, transform=cifar10_transform())
    except (OSError, RuntimeError) as e:
        if not download:
            raise DataError(f"CIFAR-10 not found in {root}; pass download=True (needs internet, 170 MB)") from e
        raise DataError(
            f"could not download CIFAR-10 into {root}: {e}. "
            "You are probably offline; the digits dataset works without a network."
        ) from e


def load_digits_sequences(
    size: int = 32, train: bool = True, val_fraction: float = 0.2, seed: int = 0
) -> torch.utils.data.TensorDataset:
    """scikit-learn's 1,797 handwritten digits (shipped with it, no download) as pixel sequences.

    8x8 images with values 0..16 are scaled to [0, 1], bilinearly resized to
    size x size (32 gives 1024 steps, like CIFAR-10), normalised to [-1, 1] like
    cifar10_transform and flattened to (size*size, 1). The split is stratified
    by label and seeded, so train and test are the same on every call.
    Returns TensorDataset(x (N, L, 1) float32, y (N,) int64).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32)[:, None] / 16  # (N, 1, 8, 8) in [0, 1]
    if size != 8:
        # bilinear weights are a convex combination, so values stay in [0, 1]
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)  # (N, 1, size, size)
    x = (x - 0.5) / 0.5  # [-1, 1]
    x = x.flatten(2).transpose(1, 2).contiguous()  # (N, L, 1)
    y = torch.tensor(digits.target, dtype=torch.long)  # (N,)
    train_idx, test_idx = train_test_split(
        torch.arange(len(y)).numpy(), test_size=val_fraction, random_state=seed, stratify=digits.target
    )
    idx = torch.from_numpy(train_idx if train else test_idx)
    return torch.utils.data.TensorDataset(x[idx], y[idx])


@dataclass(frozen=True)
class SequenceDatasetInfo:
    title: str  # for the UI
    num_classes: int
    needs_download: bool


SEQUENCE_DATASETS = {
    "digits": SequenceDatasetInfo("handwritten digits (scikit-learn, 8x8 upsampled, offline)", 10, False),
    "cifar10": SequenceDatasetInfo("CIFAR-10 in grayscale, 1024 pixels per image (170 MB download)", 10, True),
}


def load_sequence_dataset(
    name: str, train: bool, root: str | os.PathLike | None = None, download: bool = False, size: int = 32
) -> torch.utils.data.Dataset:
    """Load a SEQUENCE_DATASETS entry. `size` is for digits, `root` and `download` for CIFAR-10
    (root defaults to <cache dir>/cifar10)."""
    if name not in SEQUENCE_DATASETS:
        raise LabError(f"unknown sequence dataset {name!r}; valid names: {', '.join(SEQUENCE_DATASETS)}")
    if name == "digits":
        return load_digits_sequences(size=size, train=train)
    return load_cifar10(root if root is not None else default_cache_dir() / "cifar10", train, download)
