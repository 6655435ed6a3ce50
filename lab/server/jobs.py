"""Training in the background, for the app: a job runs `train` on a thread, takes its place in
the server's budget (lab.server.capacity), keeps a thread-safe event log a page polls, and saves its
checkpoint when it ends. With RNNLAB_RAY_ADDRESS set, the computing happens on a Ray cluster instead
(lab.server.ray_runs), queued by Ray's scheduler; the job object, its events and its saving stay here.

    job = TrainingJob("astra", model, task, config, checkpoint_dir="runs").start()
    job.events(since=n); job.stop(); job.wait()
"""

import copy
import dataclasses
import logging
import math
import threading
import time

import torch

from lab.errors import LabError
from lab.schema import PositiveNumber, check
from lab.server import shutdown
from lab.server.capacity import TurnTaker, server_budget, server_turns
from lab.server.priority import lower_this_thread
from lab.server.ray_runs import ACTOR_MB, RayRun
from lab.server.workers import WorkerError, run_in_process
from lab.settings import server_settings
from lab.training.train import resume_training_state, run_metrics, train

log = logging.getLogger(__name__)  # the app sends it to the server's log: when runs start and end
SETTLE_SECONDS = 1.0  # a live view shows a running job's events as of the start of the current second
# what a run that writes samples as it trains (the Train page's, the lesson's) adds beyond one that does not,
# measured (benchmarks/job_memory.py): four small Train-page runs added 38 MB, their tensors and overheads
# (lab.nets.cost.run_memory_mb) 14 MB; the lesson's run 18 MB where its model's were 5 MB
SAMPLER_MB = 8


