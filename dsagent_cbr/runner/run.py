"""Run a solution script on a task: a fresh workspace of public files, the script sandboxed, its
predictions graded outside the sandbox by code that trusts nothing the script wrote."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path

from dsagent_cbr.runner.result import RunResult, head_tail, parse_validation_metric
from dsagent_cbr.runner.sandbox import (
    ProcessOutcome,
    SandboxPolicy,
    SandboxUnavailable,
    require_sandbox,
    run_sandboxed,
)
from dsagent_cbr.tasks import dsagent_layout
from dsagent_cbr.tasks.grading import GradingError, grade, read_untrusted
from dsagent_cbr.tasks.model import Task

DEFAULT_TIMEOUT = 600.0
DEFAULT_MEMORY_MB = 8192.0
GRADER_POLICY = SandboxPolicy(timeout=300.0, memory_mb=4096.0, disk_mb=64.0)


def make_workspace(task: Task, script_text: str, workspace: Path) -> Path:
    """Copy (never link: a link would lead back to the task folder) the public files and the script.
    In the DS-Agent layout the test labels stay out and submission.py only keeps the predictions."""
    workspace.mkdir(parents=True, exist_ok=False)
    grading = task.dsagent
    for name in task.public_files:
        src, dst = task.public_dir / name, workspace / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if grading is not None and name == "submission.py":
            dst.write_text(dsagent_layout.capture_shim(src.read_text(encoding="utf-8")), encoding="utf-8")
        elif grading is not None and name == grading.label_file:
            _without_labels(src, dst, grading)
        elif src.is_dir():
            shutil.copytree(src, dst)
        elif src.is_file():
            shutil.copyfile(src, dst)
    (workspace / "train.py").write_text(script_text, encoding="utf-8")
    return workspace


def _without_labels(src: Path, dst: Path, grading: dsagent_layout.DsagentGrading) -> None:
    import pandas as pd

    frame = pd.read_csv(src)
    if grading.arity >= 2:  # such scripts index the label column to pass it as y_true: keep it, empty
        frame[list(grading.label_columns)] = float("nan")
    else:
        frame = frame.drop(columns=list(grading.label_columns))
    frame.to_csv(dst, index=False)


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _status(outcome: ProcessOutcome, stderr: str, policy: SandboxPolicy) -> tuple[str, str | None]:
    if outcome.timed_out:
        return "timeout", f"time limit of {policy.timeout:g}s reached; the process tree was killed"
    if outcome.memory_exceeded or "MemoryError" in stderr:
        return "memory_limit", f"memory limit of {policy.memory_mb:g} MB exceeded (processes, /tmp and /dev/shm)"
    if outcome.disk_exceeded or "File too large" in stderr:
        return "disk_limit", f"disk limit of {policy.disk_mb:g} MB exceeded"
    if outcome.output_exceeded:
        return "output_limit", "the script printed too much output and was stopped"
    if outcome.exit_code != 0:
        return "error", _last_line(stderr) or f"exit code {outcome.exit_code}"
    return "ok", None


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@cache
def _bootstrap() -> str:
    return resources.files("dsagent_cbr.runner").joinpath("bootstrap.py").read_text(encoding="utf-8")


def run_script(task: Task, script: str | Path, *, run_dir: Path | None = None, timeout: float | None = None,
               memory_mb: float | None = None, policy: SandboxPolicy | None = None, refit: bool = False) -> RunResult:
    """Execute `script` (a path or the code itself) on `task` and grade it. Never raises for the
    script's own failures: they come back as a RunResult with a status and an error line. Raises
    SandboxUnavailable when we cannot sandbox it: that is our failure, not the script's. With `refit`
    the script is told (CBR_REFIT=1) to train its final model on the validation rows too."""
    policy = policy or SandboxPolicy(timeout=DEFAULT_TIMEOUT, memory_mb=DEFAULT_MEMORY_MB)
    policy = replace(policy, **{k: v for k, v in (("timeout", timeout), ("memory_mb", memory_mb)) if v is not None})
    require_sandbox(policy.isolate)  # before anything is written: no half-made run folder
    code = Path(script).read_text(encoding="utf-8") if isinstance(script, Path) else script
    run_dir = Path(tempfile.mkdtemp(prefix=f"cbr-{task.name}-")) if run_dir is None else run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    workspace = make_workspace(task, code, run_dir / "workspace")
    outcome = run_sandboxed([sys.executable, "-c", _bootstrap()], workspace=workspace,
                            stdout_path=run_dir / "stdout.txt", stderr_path=run_dir / "stderr.txt", policy=policy,
                            environment={"CBR_REFIT": "1"} if refit else None)
    stdout, stderr = _read(run_dir / "stdout.txt"), _read(run_dir / "stderr.txt")
    if outcome.isolated and outcome.exit_code != 0 and stderr.startswith("bwrap: "):
        raise SandboxUnavailable(f"The sandbox failed to start the script: {_last_line(stderr)}")
    status, error = _status(outcome, stderr, policy)
    test = None
    if status == "ok":
        try:
            test = _grade_dsagent(task, workspace, run_dir, policy) if task.dsagent else grade(task, workspace)
        except GradingError as exc:
            status, error = "grading_error", str(exc)
    result = RunResult(
        task=task.name, status=status, exit_code=outcome.exit_code, metric=task.metric_name,
        direction=task.direction, valid_metric=parse_validation_metric(stdout, task.metric_name), test_metric=test,
        error=error, stdout=head_tail(stdout), stderr=head_tail(stderr), wall_time=round(outcome.wall_time, 3),
        peak_memory_mb=round(outcome.peak_memory_mb, 1), workspace=str(workspace), isolated=outcome.isolated,
        network=outcome.network, test_answers=task.has_answers,
    )
    result.save(run_dir / "result.json")
    return result


def _grade_dsagent(task: Task, workspace: Path, run_dir: Path, policy: SandboxPolicy) -> float:
    """Run the folder's own submission.py on the saved predictions, beside the labelled files, in a
    sandbox of its own; the score is the one it prints, never one the script printed."""
    assert task.dsagent is not None
    predictions = read_untrusted(workspace, dsagent_layout.PREDICTIONS)
    grading_dir = Path(tempfile.mkdtemp(prefix="grading-", dir=run_dir))
    try:
        for path in task.public_dir.iterdir():
            if path.is_file() and path.name != "train.py":
                shutil.copyfile(path, grading_dir / path.name)
        (grading_dir / dsagent_layout.PREDICTIONS).write_bytes(predictions)
        config = {"arity": task.dsagent.arity, "label_file": task.dsagent.label_file,
                  "label_columns": list(task.dsagent.label_columns)}
        (grading_dir / dsagent_layout.GRADING_CONFIG).write_text(json.dumps(config), encoding="utf-8")
        (grading_dir / "cbr_grader.py").write_text(dsagent_layout.GRADER, encoding="utf-8")
        out, err = run_dir / "grader-stdout.txt", run_dir / "grader-stderr.txt"
        outcome = run_sandboxed([sys.executable, "cbr_grader.py"], workspace=grading_dir, stdout_path=out,
                                stderr_path=err, policy=replace(GRADER_POLICY, isolate=policy.isolate))
        printed = _read(out)
        if outcome.exit_code != 0:
            raise GradingError(f"submission.py could not score the predictions: {_last_line(_read(err))}")
    finally:
        shutil.rmtree(grading_dir, ignore_errors=True)
    label = re.escape(task.test_pattern or "")
    matches = re.findall(rf"{label}\s*:\s*([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)", printed)
    if not matches:
        raise GradingError(f"submission.py printed no line '{task.test_pattern}: <number>'")
    return float(matches[-1])
