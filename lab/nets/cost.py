"""What a model costs, computed from its config alone, and the limits a shared server sets.

Glossary: B batch, T time steps per window, E embedding, H hidden, I layer input,
G gate blocks per cell, V vocabulary, C classes, P parameters.

Nothing here builds a module, not even on the meta device: a config that asks
for 100,000 layers or H = 10**12 is refused by arithmetic in microseconds
instead of after a minute of construction (or an allocator's RuntimeError).

    parameter_count(config)                          -> P, equal to count_parameters(build_model(config))
    loaded_model_mb(config)                          -> MB its float32 weights hold once loaded
    training_memory_bytes(config, batch, steps)      -> bytes one AdamW training step needs
    run_memory_mb(config, batch, steps)              -> MB a run adds to the server: that, and a run's own
    check_model_size(config)                         CostError over RNNLAB_MAX_PARAMS or RNNLAB_MAX_LAYERS
    check_training_memory(config, batch, steps)      CostError over RNNLAB_MAX_TRAIN_MEMORY_MB

The limits are the server's settings (lab.settings), read on every call, so a
test can change them without re-importing. Defaults suit Streamlit Community
Cloud's 1-2.7 GB: 50M parameters is 200 MB of float32 weights (the largest
shipped preset, Leviathan-LSTM, has 24M), and 1 GB for one training run leaves
room for the app itself and a second job.
"""

from lab.errors import LabError
from lab.nets.cells import RecurrentLayer
from lab.nets.families import CELLS, FAMILIES
from lab.settings import server_settings
from lab.words import count

FLOAT_BYTES = 4  # every lab model trains in float32


class CostError(LabError):
    """A model or a run too large for this server; the message says what to make smaller."""


def max_params():
    """The most parameters a model may have: RNNLAB_MAX_PARAMS."""
    return server_settings().max_params


def max_layers():
    """The most recurrent layers a model may have: RNNLAB_MAX_LAYERS."""
    return server_settings().max_layers


def max_train_memory_bytes():
    """The most training memory one run may need, in bytes: RNNLAB_MAX_TRAIN_MEMORY_MB MiB."""
    return server_settings().max_train_memory_mb * 2**20


# ---------------------------------------------------------------------------
# parameters, mirroring the modules in lab.nets.cells and lab.nets.models


def _linear(n_in, n_out):
    return n_in * n_out + n_out  # nn.Linear: weight and bias


def _scan_layer(n_in, H, gate_hidden):
    """ScanLayer: input projection when I != H, then the gate MLP H -> gate_hidden -> 2H."""
    gate_hidden = gate_hidden or 4 * H  # ScanLayer's default (seed 004: 128 -> 512 -> 256)
    return (_linear(n_in, H) if n_in != H else 0) + _linear(H, gate_hidden) + _linear(gate_hidden, 2 * H)


def _recurrent_layer(cell, backend, n_in, H):
    layer = CELLS[cell]
    if not issubclass(layer, RecurrentLayer):  # the selective scan: an MLP of the input for its gates
        return _scan_layer(n_in, H, None)
    # torch.nn.RNN/GRU/LSTM always carry b_ih and b_hh; lab's own cells one bias, or two where the
    # equations need them apart (RecurrentLayer.two_biases)
    biases = 2 if backend == "fused" or layer.two_biases else 1
    G, recurrent = layer.n_gates, H if layer.gates_read_state else 0  # minGRU and minLSTM have no U
    return G * H * (n_in + recurrent) + biases * G * H


def _stack(c, first_input):
    H, L = c.hidden_size, c.num_layers
    return _recurrent_layer(c.cell, c.backend, first_input, H) + (L - 1) * _recurrent_layer(c.cell, c.backend, H, H)


def _lm_parameters(c):
    norms = c.num_layers - 1 if c.norm == "every" else 0  # LayerNorms between layers
    return (
        c.vocab_size * c.embed_dim
        + _stack(c, c.embed_dim)
        + 2 * c.hidden_size * (norms + 1)
        + _linear(c.hidden_size, c.vocab_size)
    )


def _classifier_parameters(c):
    return _stack(c, c.input_size) + _linear(c.hidden_size, c.num_classes)


def _scan_markov_parameters(c):
    E = c.embed_dim
    return (
        (c.vocab_size + c.max_positions) * E
        + _scan_layer(E, E, c.gate_hidden)
        + 2 * E
        + _linear(E, c.decoder_hidden)
        + _linear(c.decoder_hidden, E)
        + c.vocab_size
    )