class BackgroundJob:
    """What every background job shares: a thread, a status, a stop flag honoured between
    steps, a place in the server's training budget (lab.server.capacity), and a thread-safe event
    log that a UI polls with `events(since)`. A job says what it is (`what`), what it costs
    (`cost_mb`) and does its work in `_work()`, which returns its final status.

    status: ready -> queued (waiting for the budget) -> running -> finished | stopped | failed
    (`message` says why).

    This is the one admission door for work that trains: a job waits in the budget's queue until its
    cost fits, and a job that computes in the server's own threads passes its `turn_taker` as its
    `should_stop`, so that its steps take turns with every other job's (lab.server.capacity.StepTurns).
    And the one place that decides where a job computes (`_compute`): in the server's niced training
    process (`in_process`, lab.server.workers), or with `ray_address` (None: RNNLAB_RAY_ADDRESS, lab.settings)
    in an actor of a Ray cluster, which then does the queueing in the budget's place (lab.server.ray_runs).
    """

    what = "This job"

    def __init__(self, cost_mb=0.0, owner=None, budget=None, turns=None, in_process=False, ray_address=None):
        self.status, self.message = "ready", ""
        self.cost_mb, self.owner, self.budget = cost_mb, owner, budget or server_budget()
        self.in_process, self.ray_address = in_process, ray_address or server_settings().ray_address
        self._events, self._lock, self._stop = [], threading.Lock(), threading.Event()
        self._by_type = {}  # event type -> its events: what a live view redraws from, without reading every step
        self._tick, self._settled = None, {}  # the tick of the latest event; how many of each type came before it
        self.turns = turns or server_turns()
        self.turn_taker = TurnTaker(self.turns, self._stop.is_set)  # train()'s should_stop in this server
        self._ticket = self._thread = None
        self.started_at = None  # time.time() at start(), for the server log's waits and durations
        self.first_event_at = None  # time.monotonic() of its first event: from then on it has been computing
        self.ended_at = None  # time.time() when it ended

    def start(self):
        """Queue for the budget, or on Ray (CapacityError at once if the job could never fit), and start
        the thread that waits its turn and does the work."""
        self._check_not_started()
        if self.ray_address is None:
            ticket = self.budget.request(self.cost_mb, self.owner, self.what)
        else:  # an actor is a process of its own: its resident memory counts
            ticket = RayRun(self.ray_address, self.cost_mb + ACTOR_MB, self.what)
        return self._begin(ticket)

    def _check_not_started(self):
        if self._thread is not None:
            raise RuntimeError("this job has already been started")

    def _begin(self, ticket):
        self._ticket = ticket
        self.started_at = time.time()
        self.status = "queued"
        self._thread = threading.Thread(target=self._run, name=self.what, daemon=True)
        self._thread.start()
        # a daemon, so that a server's end need not wait for a run's last step; but stopped and joined
        # before the interpreter tears down, never ended inside PyTorch or Ray (lab.server.shutdown)
        shutdown.join_at_exit(self._thread, self.stop)
        return self

    def wait(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)
        return self.status

    def stop(self):
        """Ask the job to stop: it leaves the queue, or stops before its next step."""
        self._stop.set()

    @property
    def running(self):
        """Not ended yet: queued for the budget or training."""
        return self.status in ("queued", "running")

    @property
    def queue_position(self):
        """1 if this job starts next, 2 after that, ...; 0 when it is not waiting."""
        return self._ticket.position if self._ticket is not None and self.status == "queued" else 0

    def events(self, since=0, kind=None, settled=False):
        """The job's events from the `since`-th on; with `kind`, only those of that type ("step", "eval", ...);
        `settled`: only those logged before this SETTLE_SECONDS tick while the job runs (_settled_end)."""
        with self._lock:
            of_kind, end = self._settled_end(kind, settled)
            return of_kind[since:end]

    def latest(self, kind, settled=False):
        """The job's last event of this type (of those `settled`), None before the first: a thirty-student class's
        live views ask it every redraw, and a list of every step copied and read each time was most of lesson 10's
        redraw."""
        with self._lock:
            of_kind, end = self._settled_end(kind, settled)
            return of_kind[end - 1] if end else None

    def _settled_end(self, kind, settled):
        """(the events of `kind`, None: all; where they end for a reader): a class's live views read a running
        job as of the start of the current second, so that every page redrawn within it shows the same points,
        sentences and chart, and the chart is made once (ui.shared.shared_figures) rather than for each page."""
        of_kind = self._events if kind is None else self._by_type.get(kind, [])
        if settled and self.running and self._tick == int(time.monotonic() / SETTLE_SECONDS):
            return of_kind, self._settled.get(kind, 0)
        return of_kind, len(of_kind)

    def _log(self, event):
        with self._lock:
            tick = int(time.monotonic() / SETTLE_SECONDS)
            if tick != self._tick:  # the first event of a new tick: everything before it is settled
                self._tick, self._settled = tick, {None: len(self._events)}
                self._settled.update((kind, len(events)) for kind, events in self._by_type.items())
            self._events.append(event)
            self._by_type.setdefault(event.get("type"), []).append(event)
            if self.first_event_at is None:
                self.first_event_at = time.monotonic()

    def _work(self):
        raise NotImplementedError

    def _compute(self, function, **kwargs):
        """`function(emit, should_stop, **kwargs)` where this job computes: in its Ray actor, in the
        server's training process, or in this thread; in either of the last two its steps take turns with
        the other jobs' there. Elsewhere than here, the arguments travel there and the return value back,
        pickled."""
        if self.ray_address is not None:
            return self._ticket.run(function, kwargs, self._log, self._stop.is_set)
        if self.in_process:
            return run_in_process(function, kwargs, self._log, self._stop.is_set)
        return function(emit=self._log, should_stop=self.turn_taker, **kwargs)

    def _run(self):
        if not (self.in_process or self.ray_address):  # it computes in this thread, its own: pages come first
            lower_this_thread()  # (not before starting a process: a forkserver started here would inherit it)
        status = "failed"
        try:
            if not self._ticket.wait(self._stop.is_set):
                status, self.message = "stopped", "stopped before it started"
                return
            self.status = "running"
            status = self._work()
        except Exception as e:  # reported to the UI as one line, never a traceback ...
            # bad input's own words, or a worker's line (the error it raised, or how it died); anything
            # else names its type, the mark of a bug
            line = str(e) if isinstance(e, (LabError, WorkerError)) else f"{type(e).__name__}: {e}"
            status, self.message = "failed", line
            self._log({"type": "error", "message": self.message})
            # ... while the server's log keeps where it came from (a child's, lab.server.workers logged already)
            log.error("%s failed", self.what, exc_info=not isinstance(e, WorkerError))
        finally:
            self.turn_taker.release()
            self._ticket.release()
            log.info(
                "%s: %s after %.1f s%s",
                self.what,
                status,
                time.time() - self.started_at,
                f" ({self.message})" if self.message else "",
            )
            # last: a UI that sees a final status finds the results saved and the budget free for a new job
            self.ended_at = time.time()
            self.status = status


def start_together(jobs, together="these runs"):
    """Start `jobs` (of one owner, one budget) all or none: the budget refuses, queues and admits them as one
    (lab.server.capacity.Budget.request_all), so a cap or a full budget never starts half of a race.
    On Ray each job asks the cluster for its own actor, as `start` does."""
    jobs = list(jobs)
    for job in jobs:
        job._check_not_started()
    first = jobs[0]
    if first.ray_address is not None:
        started = []
        try:
            for job in jobs:
                started.append(job.start())
        except Exception:  # one the cluster could never hold: the others stop before they train
            for job in started:
                job.stop()
            raise
        return started
    if any(job.budget is not first.budget or job.owner != first.owner for job in jobs):
        raise RuntimeError("start_together: the jobs must share one budget and one owner")
    tickets = first.budget.request_all([job.cost_mb for job in jobs], first.owner, [job.what for job in jobs], together)
    return [job._begin(ticket) for job, ticket in zip(jobs, tickets)]


