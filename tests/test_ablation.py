"""Seed 003's gate-bias ablation (lab.experiments.ablation): the model, the frozen biases through AdamW,
a tiny study's results file, the CIFAR-10 code path on a fixture, the CLI and the page. CPU-only, small.

Long (over 400 lines) because the study's model, runner, results, CLI and page are tested together
over one tiny study's results file, made once.
"""

import json
import math
import re
import time
from pathlib import Path

import pytest
import torch
from helpers import TINY_STUDY_CLI, cifar_fixture, preformatted_texts, study_results, without_timing
from hypothesis import given
from hypothesis import strategies as st

from lab.__main__ import build_parser, main
from lab.data import DataError
from lab.experiments.ablation import (
    ARMS,
    OPTIONS,
    RESULTS_FILE,
    SHIPPED_DIR,
    AblationConfig,
    AblationJob,
    FrozenBiasError,
    build_arm_model,
    check_frozen_biases,
    chrono_mean,
    cli_command,
    compare_with_baseline,
    conclusion,
    config_from_args,
    epoch_rows,
    freeze_gate_biases,
    gate_bias_pairs,
    guessing_limit,
    load_results,
    load_study_data,
    resolution,
    run_ablation,
    run_arm,
    summary_markdown,
    time_constant_table,
)
from lab.nets.cells import chrono_bias
from lab.nets.models import count_parameters
from lab.training.checkpoints import load_checkpoint
from lab.training.train import resolve_device

ROOT = Path(__file__).resolve().parent.parent

PAGE = ROOT / "pages" / "6_Ablation.py"
SEED_INFO = {"num_classes": 10, "sequence_length": 1024, "input_size": 1}  # seed 003's data
H = 181


def tiny_config(**overrides):
    options = dict(
        dataset="digits",
        size=8,
        epochs=2,
        seeds=(0, 1),
        limit_train=40,
        limit_test=30,
        batch_size=16,
        gate_batch=4,
        device="cpu",
    )
    return AblationConfig(**{**options, **overrides})


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("ablation")
    events = []
    results = run_ablation(tiny_config(), out, events.append, command="python -m lab ablation ...")
    return out, results, events


# ---------------------------------------------------------------------------
# the model and its biases


@pytest.mark.parametrize("backend", ["fused", "fast"])
@pytest.mark.parametrize("arm", list(ARMS))
def test_seed_003_parameter_count(backend, arm):
    model = build_arm_model(arm, 0, AblationConfig(backend=backend), SEED_INFO)
    assert count_parameters(model) == 101_732


@pytest.mark.parametrize("backend", ["fused", "fast"])
def test_initial_biases_of_each_arm(backend):
    config = AblationConfig(backend=backend)
    ((b_ih, b_hh),) = gate_bias_pairs(build_arm_model("baseline", 0, config, SEED_INFO))
    assert torch.equal(b_ih[H : 2 * H], torch.ones(H))  # b_iz = +1: keep more memory (PyTorch convention)
    assert not b_ih[:H].any() and not b_ih[2 * H :].any() and not b_hh.any()  # +1 in b_ih only, not +2
    ((b_ih, b_hh),) = gate_bias_pairs(build_arm_model("ablated", 0, config, SEED_INFO))
    assert not b_ih.any() and not b_hh.any()
    ((b_ih, b_hh),) = gate_bias_pairs(build_arm_model("chrono", 0, config, SEED_INFO))
    b_z = b_ih[H : 2 * H]
    assert 0 <= b_z.min() and b_z.max() <= math.log(1023) and b_z.std() > 0.5


