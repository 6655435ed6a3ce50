"""The Train page's memory race on this machine: the steps its runners take in its time, and its verdict.

    python -m benchmarks.memory_race                      # one race of 60 s, as a student starts it
    python -m benchmarks.memory_race --races 2            # two sessions' races at once
    python -m benchmarks.memory_race --steps 400 --seeds 0 1 2   # step budgets: the verdict under each seed

The runs take the Train page's path (lab.experiments.memory_race.toy_race_jobs, started together through
the server's budget), in the server's training process as the app trains them (`--in-threads`: in this
process's threads, RNNLAB_TRAINING_PROCESSES=0). Printed per race: each runner's steps and final accuracy,
the steps per second all runners of the machine took together (a training lane's, LANE_STEPS_PER_SECOND),
and the verdict the page shows.
"""

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from lab.experiments.memory_race import MEMORY_RACE, memory_verdict, race_curves, toy_race_jobs  # noqa: E402
from lab.server.jobs import start_together  # noqa: E402
from lab.training.process import configure_cpu  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each runner's time budget")
    parser.add_argument("--steps", type=int, default=None, help="a step budget instead of the time budget")
    parser.add_argument("--races", type=int, default=1, help="races at once, one per session")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one race after another per seed")
    parser.add_argument("--in-threads", action="store_true", help="train in this process's threads")
    args = parser.parse_args(argv)
    configure_cpu()
    for seed in args.seeds:
        races = [
            toy_race_jobs(
                *MEMORY_RACE,
                seconds=None if args.steps else args.seconds,
                steps=args.steps,
                seed=seed,
                owner=f"session-{n}",
                in_process=not args.in_threads,
            )
            for n in range(args.races)
        ]
        start = time.perf_counter()
        for jobs in races:
            start_together(jobs.values(), "the memory race")
        for jobs in races:
            for job in jobs.values():
                job.wait()
        wall = time.perf_counter() - start
        total = 0
        for n, jobs in enumerate(races):
            steps = {cell: [e for e in job.events() if e["type"] == "step"][-1]["step"] for cell, job in jobs.items()}
            total += sum(steps.values())
            final = {cell: accuracies[-1] for cell, (_, accuracies) in race_curves(jobs).items()}
            print(
                f"seed {seed}, race {n + 1}: steps {steps}, accuracy "
                + ", ".join(f"{cell} {a:.2f}" for cell, a in final.items())
            )
            x = "step" if args.steps else "elapsed"
            print("   ", memory_verdict(race_curves(jobs, x), jobs["rnn"].task.chance, x))
        print(f"seed {seed}: {total:,} steps in {wall:.1f} s, {total / wall:.1f} steps/s for all runners together")


if __name__ == "__main__":
    main()
