"""The structural adapter (no LLM) over every (development task -> other task of the same modality) pair,
in both layouts: our task folders and their DS-Agent/MLAgentBench copies (`cbr tasks export`).

For each pair and layout it adapts the development task's reference solution to the target's starter,
runs the result in the sandbox and grades it, and compares it with the target's random starter in the
same layout. Prints the table and the share that ran and beat the starter; writes JSON and Markdown.
Usage: python benchmarks/adapter_pairs.py [--cases a,b] [--targets c,d] [--layouts cbr,dsagent]
                                           [--timeout 600] [--out benchmarks/results/adapter_pairs.json]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from dsagent_cbr.adapter import AdapterError, CaseSolution, adapt_solution
from dsagent_cbr.bank.casefiles import solution_from_folder
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.export import dsagent_copy
from dsagent_cbr.tasks.loader import discover_tasks, load_task
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.tasks.prepare import prepare_task

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = ("cbr", "dsagent")


def seed_cases() -> dict[str, CaseSolution]:
    folders = sorted(p for p in (REPO / "casebank" / "solutions").iterdir() if p.is_dir())
    return {f.name: CaseSolution.from_case(solution_from_folder(f)) for f in folders}


def pairs(tasks: dict[str, Task], cases: dict[str, CaseSolution]) -> list[tuple[str, str]]:
    """(case task, target task): every development task with a seed solution, to every other task of
    its modality."""
    return [(c, t) for c in sorted(cases) if c in tasks for t in sorted(tasks)
            if t != c and tasks[t].modality == tasks[c].modality]


def layout_copy(task: Task, layout: str, root: Path) -> Task:
    """The task in `layout`: ours as it is, or its DS-Agent export (made once under `root`)."""
    return task if layout == "cbr" else dsagent_copy(task, root / task.name)


def measure(pair_list: list[tuple[str, str]], tasks: dict[str, Task], cases: dict[str, CaseSolution],
            layouts: list[str], timeout: float, work: Path) -> list[dict]:
    starters: dict[tuple[str, str], float | None] = {}
    rows = []
    for case_name, target_name in pair_list:
        for layout in layouts:
            target = layout_copy(tasks[target_name], layout, work / "exports")
            key = (target_name, layout)
            if key not in starters:
                run = run_script(target, target.starter, run_dir=work / "starters" / f"{target_name}-{layout}",
                                 timeout=timeout)
                starters[key] = run.test_metric if run.ok else None
            row = {"case": case_name, "target": target_name, "layout": layout, "modality": target.modality,
                   "metric": target.metric_name, "direction": target.direction, "ran": False, "score": None,
                   "starter": starters[key], "beats_starter": False, "seconds": None, "notes": [], "error": None}
            try:
                adapted = adapt_solution(cases[case_name], target)
            except AdapterError as exc:
                row["error"] = str(exc)
            else:
                row["notes"] = adapted.notes
                run = run_script(target, adapted.code, timeout=timeout,
                                 run_dir=work / "runs" / f"{case_name}--{target_name}-{layout}")
                row.update(ran=run.ok, score=run.test_metric, seconds=run.wall_time,
                           valid=run.valid_metric, selection=run.selection_metric,
                           error=None if run.ok else f"{run.status}: {run.error}")
                row["beats_starter"] = bool(run.ok and target.metric.better(run.test_metric, starters[key]))
            rows.append(row)
            mark = "beats starter" if row["beats_starter"] else "ran" if row["ran"] else f"FAILED {row['error']}"
            print(f"  {case_name} -> {target_name} [{layout}]: {fmt(row['score'])} v {fmt(row['starter'])} "
                  f"({mark})", flush=True)
    return rows


def fmt(value: object) -> str:
    return "—" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    ran = sum(r["ran"] for r in rows)
    beat = sum(r["beats_starter"] for r in rows)
    by_layout = {layout: {"pairs": sum(r["layout"] == layout for r in rows),
                          "ran": sum(r["ran"] for r in rows if r["layout"] == layout),
                          "beat_starter": sum(r["beats_starter"] for r in rows if r["layout"] == layout)}
                 for layout in dict.fromkeys(r["layout"] for r in rows)}
    return {"runs": n, "ran": ran, "beat_starter": beat, "ran_share": ran / n if n else None,
            "beat_share": beat / n if n else None, "by_layout": by_layout}


def table(rows: list[dict], totals: dict, seconds: float) -> str:
    lines = ["| case task | target task | layout | ran | graded score | random-starter score | beat the starter? |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        arrow = "↑" if r["direction"] == "maximize" else "↓"
        lines.append(f"| {r['case']} | {r['target']} | {r['layout']} | {'yes' if r['ran'] else 'no'} | "
                     f"{fmt(r['score'])} ({r['metric']} {arrow}) | {fmt(r['starter'])} | "
                     f"{'yes' if r['beats_starter'] else 'no'} |")
    lines.append("")
    lines.append(f"{totals['runs']} runs ({totals['runs'] // max(1, len(totals['by_layout']))} pairs x "
                 f"{len(totals['by_layout'])} layouts): {totals['ran']} ran ({100 * (totals['ran_share'] or 0):.1f}%), "
                 f"{totals['beat_starter']} beat the random starter ({100 * (totals['beat_share'] or 0):.1f}%); "
                 f"{seconds / 60:.1f} min in all.")
    for layout, t in totals["by_layout"].items():
        lines.append(f"- {layout}: {t['ran']}/{t['pairs']} ran, {t['beat_starter']}/{t['pairs']} beat the starter")
    failures = [r for r in rows if not r["beats_starter"]]
    if failures:
        lines += ["", "Runs that failed or did not beat the starter:"]
        lines += [f"- {r['case']} -> {r['target']} [{r['layout']}]: {r['error'] or 'score ' + fmt(r['score'])}"
                  for r in failures]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="comma-separated development tasks (default: every seed solution)")
    parser.add_argument("--targets", help="comma-separated target tasks (default: all of the same modality)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run (the runner's default)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "adapter_pairs.json")
    args = parser.parse_args()

    tasks = {p.name: load_task(p) for p in discover_tasks(REPO / "tasks")}
    for task in tasks.values():
        prepare_task(task)
    cases = seed_cases()
    chosen = pairs(tasks, cases)
    if args.cases:
        chosen = [p for p in chosen if p[0] in args.cases.split(",")]
    if args.targets:
        chosen = [p for p in chosen if p[1] in args.targets.split(",")]
    layouts = [x for x in args.layouts.split(",") if x]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="adapter-pairs-") as tmp:
        rows = measure(chosen, tasks, cases, layouts, args.timeout, Path(tmp))
    totals = summary(rows)
    text = table(rows, totals, time.monotonic() - start)
    print()
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": totals, "timeout": args.timeout, "rows": rows}, indent=2))
    args.out.with_suffix(".md").write_text(
        "# The structural adapter over every (development task -> same-modality task) pair\n\n"
        f"`{' '.join(['python', 'benchmarks/adapter_pairs.py', *sys.argv[1:]])}` (per-run timeout "
        f"{args.timeout:g} s).\n\n" + text)
    print(f"written {args.out} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