def adamw_steps(model, steps=5, weight_decay=0.1):
    """Several real AdamW steps, with weight decay and gradient clipping as lab.training.train does."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 12, 1), torch.randint(10, (8,))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=weight_decay)
    for _ in range(steps):
        _, loss, _ = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return optimizer


@pytest.mark.parametrize("backend", ["fused", "fast"])
def test_hooks_keep_frozen_biases_exactly_zero_through_adamw(backend):
    config = AblationConfig(backend=backend, hidden_size=16)
    info = {**SEED_INFO, "sequence_length": 12}
    model = build_arm_model("ablated", 0, config, info)
    ((b_ih, b_hh),) = gate_bias_pairs(model)
    optimizer = adamw_steps(model)
    h = 16
    for bias in (b_ih, b_hh):
        assert torch.equal(bias[: 2 * h], torch.zeros(2 * h))  # exactly 0, not merely small
        assert bias[2 * h :].abs().min() > 0  # the candidate bias learned
        assert not bias.grad[: 2 * h].any() and bias.grad[2 * h :].any()
        state = optimizer.state[bias]  # Adam's moments never saw a gradient there
        assert not state["exp_avg"][: 2 * h].any() and not state["exp_avg_sq"][: 2 * h].any()
    assert check_frozen_biases(model).startswith("passed")
    # the control: without the hooks the same steps move the r and z biases
    control = build_arm_model("baseline", 0, AblationConfig(backend=backend, hidden_size=16), info)
    ((c_ih, _),) = gate_bias_pairs(control)
    with torch.no_grad():
        c_ih[h : 2 * h] = 0
    adamw_steps(control)
    assert c_ih[: 2 * h].abs().min() > 0


def test_adamw_decoupled_decay_keeps_zero_at_zero():
    """Why freezing at 0 works under AdamW: decay multiplies by (1 - lr*wd); 0 stays 0, others shrink."""
    p = torch.nn.Parameter(torch.tensor([0.0, 1.0]))
    optimizer = torch.optim.AdamW([p], lr=0.1, weight_decay=0.5)
    for _ in range(3):
        p.grad = torch.zeros(2)
        optimizer.step()
    assert p[0].item() == 0.0 and p[1].item() == pytest.approx(0.95**3)


def test_frozen_bias_check_raises_when_tampered():
    model = build_arm_model("ablated", 0, AblationConfig(hidden_size=16), SEED_INFO)
    ((b_ih, b_hh),) = gate_bias_pairs(model)
    with torch.no_grad():
        b_hh[16 + 3] = 1e-12
    with pytest.raises(FrozenBiasError, match=r"b_hh\[0:2H\]: 1 of 32"):
        check_frozen_biases(model)


def test_a_run_whose_frozen_bias_moves_fails_loudly():
    config = tiny_config(epochs=1, seeds=(0,), arms=("ablated",), hidden_size=16)
    data = load_study_data(config)
    model = build_arm_model("ablated", 0, config, data.info)
    ((b_ih, _),) = gate_bias_pairs(model)

    def tamper(event):  # something outside the hooks writes to a frozen bias mid-run
        if event["type"] == "step":
            with torch.no_grad():
                b_ih[0] = 0.5

    with pytest.raises(FrozenBiasError):
        run_arm("ablated", 0, config, data, tamper, model=model)


def test_freeze_handles_remove_and_config_validation():
    model = build_arm_model("baseline", 0, AblationConfig(hidden_size=8), SEED_INFO)
    handles = freeze_gate_biases(model)
    assert len(handles) == 2 and check_frozen_biases(model).startswith("passed")
    for bad, match in [
        (dict(arms=("baseline", "nope")), "valid arms are"),
        (dict(seeds=(1, 1)), "twice"),
        (dict(dataset="mnist"), "dataset: input should be .digits. or .cifar10."),
        (dict(epochs=0), "epochs"),
        (dict(backend="cuda"), "backend"),
        (dict(size=100), "size"),
    ]:
        with pytest.raises(ValueError, match=match):
            AblationConfig(**bad)


def test_time_constants_and_chrono_mean():
    rows = {r["b_z"]: r for r in time_constant_table(seq_len=1024)}
    assert rows[1.0]["sigmoid(b)"] == pytest.approx(0.7311, abs=1e-4)
    assert rows[1.0]["tau (steps)"] == pytest.approx(math.e + 1)
    assert rows[0.0]["half-life (steps)"] == pytest.approx(1.0)
    assert chrono_mean(1024) == pytest.approx(
        chrono_bias(200_000, 1024, torch.Generator().manual_seed(0)).mean().item(), abs=0.01
    )


# ---------------------------------------------------------------------------
# a tiny study


def test_tiny_study_writes_a_well_formed_results_file(tiny_study):
    out, results, events = tiny_study
    assert {p.name for p in out.iterdir()} == {
        "results.json",
        "results.csv",
        "digits-baseline-seed0.safetensors",
        "digits-ablated-seed0.safetensors",
    }
    saved = load_results(out)
    assert saved == json.loads(json.dumps(results)) and saved["complete"]
    assert saved["dataset"]["sequence_length"] == 64 and saved["dataset"]["n_train"] == 40
    assert saved["model"]["parameters"] == 101_732
    assert [(r["arm"], r["seed"]) for r in saved["runs"]] == [
        ("baseline", 0),
        ("ablated", 0),
        ("baseline", 1),
        ("ablated", 1),
    ]
    for run in saved["runs"]:
        assert [e["epoch"] for e in run["epochs"]] == [1.0, 2.0] and len(run["steps"]) == 6  # 3 steps per epoch
        for record in [run["initial"]] + run["epochs"]:
            for gate in ("z", "r"):
                stats = record["gates"][gate]
                assert len(stats["quantiles"]) == 11 and stats["quantiles"] == sorted(stats["quantiles"])
                assert sum(stats["histogram"]) == pytest.approx(1.0, abs=1e-4)
                assert len(stats["time"]["mean"]) == 32 and stats["time"]["t_end"][-1] == 64
        assert 0 <= run["final"]["val_accuracy"] <= 1 and run["final"]["train_loss"] > 0
        frozen = run["epochs"][-1]["biases"]["rz_max_abs"]
        if run["arm"] == "ablated":
            assert frozen == 0 and run["frozen_bias_check"].startswith("passed")
            assert abs(run["initial"]["gates"]["z"]["mean"] - 0.5) < 0.02  # sigmoid(0)
        else:
            assert frozen > 0 and run["frozen_bias_check"] is None
            assert abs(run["initial"]["gates"]["z"]["mean"] - 0.731) < 0.02  # sigmoid(1): keeps ~73%
    for arm in ("baseline", "ablated"):
        s = saved["summary"][arm]
        assert s["n_seeds"] == 2 and s["val_accuracy_std"] is not None and s["val_accuracy_mean"] is not None
    assert "±" in summary_markdown(saved)
    assert len(epoch_rows(saved)) == 4 * 3 and (out / "results.csv").read_text().count("\n") == 13
    types = [e["type"] for e in events]
    assert types[0] == "study_start" and types[-1] == "study_done" and types.count("epoch") == 8
    checkpoint = load_checkpoint(out / "digits-ablated-seed0.safetensors")
    assert checkpoint.meta["extra"]["arm"] == "ablated" and checkpoint.metrics["history"][-1]["val_accuracy"] >= 0
    assert check_frozen_biases(checkpoint.model).startswith("passed")


def test_a_stopped_study_resumes_where_it_stopped(tiny_study, tmp_path):
    _, uninterrupted, _ = tiny_study
    events = []
    stop_after_first = lambda: any(e["type"] == "run_done" for e in events)  # noqa: E731
    first = run_ablation(tiny_config(), tmp_path, events.append, stop_after_first)
    saved = load_results(tmp_path)
    assert not first["complete"] and not saved["complete"]
    assert [(r["arm"], r["seed"]) for r in saved["runs"]] == [("baseline", 0)]  # saved right after the run
    assert without_timing(saved["runs"][0]) == without_timing(uninterrupted["runs"][0])

    resumed_events = []
    resumed = run_ablation(tiny_config(), tmp_path, resumed_events.append)
    assert resumed_events[0]["type"] == "study_start" and resumed_events[0]["resumed"] == 1
    ran = [(e["arm"], e["seed"]) for e in resumed_events if e["type"] == "run_start"]
    assert ran == [("ablated", 0), ("baseline", 1), ("ablated", 1)]  # the finished run is not trained again
    assert resumed["complete"] and load_results(tmp_path) == json.loads(json.dumps(resumed))
    assert resumed["created"] == first["created"]
    assert [without_timing(r) for r in resumed["runs"]] == [without_timing(r) for r in uninterrupted["runs"]]
    assert resumed["summary"] == uninterrupted["summary"]
    assert {p.name for p in tmp_path.iterdir()} >= {
        "digits-baseline-seed0.safetensors",
        "digits-ablated-seed0.safetensors",
    }
    written = (tmp_path / RESULTS_FILE).read_bytes()
    again = []
    assert run_ablation(tiny_config(), tmp_path, again.append)["complete"]
    assert not [e for e in again if e["type"] == "run_start"] and (tmp_path / RESULTS_FILE).read_bytes() == written


def test_resuming_with_another_config_is_refused(tiny_study):
    out, _, _ = tiny_study
    with pytest.raises(DataError, match=r"another config \(epochs: 2 there, 3 here\).*another --out"):
        run_ablation(tiny_config(epochs=3), out)


def test_cifar10_code_path_on_a_fixture(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10

    md5, _ = cifar_fixture(tmp_path)
    monkeypatch.setattr(CIFAR10, "train_list", [[name, md5[name]] for name, _ in CIFAR10.train_list])
    monkeypatch.setattr(CIFAR10, "test_list", [["test_batch", md5["test_batch"]]])
    monkeypatch.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": md5["batches.meta"]})
    config = AblationConfig(
        dataset="cifar10",
        root=str(tmp_path),
        epochs=1,
        seeds=(0,),
        arms=("ablated",),
        batch_size=10,
        hidden_size=8,
        gate_batch=2,
        device="cpu",
    )
    results = run_ablation(config)
    assert results["dataset"]["sequence_length"] == 1024 and results["dataset"]["n_train"] == 10
    assert results["runs"][0]["frozen_bias_check"].startswith("passed") and results["complete"]


# ---------------------------------------------------------------------------
# the CLI


def test_cli_help_and_bad_input(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["ablation", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for word in ("--limit-train", "--download", "--backend", "baseline", "ablated", "chrono", "z keeps"):
        assert word in text
    assert main(["ablation", "--size", "100", "--out", str(tmp_path)]) == 2
    assert "size" in capsys.readouterr().err


def test_the_rerun_command_and_the_parser_come_from_one_table():
    assert {o.field for o in OPTIONS} == set(AblationConfig.__dataclass_fields__)  # every field is an option
    config = AblationConfig(
        dataset="cifar10",
        root="/data/c10",
        download=True,
        arms=("chrono", "ablated"),
        seeds=(3, 4),
        epochs=7,
        backend="fast",
        hidden_size=12,
        lr=1e-3,
        min_lr=0.0,
        weight_decay=0.1,
        batch_size=5,
        grad_clip=0.5,
        limit_train=9,
        limit_test=8,
        gate_batch=3,
        checkpoint_seeds=(4,),
        device="cpu",
        size=16,
    )
    changed = [f for f in AblationConfig.__dataclass_fields__ if getattr(config, f) != getattr(AblationConfig(), f)]
    assert len(changed) == len(OPTIONS)  # the round trip below covers every option
    command = cli_command(config, "runs/x")
    args = build_parser().parse_args(command.split()[3:])
    assert config_from_args(args) == config and args.out == "runs/x"
    assert (
        cli_command(AblationConfig()) == "python -m lab ablation --dataset digits --epochs 40 --seeds 0 1 2 "
        "--arms baseline ablated"
    )


def test_cli_runs_a_tiny_study(capsys, tmp_path):
    code = main(
        [
            "ablation",
            *TINY_STUDY_CLI,
            "--seeds",
            "0",
            "--backend",
            "fast",
            "--out",
            str(tmp_path / "new"),
        ]
    )
    assert code == 0
    results = load_results(tmp_path / "new" / RESULTS_FILE)  # the folder is made
    assert "--backend fast" in results["command"] and results["model"]["backend"] == "fast"
    assert "| baseline |" in capsys.readouterr().out


# ---------------------------------------------------------------------------
# the page


def page_test(**state):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(str(PAGE.relative_to(ROOT)))
    for key, value in state.items():
        at.session_state[key] = value
    return at


def test_page_renders_the_shipped_results():
    assert (SHIPPED_DIR / RESULTS_FILE).is_file(), "no shipped ablation results"
    at = page_test().run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.table[0].value
    assert list(table["arm"]) == list(load_results(SHIPPED_DIR)["summary"]) and "test accuracy" in table.columns
    assert not at.dataframe  # a few rows: a static table, not a data grid
    assert not any("python" in block for block in preformatted_texts(at))  # no page shows a shell command
    said = [re.sub(r"\\(.)", r"\1", m.value) for m in at.markdown if m.value.startswith("**What this study says:**")]
    assert said == [f"**What this study says:** {conclusion(load_results(SHIPPED_DIR))}"]  # as lab writes it


def test_the_study_and_its_gates_are_two_sections_each_with_its_own_charts():
    """The shipped study's first screen holds its answer (one chart) and its details (the loss curves, in an
    expander); the four charts of what training did to the gates are a section of their own, under the
    same answer."""

    def charts(at):
        return sorted(re.sub(r".*ablation_shipped_", "", c.proto.id) for c in at.get("plotly_chart"))

    at = page_test().run()
    assert not at.exception and charts(at) == ["answer", "loss"]
    at.radio(key="ablation_section").set_value("gates").run()
    assert not at.exception, [e.value for e in at.exception]
    assert charts(at) == ["answer", "gate_r", "gate_z", "hist", "profile"]
    assert [h.value for h in at.header] == ["2 · Inside its gates: what training did to z and r"]
    assert any("Frozen-bias check" in s.value for s in at.success)  # the ablated arm's biases stayed at 0


def test_the_conclusion_follows_the_numbers():
    study = load_results(SHIPPED_DIR)  # the shipped study: seed 003's 40 epochs, three arms, three seeds each
    shipped = conclusion(study)
    assert study["complete"] and shipped.startswith(f"after {study['config']['epochs']} epochs (")
    base = study["summary"]["baseline"]["val_accuracy_mean"]
    for c in compare_with_baseline(study):  # each arm: under what the test images resolve, or Welch's verdict
        least = resolution(study["dataset"]["n_test"], base + c["difference"], base)
        verdict = "" if abs(c["difference"]) < least else "differs from" if c["p"] < 0.05 else "does not differ from"
        assert f"{c['arm']} {verdict}".strip() in shipped and f"p = {c['p']:.2f}" in shipped
    many = 10**6  # so many test images that only the seeds limit the comparison
    at_chance = conclusion(study_results({"baseline": [0.11, 0.12], "ablated": [0.10, 0.12]}, n_test=120))
    assert "no arm is above chance yet" in at_chance and "cannot yet say" in at_chance
    assert "guessing gives 10%, and with 120 test images guessing can reach 15.4%" in at_chance
    same = conclusion(study_results({"baseline": [0.80, 0.84, 0.82], "ablated": [0.81, 0.79, 0.83]}, n_test=many))
    assert same == (
        "after 6 epochs (baseline 82.0%, ablated 81.0%): ablated does not differ from the baseline "
        "beyond the luck of the random seeds (-1.0 points, Welch's t-test p = 0.57)."
    )  # t = -0.61, 4 df
    apart = conclusion(
        study_results(
            {"baseline": [0.60, 0.62, 0.61], "ablated": [0.60, 0.61, 0.64], "chrono": [0.90, 0.91, 0.92]}, n_test=many
        )
    )
    assert "ablated does not differ from the baseline" in apart
    assert "chrono differs from the baseline by more than the luck of the random seeds explains (+30.0 points" in apart
    two = conclusion(study_results({"baseline": [0.80, 0.84], "ablated": [0.60, 0.62, 0.61]}, complete=False))
    assert two.startswith("So far (the study is incomplete): after 6 epochs") and "differs" in two
    # one seed on a side: no test, the spread of the other decides nothing
    spread = conclusion(study_results({"baseline": [0.90], "ablated": [0.60, 0.62, 0.61]}))
    assert "single random seed" in spread
    one_seed = conclusion(study_results({"baseline": [0.75], "ablated": [0.72]}, complete=False, n_test=many))
    assert one_seed.startswith("So far (the study is incomplete): baseline ended 3.0 points above ablated")
    assert "single random seed" in one_seed
    assert "No run has finished" in conclusion(study_results({"baseline": [], "ablated": []}))


def test_ten_test_images_cannot_tell_30_from_20_percent_and_the_sentence_says_so():
    """The live run's smallest setting: 30% is no longer called "near chance" beside "guessing gives
    10%"; what limits it is the 10 test images, and the sentence says by how much (the binomial
    standard error of the difference, Agresti-Caffo: 36.2 points at 30% and 20%)."""
    said = conclusion(study_results({"baseline": [0.3], "ablated": [0.2]}, n_test=10))
    assert "near chance" not in said
    assert said == (
        "after 6 epochs (baseline 30.0%, ablated 20.0%), with 10 test images a difference under 36.2 points "
        "cannot tell the arms apart: baseline ended 10.0 points above ablated."
    )
    assert resolution(10, 0.3, 0.2) == pytest.approx(1.96 * math.sqrt((4 / 12 * 8 / 12 + 3 / 12 * 9 / 12) / 12))
    one_epoch = dict(study_results({"baseline": [0.3], "ablated": [0.2]}, n_test=10), config={"epochs": 1})
    assert conclusion(one_epoch).startswith("after 1 epoch (")  # not "1 epochs"


@given(
    n_test=st.integers(10, 5000),
    first=st.floats(0, 1),
    second=st.floats(0, 1),
    chance=st.sampled_from([0.1, 0.5]),
)
def test_the_resolution_shrinks_with_more_test_images_and_never_vanishes(n_test, first, second, chance):
    """A property of every setting: more test images resolve smaller differences, a perfect or a zero
    score still leaves some doubt, and guessing's limit sits above chance."""
    assert 0 < resolution(4 * n_test, first, second) < resolution(n_test, first, second) < 1
    assert chance < guessing_limit(n_test, chance) < 1


