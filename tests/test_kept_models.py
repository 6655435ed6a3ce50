"""The models the pages keep loaded for every session are counted in the server's training budget, and bounded.

A hostile student's finding: the pages' shared cache of loaded checkpoints (st.cache_resource, 16 entries) and
the copies made of their models were charged to nothing, so five 48 MB uploads opened at once grew the server
by 1.5 GB while its budget admitted 464 MB of runs beside them. lab.server.capacity.KeptModels now holds one
charge of their total in the budget, within a quarter of it, the least recently used dropped from their cache
first; ui.shared.checkpoint_picker loads through it."""

import pytest

import ui.shared.cached_calls
import ui.shared.checkpoint_picker
from lab.data import CharTokenizer
from lab.nets.cost import loaded_model_mb, parameter_count
from lab.nets.models import LMConfig, build_model
from lab.server.capacity import KEPT_MODELS_SHARE, Budget, CapacityError, KeptModels
from lab.training.checkpoints import save_checkpoint


def test_kept_models_are_charged_in_the_budget_within_their_bound_the_least_recently_used_dropped_first():
    """Five 48 MB uploads (96 MB each loaded, in float32) in a budget of 464 MB: at most 116 MB kept."""
    budget = Budget(464, owner_share=0.5)
    models = KeptModels(budget, 464 * KEPT_MODELS_SHARE)
    dropped = []
    for n in range(5):
        models.keep(n, 96, f"upload {n}")
        models.kept(n, f"model {n}", lambda n=n: dropped.append(n) or models.released(f"model {n}"))
        used, capacity, runs, _ = budget.snapshot()
        assert used == 96 and runs == 0 and capacity == 464  # the one kept, a charge of no session's
    assert dropped == [0, 1, 2, 3] and models.kept_mb() == 96
    assert "models kept loaded for the pages 96 MB" in budget.sentence()
    models.keep("a", 30, "smaller")
    models.kept("a", "model a", lambda: dropped.append("a"))
    assert dropped == [0, 1, 2, 3, 4] and budget.snapshot()[0] == 30  # 96 + 30 would pass 116: the old one went
    models.keep("b", 20, "another")
    models.kept("b", "model b", lambda: dropped.append("b"))
    models.use("a")  # "a" used since: "b" is dropped first
    models.keep("c", 80, "a third")
    assert dropped[-1] == "b" and budget.snapshot()[0] == 110
    with pytest.raises(CapacityError, match=r"more than this server keeps loaded for its pages \(116 MB of its 464"):
        models.keep("d", 117, "the model in big.safetensors")
    models.released("model a")
    models.forget("c")  # its loading failed
    assert budget.snapshot()[0] == 0 and models.kept_mb() == 0 and "models kept" not in budget.sentence()


def test_runs_are_admitted_beside_the_kept_models_never_on_their_memory():
    budget = Budget(100, owner_share=1.0)
    models = KeptModels(budget, 25)
    models.keep("m", 25, "a model")
    models.kept("m", "model", lambda: None)
    run = budget.request(80, "student", "a run")
    assert not run.admitted and run.position == 1  # 25 + 80 > 100: it waits
    models.released("model")  # its cache let it go
    assert run.admitted


def test_models_no_page_has_used_for_a_while_make_way_for_runs_waiting_for_room():
    """A class presses Start beside Sample pages opened earlier: the idle kept models go, the one in use stays."""
    budget = Budget(100, owner_share=1.0)
    models = KeptModels(budget, 50)
    budget.add_yielder(lambda mb: models.yield_room(mb, idle_seconds=60))
    dropped = []
    for name in ("idle", "in use"):
        models.keep(name, 25, name)
        models.kept(name, name, lambda name=name: dropped.append(name) or models.released(name))
    models._entries["idle"].used_at -= 61  # no page has asked for it for a minute
    run = budget.request(60, "student", "a run")
    assert run.admitted and dropped == ["idle"] and budget.snapshot()[0] == 85  # 25 kept + 60 training
    waiting = budget.request(30, "another", "a run")
    assert not waiting.admitted and dropped == ["idle"]  # the model in use stays: this run waits for room


