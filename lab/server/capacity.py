"""A server's training capacity, shared by cost rather than by a count of jobs.

A class on one hosted server (1-2.7 GB, a few vCPUs) starts many small runs at once and now
and then a large one. Each job asks for its estimated cost (megabytes of training memory,
lab.nets.cost); jobs run while their costs fit in the budget, the rest wait in one first-come,
first-served queue and start as soon as the jobs ahead of them fit. One owner (a browser
session) may hold at most `owner_share` of the budget at a time, so no student starves the
rest; a job that could never fit is refused at once with a message saying why.

    budget = Budget(capacity=1024, owner_share=0.5)
    ticket = budget.request(cost=30, owner="session-key", what="gru run")   # or CapacityError
    ticket.wait(should_stop)     # blocks in the job's own thread until admitted (False: stopped first)
    ...train...
    ticket.release()

A race's four runs are one request (`request_all`): refused together, queued together and admitted
together, so a cap or a full budget never starts half of it.

The models the pages keep loaded for every session are counted in the same budget (`KeptModels`): one
charge of their total, within a quarter of the budget, the least recently used dropped to make room.
"""

import collections
import functools
import os
import threading
import time

from lab.errors import LabError
from lab.server.pages_first import aside_share, step_aside
from lab.settings import server_settings
from lab.training.process import usable_cores
from lab.words import count


class CapacityError(LabError):
    """A job that cannot run on this server: larger than the budget or than one owner's share."""


class Ticket:
    """One job's place in the budget: queued, then admitted, then released."""

    def __init__(self, budget, cost, owner, what):
        self.budget, self.cost, self.owner, self.what = budget, cost, owner, what
        self.admitted = self.released = self.held = False  # held: charged past the queue (Budget.hold)
        self.group = [self]  # the tickets admitted with it, all or none (Budget.request_all)

    @property
    def position(self):
        """1 for the next job to start, 2 for the one after, ...; 0 once admitted or released."""
        return self.budget.position(self)

    def wait(self, should_stop=None, poll_seconds=0.2):
        """Block until admitted (True) or until should_stop() says stop, which leaves the queue (False)."""
        with self.budget._changed:
            while not self.admitted:
                if self.released or (should_stop is not None and should_stop()):
                    self.budget._leave(self)
                    return False
                self.budget._changed.wait(poll_seconds)
            return True

    def release(self):
        with self.budget._changed:
            self.budget._leave(self)


