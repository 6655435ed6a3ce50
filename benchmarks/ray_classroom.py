"""The classroom benchmark (benchmarks/classroom.py) with every run on a two-node Ray cluster.

    python -m benchmarks.ray_classroom [--cpus-per-node 5] [--warm-actors 10] [classroom's options: --sessions 10 ...]

Starts a Ray head (`ray start --head --block`) and a second node that joins it (`ray start --address
--block`), both on this machine, each with `--cpus-per-node` CPUs (Ray counts them; they share this
machine's real cores), then runs benchmarks.classroom unchanged against an app started with
RNNLAB_RAY_ADDRESS set to the head: N students press Start, and the same figures come out (first
loss point, each run's steps, another student's page load). Two of classroom's lines count the runs
from the server's training budget, which Ray's runs do not use: read the runs at once from the line
this benchmark adds, the peak of Ray's CPUs in use. The server's memory figures leave out the Ray
workers, which are not its children.

Bounded: classroom's waits are capped; both nodes are stopped at the end (SIGTERM to each `ray
start`, which stops its node, then SIGKILL to what is left of its process group).
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from benchmarks import classroom
from benchmarks.app import ROOT, free_port

RAY = str(Path(sys.executable).parent / "ray")
# Ray's token authentication (on by default since Ray 2.5x): every node, the app and this driver use
# the token in ~/.ray/auth_token, which `ray start --head` makes on first use
TOKEN_AUTH = {"RAY_AUTH_MODE": "token"}


def start_node(args, log):
    return subprocess.Popen(
        [RAY, "start", "--block", "--disable-usage-stats", *args],
        cwd=ROOT,
        env={**os.environ, **TOKEN_AUTH},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped below by its id, with nothing else
    )


def stop_node(node):
    node.terminate()
    try:
        node.wait(60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(node.pid, signal.SIGKILL)  # whatever the node left behind
    except ProcessLookupError:
        pass


@contextmanager
def two_node_cluster(cpus_per_node, log):
    """A head and a second node on this machine -> the head's address, once both are up."""
    import ray

    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes = [start_node(["--head", f"--port={port}", f"--num-cpus={cpus_per_node}", "--include-dashboard=false"], log)]
    try:
        deadline = time.monotonic() + 120
        while not ray.is_initialized():
            try:
                ray.init(address=address, logging_level="ERROR")
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        nodes.append(start_node([f"--address={address}", f"--num-cpus={cpus_per_node}"], log))
        while sum(node["Alive"] for node in ray.nodes()) < 2:
            if time.monotonic() > deadline:
                raise TimeoutError("the second Ray node did not join within 120 s")
            time.sleep(1)
        yield address
    finally:
        ray.shutdown()
        for node in reversed(nodes):
            stop_node(node)


class PeakCpusInUse(threading.Thread):
    """Ray's CPUs in use (one per run), sampled every half second: its peak."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.done = 0.0, threading.Event()

    def run(self):
        import ray

        while not self.done.wait(0.5):
            total, free = ray.cluster_resources().get("CPU", 0), ray.available_resources().get("CPU", 0)
            self.peak = max(self.peak, total - free)


def wait_for_warm_actors(count, timeout=600):
    """Until the app's `count` warm actors (RNNLAB_RAY_WARM_ACTORS) have started, PyTorch imported: they
    answer a poll once their start is done. Prints how long that took from now."""
    import ray

    start, deadline = time.monotonic(), time.monotonic() + timeout

    def warm_ones():
        return [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("warm ")]

    while len(named := warm_ones()) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(named)} of {count} warm actors were asked for within {timeout} s")
        time.sleep(0.5)
    ray.get([ray.get_actor(a["name"], namespace=a["namespace"]).poll.remote(0, False) for a in named], timeout=timeout)
    print(f"{count} warm actors ready (the class waited {time.monotonic() - start:.0f} s more for them)", flush=True)


def main():
    os.environ.update(TOKEN_AUTH)  # before ray is imported, which reads it once
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpus-per-node", type=int, default=5, help="the CPUs each of the two Ray nodes declares")
    parser.add_argument(
        "--warm-actors", type=int, default=0, help="the app's RNNLAB_RAY_WARM_ACTORS (the class waits for them)"
    )
    args, classroom_args = parser.parse_known_args()
    with tempfile.TemporaryFile() as log, two_node_cluster(args.cpus_per_node, log) as address:
        print(f"Ray: two nodes on this machine, {args.cpus_per_node} CPUs each; the app at {address}", flush=True)
        os.environ["RNNLAB_RAY_ADDRESS"] = address  # the app server started by classroom inherits it
        os.environ["RNNLAB_RAY_WARM_ACTORS"] = str(args.warm_actors)
        in_use = PeakCpusInUse()
        in_use.start()
        sys.argv = [f"{sys.argv[0]} (benchmarks.classroom)", *classroom_args]
        try:
            classroom.main(before_class=lambda: wait_for_warm_actors(args.warm_actors) if args.warm_actors else None)
        finally:
            in_use.done.set()  # before the cluster stops
            in_use.join()
        print(f"on Ray: at most {in_use.peak:.0f} runs trained at once (Ray's CPUs in use, one per run)")


if __name__ == "__main__":
    main()
