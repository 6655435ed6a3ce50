"""One record per cell family (lab.nets.families): every fact about a cell lives there, the rest of the lab
reads it. The equations in the record are parsed the way the step-through reads them, and nothing outside
lab/nets keeps a table or an if-chain of its own keyed by cell ids."""

import ast
import dataclasses
from pathlib import Path

import pytest

from lab.instruments.race import width_for_parameters
from lab.nets.backends import BACKENDS, make_layer
from lab.nets.cost import parameter_count, training_memory_bytes
from lab.nets.equations import parsed, plain, symbol, worked
from lab.nets.families import CELLS, FAMILIES, RACES, keeps_with_gates, kinds, racers, text_racers
from lab.training.presets import PRESETS

ROOT = Path(__file__).resolve().parent.parent
# the lab's own code outside the record's package (the presets name a cell each, as a recipe does)
READERS = [
    p
    for p in [*ROOT.glob("lab/**/*.py"), *ROOT.glob("ui/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"]
    if not p.is_relative_to(ROOT / "lab" / "nets") and p != ROOT / "lab" / "training" / "presets.py"
]
# the single cell ids left in that code, each a fact of its own and not of a family
NAMED_ON_PURPOSE = {
    ("lab/experiments/ablation/config.py", "gru_torch"): "seed 003's study is of PyTorch's GRU",
    ("lab/experiments/ablation/model.py", "gru_torch"): "seed 003's study is of PyTorch's GRU",
    ("lab/experiments/ablation/results.py", "gru_torch"): "seed 003's study is of PyTorch's GRU",
    ("lab/instruments/learning.py", "gru_torch"): "the learning lesson's one small model",
    ("lab/training/checkpoints/store.py", "scan"): "a four-character scan model's one layer",
    ("ui/train/form.py", "scan"): "a four-character scan preset's one layer",
    ("ui/train/runs.py", "scan"): "a four-character scan preset's one layer",
    ("ui/memory/settings.py", "rnn"): "the memory probe's first choice",
    ("lab/lessons/toys.py", "scan"): "the toy lesson compares the gated cells with the selective scan",
    ("ui/lessons/scanning.py", "scan"): "the lesson about the selective scan, and its background's id",
    ("ui/lessons/common.py", "scan"): "a lesson background's id",
    ("ui/lessons/__init__.py", "scan"): "a lesson's id",
}


def cell_literals(path):
    """(line, ids) for every literal, dict, tuple, list or set in `path` that names family ids."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            parts = node.keys
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = node.elts
        else:
            continue
        ids = [p.value for p in parts if isinstance(p, ast.Constant) and p.value in FAMILIES]
        if len(ids) >= 2:
            found.append((node.lineno, ids))
    return found


def test_no_table_keyed_by_cell_ids_is_left_outside_the_record():
    tables = {str(p.relative_to(ROOT)): cell_literals(p) for p in READERS}
    assert {path: found for path, found in tables.items() if found} == {}


def test_every_cell_id_still_written_outside_the_record_is_one_named_on_purpose():
    named = set()
    for path in READERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in FAMILIES:
                named.add((str(path.relative_to(ROOT)), node.value))
    assert named == set(NAMED_ON_PURPOSE)


def test_the_guard_finds_a_table_and_a_chain(tmp_path):
    """The two checks above read what they should: a colour table and an if-chain are found."""
    code = 'COLOURS = {"rnn": "#777", "lstm": "#d00"}\nif cell == "gru_seed" or cell == "min_gru":\n    pass\n'
    path = tmp_path / "guard_probe.py"
    path.write_text(code, encoding="utf-8")
    assert cell_literals(path) == [(1, ["rnn", "lstm"])]
    literals = [n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Constant) and n.value in FAMILIES]
    assert literals == ["rnn", "lstm", "gru_seed", "min_gru"]


@pytest.mark.parametrize("cell", list(FAMILIES))
def test_a_family_is_whole(cell):
    f = FAMILIES[cell]
    assert f.id == cell == f.reference.cell and CELLS[cell] is f.reference
    assert f.fast.cell == cell and (f.fused is not None or f.no_fused_because)
    # every value the cell traces is written by one line of its equations, in the order it traces them
    assert [name for e in f.equations for name in e.writes] == list(f.reference.gate_names)
    assert bool(f.keep) == bool(f.keep_label) and f.memory in f.reference.gate_names
    assert f.saved_per_unit > 0 and f.colour.startswith("#")
    # every form takes the options its constructor names, and nothing else, from one call
    for backend in (b for b, forms in BACKENDS.items() if cell in forms):
        layer = make_layer(cell, 3, 4, backend, keep_bias=2.0, chrono_tmax=None, scan_mode="sequential")
        assert getattr(layer, "scan_mode", "sequential") == "sequential" and layer.hidden_size == 4
    assert "\\" not in f.convention and f.convention.startswith(f.name + ": ")


def test_names_and_colours_tell_every_family_apart():
    assert len({f.name for f in FAMILIES.values()}) == len({f.colour for f in FAMILIES.values()}) == len(FAMILIES)


def test_kinds_group_the_two_gru_conventions_and_the_races_take_one_of_each():
    assert [f.id for f in kinds()["gru"]] == ["gru_seed", "gru_torch"]
    assert sum(len(members) for members in kinds().values()) == len(FAMILIES)
    for race in RACES:  # at most one runner of each kind: the record says which, not FAMILIES' order
        kinds_racing = [FAMILIES[c].kind or c for c in racers(race)]
        assert len(kinds_racing) == len(set(kinds_racing)), race
    assert "gru_torch" in racers("memory") and "gru_seed" not in racers("memory")
    assert [c for c in FAMILIES if keeps_with_gates(c)] == ["gru_seed", "gru_torch", "lstm"]


def test_a_family_joins_a_race_by_its_record_and_the_races_read_it():
    """Which races a cell runs in was the order of FAMILIES (the last of each kind) and a flag for one race: now
    each record says so (`races`), and the toy tasks' runners (lab.experiments.probe.TOY_CELLS, the Train page's
    memory race and lesson 10) and the text race's (text_racers) are read from it."""
    from lab.experiments.probe import TOY_CELLS

    assert set(RACES) == {"memory", "text"}
    assert TOY_CELLS == tuple(c for c, f in FAMILIES.items() if "memory" in f.races) == racers("memory")
    assert text_racers() == tuple(c for c, f in FAMILIES.items() if "text" in f.races) == racers("text")
    assert FAMILIES["gru_seed"].races == ()  # its kind races as PyTorch's convention
    with pytest.raises(ValueError, match="memory, text"):
        racers("marathon")
    with pytest.raises(ValueError, match="marathon"):
        dataclasses.replace(FAMILIES["rnn"], races=("marathon",))