def test_page_without_results_and_live_run(monkeypatch, tmp_path):
    """The live run at its smallest: one epoch of one step per arm (16 sequences, batch 16), 10 test
    images. Counts read right ("1 epoch of 1 AdamW step"), a loss or accuracy "curve" of single points
    is a sentence instead of an empty chart, and the verdict names the 10 test images as its limit."""
    monkeypatch.setenv("RNNLAB_ABLATION_DIR", str(tmp_path))  # no results there
    at = page_test(ablation_size=8, ablation_train=16, ablation_test=10, ablation_epochs=1, ablation_batch=16).run()
    assert not at.exception and any("no results of the study" in i.value for i in at.info)
    assert not any("python" in i.value or str(tmp_path) in i.value for i in at.info)  # no command, no folder
    assert not at.button  # the live run's section is not on the screen
    at.radio(key="ablation_section").set_value("live").run()
    assert (
        not at.exception
        and [i.value for i in at.info] == [at.info[0].value]  # the answer's notice alone: no results shipped
        and "no results of the study" in at.info[0].value
        and [h.value for h in at.header] == ["5 · Run it yourself (a short live version)"]
    )
    at.button(key="FormSubmitter:ablation_live_form-Train both arms").click().run()
    assert not at.exception, [e.value for e in at.exception]
    job = at.session_state["ablation_job"]
    assert isinstance(job.job, AblationJob) and job.wait(60) == "finished", job.message  # started by lab.runs
    saved = load_results(job.out_dir)  # the live run saves as the command line does, in its own folder
    assert saved == json.loads(json.dumps(job.results)) and saved["command"] == job.command
    assert [(r["arm"], r["seed"]) for r in saved["runs"]] == [("baseline", 0), ("ablated", 0)]
    assert saved["training"]["device"] == str(resolve_device("auto"))  # the study's device policy
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    live = [t.value for t in at.table if "test accuracy" in t.value.columns]
    assert len(live) == 1 and set(live[0]["arm"]) == {"baseline", "ablated"}
    assert any("Frozen-bias check" in s.value for s in at.success)
    shown = " ".join(m.value for m in [*at.markdown, *at.caption])
    assert "1 epoch of 1 AdamW step " in shown and "random seed 0." in shown
    assert not re.search(r"\b1 (epochs|steps|AdamW steps|random seeds)\b", shown), shown
    assert not any("python" in block for block in preformatted_texts(at))  # the command is not on the page
    charts = [c.proto.id for c in at.get("plotly_chart")]
    assert not [c for c in charts if c.endswith("ablation_live_loss") or c.endswith("ablation_live_acc")], charts
    assert "a curve needs two steps" in shown and "a curve over epochs needs two" in shown
    verdict = conclusion(saved)
    assert "with 10 test images" in verdict and "near chance" not in verdict
    assert verdict in re.sub(r"\\(.)", r"\1", shown)


