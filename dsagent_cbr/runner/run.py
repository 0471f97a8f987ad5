"""Run a solution script on a task: a fresh workspace of public files with the task's selection rows
held back (tasks/selection.py), the script sandboxed, what it left harvested through the one reader
(artefacts.py), its predictions graded outside the sandbox: the test rows and the selection rows.

A run folder holds `script.py` (the script as cbr was given it: nothing later re-reads the script from
where the script itself could rewrite it), `stdout.txt`, `stderr.txt`, `workspace/` (what the script
made, carried out of its scratch folder as regular files) and `result.json`."""

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

import numpy as np

from dsagent_cbr.runner.artefacts import ArtefactError, harvest, read_bytes, read_importance, read_text
from dsagent_cbr.runner.result import RunResult, head_tail, parse_validation_metric
from dsagent_cbr.runner.sandbox import (
    ProcessOutcome,
    SandboxPolicy,
    SandboxUnavailable,
    require_sandbox,
    run_sandboxed,
)
from dsagent_cbr.runner.scratch import Scratch, scratch
from dsagent_cbr.tasks import dsagent_layout
from dsagent_cbr.tasks.grading import Grades, grade, score_npy
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.tasks.selection import Held, dsagent_test_file, hold_out, write_files
from dsagent_cbr.tasks.sources import hidden_paths

GRADER_POLICY = SandboxPolicy(timeout=300.0, memory_mb=4096.0, disk_mb=64.0)
OUTPUT_CHARS = 2 * 2**20  # of stdout and stderr read back: the head and the tail, where scores and tracebacks are


def _size_mb(paths: list[Path]) -> float:
    """What the files at `paths` (folders with all they hold) take: the room a scratch folder needs."""
    files = [f for p in paths for f in ([p, *p.rglob("*")] if p.is_dir() else [p])]
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def make_workspace(task: Task, script_text: str, workspace: Path, held: Held | None = None) -> dict[str, tuple[int, int]]:
    """Copy (never link: a link would lead back to the task folder) the public files and the script;
    with selection rows held back, the files they change are written instead of copied. In the
    DS-Agent layout the test labels stay out and submission.py only keeps the predictions. Returns what
    cbr wrote, by relative path: (size, mtime_ns), so that a harvest can leave it out."""
    workspace.mkdir(parents=True, exist_ok=True)
    grading = task.dsagent
    if held is not None:
        write_files(held, workspace)
    for name in task.public_files:
        src, dst = task.public_dir / name, workspace / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if held is not None and name in held.files:
            continue
        if grading is not None and name == "submission.py":
            dst.write_text(dsagent_layout.capture_shim(src.read_text(encoding="utf-8")), encoding="utf-8")
        elif grading is not None and name == grading.label_file:
            dsagent_test_file(task).to_csv(dst, index=False)
        elif src.is_dir():
            shutil.copytree(src, dst)
        elif src.is_file():
            shutil.copyfile(src, dst)
    (workspace / "train.py").write_text(script_text, encoding="utf-8")
    return _written(workspace)


def _written(folder: Path) -> dict[str, tuple[int, int]]:
    written = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            written[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns)
    return written


def _impossible(task: Task, valid: float | None) -> tuple[str, str] | None:
    """A printed validation score the metric cannot take (NaN, RMSE -1e300, accuracy 7.5) is the
    script's error, like a crash: what it reports of itself cannot be believed."""
    if valid is None or task.metric.possible(valid):
        return None
    return "impossible_score", (f"the script printed validation {task.metric_name} {valid:g}, which "
                                f"{task.metric_name} cannot be (it lies in {task.metric.range})")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _status(outcome: ProcessOutcome, stderr: str, policy: SandboxPolicy) -> tuple[str, str | None]:
    """What ended the run, from what happened: the limits' own events and the exit code."""
    if outcome.timed_out:
        return "timeout", f"time limit of {policy.timeout:g}s reached; the process tree was killed"
    if outcome.memory_exceeded:
        return "memory_limit", f"memory limit of {policy.memory_mb:g} MB exceeded (processes, /tmp and /dev/shm)"
    if outcome.disk_exceeded:
        return "disk_limit", f"disk limit of {policy.disk_mb:g} MB exceeded"
    if outcome.output_exceeded:
        return "output_limit", "the script printed too much output and was stopped"
    if outcome.exit_code != 0 and outcome.processes_exceeded:
        return "process_limit", f"more than {policy.pids} processes and threads at once were refused"
    if outcome.exit_code != 0:
        return "error", _last_line(stderr) or f"exit code {outcome.exit_code}"
    return "ok", None


