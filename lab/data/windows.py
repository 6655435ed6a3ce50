"""Batches from a token tensor: the contiguous train/validation split, random windows (nanoGPT),
consecutive windows for truncated BPTT, and seed 004's mixed n-gram samples.

Glossary: N tokens, B batch (parallel streams), T block size, K n_max - 1 (context width)."""

import torch

from lab.data.text import check_long_enough
from lab.errors import LabError
from lab.words import count


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """A text's contiguous split, in characters: the first 1 - val_fraction for training, the rest for
    validation. Split before tokenizing, so that a tokenizer is fitted on training text only."""
    if not 0 < val_fraction < 1:
        raise LabError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


def split_train_val(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Contiguous split: the first 1 - val_fraction for training, the rest for validation.

    Contiguous rather than shuffled, so validation text is unseen text, not
    windows that overlap training windows.
    """
    if not 0 < val_fraction < 1:
        raise LabError(f"val_fraction must be in (0, 1), got {val_fraction}")
    n = int(len(ids) * (1 - val_fraction))
    return ids[:n], ids[n:]


def random_windows(
    data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """B random windows of data (N,) -> x, y each (B, T), y[:, t] = x[:, t + 1]."""
    check_long_enough(len(data), block_size)
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(block_size)  # (B, T)
    return data[offsets], data[offsets + 1]


class ConsecutiveWindows:
    """Consecutive (x, y) windows over B parallel streams, for truncated BPTT.

    The caller carries the hidden state from one batch to the next and detaches
    it (h = h.detach()) before each step, so gradients flow through T steps only
    while the state still remembers everything before. Windows are all full
    (B, T); the last partial window of each stream is dropped.
    """

    def __init__(self, data: torch.Tensor, batch_size: int, block_size: int):
        stream_len = len(data) // batch_size
        check_long_enough(
            stream_len,
            block_size,
            what=f"each of the {batch_size} batch streams (corpus of {count(len(data), 'token')})",
        )
        self.block_size = block_size
        self.streams = data[: batch_size * stream_len].reshape(batch_size, stream_len)  # (B, N // B)

    def __len__(self) -> int:
        # the last window needs one extra token for its targets
        return (self.streams.size(1) - 1) // self.block_size

    def __iter__(self):
        T = self.block_size
        for i in range(len(self)):
            s = i * T
            yield self.streams[:, s : s + T], self.streams[:, s + 1 : s + T + 1]  # (B, T), (B, T)


def ngram_samples(
    ids: torch.Tensor,
    *,
    num_samples: int,
    pad_index: int,
    n_min: int = 2,
    n_max: int = 5,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mixed n-gram samples: n ~ uniform{n_min..n_max}, context = the n - 1 tokens before a target.

    Returns contexts (N, K) with K = n_max - 1, lengths (N,) = n - 1 and targets (N,).
    Contexts are LEFT-padded with `pad_index`: the last column is always the
    token right before the target, so a column means the same distance back in
    every sample and a model can read the context right to left and stop at
    `lengths`. Pass a pad index outside the vocabulary (e.g. V, with one extra
    embedding row) so padding never looks like a real token.
    """
    if not 2 <= n_min <= n_max:
        raise LabError(f"need 2 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
    K = n_max - 1
    check_long_enough(len(ids), K)
    lengths = torch.randint(n_min - 1, n_max, (num_samples,), generator=generator)  # (N,) context lengths
    # target position t is uniform over the positions that have `length` tokens before them
    u = torch.rand(num_samples, generator=generator, dtype=torch.float64)  # float64: u * N < N even for N ~ 1e7
    t = lengths + (u * (len(ids) - lengths)).long()  # (N,)
    cols = torch.arange(K)  # (K,)
    positions = t[:, None] - K + cols  # (N, K), the K positions before t
    real = cols >= K - lengths[:, None]  # (N, K), False on the padding at the left
    contexts = torch.where(real, ids[positions.clamp(min=0)], torch.full_like(positions, pad_index))
    return contexts, lengths, ids[t]


# -----------------------------------------------------------------------------
# sequential images: each image is read one pixel per time step
