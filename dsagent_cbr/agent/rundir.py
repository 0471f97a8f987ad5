"""Run folders: runs/<task>/<run-id>/ with its config and per-step folders (the report is report.py's)."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from dsagent_cbr.agent.journal import write_bytes_atomic, write_text_atomic
from dsagent_cbr.errors import CbrError


def new_run_dir(runs_dir: Path, task_name: str) -> Path:
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    path = runs_dir / task_name / run_id
    path.mkdir(parents=True, exist_ok=False)
    return path


def save_config(run_dir: Path, config: dict[str, Any]) -> None:
    write_text_atomic(run_dir / "config.json", json.dumps(config, indent=2, default=str))


def load_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.json"
    if not path.is_file():
        raise CbrError(f"{run_dir} is not a run folder (no config.json).")
    return json.loads(path.read_text(encoding="utf-8"))


def step_path(run_dir: Path, iteration: int, attempt: int = 0) -> Path:
    """step-NN/ for an iteration's first run, step-NN/debug-K/ for its K-th debug attempt."""
    return run_dir / (f"step-{iteration:02d}" + (f"/debug-{attempt}" if attempt else ""))


def step_dir(run_dir: Path, iteration: int, attempt: int = 0) -> Path:
    path = step_path(run_dir, iteration, attempt)
    path.mkdir(parents=True, exist_ok=True)
    return path


def publish_outputs(run_dir: Path, task: Any, code: str, workspace: Path) -> None:
    """The chosen solution where a user looks first: best_solution.py and the predictions file (the
    submission to upload) at the run folder's root, each replaced atomically."""
    from dsagent_cbr.tasks.grading import GradingError, read_untrusted

    write_text_atomic(run_dir / "best_solution.py", code)
    name = task.predictions
    if not name:
        return
    try:
        write_bytes_atomic(run_dir / name, read_untrusted(workspace, name))
    except GradingError:
        return


def write_summary(run_dir: Path, title: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """summary.json, then the report (markdown and plot) from the same rows: once per call."""
    write_text_atomic(run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    write_report(run_dir, title, rows, summary)


def write_report(run_dir: Path, title: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """The loop's entry point: report.md, report.html, metrics.png and rows.json (see agent/report.py)."""
    from dsagent_cbr.agent.report import write_report as write

    write(run_dir, title, rows, summary)
