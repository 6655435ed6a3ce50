"""`python -m lab train`: a run from the command line, new or resumed, on one process or under torchrun,
with a progress bar from the training events, Ctrl-C saving the run, and a save that falls back to a
temporary folder rather than lose hours of training. lab/__main__.py parses the options."""

import contextlib
import dataclasses
import signal
import sys
import threading

from lab.errors import LabError
from lab.settings import server_settings
from lab.words import count

DEFAULT_RUNS_DIR = "runs"
SEED_EPOCHS = "seed"  # --epochs given without a number
DEFAULT_PRESET, DEFAULT_CORPUS = "astra-alpha", "bundled"


MODEL_SIZES = ("embed_dim", "hidden_size", "num_layers", "dropout", "embed_dropout", "weight_dropout")
MODEL_OPTIONS = ("cell", "backend", *MODEL_SIZES)  # override the preset's


BUDGETS = ("max_steps", "max_seconds", "max_epochs")  # --steps, --seconds, --epochs: read with the preset's


def add_train_options(parser):
    """An option for every TrainConfig field, made from its declaration: its type, choices and description
    (its bounds are TrainConfig's own, checked when the config is made: a value beyond one is refused in one
    line that names the field)."""
    from lab.schema import declared_settings
    from lab.training.train import TrainConfig

    for setting in declared_settings(TrainConfig).values():
        default = "the preset's" if setting.default is None else f"the preset's, else {setting.default}"
        options = declared_option(setting, default)
        if setting.name == "max_epochs":  # alone: the seed's own number
            options.update(
                type=epochs_option,
                nargs="?",
                const=SEED_EPOCHS,
                help=f"{setting.description}; alone, the seed's own number (scribe-alpha 10, scan-markov 10, "
                "leviathan-lstm 6 of seed 002's 200-batch epochs)",
            )
        parser.add_argument(f"--{setting.cli}", **options)


def add_model_options(parser):
    """An option for each of the model's sizes and rates (MODEL_SIZES), made from its declaration in LMConfig as
    add_train_options makes TrainConfig's (its bounds are checked when the model's config is made)."""
    from lab.nets.models import LMConfig
    from lab.schema import declared_settings

    settings = declared_settings(LMConfig)
    for name in MODEL_SIZES:
        parser.add_argument(f"--{settings[name].cli}", **declared_option(settings[name], "the preset's"))


def declared_option(setting, default):
    """argparse's keywords for a declared setting (lab.schema.Setting): its kind and its description as help
    (the `train` and `sample` commands' options alike)."""
    options = {"help": f"{setting.description} (default: {default})"}
    if setting.type is bool:  # a switch on by default is offered by the name that turns it off (--stateless)
        options.update(action="store_false" if setting.default is True else "store_true", default=None)
    elif setting.choices:
        options.update(choices=setting.choices)
    else:
        options.update(type=setting.type)
    return options


def train_options(args):
    """The TrainConfig fields given on the command line, budgets aside."""
    from lab.schema import declared_settings
    from lab.training.train import TrainConfig

    given = {s.name: getattr(args, s.cli.replace("-", "_")) for s in declared_settings(TrainConfig).values()}
    return {name: value for name, value in given.items() if value is not None and name not in BUDGETS}


def train_from_args(args):
    from lab.training import distributed
    from lab.training.process import configure_cpu
    from lab.training.train import resolve_device

    configure_cpu(args.threads)
    name, preset, corpus, model, task, train_config, resume = _resumed_run(args) if args.resume else _new_run(args)
    with distributed.process_group(resolve_device(train_config.device)):  # under torchrun: this rank joins in
        return _run_training(args, name, preset, corpus, model, task, train_config, resume)


