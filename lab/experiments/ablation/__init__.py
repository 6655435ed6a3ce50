"""Seed 003's GRU gate-bias ablation: do the reset and update biases matter over T = 1024 steps?

Glossary: B batch, T time (pixels per sequence), H hidden units, C classes, N sequences.

    config = AblationConfig(dataset="digits", epochs=3, seeds=(0, 1), arms=("baseline", "ablated"))
    results = run_ablation(config, out_dir="runs/ablation", emit=print)
    results["summary"]["ablated"]["val_accuracy_mean"]

    python -m lab ablation --dataset digits --epochs 3 --seeds 0 1 --out runs/ablation
    torchrun --nproc_per_node=4 -m lab ablation --dataset digits --epochs 3 --seeds 0 1 --out runs/ablation

Modules: model (arms, the model, frozen biases and their check, gate statistics), config (the config
and the one table of command-line options), runner (run_ablation, the one runner, resumable per run,
its runs spread over the ranks under torchrun, and AblationJob, the same runner on a background
thread), results (results.json / .csv, checkpoints, summaries), conclusions (the study's answer, each arm
against the baseline, the Markdown table, what a bias means in steps).

The model is seed 003's: one GRU layer in PyTorch's convention (lab.nets.cells.TorchGRULayer;
fused torch.nn.GRU by default), H = 181, one grey pixel per step, a linear head on the final
state: 3H(1 + H + 2) + C(H + 1) = 99,912 + 1,820 = 101,732 parameters.

    r_t = sigmoid(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}          z KEEPS memory (PyTorch's convention)

Both bias vectors stack [r; z; n], so indices [0:2H] are the reset and update biases.

Arms (registry ARMS):
    baseline   every bias learnable; b_iz = +1, so z ~ sigmoid(1) = 0.73 at first: keep more memory
    ablated    r and z chunks [0:2H] of BOTH b_ih and b_hh frozen at exactly 0 by gradient hooks,
               the candidate biases b_in, b_hn learnable (seed 003 section 4)
    chrono     b_iz ~ log U[1, T - 1] (Tallec & Ollivier 2018), which seed 003 tried and dropped

Deviation from seed 003, on purpose: its code fills the z chunk of both bias vectors with 1
(effective b_z = b_iz + b_hz = +2, sigmoid(2) = 0.88) while its text reasons with sigmoid(1);
lab puts +1 in b_iz only (lab.nets.cells.TorchGRULayer), which is what the text describes.

Why frozen zeros stay exactly 0 under AdamW: the hooks zero the gradient of those entries
before it reaches .grad, so Adam's moments stay 0 and its step m / (sqrt(v) + eps) is exactly 0;
decoupled weight decay multiplies the parameter by (1 - lr * wd), which leaves 0 at 0; gradient
clipping rescales, 0 stays 0. `check_frozen_biases` checks this exactly after every epoch and
at the end of every ablated run, and raises FrozenBiasError otherwise.

Training is lab.training.train.train with seed 003's recipe: AdamW, lr 5e-4 cosine-annealed to 1e-5,
batch 128, weight decay 0.01, gradient-norm clipping at 1.0 (lab's default). An epoch is
ceil(N / B) steps; batches are drawn uniformly with replacement (lab.training.tasks.ClassificationTask);
the test split is evaluated in full after every epoch. Gate statistics (z and r: mean,
quantiles, histogram, time profile) come from the step-by-step twin of the model (model.traceable_twin) reading
a fixed batch of test sequences, at initialisation and after every epoch.
"""

from .conclusions import (
    ARM_TITLES,
    ARM_WORDS,
    LEARNED,
    SIGNIFICANT,
    answer,
    arm_title,
    chrono_mean,
    compare_with_baseline,
    conclusion,
    gap_verdict,
    guessing_limit,
    resolution,
    summary_markdown,
    time_constant_table,
    verdict_rule,
)
from .config import OPTIONS, AblationConfig, add_arguments, cli_command, config_from_args
from .model import ARMS, FrozenBiasError, build_arm_model, check_frozen_biases, freeze_gate_biases, gate_bias_pairs
from .results import RESULTS_FILE, SHIPPED_DIR, epoch_rows, load_results, step_rows
from .runner import RANK_PATIENCE, AblationJob, load_study_data, run_ablation, run_arm