@cache
def _bootstrap() -> str:
    return resources.files("dsagent_cbr.runner").joinpath("bootstrap.py").read_text(encoding="utf-8")


def _execute(task: Task, code: str, run_dir: Path, policy: SandboxPolicy, refit: bool,
             held: Held | None) -> ProcessOutcome:
    """The script's run in a scratch folder of its own; what it made is harvested into run_dir/workspace."""
    with scratch(run_dir, _size_mb([task.public_dir / n for n in task.public_files]), policy.disk_mb) as space:
        unchanged = make_workspace(task, code, space.path, held)
        space.settle()
        outcome = run_sandboxed([sys.executable, "-c", _bootstrap()], space=space,
                                stdout_path=run_dir / "stdout.txt", stderr_path=run_dir / "stderr.txt",
                                policy=policy, hidden=tuple(hidden_paths(task)),
                                environment={"CBR_REFIT": "1"} if refit else None)
        left = harvest(space.path, run_dir / "workspace", unchanged=unchanged, max_bytes=int(policy.disk_mb * 2**20))
    if left:
        (run_dir / "left-behind.txt").write_text("\n".join(left) + "\n", encoding="utf-8")
    return outcome


def run_script(task: Task, script: str | Path, *, run_dir: Path | None = None, timeout: float | None = None,
               memory_mb: float | None = None, policy: SandboxPolicy | None = None, refit: bool = False) -> RunResult:
    """Execute `script` (a path or the code itself) on `task` and grade it. Never raises for the
    script's own failures, whatever it leaves behind: they come back as a RunResult with a status and
    an error line. Raises SandboxUnavailable when we cannot sandbox it: that is our failure, not the
    script's. Its predictions for the selection rows are graded with its test predictions. With `refit`
    the script is given every labelled row, selection rows included (so there is no selection score),
    and told (CBR_REFIT=1) to train its final model on its validation rows too."""
    policy = policy or SandboxPolicy()
    policy = replace(policy, **{k: v for k, v in (("timeout", timeout), ("memory_mb", memory_mb)) if v is not None})
    require_sandbox(policy.isolate)  # before anything is written: no half-made run folder
    code = Path(script).read_text(encoding="utf-8") if isinstance(script, Path) else script
    run_dir = Path(tempfile.mkdtemp(prefix=f"cbr-{task.name}-")) if run_dir is None else run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "script.py").write_text(code, encoding="utf-8")
    held = None if refit else hold_out(task)
    outcome = _execute(task, code, run_dir, policy, refit, held)
    stdout, stderr = read_text(run_dir / "stdout.txt", OUTPUT_CHARS), read_text(run_dir / "stderr.txt", OUTPUT_CHARS)
    if outcome.isolated and outcome.exit_code != 0 and stderr.startswith(("bwrap: ", "setpriv: ")):
        raise SandboxUnavailable(f"The sandbox failed to start the script: {_last_line(stderr)}")
    status, error = _status(outcome, stderr, policy)
    workspace = run_dir / "workspace"
    grades = Grades(None, None)
    valid = parse_validation_metric(stdout, task.metric_name)
    if status == "ok":
        try:
            read_importance(workspace)  # a malformed one is the script's failure like bad predictions
            grades = (_grade_dsagent(task, workspace, run_dir, policy, held) if task.dsagent
                      else grade(task, workspace, held))
            status, error = _impossible(task, valid) or (status, error)
        except ArtefactError as exc:
            status, error = "grading_error", str(exc)
    result = RunResult(
        task=task.name, status=status, exit_code=outcome.exit_code, metric=task.metric_name,
        direction=task.direction, valid_metric=valid, test_metric=grades.test,
        selection_metric=grades.selection, selection_rows=held.rows if held else 0,
        error=error, stdout=head_tail(stdout), stderr=head_tail(stderr), wall_time=round(outcome.wall_time, 3),
        peak_memory_mb=round(outcome.peak_memory_mb, 1), workspace=str(workspace), isolated=outcome.isolated,
        network=outcome.network, test_answers=task.has_answers, script=str(run_dir / "script.py"),
        limits=outcome.limits,
    )
    result.save(run_dir / "result.json")
    return result


