"""Training on a Ray cluster (https://docs.ray.io): with RNNLAB_RAY_ADDRESS set, every background job
of the app (lab.server.jobs: the Train page's runs and races, the lessons' toy tasks, the live ablation, the
memory probe) computes in a Ray actor of its own, on whichever machine of the cluster has room.

    RNNLAB_RAY_ADDRESS=auto streamlit run serve.py     # the cluster `ray start --head` started here
    RNNLAB_RAY_ADDRESS=local streamlit run serve.py    # a Ray started inside the server, on its own cores

    run = RayRun("auto", memory_mb=420, what="The run astra-1")  # Ray's scheduler queues it
    run.wait(should_stop)                                        # until Ray starts it (False: stopped first)
    result = run.run(function, kwargs, on_event, stopped)
    run.release()

A RayRun stands where a ticket of the server's budget (lab.server.capacity.Ticket) stands for a run trained
on the server: it asks Ray for the run's CPU and memory (lab.nets.cost's estimate plus the process's own),
and Ray's scheduler, not the budget, decides when and on which machine it starts. `run` keeps
lab.server.workers.run_in_process's contract: `function(emit, should_stop, **kwargs)` runs in the actor; its
events reach `on_event` here, in order; `stopped()` reaches its should_stop; its return value comes
back here; an exception it raises, or the death of the actor's process, is a WorkerError of one line,
and the server's log gets the traceback or Ray's account of the death.

What comes back is data, never a path: a training run returns its weights and the server saves them
in the student's space itself (lab.server.jobs.TrainingJob.save, under the space's quota), so a worker on
another machine needs neither the server's disk nor its quota. The actors import this very `lab`
package, which Ray ships to them (runtime_env py_modules): the cluster's machines need the
requirements (requirements.txt, requirements-ray.txt), not the repository.

A fresh actor is a new process that imports PyTorch: seconds on an idle machine, minutes when a class
presses Start at once on loaded cores. With RNNLAB_RAY_WARM_ACTORS=N the server starts N actors as it
starts (`start_warm_actors`), each holding one CPU and RNNLAB_RAY_WARM_ACTOR_MB of the cluster with
PyTorch imported; a run that fits takes an idle one and gives it back when it ends, and a run that
does not fit gets an actor of its own as before. Ray's scheduler still places every actor, warm or
not; a run whose own actor waits for room the cluster lacks while warm actors sit idle (too small
for it) ends them one at a time, so that an idle pool never keeps the cluster from a run.

Ray is imported here only, on first use: without RNNLAB_RAY_ADDRESS the app never imports it and
need not have it installed.
"""

import logging
import threading
import time
import uuid
from pathlib import Path

from lab.errors import LabError
from lab.server import shutdown
from lab.server.capacity import CapacityError
from lab.server.priority import lower_this_process
from lab.server.workers import WorkerError
from lab.settings import server_settings

log = logging.getLogger(__name__)
# the app's models are small: a second thread per run costs more in synchronisation than it saves, and
# Ray sets an actor's OMP_NUM_THREADS to its CPUs, so one CPU per run is also one thread per run
CPUS_PER_RUN = 1
# what an actor costs beyond its run's training memory: a process, with PyTorch and the interpreter
# (~400 MB resident, measured as a run's own process on this server); the run's Ray memory request holds it
ACTOR_MB = 400
# how long a run that no idle warm actor fits waits for its own before it retires one of them
RETIRE_AFTER_SECONDS = 2.0
_RunActor, _lock = None, threading.Lock()
_warm, _warm_lock = [], threading.Lock()  # the idle warm actors: (actor, its memory in MB)


