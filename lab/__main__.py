"""RNN Lab on the command line: the same lab functions the app calls.

python -m lab train --preset astra-alpha --seconds 60 --name astra
python -m lab sample runs/astra_latest.safetensors --prompt "ROMEO:" --strategy top_p
python -m lab summary runs/astra_latest.safetensors
python -m lab list
python -m lab ablation --dataset digits --epochs 3 --seeds 0 1 2
torchrun --nproc_per_node=4 -m lab train --preset leviathan-lstm --corpus tiny-shakespeare --resumable
torchrun --nproc_per_node=3 -m lab ablation --dataset digits --epochs 3 --seeds 0 1 2
"""

import argparse
import os
import sys
from pathlib import Path

from lab.errors import LabError
from lab.train_command import DEFAULT_PRESET, DEFAULT_RUNS_DIR, add_model_options, add_train_options, train_from_args
from lab.words import count

SEED_STRATEGY = "the model's seed's (top_p for ScanMarkov, seed 004; top_k otherwise, seed 002)"


def add_sample_options(parser):
    """An option for every SamplingConfig field, made from its declaration as the train command's are from
    TrainConfig's: its type, choices, default and description (its bounds are checked when the config is made: a
    value beyond one is refused in one line that names the field)."""
    from lab.instruments.sampling import SamplingConfig
    from lab.schema import declared_settings
    from lab.train_command import declared_option

    for setting in declared_settings(SamplingConfig).values():
        default = SEED_STRATEGY if setting.name == "strategy" else setting.default
        if setting.type is bool:
            default = f"on; --{setting.cli} turns it off" if setting.default else "off"
        parser.add_argument(f"--{setting.cli}", **declared_option(setting, default))


def sampling_config(args, family):
    """The SamplingConfig of the sample command's options; the strategy, when not given, is the model family's
    seed's (lab.instruments.sampling.default_strategy)."""
    from lab.instruments.sampling import SamplingConfig, default_strategy
    from lab.schema import declared_settings

    given = {s.name: getattr(args, s.cli.replace("-", "_")) for s in declared_settings(SamplingConfig).values()}
    given = {name: value for name, value in given.items() if value is not None}
    return SamplingConfig(**{"strategy": default_strategy(family), **given})


def _sample(args):
    from lab.instruments.sampling import generate, repetition_report
    from lab.nets.models import for_sampling
    from lab.training.checkpoints import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint, args.device)
    if checkpoint.tokenizer is None:
        raise LabError(
            f"{args.checkpoint}: a {checkpoint.config.family} reads pixels, not text; only language models can generate"
        )
    config = sampling_config(args, checkpoint.config.family)
    generation = generate(for_sampling(checkpoint.model), checkpoint.tokenizer, args.prompt, config)
    print(generation.text)
    if config.strategy == "greedy":
        report = repetition_report(generation.text)
        print(f"\n[repetition] {report}", file=sys.stderr)
    return 0


def _summary(args):
    from lab.nets.models import model_summary
    from lab.training.checkpoints import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint)
    print(model_summary(checkpoint.model, checkpoint.meta.get("name", "")).format())
    meta = checkpoint.meta
    print(f"Version          : v{meta['version']}   saved {meta['timestamp']}   lab {meta['lab_version']}")
    if checkpoint.tokenizer is not None:
        print(f"Tokenizer        : {checkpoint.tokenizer.kind}, {count(checkpoint.tokenizer.vocab_size, 'token')}")
    history = checkpoint.metrics.get("history") or []
    if history:
        last = history[-1]
        shown = {k: round(v, 4) for k, v in last.items() if k.startswith("val_") or k == "train_loss"}
        print(f"Final metrics    : step {last.get('step', '?')}, {shown}")
    return 0


def _list(args):
    from lab.instruments.race import validation_figure
    from lab.training.checkpoints import scan_checkpoints

    infos, problems = scan_checkpoints(args.dir)
    for problem in problems:  # a bad file is named, not a reason to list nothing
        print(f"skipped {problem}", file=sys.stderr)
    if not infos:
        print("no checkpoints found")
    for info in infos:
        val = validation_figure(info.metrics)  # the weights the file holds, as the pages show it
        where = "bundled" if info.bundled else "user"
        print(f"{info.name:32s} {where:8s} {info.family:12s} {info.cell:10s} final val {val:.4f}  {info.path}")
    return 0