def test_the_servers_own_charges_count_against_no_sessions_share():
    """The training process and the kept models are held by nobody: a job of nobody's (the command line's, a
    test's) is bounded by the share and the capacity, not by the server's own charges."""
    budget = Budget(200, owner_share=0.5)
    budget.hold(60, "the training process")
    models = KeptModels(budget, 50)
    models.keep("m", 40, "a model")
    job = budget.request(90, None, "a run of nobody's")
    assert job.admitted and budget.snapshot()[0] == 190


def test_models_loading_at_once_cannot_pass_the_bound_together():
    budget = Budget(400, owner_share=1.0)
    models = KeptModels(budget, 100)
    models.keep("first", 60, "a model loading")  # not loaded yet: nothing to drop for the next
    with pytest.raises(CapacityError, match="loading other models"):
        models.keep("second", 60, "the model in x.safetensors")
    assert budget.snapshot()[0] == 60


@pytest.fixture
def pages_models(monkeypatch):
    """The pages' cache, empty, charging a budget of this test's: models of 10 tiny files' size fit 2 at once."""
    ui.shared.checkpoint_picker.cached_checkpoint.clear()  # what earlier tests loaded, given back to their budget
    budget = Budget(4.0 * cost_of_one() / KEPT_MODELS_SHARE, owner_share=0.5)
    models = KeptModels(budget, 2.5 * cost_of_one())
    monkeypatch.setattr(ui.shared.checkpoint_picker, "kept_models", lambda: models)
    yield budget, models
    ui.shared.checkpoint_picker.cached_checkpoint.clear()  # (still this test's budget)


TINY = LMConfig(cell="lstm", vocab_size=10, embed_dim=4, hidden_size=16)


def cost_of_one():
    return loaded_model_mb(TINY)


def tiny_files(folder, n):
    tokenizer = CharTokenizer("abcdefgh \n")
    paths = []
    for i in range(n):
        paths.append(save_checkpoint(folder, f"upload-{i}", build_model(TINY), tokenizer))
    return paths


def test_the_pages_loaded_checkpoints_count_in_the_budget_and_their_count_is_bounded(pages_models, tmp_path):
    budget, models = pages_models
    assert loaded_model_mb(TINY) == parameter_count(TINY) * 4 / 2**20
    paths = tiny_files(tmp_path, 5)
    loaded = []
    for path in paths:  # five students open their uploads
        loaded.append(ui.shared.checkpoint_picker.cached_checkpoint(str(path), path.stat().st_mtime))
        used = budget.snapshot()[0]
        assert cost_of_one() <= used <= 2.5 * cost_of_one()  # the one just loaded counts; never more than 2
    assert len({id(c) for c in loaded}) == 5 and models.kept_mb() == 2 * cost_of_one()
    last = paths[-1]
    again = ui.shared.checkpoint_picker.cached_checkpoint(str(last), last.stat().st_mtime)
    assert again is loaded[-1]  # still kept: from the cache, charged once
    assert budget.snapshot()[0] == 2 * cost_of_one()
    ui.shared.checkpoint_picker.cached_checkpoint.clear()  # the cache lets them all go: so does the budget
    assert budget.snapshot()[0] == 0 and models.kept_mb() == 0


def test_a_copy_of_a_kept_model_is_charged_with_it_and_goes_with_it(pages_models, tmp_path):
    budget, models = pages_models
    (path,) = tiny_files(tmp_path, 1)
    key = (str(path), path.stat().st_mtime)
    checkpoint = ui.shared.checkpoint_picker.cached_checkpoint(*key)
    twin = ui.shared.cached_calls.reference_model(*key)
    assert twin is not checkpoint.model  # a fast-backend model's reference twin is a copy ...
    assert budget.snapshot()[0] == 2 * cost_of_one()  # ... charged as much as the model
    assert ui.shared.cached_calls.reference_model(*key) is twin  # made once while its checkpoint is kept
    assert ui.shared.cached_calls.sampling_model(*key) is checkpoint.model  # a small model samples as it is: free
    assert budget.snapshot()[0] == 2 * cost_of_one()
    ui.shared.checkpoint_picker.cached_checkpoint.clear()
    assert budget.snapshot()[0] == 0
    assert ui.shared.cached_calls.reference_model(*key) is not twin  # gone with its checkpoint: made again