def _fill_grading_folder(task: Task, folder: Path, predictions: bytes, held: Held | None) -> None:
    for path in task.public_dir.iterdir():
        if path.is_file() and path.name != "train.py":
            shutil.copyfile(path, folder / path.name)
    (folder / dsagent_layout.PREDICTIONS).write_bytes(predictions)
    assert task.dsagent is not None
    config = {"arity": task.dsagent.arity, "label_file": task.dsagent.label_file,
              "label_columns": list(task.dsagent.label_columns), "test_rows": held.test_rows if held else None}
    if held is not None and not isinstance(held.answers, np.ndarray):  # arrays are scored on the host
        held.answers.to_csv(folder / dsagent_layout.SELECTION_FILE, index=False)
    (folder / dsagent_layout.GRADING_CONFIG).write_text(json.dumps(config), encoding="utf-8")
    (folder / "cbr_grader.py").write_text(dsagent_layout.GRADER, encoding="utf-8")


def _run_grader(task: Task, space: Scratch, predictions: bytes, run_dir: Path, policy: SandboxPolicy,
                held: Held | None) -> str:
    _fill_grading_folder(task, space.path, predictions, held)
    space.settle()
    out, err = run_dir / "grader-stdout.txt", run_dir / "grader-stderr.txt"
    outcome = run_sandboxed([sys.executable, "cbr_grader.py"], space=space, stdout_path=out, stderr_path=err,
                            policy=replace(GRADER_POLICY, isolate=policy.isolate, cgroups=policy.cgroups))
    if outcome.exit_code != 0:
        raise ArtefactError(f"submission.py could not score the predictions: {_last_line(read_text(err, 4096))}")
    return read_text(out, 64 * 1024)


def _printed_score(task: Task, printed: str) -> float:
    label = re.escape(task.test_pattern or "")
    matches = re.findall(rf"{label}\s*:\s*([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)", printed)
    if not matches:
        raise ArtefactError(f"submission.py printed no line '{task.test_pattern}: <number>'")
    return float(matches[-1])


def _grade_dsagent(task: Task, workspace: Path, run_dir: Path, policy: SandboxPolicy, held: Held | None) -> Grades:
    """Run the folder's own submission.py on the saved predictions, beside the labelled files, in a
    sandbox of its own; the score is the one it prints, never one the script printed. With selection
    rows, it runs once more on their predictions, with a test file of those rows, labelled."""
    from dsagent_cbr.runner.artefacts import read_npy

    predictions = read_bytes(workspace, dsagent_layout.PREDICTIONS)
    saved = read_npy(predictions, dsagent_layout.PREDICTIONS, max_items=len(predictions))
    if held is not None and len(saved) != held.test_rows + held.rows:
        raise ArtefactError(f"{dsagent_layout.PREDICTIONS} has {len(saved)} predictions, expected "
                            f"{held.test_rows + held.rows} (one per row of {task.test_file})")
    grading_files = _size_mb([p for p in task.public_dir.iterdir() if p.is_file()])
    with scratch(run_dir, grading_files * 2 + len(predictions) / 2**20, GRADER_POLICY.disk_mb) as space:
        printed = _run_grader(task, space, predictions, run_dir, policy, held)
    test_part, _, selection_part = printed.partition(dsagent_layout.SELECTION_MARK)
    if held is None:
        return Grades(_printed_score(task, test_part), None)
    if isinstance(held.answers, np.ndarray):  # X_test.npy's selection windows: our metric, as for our npy tasks
        return Grades(_printed_score(task, test_part), score_npy(task, held.answers, saved[held.test_rows:], "selection"))
    return Grades(_printed_score(task, test_part), _printed_score(task, selection_part))
