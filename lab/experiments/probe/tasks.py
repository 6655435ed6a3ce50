"""The memory probe's toy tasks (recall, brackets, adding, parity): each makes a batch of sequences
(B, k + 1), the "?" last, and their answers (B,); ProbeTask is one task at one distance in the shape
lab.training.train.train trains, a fresh batch every step, scored only at the "?".

Glossary: B batch, k distance, T time (k + 1 steps), V tokens.
"""

import functools
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from lab.errors import LabError
from lab.nets.families import racers

IGNORE = -100  # F.cross_entropy's default ignore_index: the steps with no answer due
MAX_DISTANCE = 1000
SEQUENCES_PER_EPOCH = 10_000  # the data is generated afresh every step: "an epoch" only paces the progress display
CHANCE_SEQUENCES = 20_000  # enough that the commonest answer's share is within ~0.5% of its probability


def _query(x, query_id):
    x[:, -1] = query_id
    return x


RECALL_SYMBOLS = "ABCDEFGH"


def make_recall(batch, distance, generator):
    """A random symbol, then distance - 1 random symbols as distractors, then "?": answer the first."""
    S = len(RECALL_SYMBOLS)
    x = torch.randint(S, (batch, distance + 1), generator=generator)  # (B, T)
    return _query(x, S), x[:, 0].clone()


BRACKET_SLOTS = 4  # places that may hold a bracket: the first token and 3 more at random
OPEN, CLOSE, DISTRACTOR = 0, 1, 2


def make_brackets(batch, distance, generator):
    """Distractors with up to BRACKET_SLOTS brackets, the first token always a slot: answer the
    depth at the "?" (brackets opened and not closed). Each slot stays a distractor with
    probability 1/3, else holds a bracket, opening or closing with equal odds (opening at depth 0)."""
    x = torch.full((batch, distance + 1), DISTRACTOR)  # (B, T)
    later = min(BRACKET_SLOTS - 1, distance - 1)
    picks = torch.rand(batch, distance - 1, generator=generator).argsort(1)[:, :later] + 1  # (B, later)
    slots = torch.cat([torch.zeros(batch, 1, dtype=torch.long), picks.sort(1).values], 1)  # in reading order
    depth, rows = torch.zeros(batch, dtype=torch.long), torch.arange(batch)
    for slot in slots.unbind(1):
        draw = torch.rand(batch, generator=generator)
        bracket = draw < 2 / 3
        opens = (draw < 1 / 3) | (depth == 0)
        x[rows[bracket], slot[bracket]] = torch.where(opens, OPEN, CLOSE)[bracket]
        depth += torch.where(bracket, torch.where(opens, 1, -1), 0)
    return _query(x, 3), depth


def make_adding(batch, distance, generator):
    """Random digits, the first and one later digit marked (ids 10-19), then "?": answer the
    sum of the two marked digits (Hochreiter & Schmidhuber's adding problem, in digits)."""
    digits = torch.randint(10, (batch, distance + 1), generator=generator)  # (B, T)
    second = torch.randint(1, distance, (batch,), generator=generator)  # the other mark, after the first
    rows = torch.arange(batch)
    answer = digits[:, 0] + digits[rows, second]
    x = digits.clone()
    x[:, 0] += 10
    x[rows, second] += 10
    return _query(x, 20), answer


def make_parity(batch, distance, generator):
    """distance random bits, then "?": answer whether they hold an odd number of 1s."""
    x = torch.randint(2, (batch, distance + 1), generator=generator)  # (B, T)
    answer = x[:, :-1].sum(1) % 2
    return _query(x, 2), answer


@dataclass(frozen=True)
class ToyTask:
    title: str  # as a student reads it
    question: str  # what the model must answer at the "?"
    tokens: tuple  # display text of every input token, "?" last
    answers: tuple  # display text of every answer (the model's classes)
    make: Callable  # (batch, distance, torch.Generator) -> x (B, distance + 1) token ids, answers (B,)
    min_distance: int = 1

    @property
    def in_a_sentence(self):
        """The title as it reads inside a sentence ("... trained recall the first symbol at k = 20")."""
        return self.title[0].lower() + self.title[1:]

    @property
    def vocab_size(self):
        """One table for the tokens read and the answers given (the model is a language model)."""
        return max(len(self.tokens), len(self.answers))

    def show(self, token_ids):
        """A sequence (T,) as text, e.g. "( · ( · ) ?"."""
        return " ".join(self.tokens[i] for i in token_ids)

    def example(self, distance, seed=0, longest=24):
        """One sequence and its answer as text, "( · ( · ) ? → 1"; a long one shortened in the middle."""
        x, answer = self.make(1, distance, torch.Generator().manual_seed(seed))
        ids = x[0].tolist()
        shown = self.show(ids) if len(ids) <= longest else f"{self.show(ids[: longest - 8])} … {self.show(ids[-6:])}"
        return f"{shown} → {self.answers[answer.item()]}"