class Budget:
    """A capacity in cost units (MB of estimated training memory), a FIFO queue, a share per owner, and
    a cap on how many jobs one owner may have running or waiting at once (a queue of 30 runs from one
    session would hold everyone else's behind it)."""

    def __init__(self, capacity, owner_share=0.5, owner_jobs=8):
        if not capacity > 0 or not 0 < owner_share <= 1:
            raise LabError(f"capacity must be > 0 and owner_share in (0, 1], got {capacity!r}, {owner_share!r}")
        self.capacity, self.owner_share, self.owner_jobs = float(capacity), float(owner_share), owner_jobs
        self._changed = threading.Condition()
        self._queue, self._running = [], []
        self._yielders = []  # yield_room(mb) of each cache charged here (KeptModels): it gives way to runs

    def add_yielder(self, yield_room):
        """`yield_room(mb)`: a cache charged to this budget frees up to `mb` of what it holds idle, when runs
        wait for room (called outside the budget's lock)."""
        self._yielders.append(yield_room)

    @property
    def owner_limit(self):
        return self.capacity * self.owner_share

    def request(self, cost, owner, what="this run"):
        """Queue a job of `cost`; refuse it at once (CapacityError) if it could never be admitted."""
        return self.request_all([cost], owner, [what])[0]

    def request_all(self, costs, owner, whats, together="these runs"):
        """Queue jobs of `costs` (named `whats`) as one: refused together at once (CapacityError, one line)
        when any could never fit, when together they pass one session's share, or when they would pass its
        cap on jobs; else queued together and admitted together, when all of them fit. -> their tickets."""
        for cost, what in zip(costs, whats):
            self._check_fits(cost, what)
        if len(costs) > 1:
            self._check_fits(sum(costs), f"{together} ({count(len(costs), 'run')})")
        tickets = [Ticket(self, float(cost), owner, what) for cost, what in zip(costs, whats)]
        for ticket in tickets:
            ticket.group = tickets
        with self._changed:
            held = sum(t.owner == owner for t in self._queue + self._running)
            if owner is not None and held + len(tickets) > self.owner_jobs:
                now = f"this session already has {count(held, 'run')} training or waiting"
                if len(tickets) > 1:
                    now = (
                        f"{together} would make {count(held + len(tickets), 'run')} training or waiting for this "
                        "session"
                    )
                raise CapacityError(
                    f"runs: {now}, and {self.owner_jobs} is the most one session may have at once on this "
                    "server; stop one, or wait for one to end"
                )
            self._queue.extend(tickets)
            self._admit()
            short = self._used() + sum(t.cost for t in self._queue) - self.capacity
        if short > 0:  # runs wait: the caches' idle models make way (reloaded, if asked for again, in a second)
            for yield_room in self._yielders:
                yield_room(short)
        return tickets

    def hold(self, cost, what):
        """Charge `cost` at once, to no session and past the queue: what the server has already spent (its
        training process, started). -> its ticket, to release when that memory is given back."""
        ticket = Ticket(self, float(cost), None, what)
        with self._changed:
            ticket.admitted = ticket.held = True
            self._running.append(ticket)
        return ticket

    def rehold(self, ticket, cost, what):
        """A held charge (`hold`) changed to `cost` in one step, so that no run is admitted in between on room
        it would not have: `ticket` None makes one, a cost of 0 gives it back. -> the ticket, or None."""
        with self._changed:
            if ticket is not None and not ticket.released:
                if cost > 0:
                    ticket.cost = float(cost)
                    self._admit()  # less held: a queued run may fit now
                    return ticket
                self._leave(ticket)
                return None
            return self.hold(cost, what) if cost > 0 else None  # (the condition's lock is reentrant)

    def _check_fits(self, cost, what):
        if not cost <= self.owner_limit:  # also refuses NaN
            raise CapacityError(
                f"{what} needs about {cost:,.0f} MB to train, more than one session may use on this server "
                f"({self.owner_limit:,.0f} MB of {self.capacity:,.0f} MB); make the model, batch or block smaller"
            )

    def position(self, ticket):
        with self._changed:
            return self._queue.index(ticket) + 1 if ticket in self._queue else 0

    def snapshot(self):
        """(used, capacity, running jobs, queued jobs), for a page to show how full the server is (used
        counts what it holds, its training process, too)."""
        with self._changed:
            jobs = sum(not t.held for t in self._running)
            return sum(t.cost for t in self._running), self.capacity, jobs, len(self._queue)

    def sentence(self):
        """How full the server is, for a page: what it holds for itself named apart from the runs, so that a
        server with no run does not read as full of them."""
        used, capacity, runs, queued = self.snapshot()
        with self._changed:
            held = [f"{t.what} {t.cost:,.0f} MB" for t in self._running if t.held]
        return (
            f"This server's training budget (all users): {used:,.0f} of {capacity:,.0f} MB in use "
            f"({', '.join([*held, count(runs, 'run')])}), {queued:,} waiting."
        )

    def _used(self, owner=None):
        return sum(t.cost for t in self._running if owner is None or t.owner == owner)

    def _owned(self, owner):
        """What one owner's jobs hold (None, a job of nobody's: every job's), never a held charge (`hold`): the
        server's own, which is no session's share (the models kept for the pages would else count against a
        job of nobody's)."""
        return sum(t.cost for t in self._running if not t.held and (owner is None or t.owner == owner))

    def _admit(self):
        """Start queued jobs in order while they fit, a group (request_all) only whole; call with the
        lock held.

        Strictly first come, first served, except that a job held back only by its own owner's
        share does not block other owners' jobs behind it."""
        blocked_owners = set()
        for ticket in list(self._queue):
            if ticket.admitted or ticket.owner in blocked_owners:  # admitted: with the first of its group
                continue
            group = [t for t in ticket.group if not t.released]
            cost = sum(t.cost for t in group)
            if self._owned(ticket.owner) + cost > self.owner_limit:
                blocked_owners.add(ticket.owner)
                continue
            if self._used() + cost > self.capacity:
                break
            for member in group:
                self._queue.remove(member)
                self._running.append(member)
                member.admitted = True
        self._changed.notify_all()

    def _leave(self, ticket):
        """Take a ticket out of the queue or the running set; call with the lock held."""
        ticket.released = True
        if ticket in self._queue:
            self._queue.remove(ticket)
        if ticket in self._running:
            self._running.remove(ticket)
        self._admit()


