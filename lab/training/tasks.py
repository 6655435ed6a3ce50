"""What a run learns from: a task gives `train` its batches and evaluates a model.

    task = LMTask.from_corpus("bundled", "char")
    batches = task.batches(config, generator)   # built once per run, with its geometry
    x, y, restart = next(batches)               # (B, T) ids and their next ids
    task.evaluate(model, config, device)        # {"val_loss", "val_nats_per_char", ...}

LMTask: next-token prediction over windows of a text (seeds 000-002);
NgramTask: seed 004's mixed 2-5-gram samples, scored per context length;
ClassificationTask: sequences and their labels (seed 003's pixel sequences).
"""

import torch

from lab.data import (
    ConsecutiveWindows,
    DataError,
    build_tokenizer,
    chars_per_token,
    check_long_enough,
    download_tiny_shakespeare,
    encode_to_tensor,
    load_bundled_corpus,
    load_bundled_split,
    ngram_samples,
    random_windows,
    read_text,
    split_text,
)
from lab.training.ngram import model_predictor, score_by_order

CORPORA = {"bundled": load_bundled_corpus, "tiny-shakespeare": download_tiny_shakespeare}


def load_corpus(source="bundled"):
    """A corpus by name ("bundled", "tiny-shakespeare") or from a file path, as one text."""
    if source in CORPORA:
        return CORPORA[source]()
    return read_text(source)


def corpus_split(source="bundled", val_fraction=0.1):
    """A corpus as (training text, validation text): the bundled one's held-out plays, or any other
    text's last `val_fraction` (lab.data.split_text)."""
    if source == "bundled":
        return load_bundled_split()
    return split_text(load_corpus(source), val_fraction)