class TrainingJob(BackgroundJob):
    """`train` on a background thread, with an event log a UI polls.

        job = TrainingJob("astra", model, task, config, checkpoint_dir="runs")
        job.start(); ...; job.events(since=n); job.stop(); job.wait()

    The final weights are saved as a versioned checkpoint (also after stop, and after a
    non-finite loss, which keeps the last good weights). `sampler(model)`, if given, runs
    in the training thread every `sample_every_s` seconds and its text is logged as a
    {"type": "sample"} event (no race with the optimiser). Its cost in the server's
    budget is the training memory lab.nets.cost estimates, unless `cost_mb` says otherwise.

    `resume` (a TrainingState, see resume_training_state) continues a run; with
    `resumable` the checkpoint carries the training state so that it can be
    continued in turn (about three times the size: the weights and AdamW's two moments),
    and `continuation(more_seconds)` makes the job that continues it once it has ended.

    `in_process` trains in the server's niced training process (lab.server.workers), so that a server's
    pages keep its interpreter and the cores come to them first; the sampler must then be
    picklable (a module-level function or a functools.partial of one, see lab.instruments.sampling.sample_text).
    So must it on Ray (`ray_address`): the weights travel to the actor and back, and this server
    saves them in `checkpoint_dir`, the student's space, wherever the actor ran.
    """

    def __init__(
        self,
        name,
        model,
        task,
        config,
        checkpoint_dir=None,
        extra=None,
        sampler=None,
        sample_every_s=3.0,
        cost_mb=None,
        owner=None,
        budget=None,
        turns=None,
        resume=None,
        resumable=False,
        in_process=False,
        room=None,
        ray_address=None,
    ):
        from lab.nets.cost import run_memory_mb

        self.name, self.model, self.task, self.config = name, model, task, config
        self.checkpoint_dir, self.extra, self.room = checkpoint_dir, extra or {}, room  # room: the folder's quota
        self.resume, self.resumable = resume, resumable
        self.sampler, self.sample_every_s = sampler, sample_every_s
        if cost_mb is None:
            cost_mb = run_memory_mb(model.config, config.batch_size, task.sequence_length(config))
            cost_mb += SAMPLER_MB if sampler is not None else 0
            if in_process or ray_address:  # the corpus travels there in shared memory: charged to its first run
                cost_mb += share_tensors(task) / 2**20
        super().__init__(cost_mb, owner, budget, turns, in_process, ray_address)
        self.what = f"The run {name}"
        self.checkpoint_path, self.result, self.trained_status = None, None, None
        self.first_step_seconds = None  # from start() to the first step's event: what a student waits for

    def _log(self, event):
        if event["type"] == "step" and self.first_step_seconds is None:
            self.first_step_seconds = time.time() - self.started_at
            where = "on Ray" if self.ray_address else f"runs training on this server: {self.budget.snapshot()[2]}"
            log.info("%s: first step %.2f s after Start (%s)", self.what, self.first_step_seconds, where)
        super()._log(event)

    def save(self, folder=None):
        """Save the trained weights as name_vN in `folder` (default: checkpoint_dir) and return the
        path. After a failed save (a full disk) the weights are still here, so this retries, elsewhere
        if need be."""
        self.checkpoint_path = self.write_copy(folder or self.checkpoint_dir, self.name, self.room)
        if self.status == "failed" and self.trained_status not in (None, "failed"):
            self.status, self.message = self.trained_status, self.result.reason  # the failed save is behind it
        return self.checkpoint_path

    def write_copy(self, folder, name, room=None):
        """The trained weights saved as name_vN in `folder` (within `room`, its quota) -> the path: the run's own
        file, or the copy a student who joined the run keeps (lab.server.shared_runs)."""
        from lab.training.checkpoints import save_checkpoint  # checkpoints imports models; keep train importable alone

        with self._lock:  # two students' copies at once: one model, moved to the CPU once
            weights = self.model.cpu()
        return save_checkpoint(
            folder,
            name,
            weights,
            self.task.tokenizer,
            run_metrics(self.result, self.config),
            self.extra,
            self.result.training_state if self.resumable else None,
            room,
        )

    def continuation(self, more_seconds, path=None, name=None, owner=None, room=None):
        """A new job, not started, that continues this ended run from its checkpoint for `more_seconds`
        more seconds of training: the same name, so that it saves the next version beside this one
        (name_vN+1), resumable in turn, with the same options; its events' steps and seconds go on
        from this run's. The budget becomes a time budget over the new total, so the learning rate's
        cosine is stretched over it too. ValueError (CheckpointError) when this run was not saved with
        its training state or its file cannot be read. `path`, `name`, `owner` and `room`: another student's
        copy of this run to continue instead, in their folder (lab.server.shared_runs)."""
        from lab.training.checkpoints import load_checkpoint  # checkpoints imports models; keep train importable alone

        check(more_seconds, PositiveNumber, "more_seconds")
        path, name = path or self.checkpoint_path, name or self.name
        if self.running or path is None:
            raise LabError(f"resume: the run {name} has not ended and been saved yet")
        if not path.is_file():  # deleted on the Checkpoints page since: say so, not where it was
            raise LabError("This run's saved file was deleted, so it cannot continue")
        config = dataclasses.replace(
            self.config, max_seconds=self.result.elapsed + more_seconds, max_steps=None, max_epochs=None
        )
        checkpoint = load_checkpoint(path, "cpu")
        return TrainingJob(
            name,
            checkpoint.model,
            copy.copy(self.task),
            config,
            checkpoint_dir=path.parent,
            extra=self.extra,
            sampler=self.sampler,
            sample_every_s=self.sample_every_s,
            cost_mb=self.cost_mb,
            owner=owner or self.owner,
            budget=self.budget,
            turns=self.turns,
            resume=resume_training_state(checkpoint, config),
            resumable=True,
            in_process=self.in_process,
            room=room or self.room,
            ray_address=self.ray_address,
        )

    def _work(self):
        try:
            if self.in_process or self.ray_address:  # the weights travel there and back, the events as they come
                weights, self.result = self._compute(
                    _train_in_child,
                    model_config=self.model.config,
                    weights=self.model.state_dict(),
                    task=self.task,
                    config=self.config,
                    resume=self.resume,
                    sampler=self.sampler,
                    sample_every_s=self.sample_every_s,
                )
                self.model.load_state_dict(weights)
                self.model.eval()
            else:
                self.result = train_with_samples(
                    self.model,
                    self.task,
                    self.config,
                    self._log,
                    self.turn_taker,
                    self.resume,
                    self.sampler,
                    self.sample_every_s,
                )
            if not self.resumable:  # AdamW's moments are twice the weights: not kept for nothing
                self.result.training_state = None
        finally:
            self.turn_taker.release()  # saving takes no turn
        reason = self.result.reason
        status = "stopped" if reason == "stopped" else "failed" if reason.startswith("non-finite") else "finished"
        self.trained_status = status  # what the training reached, whatever becomes of its save
        if self.checkpoint_dir is not None and self.result.steps > 0:
            try:
                self.save()
            except (OSError, ValueError) as e:  # a full disk or quota: the run is not lost, its weights stay here
                kept = "the trained weights are kept in memory, so saving can be tried again"
                reason, status = f"{reason}; saving failed: {e}; {kept}", "failed"
        self.message = reason
        return status


