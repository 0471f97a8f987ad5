"""The LLM-free search (`cbr develop --model none --budget B`) against FLAML on the deployment tasks FLAML
supports: test scores, normalised as the bench does ((random - x) / (random - reference), 1.0 = the
hand-written reference), and for how many tasks the search is at least as good.

The FLAML figures are read from a bench record made on this machine (`cbr bench run --agents
flaml:60,flaml:300`), named in the output; the search runs here, one task after another, seed 0. The
record must postdate 0d30433, from which the harness holds a fifth of the labelled rows back from every
script: bench-flaml-deployment.json (2026-11-22) predates it, so its FLAML learned from rows the search's
nodes never see; bench-flaml-deployment-fixed.json, the default, does not.
With --model local the search has SmolLM2 (the embedded local model) beside its own moves. With --refit
the search's choice is also refit on every labelled row and its test score recorded beside
(`test_after_refit`); the comparison stays on `test`, since the FLAML anchor's model learned from the same
rows as the search's nodes and was not refit.
Usage: python experiments/search_vs_flaml.py [--budget 1m] [--flaml flaml:60] [--tasks a,b] [--model none] [--refit]
                                             [--flaml-record experiments/results/bench-flaml-deployment-fixed.json]
                                             [--out experiments/results/search_vs_flaml-1m.json] [--keep DIR]
       python experiments/search_vs_flaml.py --rescore RESULTS --flaml flaml:300 --flaml-record RECORD --out F
(the search runs of RESULTS, not run again, against another FLAML record: an anchor measured again)"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsagent_cbr.bench.report import learner_versions

ROOT = Path(__file__).resolve().parents[1]


def normalised(x: float, base: dict) -> float:
    sign = 1 if base["direction"] == "maximize" else -1
    return sign * (x - base["random"]) / (sign * (base["reference"] - base["random"]))


def search(task: str | Path, budget: str, runs: Path, model: str = "none", *more: str) -> dict:
    started = time.monotonic()
    folder = task if isinstance(task, Path) else ROOT / "tasks" / task
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "develop", str(folder), "--model", model,
                           "--budget", budget, "--seed", "0", "--no-retain", "--no-cache", "--store", "faiss",
                           "--runs-dir", str(runs), "--json", *more], capture_output=True, text=True, cwd=runs)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    record = json.loads(proc.stdout)
    operators: dict[str, int] = {}
    for row in record["rows"]:
        operators[row["operator"]] = operators.get(row["operator"], 0) + 1
    best = next(r for r in record["rows"] if r["iteration"] == record["best_iteration"])
    model_nodes = [r for r in record["rows"] if r["operator"] in ("plan", "improve", "debug")]
    refit = {"refit": record["refit"]["status"], "test_after_refit": record["refit"]["test_after_refit"]} \
        if record.get("refit") else {}
    return {"test": record["best_test"], "selection": record["best_selection"], **refit, "nodes": len(record["rows"]),
            "model_nodes": len(model_nodes), "model_graded": sum(r["score"] is not None for r in model_nodes),
            "operators": operators, "best_operator": best["operator"], "seconds": round(time.monotonic() - started, 1)}


def shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def compared(task: str, found: dict, base: dict, anchor: str, flaml: float) -> dict:
    """One task's row: the search's figures beside FLAML's, both normalised, and whether the search is at least FLAML."""
    row = {"task": task, "metric": base["metric"], anchor: flaml, "flaml_normalised": normalised(flaml, base), **found}
    if found.get("test") is not None:
        row["normalised"] = normalised(found["test"], base)
        row["at_least_flaml"] = row["normalised"] >= row["flaml_normalised"]
    return row


def rescored(path: Path) -> tuple[dict, dict[str, dict]]:
    """An earlier results file's settings (with the releases its runs used, where it names them), and its
    search figures without what it compared them with."""
    earlier = json.loads(path.read_text())
    settings = {k: earlier["summary"][k] for k in ("budget", "model", "refit", "packages") if k in earlier["summary"]}
    return settings, {r["task"]: {k: v for k, v in r.items() if not k.startswith("flaml") and k not in (
        "task", "metric", "normalised", "at_least_flaml")} for r in earlier["rows"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", default="1m")
    parser.add_argument("--flaml", default="flaml:60")
    parser.add_argument("--tasks", default="")
    parser.add_argument("--model", default="none")
    parser.add_argument("--refit", action="store_true")
    parser.add_argument("--flaml-record", type=Path, default=ROOT / "experiments/results/bench-flaml-deployment-fixed.json")
    parser.add_argument("--rescore", type=Path, default=None,
                        help="compare the search runs of this earlier results file with --flaml-record instead of running it")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="keep the search's run folders here")
    args = parser.parse_args()
    record = json.loads(args.flaml_record.read_text())
    flaml = {c["task"]: c["mean_test"] for c in record["cells"] if c["agent"] == args.flaml}
    settings, earlier = rescored(args.rescore) if args.rescore else (
        {"budget": args.budget, "model": args.model, "refit": args.refit}, {})
    tasks = [t for t in (args.tasks.split(",") if args.tasks else sorted(earlier or flaml)) if t in flaml]
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        runs = args.keep or temporary
        Path(runs).mkdir(parents=True, exist_ok=True)
        for task in tasks:
            found = earlier[task] if args.rescore else search(task, args.budget, Path(runs), args.model,
                                                              *(["--refit"] if args.refit else []))
            rows.append(compared(task, found, record["baselines"][task], args.flaml, flaml[task]))
            print(json.dumps(rows[-1]), flush=True)
    scored = [r for r in rows if "normalised" in r]
    summary = {**settings, "flaml": args.flaml, "flaml_record": shown(args.flaml_record),
               **({"rescored_from": shown(args.rescore)} if args.rescore else {"packages": learner_versions()}),
               "tasks": len(rows), "at_least_flaml": sum(r["at_least_flaml"] for r in scored),
               "mean_normalised_search": sum(r["normalised"] for r in scored) / max(len(scored), 1),
               "mean_normalised_flaml": sum(r["flaml_normalised"] for r in scored) / max(len(scored), 1)}
    print(json.dumps(summary))
    tag = settings["budget"] + ("" if settings["model"] == "none" else f"-{settings['model']}")
    out = args.out or ROOT / f"experiments/results/search_vs_flaml-{tag}.json"
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
