"""How long a normal develop run takes with an earlier commit's sandbox and with this one, in one run:
`cbr develop TASK --model none -T 2 --seed 0` (the starter and the adapted solutions, each a sandboxed
script run and graded), alternating the two versions so that load on the machine falls on both alike.
Each version first runs once untimed, to build its bank's index. Most of a develop command's time is
not the sandbox's (loading the embedding model, the bank), so the same is measured for the part the
sandbox owns: `cbr run TASK train.py` of the starter, the step develop repeats for every script.
Prints the median wall times and the ratios after / before.

Usage: python experiments/develop_time.py [--before COMMIT] [--task NAME] [--repeats N]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from earlier_commit import REPO, cbr, checkout, prepare


def develop(root: Path, task: str, home: Path, runs: Path) -> float:
    start = time.monotonic()
    proc = cbr(root, "develop", str(root / "tasks" / task), "--model", "none", "-T", "2", "--seed", "0",
               "--store", "faiss", "--runs-dir", str(runs), "--json", "--no-cache",
               env={**os.environ, "CBR_HOME": str(home)})
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"develop failed in {root}: {proc.stderr[-2000:]}")
    return seconds


def run_starter(root: Path, task: str, out: Path) -> float:
    start = time.monotonic()
    proc = cbr(root, "run", str(root / "tasks" / task), str(root / "tasks" / task / "train.py"), "--out", str(out))
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"cbr run failed in {root}: {proc.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="10e911c")
    parser.add_argument("--task", default="concrete-strength")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "develop_time.json")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"before": [], "after": []}
    runs: dict[str, list[float]] = {"before": [], "after": []}
    with checkout(args.before, "develop-time-") as (before, work):
        roots = {"before": before, "after": REPO}
        prepare((before, REPO), [args.task])
        for version, root in roots.items():  # untimed: each bank's index is built here
            develop(root, args.task, work / f"home-{version}", work / f"runs-{version}")
        for i in range(args.repeats):
            for version, root in roots.items():
                seconds = develop(root, args.task, work / f"home-{version}", work / f"runs-{version}")
                times[version].append(seconds)
                runs[version].append(run_starter(root, args.task, work / f"run-{version}-{i}"))
                print(f"repeat {i + 1} {version:6} develop {seconds:.2f} s, cbr run {runs[version][-1]:.2f} s",
                      flush=True)
    median = {v: statistics.median(t) for v, t in times.items()}
    median_run = {v: statistics.median(t) for v, t in runs.items()}
    ratio, ratio_run = median["after"] / median["before"], median_run["after"] / median_run["before"]
    load = os.getloadavg()[0]
    print(f"\n{args.repeats} runs each, alternating, load average {load:.2f} at the end")
    print(f"cbr develop {args.task} --model none -T 2: median before ({args.before}) {median['before']:.2f} s, "
          f"after (working tree) {median['after']:.2f} s, ratio after/before {ratio:.3f}")
    print(f"cbr run {args.task} train.py (the starter): median before {median_run['before']:.2f} s, "
          f"after {median_run['after']:.2f} s, ratio after/before {ratio_run:.3f}")
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "before": args.before, "task": args.task,
                                    "develop_seconds": times, "develop_median": median, "develop_ratio": ratio,
                                    "run_seconds": runs, "run_median": median_run, "run_ratio": ratio_run,
                                    "load_average": load}, indent=2))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