def _new_run(args):
    """A run from a preset: (name, preset name, corpus, model, task, train config, None)."""

    from lab.nets.backends import default_backend, default_scan_mode
    from lab.nets.cost import check_training_memory
    from lab.nets.models import build_model
    from lab.schema import PathText, check
    from lab.training.checkpoints import check_folder, sanitize_name
    from lab.training.presets import get_preset
    from lab.training.tasks import TASKS
    from lab.training.train import resolve_device

    preset = get_preset(args.preset or DEFAULT_PRESET)
    if preset.model.family == "classifier":
        raise LabError("preset: use `python -m lab ablation` for the sequence-classification preset")
    backend, overrides = args.backend, {k: getattr(args, k) for k in MODEL_OPTIONS if getattr(args, k) is not None}
    if preset.model.family == "lm":  # the fastest measured on the device that trains: backend and the scan's form
        device = resolve_device(args.device or "auto")
        backend = backend or default_backend(args.cell or preset.model.cell, device)
        overrides["scan_mode"] = default_scan_mode(device)
    overrides.update({"backend": backend} if backend is not None else {})
    ignored = sorted(set(overrides) - {f.name for f in dataclasses.fields(preset.model)})
    if ignored:  # ScanMarkov has no cell, hidden size or layers: say so rather than drop the option
        raise LabError(f"{ignored[0].replace('_', '-')}: the {preset.name} preset has no such setting")
    tokenizer_kind = args.tokenizer or preset.tokenizer
    options = dict(preset.tokenizer_options) if tokenizer_kind == preset.tokenizer else {}
    if args.vocab_size is not None:
        if tokenizer_kind != "sentencepiece":  # a char vocabulary is the text's characters
            raise LabError(
                "vocab-size: only a sentencepiece tokenizer has a size to choose; add --tokenizer sentencepiece"
            )
        options["vocab_size"] = args.vocab_size
    # everything that can be refused is refused before the corpus is tokenized and the model trained
    name = sanitize_name(args.name or preset.name)
    check(args.corpus or DEFAULT_CORPUS, PathText, "corpus")  # the checkpoint records it as it is
    check_folder(args.out)
    if preset.task == "ngram" and (args.stateful or args.block_size is not None):
        raise LabError(
            f"{'stateful' if args.stateful else 'block-size'}: the {preset.name} preset trains on "
            "2-5-gram samples, not windows; the scan-markov-windows preset trains on windows"
        )
    no_budget = args.steps is None and args.seconds is None and args.epochs is None
    budget = {"max_steps": 1000 if no_budget else args.steps}
    if args.epochs is not None:  # with --steps too, whichever ends first
        budget = epoch_budget(preset, args.epochs)
        steps = [s for s in (args.steps, budget["max_steps"]) if s is not None]
        budget["max_steps"] = min(steps) if steps else None
    train_config = preset.train_config(**budget, max_seconds=args.seconds, **train_options(args))
    # with the preset's vocabulary, so that a model too large is refused before the corpus is read;
    # again below with the corpus's own
    check_training_memory(
        dataclasses.replace(preset.model, **overrides), train_config.batch_size, train_config.block_size
    )
    task = TASKS[preset.task].from_corpus(args.corpus or DEFAULT_CORPUS, tokenizer_kind, **options)
    config = dataclasses.replace(preset.model, vocab_size=task.vocab_size, **overrides)
    check_training_memory(config, train_config.batch_size, task.sequence_length(train_config))
    model = build_model(config, seed=train_config.seed)
    return name, preset.name, args.corpus or DEFAULT_CORPUS, model, task, train_config, None


