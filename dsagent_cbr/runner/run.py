"""Run a solution script on a task: fresh workspace, sandboxed child process, graded predictions."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from dsagent_cbr.runner.result import RunResult, head_tail, parse_validation_metric
from dsagent_cbr.runner.sandbox import HIDE_FAILED_EXIT, run_sandboxed
from dsagent_cbr.tasks.grading import GradingError, grade
from dsagent_cbr.tasks.model import Task

DEFAULT_TIMEOUT = 600.0
DEFAULT_MEMORY_MB = 8192.0


def make_workspace(task: Task, script_text: str, workspace: Path) -> Path:
    """Copy (never link: a link would lead back to the task folder) the public files and the script."""
    workspace.mkdir(parents=True, exist_ok=False)
    for name in task.public_files:
        src = task.public_dir / name
        if src.is_dir():
            shutil.copytree(src, workspace / name)
        elif src.is_file():
            shutil.copy2(src, workspace / name)
    (workspace / "train.py").write_text(script_text, encoding="utf-8")
    return workspace


def _hidden_dirs(task: Task) -> list[Path]:
    """This task's answers, and every sibling task's, are out of the script's sight."""
    dirs = {task.private_dir}
    parent = task.root.parent
    if parent.is_dir():
        dirs |= {p / "private" for p in parent.iterdir() if (p / "private").is_dir()}
    return sorted(d for d in dirs if d.is_dir())


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def run_script(
    task: Task,
    script: str | Path,
    *,
    run_dir: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: float = DEFAULT_MEMORY_MB,
) -> RunResult:
    """Execute `script` (a path or the code itself) on `task` and grade it. Never raises for the
    script's own failures: they come back as a RunResult with a status and an error line."""
    code = Path(script).read_text(encoding="utf-8") if isinstance(script, Path) else script
    run_dir = Path(tempfile.mkdtemp(prefix=f"cbr-{task.name}-")) if run_dir is None else run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    workspace = make_workspace(task, code, run_dir / "workspace")
    outcome = run_sandboxed(
        [sys.executable, "train.py"], cwd=workspace, stdout_path=run_dir / "stdout.txt",
        stderr_path=run_dir / "stderr.txt", timeout=timeout, memory_mb=memory_mb, hide=_hidden_dirs(task),
    )
    stdout = (run_dir / "stdout.txt").read_text(encoding="utf-8", errors="replace")
    stderr = (run_dir / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    valid = parse_validation_metric(stdout)
    test, error, status = None, None, "ok"
    if outcome.timed_out:
        status, error = "timeout", f"time limit of {timeout:g}s reached; the process tree was killed"
    elif outcome.memory_exceeded or "MemoryError" in stderr:
        status, error = "memory_limit", f"memory limit of {memory_mb:g} MB exceeded"
    elif outcome.output_exceeded:
        status, error = "output_limit", "the script printed too much output and was stopped"
    elif outcome.exit_code == HIDE_FAILED_EXIT and not outcome.isolated:
        status, error = "error", "could not hide the private answers from the script"
    elif outcome.exit_code != 0:
        status, error = "error", _last_line(stderr) or f"exit code {outcome.exit_code}"
    else:
        try:
            test = grade(task, workspace, stdout)
        except GradingError as exc:
            status, error = "grading_error", str(exc)
    result = RunResult(
        task=task.name, status=status, exit_code=outcome.exit_code, metric=task.metric_name,
        direction=task.direction, valid_metric=valid, test_metric=test, error=error,
        stdout=head_tail(stdout), stderr=head_tail(stderr), wall_time=round(outcome.wall_time, 3),
        peak_memory_mb=round(outcome.peak_memory_mb, 1), workspace=str(workspace), isolated=outcome.isolated,
    )
    result.save(run_dir / "result.json")
    return result
