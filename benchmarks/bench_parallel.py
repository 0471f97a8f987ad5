"""The same grid at --parallel 1 and --parallel 2, measured in one run: are the scores identical (every
trial is seeded and independent), and what is the wall-time ratio?

Each setting runs `cbr bench run` into its own fresh grid folder (its own base bank, Ray started and
stopped by the command), timed from the outside. Prints per-trial scores side by side, the mismatches,
and the ratios of the whole command's wall time and of the trial phase (first trial start to last trial
end). Writes benchmarks/results/bench_parallel.json.
Usage: python benchmarks/bench_parallel.py [--tasks a,b,c] [--models none,local] [--trials 2]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsagent_cbr.bench.report import stamp
from dsagent_cbr.commands.bench_cmd import DEFAULT_TASKS

REPO = Path(__file__).resolve().parents[1]


def run_grid(parallel: int, args: argparse.Namespace, root: Path) -> dict:
    grid, out = root / f"parallel-{parallel}", root / "tables"
    command = [sys.executable, "-m", "dsagent_cbr.cli", "bench", "run", "--tasks", args.tasks, "--agents", args.agents,
               "--models", args.models, "--trials", str(args.trials), "--parallel", str(parallel), "--grid", str(grid),
               "--name", f"parallel-{parallel}", "--out-dir", str(out)]
    env = {**os.environ, "CBR_HOME": str(root / f"home-{parallel}")}
    load_before, start = os.getloadavg()[0], time.monotonic()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    wall, load_after = time.monotonic() - start, os.getloadavg()[0]
    if done.returncode != 0:
        sys.exit(f"--parallel {parallel} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    trials = json.loads((out / f"bench-parallel-{parallel}.json").read_text())["trials"]
    first = min(t["started"] for t in trials)
    last = max(t["started"] + t["wall_seconds"] for t in trials)
    print(f"--parallel {parallel}: {len(trials)} trials, command {wall:.1f}s, trial phase {last - first:.1f}s "
          f"(1-minute load average {load_before:.2f} before, {load_after:.2f} after)", flush=True)
    return {"parallel": parallel, "wall_seconds": round(wall, 2), "trial_phase_seconds": round(last - first, 2),
            "load_average_before": round(load_before, 2), "load_average_after": round(load_after, 2),
            "trials": {t["id"]: {k: t.get(k) for k in ("outcome", "test_metric", "one_pass", "solved_by")} for t in trials}}


def _cell(t: dict | None) -> str:
    return "missing" if t is None else f"{t['outcome']} {t['test_metric']} one-pass={t['one_pass']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--agents", default="deploy:cbr")
    parser.add_argument("--models", default="none,local")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_parallel.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-parallel-") as tmp:
        one, two = run_grid(1, args, Path(tmp)), run_grid(2, args, Path(tmp))
    ids = sorted(one["trials"])
    print("\n| trial | --parallel 1 | --parallel 2 | same |\n|---|---|---|:---:|")
    mismatches = []
    for trial_id in ids:
        a, b = one["trials"][trial_id], two["trials"].get(trial_id)
        same = a == b
        if not same:
            mismatches.append(trial_id)
        print(f"| {trial_id} | {_cell(a)} | {_cell(b)} | {'yes' if same else 'NO'} |")
    ratio = one["wall_seconds"] / two["wall_seconds"]
    phase = one["trial_phase_seconds"] / two["trial_phase_seconds"]
    print(f"\nscores identical: {not mismatches} ({len(ids) - len(mismatches)}/{len(ids)} trials)")
    print(f"wall time --parallel 1 / --parallel 2: {ratio:.2f} (command), {phase:.2f} (trial phase)")
    result = {"stamp": stamp(), "identical": not mismatches, "mismatches": mismatches, "wall_ratio": round(ratio, 3),
              "trial_phase_ratio": round(phase, 3), "runs": [one, two]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
