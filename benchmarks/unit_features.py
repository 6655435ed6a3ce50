"""What the bundled character models' units track, on the validation text (issue 15).

    python -m benchmarks.unit_features [--checkpoints checkpoints/char-lstm_latest.safetensors ...]

Every checkpoint (default: every bundled model with a character tokenizer) reads the
validation text, the bundled corpus's four held-out plays (lab.data.load_bundled_split), in one pass
from the zero state with the state carried (lab.instruments.units.unit_correlations_over).
For each feature of lab.instruments.features.FEATURES, the table gives the strongest Pearson r of any
unit of any gate or state of any layer, and which unit it is ("c 45": unit 45 of the cell
state c, layer 0; "1:h 7" for layer 1). A first table names the models measured, with a
SHA-256 prefix of each file, so that a rerun on retrained models says which ones it read.
Prints Markdown for BENCHMARKS-HISTORY.md.
"""

import argparse
import hashlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.data import load_bundled_split  # noqa: E402
from lab.instruments.features import FEATURES  # noqa: E402
from lab.instruments.units import strongest_per_feature, unit_correlations_over  # noqa: E402
from lab.nets.cost import parameter_count  # noqa: E402
from lab.training.checkpoints import load_checkpoint  # noqa: E402
from lab.training.process import configure_cpu  # noqa: E402

# Karpathy, Johnson & Fei-Fei (2015) found such units in well-trained character LSTMs; the issue
# expects at least one unit this strong for one of these features
EXPECTED = (0.5, ("line_position", "in_brackets"))


def bundled_char_models():
    paths = sorted((ROOT / "checkpoints").glob("*_latest.safetensors"))
    return [str(p.relative_to(ROOT)) for p in paths if getattr(load_checkpoint(p).tokenizer, "kind", "") == "char"]


def validation_text():
    return load_bundled_split()[1]


def unit_name(layer, gate, unit):
    return f"{gate} {unit}" if layer == 0 else f"{layer}:{gate} {unit}"


def model_row(path, checkpoint, seconds):
    config = checkpoint.config
    evals = [e for e in checkpoint.metrics.get("history", []) if "val_nats_per_char" in e]
    loss = f"{evals[-1]['val_nats_per_char']:.3f}" if evals else "–"
    size = (
        f"{config.num_layers}×{config.hidden_size}" if hasattr(config, "num_layers") else f"1×{config.embed_dim} (scan)"
    )
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    return (
        f"| {Path(path).name} | {config.cell} | {size} | {parameter_count(config):,} | {loss} | `{digest}` "
        f"| {seconds:.0f} s |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", nargs="*", default=None, help="checkpoints to measure")
    args = parser.parse_args()
    configure_cpu(2)
    paths = args.checkpoints or bundled_char_models()
    text = validation_text()
    best, rows = {}, []
    for path in paths:
        checkpoint = load_checkpoint(path)
        start = time.perf_counter()
        table = unit_correlations_over(checkpoint.model, checkpoint.tokenizer, text)
        best[Path(path).name] = strongest_per_feature(table).set_index("feature")
        rows.append(model_row(path, checkpoint, time.perf_counter() - start))
    print(f"Validation text: the bundled corpus's four held-out plays, {len(text):,} characters.\n")
    print(
        "| model | cell | layers × units | parameters | validation nats/char (its own record) | SHA-256 | measured in |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    names = list(best)
    print("\nStrongest unit per feature: Pearson r over the validation text (the unit in brackets).\n")
    print("| feature | " + " | ".join(n.removesuffix("_latest.safetensors") for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for feature, spec in FEATURES.items():
        cells = []
        for name in names:
            if feature not in best[name].index:  # constant on the text: no correlation
                cells.append("– (constant)")
                continue
            row = best[name].loc[feature]
            cells.append(f"{row['correlation']:+.2f} ({unit_name(row['layer'], row['gate'], row['unit'])})")
        print(f"| {feature}: {spec.description} | " + " | ".join(cells) + " |")
    threshold, features = EXPECTED
    print()
    for name in names:
        strong = [f for f in features if f in best[name].index and best[name].loc[f, "abs_correlation"] >= threshold]
        verdict = f"yes: {', '.join(strong)}" if strong else "no"
        print(f"- {name}: a unit with |r| >= {threshold} for {' or '.join(features)}? {verdict}")


if __name__ == "__main__":
    main()