def build_parser():
    from lab.nets.backends import BACKENDS
    from lab.nets.families import CELLS
    from lab.training.presets import PRESETS

    parser = argparse.ArgumentParser(
        prog="python -m lab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    t = commands.add_parser(
        "train",
        help="train a language model and save a checkpoint",
        description="Train a language model on a corpus and save name_vN / name_latest.",
    )
    t.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help=f"model family and recipe to start from (default {DEFAULT_PRESET}, the small char GRU)",
    )
    t.add_argument("--cell", choices=sorted(CELLS), help="override the preset's cell")
    t.add_argument(
        "--backend",
        choices=list(BACKENDS),
        help="reference (lab/nets/cells.py), fast (lab/nets/kernels.py) or fused (torch.nn, cuDNN); "
        "default: the fastest on the device (lab.nets.backends.default_backend)",
    )
    add_model_options(t)
    t.add_argument(
        "--corpus", help="'bundled' (shipped Shakespeare, offline), 'tiny-shakespeare' (download), or a text file"
    )
    t.add_argument("--tokenizer", choices=["char", "sentencepiece"], help="default: the preset's")
    t.add_argument("--vocab-size", type=int, help="SentencePiece vocabulary size (default 1000)")
    add_train_options(t)
    t.add_argument("--threads", type=int, default=4, help="cap on CPU threads (default 4)")
    t.add_argument("--name", help="checkpoint base name (default: the preset's name)")
    t.add_argument("--out", default=DEFAULT_RUNS_DIR, help=f"checkpoint folder (default {DEFAULT_RUNS_DIR}/)")
    t.add_argument(
        "--resumable",
        action="store_true",
        help="save the optimizer's and random generators' state too, so that --resume can continue "
        "the run (a file about three times larger)",
    )
    t.add_argument(
        "--resume",
        metavar="CHECKPOINT",
        help="continue the run saved in a resumable checkpoint: its model, corpus and settings, from its "
        "step; --steps / --seconds give a new total budget",
    )
    t.set_defaults(func=train_from_args)

    s = commands.add_parser(
        "sample",
        help="generate text from a checkpoint",
        description="Generate text from a checkpoint with one sampling strategy.",
    )
    s.add_argument("checkpoint", help="path to a .safetensors checkpoint")
    s.add_argument("--prompt", default="\n", help="text to start from")
    add_sample_options(s)
    s.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda"], help="default auto: CUDA when available"
    )
    s.set_defaults(func=_sample)

    m = commands.add_parser(
        "summary",
        help="seed-002-style model summary of a checkpoint",
        description="Print the parameter breakdown, size, convention and metrics.",
    )
    m.add_argument("checkpoint", help="path to a .safetensors checkpoint")
    m.set_defaults(func=_summary)

    ls = commands.add_parser(
        "list", help="list bundled and user checkpoints", description="List bundled checkpoints and those in a folder."
    )
    ls.add_argument("--dir", default=DEFAULT_RUNS_DIR, help=f"user checkpoint folder (default {DEFAULT_RUNS_DIR}/)")
    ls.set_defaults(func=_list)

    from lab.experiments.ablation import ARMS, add_arguments

    ab = commands.add_parser(
        "ablation",
        help="seed 003's GRU gate-bias ablation: baseline b_z=+1 vs r/z biases frozen at 0",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train seed 003's GRU classifier (1 layer, H=181, 101,732 parameters, PyTorch convention:\n"
        "z keeps memory) once per arm and seed with its recipe (AdamW, lr 5e-4 cosine to 1e-5,\n"
        "batch 128, weight decay 0.01), and write results.json / results.csv (per-epoch train\n"
        "loss, test accuracy, z and r gate statistics) and one checkpoint per arm into --out.\n\n"
        "arms:\n" + "\n".join(f"  {name:9s} {arm.description}" for name, arm in ARMS.items()),
        epilog="example (offline, the shipped study: seed 003's protocol at its own length, ~16 minutes a run\n"
        "on 2 cores; the same command continues a study that was interrupted, run by run):\n"
        "  python -m lab ablation --dataset digits --epochs 40 --seeds 0 1 2 "
        "--arms baseline ablated chrono --out checkpoints/ablation",
    )
    add_arguments(ab, out_default=f"{DEFAULT_RUNS_DIR}/ablation")
    ab.add_argument("--threads", type=int, default=2, help="cap on CPU threads (default 2)")
    ab.set_defaults(func=_ablation)
    return parser