TOY_TASKS = {
    "recall": ToyTask(
        "Recall the first symbol",
        "which symbol came first, before all the distractors?",
        tuple(RECALL_SYMBOLS) + ("?",),
        tuple(RECALL_SYMBOLS),
        make_recall,
    ),
    "brackets": ToyTask(
        "Count the open brackets",
        "how many brackets are open (opened and not yet closed)?",
        ("(", ")", "·", "?"),
        tuple(str(d) for d in range(BRACKET_SLOTS + 1)),
        make_brackets,
    ),
    "adding": ToyTask(
        "Add two marked digits",
        "what is the sum of the two digits in brackets?",
        tuple(str(d) for d in range(10)) + tuple(f"[{d}]" for d in range(10)) + ("?",),
        tuple(str(s) for s in range(19)),
        make_adding,
        min_distance=2,
    ),
    "parity": ToyTask("Parity of the bits", "is the number of 1s odd?", ("0", "1", "?"), ("even", "odd"), make_parity),
}
TOY_CELLS = racers("memory")  # the cells whose record says they run in the toy tasks' race


def toy_task(name):
    if name not in TOY_TASKS:
        raise LabError(f"task: unknown task {name!r}; valid tasks are {list(TOY_TASKS)}")
    return TOY_TASKS[name]


def targets(x, answers):
    """y (B, T): the answer at the "?" (the last step), IGNORE everywhere else."""
    y = torch.full_like(x, IGNORE)
    y[:, -1] = answers
    return y


class ProbeTask:
    """One toy task at one distance, in the shape lab.training.train.train trains (like LMTask): a fresh
    batch every step and, as validation, the accuracy at the "?" on a fixed set of fresh
    sequences (drawn with another random seed than training's)."""

    tokenizer = None  # the tokens are the task's own: nothing to save beside a checkpoint

    def __init__(self, task, distance, eval_sequences=512, seed=0):
        spec = toy_task(task)
        if not isinstance(distance, int) or not spec.min_distance <= distance <= MAX_DISTANCE:
            raise LabError(
                f"distance: {task} needs an integer in [{spec.min_distance}, {MAX_DISTANCE}], got {distance!r}"
            )
        self.task, self.distance, self.eval_sequences, self.seed = task, distance, eval_sequences, seed

    @property
    def vocab_size(self):
        return TOY_TASKS[self.task].vocab_size

    def sequence_length(self, config):
        return self.distance + 1

    def check(self, config):
        """Nothing to check: the sequences are made to measure."""

    def items_per_epoch(self, config):
        return SEQUENCES_PER_EPOCH / config.batch_size

    def batch(self, batch_size, generator):
        """-> x (B, T) token ids, y (B, T) targets, answers (B,)."""
        x, answers = TOY_TASKS[self.task].make(batch_size, self.distance, generator)
        return x, targets(x, answers), answers

    def batches(self, config, generator):
        while True:
            x, y, _ = self.batch(config.batch_size, generator)
            yield x, y, True

    def tokens(self, x):
        return x.numel()

    def eval_set(self):
        """The fixed validation sequences -> x, y, answers."""
        return self.batch(self.eval_sequences, torch.Generator().manual_seed(1_000_003 + self.seed))

    @functools.cached_property
    def chance(self):
        """The accuracy of always giving the commonest answer (measured on many fresh sequences)."""
        answers = self.batch(CHANCE_SEQUENCES, torch.Generator().manual_seed(2_000_003 + self.seed))[2]
        return answers.bincount().max().item() / len(answers)

    @torch.no_grad()
    def evaluate(self, model, config, device):
        x, y, answers = self.eval_set()
        logits = model(x.to(device))[0][:, -1]  # (B, V): the answers given at the "?"
        return {
            "val_loss": F.cross_entropy(logits, answers.to(device)).item(),
            "val_accuracy": (logits.argmax(-1).cpu() == answers).float().mean().item(),
        }