def _resumed_run(args):
    """--resume: the saved run and its settings; an option that would change what it computes is refused."""
    from lab.training.checkpoints import check_folder, load_checkpoint, sanitize_name
    from lab.training.presets import get_preset
    from lab.training.tasks import TASKS, corpus_split
    from lab.training.train import TrainConfig, resume_training_state

    checkpoint = load_checkpoint(args.resume, "cpu")
    preset, corpus = checkpoint.meta["extra"].get("preset"), checkpoint.metrics.get("corpus", DEFAULT_CORPUS)
    tokenizer = checkpoint.tokenizer
    if tokenizer is None:
        raise LabError(f"resume: {args.resume} is a {checkpoint.config.family}, not a language model")
    for option, given, saved in [
        ("preset", args.preset, preset),
        ("corpus", args.corpus, corpus),
        ("tokenizer", args.tokenizer, tokenizer.kind),
        ("vocab_size", args.vocab_size, tokenizer.vocab_size),
        *((k, getattr(args, k), getattr(checkpoint.config, k, None)) for k in MODEL_OPTIONS),
    ]:
        if given is not None and given != saved:
            raise LabError(
                f"resume: --{option.replace('_', '-')} {given} differs from the run being resumed "
                f"({saved}); leave it out to continue that run"
            )
    name = sanitize_name(args.name or checkpoint.meta["name"])
    check_folder(args.out)
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    budgets = {k: v for k, v in [("max_steps", args.steps), ("max_seconds", args.seconds)] if v is not None}
    saved = {k: v for k, v in checkpoint.metrics.get("train_config", {}).items() if k in fields}
    train_config = TrainConfig(**{**saved, **budgets, **train_options(args)})
    state = resume_training_state(checkpoint, train_config)  # refuses a changed setting, or no budget left
    task = TASKS[get_preset(preset).task if preset else "lm"](*corpus_split(corpus), tokenizer)
    return name, preset, corpus, checkpoint.model, task, train_config, state


def _run_training(args, name, preset, corpus, model, task, train_config, resume):
    """Train (continuing `resume`, a TrainingState, if given), report, and save name_vN.
    Under torchrun every rank trains and rank 0 alone prints and saves."""
    from tqdm import tqdm

    from lab.nets.models import model_summary
    from lab.training import distributed
    from lab.training.checkpoints import check_resumable_size
    from lab.training.train import resolve_device, run_metrics, train

    rank, world = distributed.rank_and_world()
    say = print if rank == 0 else (lambda *args, **kwargs: None)
    resumable = args.resumable or resume is not None
    if resumable:
        check_resumable_size(model.config)
    distributed.check_same_as_rank0(
        [len(task.train_ids), task.train_ids.sum().item()], "corpus", f"or tokenized {corpus}"
    )
    summary = model_summary(model, name)
    say(f"{name}: {summary.total:,} parameters, {summary.conventions[0]}")
    say(
        f"corpus {corpus}: {len(task.train_ids):,} train / {len(task.val_ids):,} val tokens "
        f"({task.tokenizer.kind}, vocab {task.vocab_size}, {task.chars_per_token:.2f} chars/token)"
    )
    if world > 1:
        say(
            f"data-parallel over {world} ranks: global batch {train_config.batch_size} = "
            f"{train_config.batch_size // world} per rank x {world}; steps and the learning-rate schedule count "
            "global batches"
        )
    if resume is not None:
        say(
            f"resuming at step {resume.step} ({resume.elapsed:.0f}s trained) of a budget of "
            f"{count(train_config.max_steps, 'step') if train_config.max_steps else '- steps'} / "
            f"{train_config.max_seconds or '-'} s"
        )

    bar = tqdm(
        total=100,
        unit="%",
        mininterval=0.5,
        disable=rank != 0,
        bar_format="{l_bar}{bar}| {n:.0f}/{total}% [{elapsed}<{remaining}] {postfix}",
    )

    def on_event(event):
        if event["type"] == "step":
            bar.update(event["progress"] * 100 - bar.n)
            bar.set_postfix_str(
                f"step {event['step']} loss {event['train_loss']:.3f} {event['tokens_per_s']:,.0f} tok/s"
            )
        elif event["type"] == "eval":
            by_n = "".join(
                f" | n={n} {event[f'val_loss_n{n}']:.3f} {100 * event[f'val_accuracy_n{n}']:.0f}%"
                for n in range(2, 6)
                if f"val_loss_n{n}" in event
            )  # seed 004's orders
            bar.write(
                f"step {event['step']:6d} | train {event['train_loss']:.4f} | val {event['val_loss']:.4f} "
                f"({event['val_nats_per_char']:.4f} nats/char){by_n} | {event['elapsed']:.0f}s"
            )

    first_step = resume.step if resume is not None else 0
    try:
        with stop_on_signal(lambda line: bar.write(line, file=sys.stderr)) as stop:
            result = train(model, task, train_config, on_event, should_stop=stop.is_set, resume=resume)
    except KeyboardInterrupt:  # the second Ctrl-C
        result = None
    finally:  # also before an error message, which must not land on the bar's line
        bar.close()
    if result is None or result.steps == first_step:
        say(
            "interrupted before a step was taken; nothing saved" if result is not None else "interrupted; nothing saved"
        )
        return 1
    if rank != 0:
        return 0
    last = result.history[-1] if result.history else {}
    path = _save_or_rescue(
        args.out,
        name,
        model.cpu(),
        task.tokenizer,
        run_metrics(result, train_config, corpus=corpus),
        {"preset": preset},
        result.training_state if resumable else None,
    )
    tokens_per_s = (
        (result.steps - first_step)
        * train_config.batch_size
        * train_config.block_size
        / (result.elapsed - (resume.elapsed if resume is not None else 0.0))
    )
    print(
        f"{result.reason}: {count(result.steps, 'step')} in {result.elapsed:.1f}s, {tokens_per_s:,.0f} tok/s, "
        f"val loss {last.get('val_loss', float('nan')):.4f} "
        f"({last.get('val_nats_per_char', float('nan')):.4f} nats/char)"
    )
    if model.config.family == "lm":  # a recurrent LM's memory, beyond the cold-started validation windows
        device = resolve_device(train_config.device)  # where it trained: CUDA when there is one
        in_order = task.evaluate_in_order(model.to(device), device)
        print(
            f"validation split read in order, state carried: {in_order['val_loss_in_order']:.4f} "
            f"({in_order['val_nats_per_char_in_order']:.4f} nats/char)"
        )
    print(f"saved {path}")
    if result.reason == "stopped":
        print(
            f"continue it with: python -m lab train --resume {path} --out {args.out}"
            if resumable
            else "(a run started with --resumable can be continued after a stop)"
        )
    return 0


