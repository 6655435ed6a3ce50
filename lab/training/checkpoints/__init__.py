"""One checkpoint format: safetensors weights with JSON metadata.

A checkpoint file holds the weights, the model config (family, cell and
convention), the tokenizer (character table or SentencePiece model bytes), the
metrics history, the lab version and a timestamp. safetensors is a header of
JSON plus raw tensor bytes, so loading a file can never execute code: a pickle
(what torch.save writes) is rejected as "not an RNN Lab checkpoint".

Everything in the header is data from a file a user may have edited: it is
validated whole against one schema (`read_header`) before anything is built,
so a file either loads completely or is refused with one line naming the field.

A resumable checkpoint also carries its run's lab.training.train.TrainingState: AdamW's
moments as tensors named `optim.<parameter>.exp_avg`, `.exp_avg_sq` and `.step`,
the random generators' states as `rng.torch` (one row per rank) and `rng.data`,
and the step, the elapsed time and AdamW's settings as JSON (`training_state`).
Both halves are checked as strictly as the weights; files without them load as before.

Versioning follows seed 002: saving "astra" writes astra_v1, astra_v2, ...
and refreshes astra_latest. Several sessions may save under one name at once:

* Every write goes to a temporary file `.NAME~RANDOM.tmp` in the same folder,
  flushed to disk, so a crash mid-save never leaves a partial checkpoint.
* A save holds the folder's lock (flock on the directory) from its temporary
  file to the last rename. Inside it the version is published with link(2),
  which like O_EXCL fails when the name exists, so two savers can never both
  become _v1 even where the lock does not work; `_latest` is then replaced
  by a hard link to the same file, so it always names the newest version.
* A temporary file found while holding the lock belongs to a save that died
  (kill -9, power cut): the next save or listing removes it, and points a
  `_latest` that a dead save left behind its newest version at that version.

Four modules: entries.py (every header entry declared, pydantic models), header.py (a header read
through them), format.py (a checkpoint's bytes, written and loaded, the header checked on writing
too, so that a file the lab writes always loads), store.py (folders: versioned saves, listing, deleting).
They import the model, data, cost and training modules of the lab, never the server's pages.
Every public name is importable from lab.training.checkpoints.
"""

from lab.training.checkpoints.entries import (  # noqa: F401 - the package's public names
    FORMAT,
    FORMAT_VERSION,
    MAX_ELAPSED_SECONDS,
    AdamWSettings,
    Event,
    Extra,
    Metadata,
    Metrics,
    TrainingStateHeader,
)
from lab.training.checkpoints.format import (  # noqa: F401 - the package's public names
    FLOAT_DTYPES,
    MAX_CHECKPOINT_BYTES,
    Checkpoint,
    check_resumable_size,
    checkpoint_bytes,
    load_checkpoint,
    resumable_checkpoint_bytes,
    why_not_resumable,
)
from lab.training.checkpoints.header import (  # noqa: F401 - the package's public names
    CheckpointError,
    Header,
    read_header,
    version_number,
)
from lab.training.checkpoints.store import (  # noqa: F401 - the package's public names
    BUNDLED_DIR,
    SUFFIX,
    TEMP_GLOB,
    CheckpointInfo,
    atomic_write_bytes,
    check_folder,
    delete_checkpoint,
    list_checkpoints,
    next_version,
    read_info,
    sanitize_name,
    save_checkpoint,
    scan_checkpoints,
)