def _once(make):
    """`make()` at the first call, whichever thread makes it; the same object at every call after."""
    lock, made = threading.Lock(), []

    @functools.wraps(make)
    def once():
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return once


@_once
def server_budget():
    """The budget every job of this process draws on, made on first use from the server's settings:
    RNNLAB_TRAINING_BUDGET_MB, RNNLAB_SESSION_SHARE and RNNLAB_SESSION_RUNS (lab.settings)."""
    settings = server_settings()
    return Budget(settings.training_budget_mb, settings.session_share, settings.session_runs)


KEPT_MODELS_SHARE = 0.25  # the part of the budget the models kept loaded for the pages may hold together
# a kept model no page has used for this long makes way for runs waiting for room (a class pressing Start beside
# Sample pages it opened earlier); one in use stays, so that no page reloads its model between two redraws
KEPT_IDLE_SECONDS = 30.0


class _Kept:
    """One kept model: its cost, how its cache drops it (None while it loads), and the copies made of it."""

    def __init__(self, key, cost, what):
        self.key, self.cost, self.what = key, cost, what
        self.value, self.drop, self.copies = None, None, {}
        self.lock = threading.Lock()  # one copy of each name made at a time
        self.used_at = time.monotonic()


class KeptModels:
    """The models a server keeps loaded for every session (the pages' cache of loaded checkpoints,
    ui.shared.checkpoint_picker, and the copies made from them: an int8 sampler, a reference twin), charged to
    the training budget while they are kept: one held charge of their total (Budget.rehold), so that runs are
    admitted beside them, never on the memory they take. Together at most `max_mb`: a model that would pass it
    first has the least recently used ones dropped from their cache, so that five large uploads opened at once
    cost at most that.

        models.keep(key, cost_mb, "the model in x.safetensors")   # before loading: CapacityError if no room
        models.kept(key, checkpoint, drop)   # loaded: `drop()` takes it out of its cache, which then calls
        models.released(checkpoint)          # ... this, as it does when it lets it go for its own reasons
        models.use(key)                      # on every use: the least recently used go first

    Every `drop` is called outside this object's lock: a cache calls `released` back holding its own."""

    def __init__(self, budget, max_mb):
        self.budget, self.max_mb = budget, float(max_mb)
        self._lock = threading.Lock()
        self._entries = collections.OrderedDict()  # key -> _Kept, the least recently used first
        self._by_value = {}  # id(a kept object) -> its _Kept (held alive by its cache until `released`)
        self._ticket = None  # the budget's one charge for all of them

    def kept_mb(self):
        with self._lock:
            return sum(entry.cost for entry in self._entries.values())

    def keep(self, key, cost_mb, what):
        """Charge `cost_mb` for the model `key` before it is loaded, first dropping the least recently used
        until it fits; CapacityError when it cannot (larger than all of `max_mb`, or the models loading now
        leave no room). Then `kept` once loaded, or `forget` when loading failed."""
        cost_mb = float(cost_mb)
        if not cost_mb <= self.max_mb:  # also refuses NaN
            raise CapacityError(
                f"{what} needs about {cost_mb:,.0f} MB loaded, more than this server keeps loaded for its pages "
                f"({self.max_mb:,.0f} MB of its {self.budget.capacity:,.0f} MB budget)"
            )
        with self._lock:
            self._forget(key)  # loaded again (its file changed, or its cache dropped it without a word)
            dropped = self._make_room(cost_mb)
            fits = self._total() + cost_mb <= self.max_mb
            if fits:
                self._entries[key] = _Kept(key, cost_mb, what)
            self._recharge()
        self._drop(dropped)
        if not fits:
            raise CapacityError(
                f"{what}: the server is loading other models into the room it keeps for them "
                f"({self.max_mb:,.0f} MB); try again in a moment"
            )

    def kept(self, key, value, drop):
        """`value`, the model `keep` charged for, is loaded and in its cache; `drop()` takes it out."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.value is None:
                entry.value, entry.drop = value, drop
                self._by_value[id(value)] = entry

    def forget(self, key):
        """Loading `key` failed: its charge is given back."""
        with self._lock:
            self._forget(key)
            self._recharge()

    def use(self, key):
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self._entries[key].used_at = time.monotonic()

    def yield_room(self, mb, idle_seconds=KEPT_IDLE_SECONDS):
        """Runs wait for `mb` of the budget: drop the least recently used models no page has used for
        `idle_seconds`, until `mb` is freed or none is left (Budget.add_yielder)."""
        dropped, now = [], time.monotonic()
        with self._lock:
            for entry in list(self._entries.values()):
                if mb <= 0 or now - entry.used_at < idle_seconds:
                    break  # least recently used first: the rest were used later still
                if entry.drop is not None:
                    self._forget(entry.key)
                    dropped.append(entry.drop)
                    mb -= entry.cost
            self._recharge()
        self._drop(dropped)

    def copy(self, key, name, make):
        """A copy of the kept model `key`, `make() -> (copy, its MB)`, made once and kept with it (dropped when
        it is), its MB added to its charge. Made for this call alone where `key` is not kept, or the copy
        does not fit beside the others."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or entry.value is None:
            return make()[0]
        with entry.lock:
            if name in entry.copies:
                return entry.copies[name]
            made, cost_mb = make()
            with self._lock:
                if self._entries.get(key) is not entry:  # dropped while it was made
                    return made
                self._entries.move_to_end(key)
                dropped = self._make_room(cost_mb, spare=entry)
                fits = self._total() + cost_mb <= self.max_mb
                if fits:
                    entry.cost += cost_mb
                    entry.copies[name] = made
                self._recharge()
        self._drop(dropped)
        return made

    def released(self, value):
        """Its cache let `value` go: its charge, and its copies with it, go too."""
        with self._lock:
            entry = self._by_value.pop(id(value), None)
            if entry is not None and self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
            self._recharge()

    def _total(self):
        return sum(entry.cost for entry in self._entries.values())

    def _forget(self, key):
        entry = self._entries.pop(key, None)
        if entry is not None and entry.value is not None:
            self._by_value.pop(id(entry.value), None)

    def _make_room(self, cost_mb, spare=None):
        """Take the least recently used loaded models out until `cost_mb` more fits (not `spare`, nor one
        that is loading) -> how to drop them from their caches; call with the lock held."""
        dropped = []
        for entry in list(self._entries.values()):
            if self._total() + cost_mb <= self.max_mb:
                break
            if entry is not spare and entry.drop is not None:
                self._forget(entry.key)
                dropped.append(entry.drop)
        return dropped

    def _drop(self, dropped):
        for drop in dropped:  # outside the lock
            drop()

    def _recharge(self):
        self._ticket = self.budget.rehold(self._ticket, self._total(), "models kept loaded for the pages")