def test_an_equation_is_read_as_what_it_writes_and_reads():
    e = parsed(r"h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde h_t")
    assert (e.writes, e.reads, e.updates_state) == (("h",), ("z", "h_prev", "n"), True)
    gate = parsed(r"r_t = \sigma(W_r x_t + U_r h_{t-1} + b_r)")  # x_t and the weights are not per-unit values
    assert (gate.writes, gate.reads, gate.updates_state) == (("r",), ("h_prev",), False)
    assert parsed(r"[A_t, B_t] = \sigma\big(\mathrm{gate}(e_t)\big)").writes == ("A", "B")


def test_a_worked_line_writes_one_units_numbers_into_the_update():
    values = {"z": "0.200", "h_prev": "0.500", "n": "−0.300", "h": "0.340"}
    seed_gru = FAMILIES["gru_seed"].equations[-1]
    assert worked(seed_gru, values) == "h_t = (1 − 0.200) · 0.500 + 0.200 · −0.300 = 0.340"
    rnn = FAMILIES["rnn"].equations[0]  # matrices: the symbols stay, the state it started from is named
    assert worked(rnn, {"h_prev": "0.100", "h": "0.200"}) == (
        "h_t = tanh(W_xh x_t + W_hh h_{t−1} + b_h) = 0.200, from h_{t−1} = 0.100"
    )
    assert symbol(FAMILIES["gru_seed"].latex, "n") == "h̃_t" and symbol(FAMILIES["gru_torch"].latex, "n") == "n_t"
    assert plain(r"c_t = f_t \odot c_{t-1} + i_t \odot g_t") == "c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t"


def test_the_text_race_leaves_out_the_minimal_cells_because_at_equal_parameters_they_need_far_more_memory():
    """At the parameter count of the Train page's model a minGRU or minLSTM (no U) is several times as wide as the
    GRU, and its training step needs several times the memory: the text race keeps to the cells that fit."""
    assert "gru_torch" in text_racers() and "min_gru" not in text_racers() and "min_gru" in racers("memory")
    page_model = dataclasses.replace(PRESETS["astra-alpha"].model, vocab_size=80)
    target = parameter_count(page_model)
    memory = {}
    for cell in ("gru_torch", "min_gru", "min_lstm"):
        config = dataclasses.replace(page_model, cell=cell, hidden_size=width_for_parameters(page_model, cell, target))
        memory[cell] = training_memory_bytes(config, 32, 64)
    assert memory["min_gru"] > 4 * memory["gru_torch"] and memory["min_lstm"] > 4 * memory["gru_torch"]


def test_home_shows_every_family_by_its_record():
    """Home's list of families was a table of its own (titles and notes by cell id): it now reads the records."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert [s.value for s in at.subheader] == [f.name for f in FAMILIES.values()]
    assert len(at.latex) == len(FAMILIES) and not at.exception
    assert all(any(f.note in c.value for c in at.caption) for f in FAMILIES.values())