class RunActor:
    """One run's process on the cluster: `run` computes in one thread of the actor while `poll`, in its
    second (max_concurrency=2), hands over the events so far and passes Stop on. A warm actor
    (`warm=True`) imports PyTorch and the training code as it starts, and is `reset` between runs."""

    def __init__(self, warm=False):
        lower_this_process()  # on the server's own machine the pages come first (lab.server.priority)
        if warm:
            import lab.training.train  # noqa: F401  (and PyTorch with it)
        self.reset()

    def reset(self):
        self.events, self.stop = [], threading.Event()

    def run(self, function, kwargs):
        return function(emit=self.events.append, should_stop=self.stop.is_set, **kwargs)

    def poll(self, since, stop):
        if stop:
            self.stop.set()
        return self.events[since:]


def connect(address, **init_options):
    """Connect this process to the Ray cluster at `address` ("auto", "HOST:6379", or "local": start one
    in this process) on first use; later calls find it connected. `init_options` go to ray.init (the
    tests' num_cpus=2). Returns the ray module."""
    try:
        import ray
    except ImportError:
        raise LabError(
            # a page shows this line to a student who pressed Train: no command in it (README: installing Ray)
            f"RNNLAB_RAY_ADDRESS: set to {address!r}, but Ray is not installed on this server"
        ) from None

    global _RunActor
    with _lock:
        if not ray.is_initialized():
            lab_folder = str(Path(__file__).parent.parent)  # the whole lab package
            ray.init(address=address, runtime_env={"py_modules": [lab_folder]}, **init_options)
            # ray.init registered Ray's own end: this process's runs must end before it (lab.server.shutdown)
            shutdown.register()
        if _RunActor is None:
            _RunActor = ray.remote(max_concurrency=2)(RunActor)
    return ray


def check_fits(ray, cpus, memory_mb, what):
    """CapacityError at once for a run that no machine of the cluster could ever hold (Ray would keep it
    waiting for ever). A cluster with no machine of `cpus` CPUs yet, which an autoscaler may add, is not
    judged."""
    sizes = [
        node["Resources"].get("memory", 0) / 2**20
        for node in ray.nodes()
        if node["Alive"] and node["Resources"].get("CPU", 0) >= cpus
    ]
    if sizes and memory_mb > max(sizes):
        raise CapacityError(
            f"{what} needs about {memory_mb:,.0f} MB to train, more than any machine of the Ray cluster "
            f"has ({max(sizes):,.0f} MB); make the model, batch or block smaller"
        )


def start_warm_actors(address, count=None, memory_mb=None, poll_seconds=0.5):
    """Start `count` warm actors (default RNNLAB_RAY_WARM_ACTORS) of `memory_mb` each (default
    RNNLAB_RAY_WARM_ACTOR_MB): Ray places them as it has room. Returns once all have started, their
    PyTorch imported, or once the server begins to end (the server calls it in a thread of its own)."""
    count = server_settings().ray_warm_actors if count is None else count
    if memory_mb is None:  # 1024 by default: the default run asks for ~470 MB
        memory_mb = server_settings().ray_warm_actor_mb
    ray = connect(address)
    options = dict(num_cpus=CPUS_PER_RUN, memory=int(memory_mb * 2**20))
    actors = [_RunActor.options(name=f"warm {uuid.uuid4().hex[:8]}", **options).remote(warm=True) for _ in range(count)]
    with _warm_lock:
        _warm.extend((actor, memory_mb) for actor in actors)
    starting = [actor.poll.remote(0, False) for actor in actors]  # each answered once its actor has started
    while starting:
        if shutdown.ENDING.is_set():  # the server is ending: it need not wait for them
            return actors
        started, starting = ray.wait(starting, num_returns=len(starting), timeout=poll_seconds)
        ray.get(started)  # an actor that could not start raises here
    if actors:
        log.info("%d warm Ray actors of %d MB each are ready", count, memory_mb)
    return actors


def idle_warm_actors():
    """How many warm actors are idle now."""
    with _warm_lock:
        return len(_warm)


def retire_warm_actors(count=None):
    """End `count` idle warm actors (all of them if None), which gives their CPUs and memory back to the
    cluster. Returns how many were ended."""
    with _warm_lock:
        keep = 0 if count is None else max(len(_warm) - count, 0)
        retired = _warm[keep:]
        del _warm[keep:]
    if retired:
        import ray

        for actor, _ in retired:
            ray.kill(actor)
    return len(retired)