def share_tensors(task):
    """Move the task's tensors (a corpus's token ids) not yet in shared memory there -> their bytes: a run
    that computes elsewhere maps them from there (lab.server.workers), so the first run on a corpus pays
    for that copy and the runs after it (a race's other three) share it."""
    moved = 0
    for value in vars(task).values():
        if isinstance(value, torch.Tensor) and not value.is_shared():
            moved += value.nbytes
            value.share_memory_()
    return moved


def train_with_samples(model, task, config, emit, should_stop=None, resume=None, sampler=None, sample_every_s=3.0):
    """`train`, with `sampler(model)`'s text emitted as {"type": "sample", step, text} every
    `sample_every_s` seconds, between steps (so it never races the optimiser), from the first step."""
    last_sample = -math.inf

    def emit_with_samples(event):
        nonlocal last_sample
        emit(event)
        now = time.perf_counter()
        if sampler is not None and event["type"] == "step" and now - last_sample >= sample_every_s:
            last_sample = now
            text = sampler(model)
            model.train()
            emit({"type": "sample", "step": event["step"], "text": text})

    return train(model, task, config, emit_with_samples, should_stop, resume)


def _train_in_child(emit, should_stop, model_config, weights, **kwargs):
    """TrainingJob's work in the server's training process (lab.server.workers) or a Ray actor:
    -> (trained weights, TrainResult)."""
    from lab.nets.models import build_model

    with torch.device("meta"):  # shapes only: the weights given replace them, nothing is drawn
        model = build_model(model_config)
    model.load_state_dict(weights, assign=True)
    result = train_with_samples(model, emit=emit, should_stop=should_stop, **kwargs)
    return {k: v.cpu() for k, v in model.state_dict().items()}, result