def test_a_live_ablation_and_training_runs_share_the_servers_budget(monkeypatch):
    import threading

    import lab.experiments.ablation.runner
    from lab.nets.models import LMConfig, build_model
    from lab.server.capacity import Budget
    from lab.server.jobs import TrainingJob
    from lab.training.tasks import LMTask
    from lab.training.train import TrainConfig

    task = LMTask.from_text("abcdefgh" * 40, "char")
    budget = Budget(capacity=1, owner_share=1.0)  # room for one job at a time

    def training_job(**options):
        return TrainingJob(
            "run",
            build_model(LMConfig(vocab_size=task.vocab_size, hidden_size=8, embed_dim=4)),
            task,
            TrainConfig(max_steps=2, batch_size=2, block_size=8, device="cpu"),
            cost_mb=1,
            budget=budget,
            **options,
        )

    training_gate, ablation_gate = threading.Event(), threading.Event()
    training = training_job(sampler=lambda model: training_gate.wait(30) and "", sample_every_s=0).start()
    real_run_arm = lab.experiments.ablation.runner.run_arm
    monkeypatch.setattr(
        lab.experiments.ablation.runner,
        "run_arm",
        lambda *args, **kwargs: ablation_gate.wait(30) and real_run_arm(*args, **kwargs),
    )
    ablation = AblationJob(tiny_config(epochs=1, seeds=(0,), arms=("baseline",)), cost_mb=1, budget=budget).start()
    assert ablation.status == "queued" and ablation.queue_position == 1  # the training run holds the budget
    training_gate.set()
    assert training.wait(30) == "finished"
    later = training_job().start()
    deadline = time.monotonic() + 30
    while ablation.status != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ablation.status == "running" and later.status == "queued"  # now the live ablation holds it
    ablation_gate.set()
    assert ablation.wait(60) == "finished", ablation.message
    assert later.wait(30) == "finished"
    assert budget.snapshot()[2:] == (0, 0)  # everything given back


