"""Run every task's random starter and its reference solution through the sandboxed runner.

Prints one table (task, stage, modality, metric, random score, reference score, train time) and
writes it as JSON. Usage: python experiments/baselines.py [--tasks a,b] [--out results/baselines.json]"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from dsagent_cbr.runner.run import run_script
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
        reference = REPO / "casebank" / "solutions" / task.name / "solution.py"
        with tempfile.TemporaryDirectory() as tmp:
            starter = run_script(task, task.starter, run_dir=Path(tmp) / "starter")
            ref = run_script(task, reference, run_dir=Path(tmp) / "reference") if reference.is_file() else None
        beats = None
        if ref is not None and ref.ok and starter.ok:
            beats = task.metric.better(ref.test_metric, starter.test_metric)
        rows.append({
            "task": task.name, "stage": task.stage, "modality": task.modality, "metric": task.metric_name,
            "direction": task.direction, "random": starter.test_metric, "random_status": starter.status,
            "reference": ref.test_metric if ref else None, "reference_status": ref.status if ref else "none",
            "reference_valid": ref.valid_metric if ref else None,
            "train_seconds": ref.wall_time if ref else None, "beats_random": beats,
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
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "baselines.json")
    args = parser.parse_args()
    rows = measure(args.tasks.split(",") if args.tasks else None)
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
