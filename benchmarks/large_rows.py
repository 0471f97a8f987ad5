"""Large tables: how long `cbr tasks new` takes on 100k, 1M and 5M rows, when the search's first node is
graded, and whether the run ends with a refit submission within its budget.

    python benchmarks/large_rows.py [--rows 100000 1000000 5000000] [--budget 5m] [--work DIR]

Each table is made with numpy, seeded: eight number columns, a category of 300 values and one of 5, and
a binary target that depends on both kinds of column (about 30% positives). It is made into a task as a
user makes one (`cbr tasks new --holdout 0.2`, the hold-out being the test set), then searched without a
model (`cbr develop --model none --budget B`). A command's peak memory is the largest resident set of
any one process it waited for, its sandboxed scripts among them (wait4's rusage).

The figures come from the run's own record (summary.json): when the first single-script node ended with
a selection score, how many nodes graded, the refit's status, the submission's test score, and the
command's wall clock. A table and its task are made once and reused by a second run of this script."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from suite import seconds  # noqa: E402  (the budget's reading is the suite's)

from dsagent_cbr.agent.record import RunRecord  # noqa: E402
from dsagent_cbr.bench.report import stamp  # noqa: E402


def table(rows: int, seed: int = 0) -> pd.DataFrame:
    """A binary table of `rows` rows whose target needs the numbers, their interactions and the categories."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 8)).astype(np.float32)
    city = rng.integers(0, 300, rows)
    kind = rng.integers(0, 5, rows)
    city_effect = rng.normal(scale=0.8, size=300)[city]
    numbers = x[:, 0] - 0.7 * x[:, 1] + 0.5 * x[:, 2] * x[:, 3] + np.sin(2 * x[:, 4])
    logit = numbers + city_effect + 0.3 * kind - 1
    label = rng.random(rows) < 1 / (1 + np.exp(-logit))
    frame = pd.DataFrame(np.round(x, 4), columns=[f"x{i}" for i in range(8)])
    frame.insert(0, "id", np.arange(1, rows + 1))
    frame["city"] = [f"c{i}" for i in city]
    frame["kind"] = np.array(list("abcde"))[kind]
    frame["label"] = np.where(label, "yes", "no")
    return frame


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsagent_cbr.cli", *args]


def timed(command: list[str], log: Path) -> tuple[float, float]:
    """Run `command` (output to `log`); its wall seconds and the peak memory of its largest process, MB."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
        _, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed: see {log}")
    return took, usage.ru_maxrss / 1024


def made_task(rows: int, work: Path) -> tuple[Path, dict]:
    """The task folder for `rows` rows, and how long `cbr tasks new` took to make it (kept for reuse)."""
    task, kept = work / "tasks" / f"rows-{rows}", work / f"tasks-new-{rows}.json"
    if kept.is_file() and task.is_dir():
        return task, json.loads(kept.read_text(encoding="utf-8"))
    csv = work / "data" / f"rows-{rows}.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    table(rows).to_csv(csv, index=False)
    new = cli("tasks", "new", str(task), "--train", str(csv), "--target", "label", "--metric", "auroc",
              "--holdout", "0.2")
    took, peak = timed(new, work / f"tasks-new-{rows}.log")
    facts = {"tasks_new_seconds": round(took, 1), "tasks_new_peak_mb": round(peak)}
    kept.write_text(json.dumps(facts), encoding="utf-8")
    return task, facts


def searched(task: Path, budget: str, work: Path) -> dict:
    """One search without a model on `task`: what its record says of its first graded node and its end."""
    runs = work / "runs" / f"{task.name}-{budget}"
    develop = cli("develop", str(task), "--model", "none", "--budget", budget, "--seed", "0",
                  "--runs-dir", str(runs), "--no-retain")
    took, peak = timed(develop, work / f"develop-{task.name}-{budget}.log")
    summary = next(runs.rglob("summary.json"))
    record = RunRecord.model_validate_json(summary.read_text(encoding="utf-8"))
    timing = {"develop_seconds": round(took, 1), "over_budget": round(took / seconds(budget), 2),
              "develop_peak_mb": round(peak)}
    return {**timing, **run_facts(record)}


def run_facts(record: RunRecord) -> dict:
    """When the first single-script node graded (seconds into the run), how many did, and what was
    submitted: the refit's test score when the refit was used, else the selected node's first fit's."""
    singles = [r for r in record.rows if r.operator != "ensemble" and r.score is not None]
    refit = record.refit
    refit_used = refit is not None and refit.status == "ok"
    submitted = refit.test_after_refit if refit_used else record.best_test
    return {"first_graded_at": min((r.ended for r in singles), default=None), "graded": len(singles),
            "refit": refit.status if refit else None, "submission": record.submission is not None,
            "test": None if submitted is None else round(submitted, 5), "stopped": record.stopped}


def markdown(results: list[dict], budget: str) -> str:
    columns = {"rows": "rows", "tasks_new_seconds": "tasks new (s)", "tasks_new_peak_mb": "its peak (MB)",
               "first_graded_at": f"first graded node (s into {budget})", "graded": "nodes graded",
               "refit": "refit", "test": "submission's AUROC", "over_budget": "wall / budget",
               "develop_peak_mb": "develop's peak (MB)"}
    lines = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    for result in results:
        cells = ["—" if result[k] is None else str(result[k]) for k in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--budget", default="5m", help="each search's wall-clock budget, as 5m or 90s")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cbr-large-rows"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "large-rows")
    args = parser.parse_args()
    seconds(args.budget)
    results = []
    for rows in args.rows:
        task, made = made_task(rows, args.work)
        results.append({"rows": rows, **made, **searched(task, args.budget, args.work)})
        print(json.dumps(results[-1]), flush=True)
    facts = stamp()
    said = f"`{facts['command']}` at {facts['commit']}, {facts['date']}"
    text = f"{said}; load average {facts['load_average']}.\n\n{markdown(results, args.budget)}\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"stamp": facts, "rows": results}, indent=1)
    args.out.with_suffix(".json").write_text(record, encoding="utf-8")
    args.out.with_suffix(".md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
