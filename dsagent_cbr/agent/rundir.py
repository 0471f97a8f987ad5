"""Run folders: runs/<task>/<run-id>/ with its config, per-step files, report and plot."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from dsagent_cbr.agent.journal import write_text_atomic
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


def step_dir(run_dir: Path, iteration: int, attempt: int = 0) -> Path:
    name = f"step-{iteration:02d}" + (f"/debug-{attempt}" if attempt else "")
    path = run_dir / name
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
        data = read_untrusted(workspace, name)
    except GradingError:
        return
    tmp = run_dir / f".{name}.tmp"
    tmp.write_bytes(data)
    tmp.replace(run_dir / name)


def write_summary(run_dir: Path, title: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """summary.json, then the report (markdown and plot) from the same rows: once per call."""
    write_text_atomic(run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    write_report(run_dir, title, rows, summary)


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.5g}"


def write_report(run_dir: Path, title: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """report.md with a table of iterations, and metrics.png with validation and test per iteration."""
    lines = [f"# {title}", ""]
    for key in ("task", "model", "metric", "best_iteration", "best_valid", "best_test", "stopped", "cost_usd",
                "tokens"):
        if key in summary:
            lines.append(f"- **{key.replace('_', ' ')}**: {summary[key]}")
    lines += ["", "| iter | case | step | status | debug | validation | test | retained |",
              "|---:|---|---|---|---:|---:|---:|:---:|"]
    for r in rows:
        step = str(r.get("step", "")).replace("|", "/").replace("\n", " ")[:90]
        lines.append(f"| {r['iteration']} | {r.get('case', '')} | {step} | {r.get('status', '')} | "
                     f"{r.get('debug_attempts', 0)} | {fmt(r.get('valid'))} | {fmt(r.get('test'))} | "
                     f"{'yes' if r.get('retained') else ''} |")
    errors = summary.get("model_errors") or []
    if errors:
        lines += ["", "## What the model got wrong", ""] + [f"- iteration {e['iteration']}, {e['role']}: {e['error']}"
                                                              for e in errors]
    lines += ["", "![metrics per iteration](metrics.png)", ""]
    write_text_atomic(run_dir / "report.md", "\n".join(lines))
    _plot(run_dir / "metrics.png", rows, str(summary.get("metric", "")))


def _plot(path: Path, rows: list[dict[str, Any]], metric: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, marker in (("valid", "o"), ("test", "s")):
        points = [(r["iteration"], r[key]) for r in rows if r.get(key) is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker=marker, label="validation" if key == "valid" else "test")
    ax.set_xlabel("iteration")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per iteration")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