def test_a_live_ablation_in_a_process_of_its_own_gives_the_threads_results(tmp_path):
    config = tiny_config(epochs=1, seeds=(0,), arms=("baseline",))
    jobs = [
        AblationJob(config, out_dir=tmp_path / where, cost_mb=1, in_process=where == "process").start()
        for where in ("thread", "process")
    ]
    for job in jobs:
        assert job.wait(120) == "finished", job.message
    thread, process = (load_results(job.out_dir) for job in jobs)
    assert [r["final"] for r in process["runs"]] == [r["final"] for r in thread["runs"]]
    assert [e["type"] for e in jobs[1].events()] == [e["type"] for e in jobs[0].events()]


def test_welchs_t_test_against_the_baseline_by_hand():
    def study(accuracies):
        return {"summary": {arm: {"val_accuracy_by_seed": dict(enumerate(v))} for arm, v in accuracies.items()}}

    (apart,) = compare_with_baseline(study({"baseline": [0.90, 0.91, 0.92], "ablated": [0.60, 0.62, 0.61]}))
    # means 0.61 and 0.91, each variance 1e-4 over 3 seeds: t = -0.30 / sqrt(2 * 1e-4 / 3) = -36.74, 4 d.o.f.
    assert apart["arm"] == "ablated" and apart["difference"] == pytest.approx(-0.30)
    assert apart["t"] == pytest.approx(-36.742, abs=1e-3) and apart["p"] < 1e-5 and apart["n"] == (3, 3)
    (close,) = compare_with_baseline(study({"baseline": [0.80, 0.84, 0.82], "ablated": [0.81, 0.79, 0.83]}))
    assert close["t"] == pytest.approx(-0.612, abs=1e-3) and close["p"] > 0.5  # the seeds alone explain it
    assert compare_with_baseline(study({"baseline": [0.80], "chrono": [0.85, 0.86]})) == []  # no spread yet
    table = summary_markdown(
        {
            **study({"baseline": [0.9, 0.91], "chrono": [0.95, 0.96]}),
            "summary": {
                arm: {
                    "n_seeds": 2,
                    "val_accuracy_by_seed": dict(enumerate(v)),
                    "val_accuracy_mean": sum(v) / 2,
                    "val_accuracy_std": 0.007,
                    "val_loss_mean": None,
                    "val_loss_std": None,
                    "train_loss_mean": None,
                    "train_loss_std": None,
                    "z_mean_final": None,
                    "b_z_mean_final": None,
                }
                for arm, v in {"baseline": [0.9, 0.91], "chrono": [0.95, 0.96]}.items()
            },
        }
    )
    assert "| chrono | +5.0 points |" in table
