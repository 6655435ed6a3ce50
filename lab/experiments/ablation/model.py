"""The arms, seed 003's model for each, the frozen reset/update biases, and the gate and bias statistics
recorded for every epoch.

Glossary: B batch, T time (pixels per sequence), H hidden units.
"""

import math
from dataclasses import dataclass

import torch

from lab.errors import LabError
from lab.nets.backends import FusedLayer
from lab.nets.cells import TorchGRULayer
from lab.nets.models import ClassifierConfig, build_model, recurrent_layers
from lab.nets.models import to_reference as traceable_twin

# lab.nets.cells' backend names appear in this package only here and in `traceable_twin` above, so a
# rename there (issue 12) changes these lines alone.
DEFAULT_BACKEND = "fused"  # torch.nn.GRU with cuDNN, as seed 003; the others run lab's TorchGRULayer
BACKEND_HELP = (
    f"{DEFAULT_BACKEND}: torch.nn.GRU (default, as seed 003); fast: lab's hand-written kernel; "
    "reference: lab.nets.cells.TorchGRULayer as written"
)
GATES = ("z", "r")
QUANTILES = tuple(i / 10 for i in range(11))  # min, deciles, max
HIST_BINS = 20  # over [0, 1]
TIME_BINS = 32  # the time profile averages T steps into this many bins
MAX_QUANTILE_ELEMENTS = 2**24  # torch.quantile's input limit; larger traces are subsampled evenly


class FrozenBiasError(RuntimeError):
    """A reset/update bias of the ablated arm is not exactly 0: the ablation is invalid."""


@dataclass(frozen=True)
class Arm:
    name: str
    description: str
    keep_bias: float = 1.0  # initial b_iz (lab.nets.cells.TorchGRULayer puts it in b_ih only)
    chrono: bool = False  # chrono initialisation of b_iz with T_max = the sequence length
    freeze_rz: bool = False  # the r and z chunks of b_ih and b_hh are frozen at 0


ARMS = {
    arm.name: arm
    for arm in [
        Arm(
            "baseline",
            "every bias learnable; update-gate bias b_iz = +1, so z ~ sigmoid(1) = 0.73 at "
            "initialisation (PyTorch convention: z keeps, so +1 means keep more memory)",
            keep_bias=1.0,
        ),
        Arm(
            "ablated",
            "reset and update biases (r and z chunks [0:2H] of b_ih and b_hh) frozen at exactly 0 "
            "by gradient hooks, so z ~ sigmoid(0) = 0.5; candidate biases b_in, b_hn learnable",
            keep_bias=0.0,
            freeze_rz=True,
        ),
        Arm(
            "chrono",
            "chrono initialisation b_iz ~ log U[1, T - 1] (mean ~5.9 at T = 1024), every bias learnable",
            chrono=True,
        ),
    ]
}


def get_arm(name):
    if name not in ARMS:
        raise LabError(f"arms: unknown arm {name!r}; valid arms are {list(ARMS)}")
    return ARMS[name]


def model_config(arm_name, config, data_info):
    arm = get_arm(arm_name)
    return ClassifierConfig(
        cell="gru_torch",
        backend=config.backend,
        input_size=data_info.get("input_size", 1),
        hidden_size=config.hidden_size,
        num_layers=1,
        num_classes=data_info["num_classes"],
        keep_bias=arm.keep_bias,
        chrono_tmax=data_info["sequence_length"] if arm.chrono else None,
    )


def gate_bias_pairs(model):
    """(b_ih, b_hh) of every GRU layer, each (3H,) stacked [r; z; n], for either backend."""
    pairs = []
    for layer in recurrent_layers(model):
        if isinstance(layer, FusedLayer) and layer.cell == "gru_torch":
            pairs.append((layer.rnn.bias_ih_l0, layer.rnn.bias_hh_l0))
        elif isinstance(layer, TorchGRULayer):
            pairs.append((layer.bias, layer.bias_hh))
        else:
            raise LabError(
                f"the gate-bias ablation needs gru_torch layers (PyTorch convention), not {type(layer).__name__}"
            )
    return pairs


def _zero_reset_update_grad(H):
    def hook(grad):  # grad (3H,) -> the same with the r and z chunks [0:2H] zeroed
        grad = grad.clone()
        grad[: 2 * H] = 0
        return grad

    return hook


def freeze_gate_biases(model):
    """Set the r and z chunks of both bias vectors of every GRU layer to 0 and keep them there with
    gradient hooks (seed 003 section 4). Returns the hook handles (`handle.remove()` unfreezes).

    The hooks do not travel inside a checkpoint: call this again after loading to keep training."""
    handles = []
    for b_ih, b_hh in gate_bias_pairs(model):
        H = b_ih.numel() // 3
        for bias in (b_ih, b_hh):
            with torch.no_grad():
                bias[: 2 * H] = 0
            handles.append(bias.register_hook(_zero_reset_update_grad(H)))
    return handles


