"""RNN Lab's backend: recurrent cells, models, data, training, sampling and introspection.

Never imports Streamlit: the app (app.py, pages/) and the command line
(`python -m lab`) are two clients of the same functions.

Its parts, each importing only those above it (tests/test_architecture.py checks the direction):

    errors, schema   LabError, the one error for bad input; configs declared with pydantic
    settings         the server's and the command line's settings, from RNNLAB_ variables, each with its bounds
    words            counts in words ("1 epoch", "2 epochs")
    data             corpora, tokenizers, batches, sequential images
    nets             the cells as their equations, the faster backends, the model families
    training         the training loop, tasks, presets, checkpoints
    instruments      sampling, gate traces, stepping, memory, units: what the teaching pages measure
    server           the budget a class shares, background jobs, worker processes, Ray, spaces
    experiments      seed 003's ablation and the memory probe, run through the server's budget
    lessons          what the lessons say, computed from the figures they show (no server: nothing runs)
    runs             the one runner: every run a page asks for, built from its settings and started or joined
    __main__         the command line (`python -m lab`), with train_command
"""

import importlib.metadata
import os
import re
from pathlib import Path

# OpenMP's idle threads spin-wait by default. On shared or busy cores (Streamlit
# Community Cloud, CI, a laptop running the app and the tests) the spinning makes
# small-model work ~10x slower (BENCHMARKS-HISTORY.md). It only takes effect when set
# before torch is first imported, which `import lab` normally is.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _version():
    """The version written once, in pyproject.toml: read there in a checkout (what the app runs from),
    from the installed package's metadata otherwise."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        return re.search(r'^version = "([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M).group(1)
    return importlib.metadata.version("rnn-lab")


__version__ = _version()
