"""The LLM-free search against FLAML on a user's own data: each Kaggle-shaped example folder (`cbr tasks
kaggle-example`) becomes a task with a labelled 20% hold-out (`cbr tasks new --holdout 0.2`); FLAML (in the
task's own skeleton, as `cbr bench` runs it) and `cbr develop --model none --budget B` run on it (or
--model local: SmolLM2 beside the search's own moves), and
both are graded on the hold-out, which neither saw. These folders have no hand-written reference, so
the normalised score here runs from the random starter (0) to FLAML (1).

With --refit the search's choice is also refit on every labelled row, its hold-out score recorded beside
(`test_after_refit`); the comparison stays on `test` (FLAML's model learned from the same rows as the nodes).

Usage: python experiments/search_vs_flaml_own.py [--budget 5m] [--flaml 300] [--folders credit,debates,feedback] [--refit]
                                                 [--model none|local]
                                                 [--out experiments/results/search_vs_flaml_own-5m.json]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_vs_flaml import search  # noqa: E402

from dsagent_cbr.bench.flaml_script import flaml_script  # noqa: E402
from dsagent_cbr.bench.report import learner_versions  # noqa: E402
from dsagent_cbr.harness.run import run_script  # noqa: E402
from dsagent_cbr.tasks.loader import load_task  # noqa: E402
from dsagent_cbr.tasks.recipes.kaggle_folders import FOLDERS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def measure(name: str, root: Path, budget: str, flaml_seconds: int, model: str, *more: str) -> dict:
    folder = FOLDERS[name](root / "kaggle" / name)
    task_dir = root / "tasks" / name
    subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "tasks", "new", str(task_dir), "--from-kaggle-folder",
                    str(folder), "--holdout", "0.2"], check=True, capture_output=True, env=os.environ)
    task = load_task(task_dir)
    random = run_script(task, task.starter, run_dir=root / "starter" / name).test_metric
    flaml = run_script(task, flaml_script(task, flaml_seconds, 0), run_dir=root / "flaml" / name,
                       timeout=2 * flaml_seconds + 300)
    found = search(task_dir, budget, root / "runs", model, *more)
    sign = 1 if task.direction == "maximize" else -1
    row = {"folder": name, "metric": task.metric_name, "direction": task.direction, "random": random,
           f"flaml_{flaml_seconds}": flaml.test_metric, "flaml_status": flaml.status, **found}
    if found.get("test") is not None and flaml.test_metric is not None:
        row["normalised_to_flaml"] = (found["test"] - random) / (flaml.test_metric - random)
        row["at_least_flaml"] = sign * (found["test"] - flaml.test_metric) >= 0
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", default="5m")
    parser.add_argument("--flaml", type=int, default=300)
    parser.add_argument("--folders", default="credit,debates,feedback")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--refit", action="store_true")
    parser.add_argument("--model", default="none", help="none, or local (SmolLM2) beside the search's own moves")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cbr-own-flaml-") as tmp:
        os.environ["CBR_HOME"] = str(Path(tmp) / "home")
        (Path(tmp) / "runs").mkdir()
        for name in args.folders.split(","):
            rows.append(measure(name, Path(tmp), args.budget, args.flaml, args.model,
                                *(["--refit"] if args.refit else [])))
            print(json.dumps(rows[-1]), flush=True)
    scored = [r for r in rows if "at_least_flaml" in r]
    summary = {"budget": args.budget, "model": args.model, "refit": args.refit, "flaml": f"flaml:{args.flaml}", "folders": len(rows),
               "at_least_flaml": sum(r["at_least_flaml"] for r in scored),
               "mean_normalised_to_flaml": sum(r["normalised_to_flaml"] for r in scored) / max(len(scored), 1),
               "packages": learner_versions()}
    print(json.dumps(summary))
    tag = args.budget + ("" if args.model == "none" else f"-{args.model}")
    out = args.out or ROOT / f"experiments/results/search_vs_flaml_own-{tag}.json"
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