class LMTask:
    """Next-token prediction on a text: a tokenizer, a training and a validation text, windows."""

    def __init__(self, train_text, val_text, tokenizer):
        self.tokenizer = tokenizer
        self.train_ids, self.val_ids = encode_to_tensor(tokenizer, train_text), encode_to_tensor(tokenizer, val_text)
        # characters per token on held-out text turns loss per token into nats per character
        self.chars_per_token = chars_per_token(tokenizer, val_text) if val_text else 1.0

    @classmethod
    def from_split(cls, train_text, val_text, tokenizer_kind="char", **tokenizer_options):
        # A subword tokenizer learns its pieces from training text only, so validation text stays unseen.
        # A character vocabulary is the alphabet of both: a character met only in validation must still encode.
        fitted_on = train_text + val_text if tokenizer_kind == "char" else train_text
        return cls(train_text, val_text, build_tokenizer(tokenizer_kind, fitted_on, **tokenizer_options))

    @classmethod
    def from_text(cls, text, tokenizer_kind="char", val_fraction=0.1, **tokenizer_options):
        """A text split contiguously: validation is its last `val_fraction`."""
        return cls.from_split(*split_text(text, val_fraction), tokenizer_kind, **tokenizer_options)

    @classmethod
    def from_corpus(cls, source="bundled", tokenizer_kind="char", **tokenizer_options):
        """A named corpus or a file (corpus_split): the bundled one is split at its held-out plays."""
        return cls.from_split(*corpus_split(source), tokenizer_kind, **tokenizer_options)

    @property
    def vocab_size(self):
        return self.tokenizer.vocab_size

    def sequence_length(self, config):
        """Time steps backpropagated through per item: the window."""
        return config.block_size

    def check(self, config):
        check_long_enough(len(self.train_ids), config.block_size, "training split")
        check_long_enough(len(self.val_ids), config.block_size, "validation split")

    def items_per_epoch(self, config):
        return len(self.train_ids) / (config.batch_size * config.block_size)

    def batches(self, config, generator):
        """A run's batches, endless: x, y (B, T) and whether a carried state must be reset first. Each run
        has its own, so a task reused by several runs gives each of them the same batches."""
        B, T = config.batch_size, config.block_size
        if config.stateful:  # consecutive windows: each pass over the streams starts from a fresh state
            while True:
                for i, (x, y) in enumerate(ConsecutiveWindows(self.train_ids, B, T)):
                    yield x, y, i == 0
        while True:
            yield (*random_windows(self.train_ids, B, T, generator), True)

    def tokens(self, x):
        return x.numel()

    @torch.no_grad()
    def evaluate(self, model, config, device):
        generator = torch.Generator().manual_seed(config.seed + 1)  # the same windows every time
        x, y = random_windows(self.val_ids, config.eval_windows, config.block_size, generator)
        total = 0.0
        for x_batch, y_batch in zip(x.split(config.batch_size), y.split(config.batch_size)):
            total += model(x_batch.to(device), y_batch.to(device))[1].item() * y_batch.numel()
        val_loss = total / y.numel()
        return {"val_loss": val_loss, "val_nats_per_char": val_loss / self.chars_per_token}

    @torch.no_grad()
    def evaluate_in_order(self, model, device, streams=16, chunk=256):
        """Validation loss with the split read in order, as an RNN reads a text: `streams` rows of
        consecutive chunks, the state carried from chunk to chunk, so no window starts from a cold
        zero state as evaluate()'s do (seed 001: the state is the model's memory). A model trained
        on long enough windows scores lower here (astra-alpha: ~0.03 nats/char); one trained only
        on short windows may score higher, its state drifting where training never took it."""
        n = len(self.val_ids)
        streams = max(1, min(streams, n // (chunk + 1)))  # a short split: fewer streams, then shorter chunks
        windows = ConsecutiveWindows(self.val_ids, streams, min(chunk, n // streams - 1))
        state, total, count = None, 0.0, 0
        for x, y in windows:
            _, loss, state = model(x.to(device), y.to(device), state)
            total, count = total + loss.item() * y.numel(), count + y.numel()
        return {"val_loss_in_order": total / count, "val_nats_per_char_in_order": total / count / self.chars_per_token}


class ClassificationTask:
    """Sequence classification (seed 003): (x (N, T, F), y (N,)) tensors for train and test."""

    def __init__(self, train_set, test_set):
        self.x_train, self.y_train = _as_tensors(train_set)
        self.x_test, self.y_test = _as_tensors(test_set)
        self.tokenizer = None

    def sequence_length(self, config):
        """Time steps backpropagated through per item: the whole sequence."""
        return self.x_train.shape[1]

    def check(self, config):
        if len(self.x_train) == 0 or len(self.x_test) == 0:
            raise DataError("the sequence dataset is empty")

    def items_per_epoch(self, config):
        return len(self.x_train) / config.batch_size

    def batches(self, config, generator):
        while True:
            i = torch.randint(len(self.x_train), (config.batch_size,), generator=generator)
            yield self.x_train[i], self.y_train[i], True

    def tokens(self, x):
        return x.shape[0] * x.shape[1]  # pixels

    @torch.no_grad()
    def evaluate(self, model, config, device):
        correct, loss_sum = 0, 0.0
        for start in range(0, len(self.x_test), config.batch_size):
            x = self.x_test[start : start + config.batch_size].to(device)
            y = self.y_test[start : start + config.batch_size].to(device)
            logits, loss, _ = model(x, y)
            correct += (logits.argmax(-1) == y).sum().item()
            loss_sum += loss.item() * len(y)
        return {"val_loss": loss_sum / len(self.x_test), "val_accuracy": correct / len(self.x_test)}


def _as_tensors(dataset):
    if hasattr(dataset, "tensors"):
        return dataset.tensors
    xs, ys = zip(*(dataset[i] for i in range(len(dataset))))
    return torch.stack(xs), torch.as_tensor(ys)


class NgramTask(LMTask):
    """Seed 004's training data: mixed 2..5-gram samples from the same text, tokenizer and split as
    LMTask. Each sample is a context of n - 1 = 1..4 characters and the character after it
    (lab.data.ngram_samples, n uniform); an epoch is every (position, n) pair once in expectation
    (~4M samples of Tiny Shakespeare, as the seed says), drawn with replacement.

    A batch is x, y (B, K = n_max - 1) with each context at the LEFT, from position 0 as the seed
    composes it, and y = IGNORE everywhere except under the context's last character:

        context "ab" -> target c     x = [a b . .]    y = [- c - -]      (. any token, - IGNORE)

    The model is causal, so what follows the context never reaches the prediction, and the loss
    (with its label smoothing) is taken on the B real targets alone: train() needs no special case.
    """

    IGNORE = -100  # torch.nn.functional.cross_entropy's default ignore_index
    n_min, n_max = 2, 5

    def sequence_length(self, config):
        return self.n_max - 1

    def check(self, config):
        for ids, what in ((self.train_ids, "training split"), (self.val_ids, "validation split")):
            check_long_enough(len(ids), self.n_max, what)

    def items_per_epoch(self, config):
        return (self.n_max - self.n_min + 1) * len(self.train_ids) / config.batch_size

    def batches(self, config, generator):
        K = self.n_max - 1
        while True:
            contexts, lengths, targets = ngram_samples(
                self.train_ids,
                num_samples=config.batch_size,
                pad_index=0,
                n_min=self.n_min,
                n_max=self.n_max,
                generator=generator,
            )
            # ngram_samples right-aligns each context after its padding; rotate it to start at column 0
            x = contexts.gather(1, (torch.arange(K) + K - lengths[:, None]) % K)  # (B, K)
            y = torch.full_like(x, self.IGNORE)  # (B, K)
            y[torch.arange(len(x)), lengths - 1] = targets
            yield x, y, True

    @torch.no_grad()
    def evaluate(self, model, config, device):
        """Loss and accuracy at every n on the same eval_windows validation targets (fixed), and
        nats/char at n = n_max."""
        generator = torch.Generator().manual_seed(config.seed + 1)
        positions = torch.randint(self.n_max - 1, len(self.val_ids), (config.eval_windows,), generator=generator)
        scores = score_by_order(
            model_predictor(model, device),
            self.val_ids,
            range(self.n_min, self.n_max + 1),
            positions,
            batch=config.batch_size,
        )
        metrics = {f"val_{name}_n{n}": s[name] for n, s in scores.items() for name in ("loss", "accuracy")}
        val_loss = scores[self.n_max]["loss"]
        return {"val_loss": val_loss, "val_nats_per_char": val_loss / self.chars_per_token, **metrics}


TASKS = {"lm": LMTask, "ngram": NgramTask}  # a preset's `task`: windows of text, or seed 004's n-gram samples