@_once
def kept_models():
    """The models this process keeps loaded for its pages, charged to `server_budget()`."""
    budget = server_budget()
    models = KeptModels(budget, budget.capacity * KEPT_MODELS_SHARE)
    budget.add_yielder(models.yield_room)
    return models


class StepTurns:
    """Whose turn it is to compute a training step, for the jobs of one server process.

    Training threads run Python between PyTorch's kernels, and Python runs one thread at a time:
    ten runs stepping at once leave the thread that draws a student's page a tenth of the
    interpreter, and the page takes ten times as long. Only `concurrent` jobs compute a step at
    a time; the others wait, holding nothing, so a page competes with at most that many. Every
    admitted run still trains (turns go round), each at its share of the machine.

        turns.take(should_stop)   # blocks until a turn is free (False: stopped while waiting)
        ...one step...
        turns.give_back()
    """

    def __init__(self, concurrent):
        if not concurrent >= 1:
            raise LabError(f"concurrent must be >= 1, got {concurrent!r}")
        self.concurrent = int(concurrent)
        self._changed = threading.Condition()
        self._free, self._waiting = self.concurrent, collections.deque()

    def take(self, should_stop=None, poll_seconds=0.2, first=False):
        """First come, first served: a job that gives its turn back and asks again queues behind the
        others (a plain semaphore lets it take the turn straight back, and the others starve). A job's
        `first` step goes to the front: a student who just pressed Start sees a loss point after one
        step of the others, not after a round of all of them, and each job does this once."""
        me = object()
        with self._changed:
            if first:
                self._waiting.appendleft(me)
            else:
                self._waiting.append(me)
            while not (self._free and self._waiting[0] is me):
                if should_stop is not None and should_stop():
                    self._waiting.remove(me)
                    self._changed.notify_all()
                    return False
                self._changed.wait(poll_seconds)
            self._waiting.popleft()
            self._free -= 1
            self._changed.notify_all()  # the next in line may fit too (concurrent > 1)
            return True

    def give_back(self):
        with self._changed:
            self._free += 1
            self._changed.notify_all()


