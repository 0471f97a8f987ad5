"""What one report costs: write_report on a 10-iteration run folder, split into the matplotlib part (building
and encoding the figures) and the rest (reading the scripts, model families by AST, rows.json, both templates,
atomic writes). The loop rewrites the report after every iteration, so the rest must stay well under a second.

    python experiments/bench_report.py [--rows 10] [--repeat 7]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dsagent_cbr.agent.record import Row, RunRecord  # noqa: E402


def run_folder(root: Path, n: int) -> tuple[list[dict], dict]:
    """n iterations with the seed bank's real solution scripts, every third one failed, feature importance."""
    scripts = sorted((REPO / "casebank" / "solutions").glob("*/solution.py"))
    rows = []
    for t in range(1, n + 1):
        step = root / f"step-{t:02d}"
        step.mkdir(parents=True)
        (step / "script.py").write_text(scripts[t % len(scripts)].read_text())
        ok = t % 3 != 0
        rows.append({"iteration": t, "case": scripts[t % len(scripts)].parent.name, "step": f"adapt case {t}",
                     "status": "ok" if ok else "error", "error": None if ok else "ValueError: bad input",
                     "valid": 5.0 - 0.1 * t if ok else None, "test": 4.9 - 0.1 * t if ok else None,
                     "wall_time": 3.0 + t, "retained": ok})
    (root / "importance.json").write_text(json.dumps({f"feature_{i}": float(i) for i in range(40)}))
    summary = {"task": "bench", "model": "none", "metric": "rmse", "direction": "minimize", "best_iteration": n - 1,
               "best_valid": 5.0 - 0.1 * (n - 1), "best_test": None, "stopped": "completed",
               "baselines": {"starter": 30.0, "reference": 4.5}, "feature_importance": "importance.json"}
    return rows, summary


@click.command()
@click.option("--rows", "n", default=10, show_default=True)
@click.option("--repeat", default=7, show_default=True)
def main(n: int, repeat: int) -> None:
    from dsagent_cbr.report import run_report as report

    plotting: list[float] = []

    def timed(function):  # the figure builders and the PNG encoder, timed in place
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                plotting[-1] += time.perf_counter() - started
        return wrapper

    for name in ("build_metrics_figure", "build_importance_figure", "_png"):
        setattr(report, name, timed(getattr(report, name)))
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        rows, summary = run_folder(Path(tmp), n)
        record = RunRecord(kind="develop", run_dir=tmp, rows=[Row(**r) for r in rows], **summary)
        for _ in range(repeat + 1):  # the first call pays for imports and template compilation: not counted
            plotting.append(0.0)
            started = time.perf_counter()
            report.write_report(Path(tmp), record)
            totals.append(time.perf_counter() - started)
    total, plot = statistics.median(totals[1:]), statistics.median(plotting[1:])
    print(f"write_report, {n} rows, median of {repeat}: {total * 1000:.0f} ms in all, "
          f"{plot * 1000:.0f} ms matplotlib, {(total - plot) * 1000:.0f} ms the rest "
          f"(first call with imports: {totals[0] * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
