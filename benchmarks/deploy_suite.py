"""Run `cbr deploy` over every deployment task for one model and strategy, N times each.

Prints the one-pass rate (the LLM's first script ran and was graded: the paper's measure), the final
success rate (a graded result, the structural adapter included), how many runs beat the random
starter, and per task the test score beside the random starter's and the paired development task's
reference score. Writes JSON.
Usage: python benchmarks/deploy_suite.py --model none|local|... [--strategy cbr] [--repeats 1] [--tasks a,b]"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import tomllib
from pathlib import Path

from dsagent_cbr.agent.deploy import DeployConfig, deploy
from dsagent_cbr.agent.rundir import new_run_dir
from dsagent_cbr.bank import open_bank
from dsagent_cbr.config import load_settings
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.loader import discover_tasks, load_task
from dsagent_cbr.tasks.prepare import prepare_task

REPO = Path(__file__).resolve().parents[1]


def reference_score(task_name: str) -> float | None:
    meta = REPO / "casebank" / "solutions" / task_name / "meta.toml"
    if not meta.is_file():
        return None
    return tomllib.loads(meta.read_text()).get("test_score")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="none")
    parser.add_argument("--strategy", default="cbr", choices=["cbr", "zero-shot", "one-shot-random"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tasks", help="comma-separated deployment task names (default: all)")
    parser.add_argument("--no-fallback", action="store_true")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--no-sandbox", action="store_true", help="run scripts unisolated (recorded)")
    parser.add_argument("--cache", action="store_true", help="answer repeated requests from the cache")
    parser.add_argument("--store", default="faiss", choices=["chroma", "faiss"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    tasks = [load_task(p) for p in discover_tasks(REPO / "tasks")]
    tasks = [t for t in tasks if t.stage == "deployment" and (not args.tasks or t.name in args.tasks.split(","))]
    runs_root = Path(tempfile.mkdtemp(prefix="deploy-suite-"))
    # A fresh bank holding only the shipped seed: earlier runs' retained cases must not leak in.
    settings = load_settings(model=args.model, store=args.store, runs_dir=runs_root, bank_dir=runs_root / "bank",
                             use_cache=args.cache)
    policy = SandboxPolicy(timeout=args.timeout, isolate=not args.no_sandbox)
    bank = open_bank(settings)
    rows = []
    for task in tasks:
        prepare_task(task)
        starter = run_script(task, task.starter, run_dir=runs_root / f"{task.name}-starter", policy=policy)
        for repeat in range(args.repeats):
            # Each repeat is its own trial: its own seed, so its own sample of the model.
            config = DeployConfig(strategy=args.strategy, fallback=not args.no_fallback, seed=repeat, policy=policy)
            run_dir = new_run_dir(runs_root, task.name)
            with _model(settings, run_dir, repeat) as client:
                result = deploy(task, config, run_dir, bank, client, settings.tasks_dir)
            facts = result.deploy
            beats = result.solved and task.metric.better(result.best_test, starter.test_metric)
            rows.append({"task": task.name, "metric": task.metric_name, "direction": task.direction,
                         "one_pass": facts.one_pass, "final_success": result.solved,
                         "solved_by": facts.solved_by, "test_metric": result.best_test,
                         "repeat": repeat, "random": starter.test_metric,
                         "beats_random": beats, "paired_with": list(task.paired_with),
                         "paired_reference": reference_score(task.paired_with[0]) if task.paired_with else None})
            print(f"  {task.name} #{repeat}: one-pass={facts.one_pass} final={result.solved} "
                  f"by={facts.solved_by} test={result.best_test}", flush=True)
    print_summary(rows, args)
    out = args.out or REPO / "benchmarks" / "results" / f"deploy_suite-{args.model.replace(':', '_').replace('/', '_')}-{args.strategy}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2, default=str))
    print(f"\nwritten {out}")


def _model(settings: object, run_dir: Path, seed: int) -> contextlib.AbstractContextManager:
    if settings.model == "none":
        return contextlib.nullcontext(None)
    from dsagent_cbr.llm import open_llm

    return open_llm(settings, run_dir=run_dir, seed=seed)


def fmt(v: object) -> str:
    return "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def print_summary(rows: list[dict], args: argparse.Namespace) -> None:
    n = len(rows)
    asked = [r for r in rows if r["one_pass"] is not None]
    one_pass = f"{sum(r['one_pass'] for r in asked)}/{len(asked)}" if asked else "n/a (no LLM)"
    print(f"\nmodel {args.model}, strategy {args.strategy}, {n} runs")
    print(f"one-pass rate:      {one_pass}")
    print(f"final success rate: {sum(r['final_success'] for r in rows)}/{n}")
    print(f"beats random:       {sum(bool(r['beats_random']) for r in rows)}/{n}")
    print("\ntask | metric | one-pass | solved by | test (mean) | random | paired dev task | its reference")
    print("--- | --- | --- | --- | --- | --- | --- | ---")
    for task in dict.fromkeys(r["task"] for r in rows):
        rs = [r for r in rows if r["task"] == task]
        scores = [r["test_metric"] for r in rs if r["test_metric"] is not None]
        op = [r["one_pass"] for r in rs if r["one_pass"] is not None]
        print(" | ".join([task, f"{rs[0]['metric']} ({'↑' if rs[0]['direction'] == 'maximize' else '↓'})",
                          f"{sum(op)}/{len(op)}" if op else "n/a", ",".join(sorted({r['solved_by'] for r in rs})),
                          fmt(statistics.mean(scores)) if scores else "failed", fmt(rs[0]["random"]),
                          ", ".join(rs[0]["paired_with"]), fmt(rs[0]["paired_reference"])]))


if __name__ == "__main__":
    main()