@contextlib.contextmanager
def stop_on_signal(say):
    """While training: a Ctrl-C (SIGINT) or a SIGTERM (a machine shutting down, a scheduler's end of
    time) asks for a stop after the current step, so that the run is saved as if it had ended; a
    second Ctrl-C raises KeyboardInterrupt at once. Yields the threading.Event that says a stop was asked."""
    requested = threading.Event()

    def handler(signum, frame):
        if requested.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        requested.set()
        say(f"{signal.Signals(signum).name}: stopping after this step and saving (Ctrl-C again to quit without saving)")

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def epoch_budget(preset, epochs):
    """--epochs N (or --epochs alone: the seed's own number) as TrainConfig budget fields."""
    if epochs == SEED_EPOCHS:
        if preset.seed_epochs is None:
            raise LabError(
                f"epochs: the {preset.name} preset's seed gives no number of epochs; write one, e.g. --epochs 3"
            )
        epochs = preset.seed_epochs
    return preset.epoch_budget(epochs)


def epochs_option(value):
    """--epochs's value: a number, or "seed" (what --epochs alone means)."""
    return value if value == SEED_EPOCHS else float(value)


def rescue_dir():
    """Where a trained model goes when its folder cannot take it: RNNLAB_RESCUE_DIR (lab.settings)."""
    return server_settings().rescue_dir


def _save_or_rescue(folder, name, model, tokenizer, metrics, extra, training_state=None):
    """save_checkpoint into `folder`, or, when that fails (a full disk), into rescue_dir(): minutes
    of training are not dropped because one folder filled up. Only both failing raises."""
    from lab.training.checkpoints import save_checkpoint

    try:
        return save_checkpoint(folder, name, model, tokenizer, metrics, extra, training_state)
    except OSError as e:
        rescued = save_checkpoint(rescue_dir(), name, model, tokenizer, metrics, extra, training_state)
        print(
            f"warning: could not save in {folder}: {e}; the trained model was saved to {rescued} instead "
            f"(move it with: mv {rescued} {folder}/)",
            file=sys.stderr,
        )
        return rescued