PARAMETERS = {"lm": _lm_parameters, "classifier": _classifier_parameters, "scan_markov": _scan_markov_parameters}


def parameter_count(config):
    """Trainable parameters of build_model(config), from the config's numbers alone."""
    return PARAMETERS[config.family](config)


def loaded_model_mb(config):
    """MB a model of this config holds once loaded to sample or be studied: its float32 parameters (what a
    server keeps loaded for its pages is charged to its budget by this, lab.server.capacity.KeptModels)."""
    return parameter_count(config) * FLOAT_BYTES / 2**20


# ---------------------------------------------------------------------------
# training memory


def activation_floats_per_token(config):
    """float32 values one training step keeps per token (B*T of them) until backward."""
    c = config
    if c.family == "scan_markov":
        E = c.embed_dim
        return 14 * E + 6 * c.gate_hidden + 4 * c.decoder_hidden + 3 * c.vocab_size
    per_layer = (FAMILIES[c.cell].saved_per_unit + (1 if c.dropout else 0)) * c.hidden_size  # + a dropout mask
    if c.family == "classifier":  # only the last step reaches the head
        return c.input_size + c.num_layers * per_layer
    # embedding output, the layers, LayerNorms, then logits and their softmax for the loss
    return c.embed_dim + c.num_layers * per_layer + 4 * c.hidden_size + 3 * c.vocab_size


def training_memory_bytes(config, batch_size, block_size):
    """Bytes one AdamW training step needs: weights, gradients, AdamW's two moments and
    lab.training.train's copy of the last finite weights (5 copies of every parameter) plus the
    activations saved for backpropagation
    through block_size steps of batch_size windows (for a classifier, block_size is
    the sequence length). An estimate, meant to err high, not a measurement."""
    weights = 5 * parameter_count(config)
    activations = batch_size * block_size * activation_floats_per_token(config)
    return FLOAT_BYTES * (weights + activations)


# What a run adds beyond its model's tensors, measured (benchmarks/job_memory.py, BENCHMARKS.md): its
# thread's share of the allocator and PyTorch's per-thread state, its batches, which grow with the steps it
# takes. At the pages' defaults: four toy-task runs 110 MB where their tensors were 6 MB; a 300-step lesson run
# 69 MB for 5 MB; a default Train run 99 MB for 69 MB; a race of four 258-289 MB for ~155 MB. About 40 MB a
# run covers them within 2x. A run that writes samples as it trains adds more (lab.server.jobs.SAMPLER_MB)
RUN_OVERHEAD_MB = 40


def run_memory_mb(config, batch_size, block_size):
    """MB a training run adds to the process it trains in, what the server's budget charges for it:
    training_memory_bytes and RUN_OVERHEAD_MB. (The training process itself is charged once, when it
    starts: lab.server.workers.PROCESS_MB.)"""
    return training_memory_bytes(config, batch_size, block_size) / 2**20 + RUN_OVERHEAD_MB


def _mb(n_bytes):
    """Bytes in whole MB, rounded; in integers, as a crafted config's count can be too large for a float."""
    return f"{(int(n_bytes) + 2**19) // 2**20:,} MB"


def check_model_size(config):
    """CostError when the config's model has more parameters than RNNLAB_MAX_PARAMS or more
    recurrent layers than RNNLAB_MAX_LAYERS; returns the parameter count."""
    layers = getattr(config, "num_layers", 1)
    if layers > max_layers():
        raise CostError(
            f"num_layers: {count(layers, 'layer')} is more than this server's limit of {max_layers()} "
            "(RNNLAB_MAX_LAYERS)"
        )
    n_params, limit = parameter_count(config), max_params()
    if n_params > limit:
        raise CostError(
            f"model: {n_params:,} parameters ({_mb(FLOAT_BYTES * n_params)} of weights) is more than this "
            f"server's limit of {limit:,} (RNNLAB_MAX_PARAMS); use fewer or smaller layers"
        )
    return n_params


def check_training_memory(config, batch_size, block_size):
    """CostError when a training step would need more than RNNLAB_MAX_TRAIN_MEMORY_MB."""
    check_model_size(config)
    need, limit = training_memory_bytes(config, batch_size, block_size), max_train_memory_bytes()
    if need > limit:
        raise CostError(
            f"training: needs about {_mb(need)} (weights, gradients, AdamW state and the activations "
            f"of {batch_size} x {count(block_size, 'step')}), more than this server's limit of {_mb(limit)} "
            "(RNNLAB_MAX_TRAIN_MEMORY_MB); use a smaller model, batch size or block size"
        )
    return need