def check_frozen_biases(model):
    """Raise FrozenBiasError unless every r and z bias (b_ih[0:2H], b_hh[0:2H]) is exactly 0."""
    for l, (b_ih, b_hh) in enumerate(gate_bias_pairs(model)):
        H = b_ih.numel() // 3
        for name, bias in (("b_ih", b_ih), ("b_hh", b_hh)):
            frozen = bias.detach()[: 2 * H]
            nonzero = int(torch.count_nonzero(frozen))
            if nonzero:
                raise FrozenBiasError(
                    f"layer {l} {name}[0:2H]: {nonzero} of {2 * H} frozen reset/update biases are not exactly 0 "
                    f"(max |b| = {frozen.abs().max().item():.3g}); the ablation is invalid"
                )
    return "passed: r and z chunks of b_ih and b_hh are exactly 0"


def build_arm_model(arm_name, seed, config, data_info, device="cpu"):
    """Seed 003's classifier for one arm, initialised under `seed`, on `device`, frozen if ablated."""
    arm = get_arm(arm_name)
    model = build_model(model_config(arm_name, config, data_info), seed=seed)
    model.to(device)  # before the hooks, so they sit on the parameters that train
    if arm.freeze_rz:
        freeze_gate_biases(model)
    return model


def rounded(x, digits=6):
    """A float for results.json: rounded, and None where JSON has no number (nan, inf)."""
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


def _stats(v):
    return {
        "mean": rounded(v.mean()),
        "std": rounded(v.std()) if v.numel() > 1 else 0.0,
        "min": rounded(v.min()),
        "max": rounded(v.max()),
    }


@torch.no_grad()
def bias_statistics(model):
    """Effective gate biases of the first layer: b_r = b_ir + b_hr, b_z = b_iz + b_hz, and b_in, b_hn."""
    b_ih, b_hh = (b.detach().float().cpu() for b in gate_bias_pairs(model)[0])
    H = b_ih.numel() // 3
    frozen = torch.cat([b_ih[: 2 * H], b_hh[: 2 * H]])
    return {
        "b_r": _stats(b_ih[:H] + b_hh[:H]),
        "b_z": _stats(b_ih[H : 2 * H] + b_hh[H : 2 * H]),
        "b_in": _stats(b_ih[2 * H :]),
        "b_hn": _stats(b_hh[2 * H :]),
        "rz_max_abs": rounded(frozen.abs().max()),
    }


def _distribution(v):
    """v (B, T, H) gate values in (0, 1) -> mean, std, quantiles, histogram and time profile."""
    v = v.detach().float().cpu()
    flat = v.flatten()
    if flat.numel() > MAX_QUANTILE_ELEMENTS:
        flat = flat[:: math.ceil(flat.numel() / MAX_QUANTILE_ELEMENTS)]
    quantiles = torch.quantile(flat, torch.tensor(QUANTILES))
    hist = torch.histc(v, bins=HIST_BINS, min=0.0, max=1.0)
    T = v.size(1)
    per_step = v.transpose(0, 1).reshape(T, -1)  # (T, B*H)
    bins = torch.tensor_split(torch.arange(T), min(TIME_BINS, T))
    chunks = [per_step[idx].flatten() for idx in bins]
    chunks_q = [
        torch.quantile(c[:: math.ceil(c.numel() / MAX_QUANTILE_ELEMENTS)], torch.tensor([0.1, 0.9])) for c in chunks
    ]
    return {
        "mean": rounded(v.mean()),
        "std": rounded(v.std()),
        "quantiles": [rounded(q) for q in quantiles],
        "histogram": [rounded(h) for h in hist / hist.sum()],
        "below_0.1": rounded((v < 0.1).float().mean()),
        "above_0.9": rounded((v > 0.9).float().mean()),
        "time": {
            "t_start": [int(idx[0]) for idx in bins],
            "t_end": [int(idx[-1]) + 1 for idx in bins],
            "mean": [rounded(c.mean()) for c in chunks],
            "q10": [rounded(q[0]) for q in chunks_q],
            "q90": [rounded(q[1]) for q in chunks_q],
        },
    }


@torch.no_grad()
def gate_statistics(model, x, gates=GATES):
    """Trace the gates of the first layer on x (G, T, 1) through the step-by-step twin (fused layers
    cannot trace; `traceable_twin` computes the same function) -> {gate: distribution}."""
    twin = traceable_twin(model)
    was_training = twin.training
    trace = [{} for _ in recurrent_layers(twin)]
    twin.eval()
    try:
        twin(x.to(next(twin.parameters()).device), trace=trace)
    finally:
        twin.train(was_training)
    return {gate: _distribution(trace[0][gate]) for gate in gates}
