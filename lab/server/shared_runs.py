"""Identical experiments computed once (issue 49). A class pressing the same button asks for the same run thirty
times; a run is a function of its settings and seed (lab.nets.randomness), so the server trains it once and shows
it to each: whoever asks for a run equal to one training here, or ended in the last hour, joins it.

    started = start_runs([(job, name, folder, room), ...], owner, together="the race", private=False)
    run = started[0]            # a Member: the job as this student's, under the student's own name
    run.events(); run.stop()    # Stop leaves it: the job stops when the last student has left
    run.classmates              # how many others asked for it
    run.checkpoint_path         # this student's own copy, written into their folder once the run has ended

A joined run costs the server's budget nothing more: one job, one place in the queue. A run on a student's own
text (`private`) is joined only from that student's own space: what one student brought stays theirs.
"""

import dataclasses
import hashlib
import json
import threading
import time
import weakref

import torch

import lab
from lab.server.jobs import start_together

KEEP_SECONDS = 3600  # a run that ended this long ago is trained again rather than joined


# id(tensor) -> (a weak reference to it, its digest): a corpus is hashed once per server, not once per run; the
# reference tells a tensor from a later one that took its id
_digests = {}
_digests_lock = threading.Lock()


def _fingerprint(value):
    """A task's content as JSON-able values: its tensors by digest, its tokenizer by state, the rest by value."""
    if isinstance(value, torch.Tensor):
        with _digests_lock:
            known, digest = _digests.get(id(value), (None, None))
        if known is None or known() is not value:
            digest = hashlib.sha256(value.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
            with _digests_lock:
                _digests[id(value)] = (weakref.ref(value, lambda _, key=id(value): _digests.pop(key, None)), digest)
        return f"{value.dtype}{tuple(value.shape)}:{digest}"
    if hasattr(value, "to_state"):
        return value.to_state()
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if hasattr(value, "__dict__"):
        return {k: _fingerprint(v) for k, v in sorted(vars(value).items())}
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def experiment_key(job, private_to=None):
    """What makes two runs the same experiment: the model's config and the run's settings (seed included), the
    task's data, what the run writes besides (its sampler, its extra), the lab's version; for the probe and the
    live ablation, their settings (seeds included) and the lab's version; `private_to` (an owner) for a run on a
    student's own text. None for a continuation of a saved run, which is its student's."""
    if getattr(job, "resume", None) is not None:
        return None
    parts = {"kind": type(job).__name__, "settings": dataclasses.asdict(job.config), "lab": lab.__version__}
    parts["private"] = private_to
    if hasattr(job, "model"):  # a training run; an experiment's job (the probe, the live ablation) is its settings
        sampler = getattr(job, "sampler", None)
        parts |= {
            "model": dataclasses.asdict(job.model.config) | {"family": job.model.config.family},
            "task": {"kind": type(job.task).__name__, **_fingerprint(job.task)},
            "sampler": None if sampler is None else repr(getattr(sampler, "args", ())[2:]),
            "extra": getattr(job, "extra", None),
            "resumable": getattr(job, "resumable", False),
        }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


class SharedRun:
    """One experiment: its job, and the students who asked for it (owner -> Member)."""

    def __init__(self, job):
        self.job, self.members, self.lock = job, {}, threading.Lock()
        self.abandoned = False  # every student left: it is stopping, and nobody joins it any more

    def joinable(self, now):
        if self.abandoned:
            return False
        if self.job.running:
            return True
        ended = self.job.ended_at
        return self.job.status == "finished" and ended is not None and now - ended < KEEP_SECONDS

    def member(self, owner, name, folder, room, joined):
        """`owner`'s Member of this run: the one they hold already, else a new one with these details."""
        with self.lock:
            member = self.members.get(owner) or Member(self, owner, name, folder, room, joined)
            self.members[owner] = member
            return member

    def leave(self, owner):
        with self.lock:
            self.members.pop(owner, None)
            self.abandoned = not self.members
        if self.abandoned:
            self.job.stop()


class Member:
    """A student's hold on a shared run: everything of the job (events, status, model, task) under the student's
    own name, their own saved copy, and Stop that leaves the run rather than ending it for the others."""

    def __init__(self, shared, owner, name, folder, room, joined):
        self._shared, self.owner, self.name = shared, owner, name
        self._folder, self._room, self._copy, self.message_of_copy = folder, room, None, ""
        self.joined = joined  # True: someone else's run, joined; False: this student started it
        self.joined_ended = joined and not shared.job.running  # joined after it ended: shown whole at once

    def __getattr__(self, attribute):
        return getattr(self._shared.job, attribute)

    @property
    def job(self):
        return self._shared.job

    @property
    def classmates(self):
        """How many others asked for this same run."""
        with self._shared.lock:
            return max(0, len(self._shared.members) - 1)

    @property
    def trained_at(self):
        """When the run ended (time.time()), None while it trains."""
        return self.job.ended_at

    def stop(self):
        self._shared.leave(self.owner)

    @property
    def checkpoint_path(self):
        """The student's own saved copy: the job's file for whoever started it, a copy in the student's folder
        (written once, the first time it is asked for after the run ended) for whoever joined it."""
        if not self.joined or self._folder is None:
            return self.job.checkpoint_path
        if self._copy is None and not self.job.running and self.job.checkpoint_path is not None:
            try:
                self._copy = self.job.write_copy(self._folder, self.name, self._room)
            except (OSError, ValueError) as error:  # the student's quota or disk: the run itself is saved
                self.message_of_copy = f"your copy could not be saved: {error}"
        return self._copy

    def continuation(self, more_seconds):
        """The job that continues this student's own copy of the run, in their folder, as theirs."""
        return self.job.continuation(more_seconds, self.checkpoint_path, self.name, self.owner, self._room)

    def save(self, folder=None):
        self._copy = self.job.write_copy(folder or self._folder, self.name, self._room)
        return self._copy


class SharedRuns:
    """The server's experiments by key: the ones training, and those ended within KEEP_SECONDS."""

    def __init__(self):
        self._runs, self._lock = {}, threading.Lock()

    def start(self, requests, owner, together="these runs", private=False):
        """`requests`: (job not started, the student's name for it, their folder, their room check) each.
        Each request equal to a joinable run joins it; the others start together (all or none,
        lab.server.jobs.start_together) and become joinable. -> a Member per request, in order."""
        now = time.time()
        keys = [experiment_key(request[0], owner if private else None) for request in requests]
        with self._lock:
            self._runs = {k: run for k, run in self._runs.items() if run.joinable(now)}
            found = [self._runs.get(key) if key is not None else None for key in keys]
            fresh = [request[0] for request, run in zip(requests, found) if run is None]
            if fresh:
                start_together(fresh, together)
            members = []
            for key, (job, name, folder, room), run in zip(keys, requests, found):
                joined = run is not None
                if not joined:
                    run = SharedRun(job)
                    if key is not None:
                        self._runs[key] = run
                members.append(run.member(owner, name, folder, room, joined))
            return members

    def join(self, keys, owner):
        """Join the runs of these experiment keys, all or none: a Member of each (named as its job), or None when
        one of them is not joinable now. What a class pressing the same button asks for, built by nobody but the
        first (SharedRuns.start needs each request's job, and a race's models were most of a press)."""
        with self._lock:
            now = time.time()
            runs = [self._runs.get(key) for key in keys]
            if not all(run is not None and run.joinable(now) for run in runs):
                return None
            return [run.member(owner, run.job.name, None, None, True) for run in runs]

    def find(self, key):
        """The run of this experiment key a request now would join, or None."""
        with self._lock:
            run = self._runs.get(key)
            return run if run is not None and run.joinable(time.time()) else None

    def computing(self):
        """How many distinct runs this server holds (training or joinable)."""
        with self._lock:
            return len(self._runs)


_shared = SharedRuns()


def joinable(key):
    """The run a request of this experiment key would join on this server now (a SharedRun), or None."""
    return _shared.find(key)


def join_runs(keys, owner):
    """SharedRuns.join on the server's one registry of experiments."""
    return _shared.join(keys, owner)


def start_runs(requests, owner, together="these runs", private=False):
    """SharedRuns.start on the server's one registry of experiments."""
    return _shared.start(requests, owner, together, private)