def _take_warm(memory_mb, cpus):
    """An idle warm actor that can hold a run of `memory_mb` and `cpus`, taken from the idle ones; or None."""
    if cpus != CPUS_PER_RUN:
        return None
    with _warm_lock:
        for n, (_, size_mb) in enumerate(_warm):
            if memory_mb <= size_mb:
                return _warm.pop(n)
    return None


class RayRun:
    """One job's actor on the Ray cluster, asked for at once (Ray queues it) and released at the end, or
    an idle warm actor that fits it, given back at the end; see the module's docstring."""

    position = 0  # Ray's queue has no order a page could show: a waiting run shows no number

    def __init__(self, address, memory_mb, what, cpus=CPUS_PER_RUN):
        self.ray, self.what, self._died = connect(address), what, False
        check_fits(self.ray, cpus, memory_mb, what)
        self._warm = _take_warm(memory_mb, cpus)
        self._asks = {"CPU": cpus, "memory": int(memory_mb * 2**20)}
        if self._warm:
            self.actor = self._warm[0]
        else:
            options = dict(name=f"{what} {uuid.uuid4().hex[:8]}", num_cpus=cpus, memory=self._asks["memory"])
            self.actor = _RunActor.options(**options).remote()
        self._started = self.actor.poll.remote(0, False)  # answered once Ray has started the actor

    def wait(self, should_stop=None, poll_seconds=0.2):
        """Block until Ray has started the actor (True) or should_stop() says stop, which gives up its
        place (False). An actor of its own kept waiting for room (not for its process to start) while
        warm actors sit idle ends one of them every RETIRE_AFTER_SECONDS."""
        waited_since = time.monotonic()
        while not self.ray.wait([self._started], timeout=poll_seconds)[0]:
            if should_stop is not None and should_stop():
                self.release()
                return False
            if not self._warm and time.monotonic() - waited_since > RETIRE_AFTER_SECONDS:
                free = self.ray.available_resources()
                if any(free.get(name, 0) < amount for name, amount in self._asks.items()) and retire_warm_actors(1):
                    log.info("%s waits for room: an idle warm Ray actor was ended to make it", self.what)
                waited_since = time.monotonic()
        return True

    def run(self, function, kwargs, on_event, stopped, poll_seconds=0.2):
        """`function(emit, should_stop, **kwargs)` in the actor -> its return value; see the module's docstring."""
        exceptions = self.ray.exceptions
        result, delivered = self.actor.run.remote(function, kwargs), 0
        try:
            while True:
                done = self.ray.wait([result], timeout=poll_seconds)[0]
                events = self.ray.get(self.actor.poll.remote(delivered, stopped()))  # after `done`: the last ones
                for event in events:
                    on_event(event)
                delivered += len(events)
                if done:
                    return self.ray.get(result)
        except exceptions.RayTaskError as e:  # the function raised: its own line; its traceback to the log
            log.error("%s failed on Ray:\n%s", self.what, e)
            raise WorkerError(f"{type(e.cause).__name__}: {e.cause}") from None
        except exceptions.RayActorError as e:  # the process died: killed, out of memory, its machine gone
            self._died = True
            log.error("%s: its Ray worker died:\n%s", self.what, e)
            raise WorkerError(
                "the Ray worker computing it died (killed, out of memory, or its machine left the cluster; "
                "the server's log has Ray's account)"
            ) from None

    def release(self, reset_seconds=30):
        """Give a warm actor back, reset for its next run; end any other, which gives its CPU and memory
        back to the cluster."""
        if self._warm and not self._died:
            try:
                self.ray.get(self.actor.reset.remote(), timeout=reset_seconds)
            except (self.ray.exceptions.RayError, TimeoutError):
                log.exception("%s: its warm Ray actor did not reset; it is ended instead", self.what)
            else:
                with _warm_lock:
                    _warm.append(self._warm)
                return
        self.ray.kill(self.actor)
