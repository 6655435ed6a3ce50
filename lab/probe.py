"""Memory probe: how many steps back can each cell recall a symbol?

Glossary: B batch, T time (seq_len), S alphabet size, H hidden, K lags.

Delayed recall. The input is a uniformly random sequence over S symbols and
the target at step t is the input k steps earlier:

    x   3 0 7 7 1 5 2 ...
    y   - - 3 0 7 7 1 ...        (k = 2; "-" = no target, ignored by the loss)

Each symbol is independent, so nothing but memory helps: chance accuracy is
1/S, and the state must hold the last k symbols at once to solve lag k.

Design, chosen to be fast and honest:
* One small model per (cell, lag), trained from scratch on the same number of
  steps: a lag is never helped or hurt by sharing capacity with another.
* The model is a lab RecurrentLM over the S symbols (lab.models.LMConfig,
  1 layer): embedding -> cell -> LayerNorm -> linear, its loss already skips
  targets of -100.
* Every cell gets the hidden size whose total parameter count is closest to
  `param_budget`, so cells are compared at equal size; the actual counts are
  in the result.
* Accuracy is measured on fresh sequences (another seed), over the steps t >= k.
"""
import time
from dataclasses import dataclass

import pandas as pd
import torch

from lab.cells import CELLS
from lab.models import LMConfig, build_model, count_parameters
from lab.train import resolve_device

IGNORE = -100  # F.cross_entropy's default ignore_index: steps with no target
MAX_HIDDEN = 1024  # upper end of the hidden-size search


@dataclass
class ProbeConfig:
    """One memory-probe experiment: every cell in `cells` at every lag in `lags`."""

    cells: tuple = tuple(CELLS)  # keys of lab.cells.CELLS
    lags: tuple = (1, 2, 4, 8, 16)  # k: recall the symbol seen k steps ago
    alphabet: int = 8  # S symbols; chance accuracy 1/S
    param_budget: int = 5000  # target parameter count of every model
    embed_dim: int = 8  # E, the same for every cell
    steps: int = 300  # AdamW steps per model
    batch_size: int = 32  # B sequences per step
    seq_len: int = 48  # T steps per sequence, more than the largest lag
    lr: float = 1e-2
    eval_sequences: int = 256  # fresh sequences for the accuracy
    seed: int = 0
    device: str = "auto"  # "auto" (CUDA when available), "cpu" or "cuda" (lab.train.resolve_device)

    def __post_init__(self):
        unknown = [c for c in self.cells if c not in CELLS]
        if unknown or not self.cells:
            raise ValueError(f"cells: unknown cells {unknown}; valid cells are {sorted(CELLS)}")
        positive = ("alphabet", "param_budget", "embed_dim", "steps", "batch_size", "seq_len", "eval_sequences")
        for field in positive:
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{field}: must be a positive integer, got {value!r}")
        if self.alphabet < 2:
            raise ValueError(f"alphabet: needs at least 2 symbols, got {self.alphabet}")
        if not self.lags or any(not isinstance(k, int) or not 1 <= k < self.seq_len for k in self.lags):
            raise ValueError(f"lags: must be integers in [1, seq_len - 1 = {self.seq_len - 1}], got {self.lags!r}")
        if not self.lr > 0:
            raise ValueError(f"lr: must be > 0, got {self.lr!r}")


def recall_batch(config, lag, batch_size, generator):
    """Random symbols x (B, T) and targets y (B, T) with y[:, t] = x[:, t - lag], IGNORE before."""
    x = torch.randint(config.alphabet, (batch_size, config.seq_len), generator=generator)  # (B, T)
    y = torch.full_like(x, IGNORE)
    y[:, lag:] = x[:, :-lag]
    return x, y


def model_config(config, cell, hidden_size):
    return LMConfig(cell=cell, vocab_size=config.alphabet, embed_dim=config.embed_dim, hidden_size=hidden_size,
                    num_layers=1)


def _params(config, cell, hidden_size):
    return count_parameters(build_model(model_config(config, cell, hidden_size)))


def hidden_size_for_budget(config, cell):
    """The hidden size whose model is closest to config.param_budget -> (H, parameter count).

    Parameters grow with H, so a binary search finds the last H under budget;
    then the closer of it and H + 1 wins.
    """
    lo, hi = 1, MAX_HIDDEN
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _params(config, cell, mid) <= config.param_budget:
            lo = mid
        else:
            hi = mid - 1
    candidates = [(abs(_params(config, cell, h) - config.param_budget), h) for h in (lo, lo + 1)]
    H = min(candidates)[1]
    return H, _params(config, cell, H)


def _train_and_score(config, cell, lag, hidden_size, device, callback):
    """Train one model on lag `lag` and return (accuracy, final training loss)."""
    with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the caller's RNG
        torch.manual_seed(config.seed)
        model = build_model(model_config(config, cell, hidden_size)).to(device)
    data = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    model.train()
    for step in range(1, config.steps + 1):
        x, y = recall_batch(config, lag, config.batch_size, data)  # drawn on the CPU: the same data on any device
        _, loss, _ = model(x.to(device), y.to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if callback and (step % 50 == 0 or step == config.steps):
            callback({"event": "probe_step", "cell": cell, "lag": lag, "step": step, "loss": loss.item()})
    x, y = recall_batch(config, lag, config.eval_sequences, torch.Generator().manual_seed(config.seed + 1))
    model.eval()
    with torch.no_grad():
        predictions = model(x.to(device))[0].argmax(-1).cpu()  # (B, T)
    scored = y != IGNORE
    return (predictions[scored] == y[scored]).float().mean().item(), loss.item()


def run_memory_probe(config=None, callback=None):
    """Train and score every (cell, lag) of the config.

    callback(event: dict) hears "probe_model" (size chosen), "probe_step" (every
    50 steps) and "probe_result" events. Returns a DataFrame with one row per
    (cell, lag): cell, lag, accuracy, chance, params, hidden_size, final_loss, seconds.
    """
    config = config or ProbeConfig()
    device = resolve_device(config.device)
    rows = []
    for cell in config.cells:
        hidden_size, params = hidden_size_for_budget(config, cell)
        if callback:
            callback({"event": "probe_model", "cell": cell, "hidden_size": hidden_size, "params": params})
        for lag in config.lags:
            start = time.perf_counter()
            accuracy, final_loss = _train_and_score(config, cell, lag, hidden_size, device, callback)
            row = {"cell": cell, "lag": lag, "accuracy": accuracy, "chance": 1 / config.alphabet, "params": params,
                   "hidden_size": hidden_size, "final_loss": final_loss, "seconds": time.perf_counter() - start}
            rows.append(row)
            if callback:
                callback({"event": "probe_result", **row})
    return pd.DataFrame(rows)
