"""Run every task's random starter and its reference solution through the sandboxed runner.

References: a development task's is its seed-bank solution (casebank/solutions/<task>/solution.py), a
deployment task's is benchmarks/references/<task>.py (kept out of every bank). Prints one table (task,
stage, modality, metric, random score, reference score, train time) and writes it as JSON; with
--tasks, only those rows of an existing table are replaced. `cbr bench` reads this table for its
normalised scores. Usage: python benchmarks/baselines.py [--tasks a,b] [--out results/baselines.json]"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from dsagent_cbr.bench.references import reference_script
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.loader import discover_tasks, load_task
from dsagent_cbr.tasks.prepare import prepare_task

REPO = Path(__file__).resolve().parents[1]


def measure(names: list[str] | None) -> list[dict]:
    rows = []
    for folder in discover_tasks(REPO / "tasks"):
        if names and folder.name not in names:
            continue
        task = load_task(folder)
        prepare_task(task)
        reference = reference_script(task.name, task.stage)
        with tempfile.TemporaryDirectory() as tmp:
            starter = run_script(task, task.starter, run_dir=Path(tmp) / "starter")
            ref = run_script(task, reference, run_dir=Path(tmp) / "reference") if reference else None
        beats = None
        if ref is not None and ref.ok and starter.ok:
            beats = task.metric.better(ref.test_metric, starter.test_metric)
        rows.append({
            "task": task.name, "stage": task.stage, "modality": task.modality, "metric": task.metric_name,
            "direction": task.direction, "random": starter.test_metric, "random_status": starter.status,
            "reference": ref.test_metric if ref else None, "reference_status": ref.status if ref else "none",
            "reference_valid": ref.valid_metric if ref else None,
            "train_seconds": ref.wall_time if ref else None, "beats_random": beats,
            "reference_script": str(reference.relative_to(REPO)) if reference else None,
        })
        print(f"  measured {task.name}", flush=True)
    return rows


def fmt(v: object) -> str:
    return "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def print_table(rows: list[dict]) -> None:
    header = ["task", "stage", "modality", "metric", "random", "reference", "train s", "beats random"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for r in rows:
        print(" | ".join([r["task"], r["stage"], r["modality"], f"{r['metric']} ({'↑' if r['direction'] == 'maximize' else '↓'})",
                          fmt(r["random"]), fmt(r["reference"]), fmt(r["train_seconds"]), fmt(r["beats_random"])]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "baselines.json")
    args = parser.parse_args()
    rows = measure(args.tasks.split(",") if args.tasks else None)
    if args.tasks and args.out.is_file():  # keep the other tasks' rows, in the suite's order
        fresh = {r["task"]: r for r in rows}
        old = json.loads(args.out.read_text())
        rows = [fresh.pop(r["task"], r) for r in old] + list(fresh.values())
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(rows, indent=2))
    tmp.replace(args.out)
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
