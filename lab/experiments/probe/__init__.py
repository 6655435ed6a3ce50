"""Memory probes: toy tasks that need memory and little else, small enough to train in seconds.

Glossary: B batch, k distance, T time (k + 1 steps), V tokens, H hidden units.

Every task is a sequence that ends in a question mark. The answer is due at the "?" and
depends on a token read k steps before it (the `distance`), with other tokens in between:

    recall    C A H B E ?            -> C      the first symbol, behind k - 1 distractors
    brackets  ( · ( · ) · · ?        -> 1      brackets still open (· is a distractor)
    adding    [4] 1 7 [2] 9 ?        -> 6      the sum of the two marked digits
    parity    1 0 1 1 0 ?            -> odd    whether the bits hold an odd number of 1s

The first token always counts (the symbol to recall, a slot that may open a bracket, the
first marked digit, the first bit), so a model that cannot carry something across k steps
is left to guess. Accuracy is scored only at the "?" and compared with chance: always
giving the commonest answer.

The same runs serve a lesson's live run and the shipped table (scripts/build_probe_results.py):
* one model per (task, cell, distance), trained from scratch by lab.training.train.train (so
  TrainingJob runs it from a page), on fresh batches every step;
* the model is a lab RecurrentLM (embedding -> cell -> LayerNorm -> linear) whose one table
  holds the task's tokens and its answers; its loss skips every step but the "?";
* every cell gets the hidden size whose parameter count is closest to `param_budget`, so
  cells are compared at equal size (the counts are in the results);
* a run stops early once it answers `solved` of a fixed set of fresh sequences right, so
  the step budget goes to the distances that are hard; and a cell left at chance at
  `give_up_after` distances in a row is not trained at the longer ones (their rows say
  so), where it could only do as badly, so the budget goes to the cells still learning.

An earlier version scored recall at every step ("the symbol k steps back" for all t at
once). That asks the state to shift a window of the last k symbols along every step, a
delay line in which every unit is overwritten at every step: what a vanilla RNN does by
construction, and what gated cells, initialised to keep (bias +1), must first unlearn. It
measured that head start, not how long one memory survives (BENCHMARKS-HISTORY.md, "Toy tasks").

Modules: tasks (the toy tasks and ProbeTask, one task at one distance as lab.training.train trains
it), runs (ProbeConfig, the runs with their parameter budget, the results table, and ProbeJob).
"""

from .runs import (
    AT_CHANCE,
    HOLDS,
    ProbeConfig,
    ProbeJob,
    hidden_size_for_budget,
    probe_run,
    results_table,
    run_memory_probe,
)
from .tasks import IGNORE, TOY_CELLS, TOY_TASKS, ProbeTask
