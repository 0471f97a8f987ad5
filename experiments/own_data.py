"""A user's own data, benchmarked honestly: each Kaggle-shaped example folder (`cbr tasks kaggle-example`)
becomes a task with a labelled 20% hold-out (`cbr tasks new --holdout 0.2`), and the random starter,
`cbr deploy --model none` and `cbr develop --model none -T 2` are graded on it. develop chooses by
validation; the hold-out score is only reported.

Prints one table and writes it as JSON. Usage:
python experiments/own_data.py [--folders credit,debates,feedback] [--out experiments/results/own_data.json]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.recipes.kaggle_folders import FOLDERS

REPO = Path(__file__).resolve().parents[1]


def cbr(env: dict[str, str], *args: str | Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"cbr {' '.join(map(str, args))} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout) if "--json" in args else {}


def measure(names: list[str], root: Path) -> list[dict]:
    env = {**os.environ, "CBR_HOME": str(root / "home")}
    rows = []
    for name in names:
        folder = FOLDERS[name](root / "kaggle" / name)
        task_dir = root / "tasks" / name
        cbr(env, "tasks", "new", task_dir, "--from-kaggle-folder", folder, "--holdout", "0.2")
        task = load_task(task_dir)
        starter = run_script(task, task.starter, run_dir=root / "starter" / name)
        common = ["--model", "none", "--store", "faiss", "--runs-dir", root / "runs", "--json"]
        deployed = cbr(env, "deploy", task_dir, *common)
        developed = cbr(env, "develop", task_dir, "-T", "2", *common)
        rows.append({
            "folder": name, "modality": task.modality, "task_type": task.task_type, "metric": task.metric_name,
            "direction": task.direction, "train_rows": len(pd.read_csv(task_dir / "data" / "train.csv")),
            "holdout_rows": len(pd.read_csv(task_dir / "data" / "test.csv")),
            "random_test": starter.test_metric, "deploy_valid": deployed["best_valid"],
            "deploy_test": deployed["best_test"], "develop_valid": developed["best_valid"],
            "develop_test": developed["best_test"],
        })
        print(f"  measured {name}", flush=True)
    return rows


def fmt(v: object) -> str:
    return "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def print_table(rows: list[dict]) -> None:
    header = ["folder", "modality", "type", "metric", "train", "hold-out", "random (hold-out)", "deploy valid",
              "deploy hold-out", "develop valid", "develop hold-out"]
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for r in rows:
        arrow = "↑" if r["direction"] == "maximize" else "↓"
        print(" | ".join([r["folder"], r["modality"], r["task_type"], f"{r['metric']} ({arrow})", str(r["train_rows"]),
                          str(r["holdout_rows"]), *(fmt(r[k]) for k in ("random_test", "deploy_valid", "deploy_test",
                                                                        "develop_valid", "develop_test"))]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--folders", default=",".join(FOLDERS), help="comma-separated example folders")
    parser.add_argument("--out", type=Path, default=REPO / "experiments" / "results" / "own_data.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cbr-own-data-") as tmp:
        rows = measure(args.folders.split(","), Path(tmp))
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