def _ablation(args):
    """The study, in one process, or under torchrun with its runs spread over the ranks: every rank
    prints its runs' epochs, rank 0 alone draws the progress bar of its share and writes the results."""
    from tqdm import tqdm

    from lab.experiments.ablation import RANK_PATIENCE, cli_command, config_from_args, run_ablation, summary_markdown
    from lab.training import distributed
    from lab.training.process import configure_cpu
    from lab.training.train import resolve_device

    configure_cpu(args.threads)
    config = config_from_args(args)
    bar = None

    def say(line):  # one write per line, flushed: the ranks share one stdout, and lines must not interleave
        tqdm.write(line + "\n", end="")
        sys.stdout.flush()

    def on_event(event):
        nonlocal bar
        kind = event["type"]
        if kind == "study_start":
            bar = tqdm(
                total=event["runs_here"] * event["steps_per_run"],
                unit="step",
                mininterval=5,
                disable=distributed.rank_and_world()[0] != 0,
            )
            if bar.disable:
                return
            d = event["dataset"]
            say(
                f"{d['name']}: {d['n_train']} train / {count(d['n_test'], 'test sequence')} of "
                f"{count(d['sequence_length'], 'step')}; {count(event['runs'], 'run')} x "
                f"{count(event['steps_per_run'], 'step')}"
            )
            if event["resumed"]:
                say(
                    f"continuing the study in {args.out}: {event['resumed']} of {count(event['runs'], 'run')} "
                    "already done"
                )
            if event["ranks"] > 1:
                say(
                    f"spread over {event['ranks']} ranks, one run each at a time, each trained as one process "
                    "would; rank 0 writes the results"
                )
        elif kind == "step":
            bar.update(1)
            bar.set_postfix_str(f"{event['arm']} seed {event['seed']} loss {event['train_loss']:.3f}", refresh=False)
        elif kind == "epoch":
            say(
                f"{event['arm']:8s} seed {event['seed']} epoch {event['epoch']:g}: train {event['train_loss']:.4f}"
                f" | test loss {event['val_loss']:.4f} acc {100 * event['val_accuracy']:.1f}% | mean z "
                f"{event['z_mean']:.3f} r {event['r_mean']:.3f} b_z {event['b_z_mean']:.3f} | "
                f"{event['elapsed']:.0f}s"
            )
        elif kind == "run_done" and event["frozen_bias_check"]:
            say(f"{event['arm']:8s} seed {event['seed']} frozen-bias check {event['frozen_bias_check']}")

    # under torchrun this rank joins in; a rank may wait for the others' runs for hours (RANK_PATIENCE)
    with distributed.process_group(resolve_device(config.device), RANK_PATIENCE):
        try:
            results = run_ablation(config, args.out, on_event, command=cli_command(config, args.out))
        except KeyboardInterrupt:
            if not distributed.rank_and_world()[0]:
                print(
                    f"\ninterrupted; finished runs are in {args.out}/results.json, and the same command continues "
                    "the study",
                    file=sys.stderr,
                )
            return 1
        finally:
            if bar is not None:
                bar.close()
    if results is None:  # another rank than 0: its runs are in rank 0's results
        return 0
    print(summary_markdown(results))
    print(f"results in {Path(args.out) / 'results.json'} ({'complete' if results['complete'] else 'incomplete'})")
    return 0


def main(argv=None):
    from lab.training.distributed import RankFailed

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    # LabError: bad input (DataError, CheckpointError, CostError, SamplingError, config errors); OSError: a
    # file problem; MemoryError: an allocation the cost limits did not foresee; RankFailed: a rank's run
    # failed, said by every rank. One line each: anything else is a bug, and keeps its traceback
    except (LabError, OSError, MemoryError, RankFailed) as e:
        return _one_line_error(e)
    except RuntimeError as e:  # under torchrun: a collective that failed, most often because another rank did
        if not _rank():
            raise
        return _one_line_error(
            RuntimeError(f"lost contact with another rank, which most likely failed first (see its error line): {e}")
        )


def _rank():
    """'rank R: ' under torchrun, else ''."""
    from lab.training.distributed import launched

    return f"rank {os.environ['RANK']}: " if launched() else ""


def _one_line_error(e):
    # under torchrun the line starts afresh: another rank's progress bar may have left the cursor mid-line
    print(
        f"{chr(10) if _rank() else ''}error: {_rank()}{' '.join(str(e).split()) or type(e).__name__}", file=sys.stderr
    )  # always one line
    return 2


if __name__ == "__main__":
    exit_code = main()
    if _rank():
        # a torchrun rank whose work is done ends without finalizing the interpreter: gloo's worker threads may
        # still be releasing a finished collective's tensors, which takes the GIL, and one that tries while the
        # interpreter finalizes aborts the process (SIGABRT, "terminate called without an active exception",
        # after everything was saved; seen in a core dump here, and pytorch/pytorch#179291)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)
    sys.exit(exit_code)
