"""RNN Lab's backend: recurrent cells, models, data, training, sampling and introspection.

Never imports Streamlit: the app (app.py, pages/) and the command line
(`python -m lab`) are two clients of the same functions.
"""

import os

# OpenMP's idle threads spin-wait by default. On shared or busy cores (Streamlit
# Community Cloud, CI, a laptop running the app and the tests) the spinning makes
# small-model work ~10x slower (BENCHMARKS.md). It only takes effect when set
# before torch is first imported, which `import lab` normally is.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