class TurnTaker:
    """One job's `should_stop` for train(), which asks it once before every step: it gives this job's turn
    (StepTurns) back and waits for the next, so that the steps of many jobs take turns. True (stop) when
    `stopped()` while waiting. `release()` gives a turn still held back, when the job ends or saves."""

    def __init__(self, turns, stopped):
        self.turns, self.stopped = turns, stopped
        self.holds_turn, self.turns_taken = False, 0

    def __call__(self):
        self.release()
        step_aside()
        self.holds_turn = self.turns.take(self.stopped, first=not self.turns_taken)
        self.turns_taken += 1
        return not self.holds_turn or self.stopped()

    def release(self):
        if self.holds_turn:
            self.turns.give_back()
            self.holds_turn = False


@_once
def server_turns():
    """The step turns of this process's jobs: RNNLAB_CONCURRENT_STEPS compute a step at once (PyTorch's own
    threads still use every core for that step), made on first use."""
    return StepTurns(server_settings().concurrent_steps)


def step_lanes(settings=None):
    """How many training steps this server computes at once: one per training process (the runs in a
    process take turns step by step, lab.server.workers), or RNNLAB_CONCURRENT_STEPS where the runs train
    in the server's own threads; never more than its cores. What a page's estimate of a run's steps in its
    time is based on (a Ray cluster's own cores are not counted)."""
    settings = settings or server_settings()
    lanes = settings.training_processes or settings.concurrent_steps
    return max(1, min(lanes, usable_cores()))


def lane_share(lanes, runs_training, load=None, cores=None, aside=None):
    """The part of a lane's speed each lane gets on this machine now (0-1]: its cores shared with what else is
    runnable (`load`, the one-minute load average, os.getloadavg, less the lanes this server's runs keep busy).
    The training processes run at the lowest priority, so other work comes first: at a load of 11 on two cores,
    a race took a tenth of its quiet steps (BENCHMARKS.md, "The memory race"). Less the time the runs have lately
    stepped aside for the pages (`aside`, lab.server.pages_first.aside_share)."""
    cores = cores or usable_cores()
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if aside is None:
        aside = aside_share()
    others = max(0.0, load - min(lanes, runs_training))
    return min(1.0, cores / max(cores, others + lanes)) * (1.0 - aside)
