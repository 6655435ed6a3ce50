"""Test-wide settings: one intra-op thread.

The tests train and sample tiny models, where a second OpenMP thread costs more
in synchronisation than it saves, and where busy cores make spinning threads
orders of magnitude slower. Speed is measured in benchmarks/, not here.
"""
import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)  # again before every test: `python -m lab train --threads N` changes it
    yield
