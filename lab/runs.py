"""The one runner of the app: every training run a page asks for is built here from its settings and started (or
joined) here. A run is a function of its settings and seed (lab.nets.randomness), so the same settings name the
same run, which lab.server.shared_runs then trains once for everyone who asks for it.

    job = training_run("gru-1", model_config, task, train_config, sampler=..., owner=key, in_process=True)
    (run,) = start([(job, "gru-1", folder, room)], owner=key, together="this run", private=False)
    run.events(); run.stop()                       # Stop leaves a shared run; the last to leave stops it

    probe = memory_probe(ProbeConfig(...), owner=key, in_process=True)       # started or joined, the same way
    study = live_ablation(AblationConfig(...), owner=key, in_process=True)

The command line trains the same way, in the foreground (lab.train_command: build_model(config, seed) and
lab.training.train.train; the probe and the ablation: their experiments' own runners, seeded from their settings).
"""

from lab.experiments.ablation import AblationJob
from lab.experiments.probe import ProbeJob
from lab.nets.models import build_model
from lab.server.jobs import TrainingJob
from lab.server.shared_runs import start_runs


def training_run(name, model_config, task, train_config, **job_options):
    """A TrainingJob of these settings, its model initialised from train_config.seed, not started: the checks a
    page makes before starting it (a race starts all its runs or none) come first. `job_options` go to
    TrainingJob (checkpoint_dir, extra, sampler, owner, in_process, resumable, room, ...)."""
    model = build_model(model_config, seed=train_config.seed)
    return TrainingJob(name, model, task, train_config, **job_options)


def start(requests, owner, together="these runs", private=False):
    """Start the requested runs, all or none, or join the identical runs already on this server -> a run per
    request (lab.server.shared_runs.Member). `requests`: (job, the student's name for it, the folder and room
    their own copy is saved in) each; `private`: runs on the student's own text, never joined across spaces."""
    return start_runs(requests, owner, together, private)


def is_training_run(job):
    """Whether a session's job is a training run (started or joined), not an ablation or a probe."""
    return isinstance(getattr(job, "job", job), TrainingJob)


def memory_probe(config, owner, in_process=False):
    """The memory probe of these settings (a ProbeConfig), started on this server's budget or joined -> its run."""
    (run,) = start(
        [(ProbeJob(config, owner=owner, in_process=in_process), "memory probe", None, None)], owner, "the probe"
    )
    return run


def live_ablation(config, owner, in_process=False):
    """The live gate-bias ablation of these settings (an AblationConfig), started or joined -> its run."""
    job = AblationJob(config, owner=owner, in_process=in_process)
    (run,) = start([(job, "live ablation", None, None)], owner, "the live ablation")
    return run
