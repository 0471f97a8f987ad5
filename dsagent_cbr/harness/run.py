"""Run a solution script on a task: build its workspace (workspace.py: the task's public files, the
selection rows held back), run it in the sandbox, harvest what it left through the bounded readers
(readers.py), and grade its predictions outside the sandbox: the test rows and the selection rows.

A run folder holds `script.py` (the script as cbr was given it: nothing later re-reads the script from
where the script itself could rewrite it), `stdout.txt`, `stderr.txt`, `workspace/` (what the script
made, carried out of its scratch folder as regular files) and `result.json`."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

from dsagent_cbr.errors import Cancelled
from dsagent_cbr.harness import workspace
from dsagent_cbr.harness.dsagent_grader import grade_dsagent
from dsagent_cbr.harness.grading import Grades, grade
from dsagent_cbr.harness.plan import Held, hold_out
from dsagent_cbr.harness.readers import (
    ArtefactError,
    FitRounds,
    harvest,
    read_importance,
    read_text,
)
from dsagent_cbr.harness.result import RunResult, head_tail, parse_validation_metric
from dsagent_cbr.sandbox import (
    ProcessOutcome,
    SandboxPolicy,
    SandboxUnavailable,
    require_sandbox,
    run_sandboxed,
)
from dsagent_cbr.sandbox.scratch import scratch, size_mb
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.tasks.sources import hidden_paths

# of stdout and stderr read back: the head and the tail, where scores and tracebacks are
OUTPUT_CHARS = 2 * 2**20
REFIT_VARIABLE = "CBR_REFIT"
# when a script's boosting must stop (seconds since the epoch), its time limit less the room it needs to
# predict and write: untrusted/bootstrap.py stops LightGBM and XGBoost there, keeping the rounds built
DEADLINE_VARIABLE = "CBR_DEADLINE"
# when the script is killed (seconds since the epoch), and about how many rows it will predict once
# trained: the bootstrap stops a booster sooner when predicting that many rows with the trees it has would
# not end by then (a five-class LightGBM on diamonds-cut trained 14 s, then took 15 s to predict 26k rows)
END_VARIABLE, PREDICT_ROWS_VARIABLE = "CBR_END", "CBR_PREDICT_ROWS"
# the rounds the first fit's boosters kept (harness/readers.py's read_fit_rounds), given to its refit
FIRST_FIT_VARIABLE = "CBR_FIRST_FIT"
FIT_KEYS = ("calls", "models", "unwatched")


def predict_room(limit: float) -> float:
    """Seconds of a script's time limit kept for predicting and writing, after its training stops: a
    quarter of it, and up to half of a short one, within 5 to 60 s. With 5 s of a 15 s limit, a booster
    of five classes stopped at its deadline after 590 rounds was killed while it predicted (diamonds-cut,
    on a loaded core)."""
    return min(60.0, max(5.0, 0.25 * limit, min(0.5 * limit, 10.0)))


def limit_to_train(seconds: float) -> float:
    """The shortest time limit whose deadline for training (the limit less its predict_room) leaves
    `seconds` to train. A limit less its predict_room grows with the limit, so halving finds it."""
    low, high = seconds, seconds + 60.0  # predict_room keeps at most 60 s
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if middle - predict_room(middle) < seconds else (low, middle)
    return high


@dataclass(frozen=True)
class Ran:
    """What the sandbox gave back: how the process ended, and what it printed (head and tail)."""

    outcome: ProcessOutcome
    stdout: str
    stderr: str


def run_script(
    task: Task,
    script: str | Path,
    *,
    run_dir: Path | None = None,
    timeout: float | None = None,
    memory_mb: float | None = None,
    policy: SandboxPolicy | None = None,
    refit: bool = False,
    first_fit: FitRounds | None = None,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Execute `script` (a path or the code itself) on `task` and grade it. Never raises for the
    script's own failures, whatever it leaves behind: they come back as a RunResult with a status and
    an error line. Raises SandboxUnavailable when the sandbox could not start it (ours, not the
    script's), and Cancelled when `cancel` was set while it ran. With `refit` the script is given every
    labelled row and told (CBR_REFIT=1) to learn from its validation rows too; it predicts the test rows
    alone (it learned the selection rows: agent/refit.py judges it otherwise). `first_fit`: the rounds
    its first fit's boosters kept, for the refit to stop at (untrusted/bootstrap.py)."""
    policy = replace(
        policy or SandboxPolicy(),
        **{k: v for k, v in (("timeout", timeout), ("memory_mb", memory_mb)) if v is not None},
    )
    require_sandbox(policy.isolate)  # before anything is written: no half-made run folder
    code = Path(script).read_text(encoding="utf-8") if isinstance(script, Path) else script
    run_dir = Path(tempfile.mkdtemp(prefix=f"cbr-{task.name}-")) if run_dir is None else run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "script.py").write_text(code, encoding="utf-8")
    held = hold_out(task)
    held = held.for_refit() if refit and held is not None else held
    told = refit_environment(refit, first_fit)
    ran = _sandboxed(task, held, code, run_dir, policy, told, cancel)
    status, error = _status(ran, policy)
    valid = parse_validation_metric(ran.stdout, task.metric_name)
    grades, status, error = _graded(task, held, run_dir, policy, valid, status, error)
    result = RunResult(
        task=task.name,
        status=status,
        exit_code=ran.outcome.exit_code,
        metric=task.metric_name,
        direction=task.direction,
        valid_metric=valid,
        test_metric=grades.test,
        selection_metric=grades.selection,
        selection_rows=held.rows if held else 0,
        error=error,
        stdout=head_tail(ran.stdout),
        stderr=head_tail(ran.stderr),
        wall_time=round(ran.outcome.wall_time, 3),
        peak_memory_mb=round(ran.outcome.peak_memory_mb, 1),
        workspace=str(run_dir / "workspace"),
        isolated=ran.outcome.isolated,
        network=ran.outcome.network,
        test_answers=task.has_answers,
        script=str(run_dir / "script.py"),
        limits=ran.outcome.limits,
        refit=refit,
    )
    result.save(run_dir / "result.json")
    return result


@cache
def _bootstrap() -> str:
    return (
        resources.files("dsagent_cbr.untrusted")
        .joinpath("bootstrap.py")
        .read_text(encoding="utf-8")
    )


def _sandboxed(
    task: Task,
    held: Held | None,
    code: str,
    run_dir: Path,
    policy: SandboxPolicy,
    told: dict[str, str] | None,
    cancel: threading.Event | None,
) -> Ran:
    """Build the workspace in a scratch folder of its own, run the script there, and harvest what it made
    into run_dir/workspace once it is dead; `told`: a refit's variables (None: not a refit)."""
    room = size_mb([task.public_dir / n for n in task.public_files])
    with scratch(run_dir, room, policy.disk_mb) as space:
        ours = workspace.build(task, held, space.path, code, refit=told is not None)
        space.settle()
        environment = _deadlines(policy.timeout, held)
        outcome = run_sandboxed(
            [sys.executable, "-c", _bootstrap()],
            space=space,
            stdout_path=run_dir / "stdout.txt",
            stderr_path=run_dir / "stderr.txt",
            policy=policy,
            hidden=tuple(hidden_paths(task)),
            cancel=cancel,
            environment={**environment, **(told or {})},
        )
        left = harvest(
            space.path, run_dir / "workspace", unchanged=ours, max_bytes=int(policy.disk_mb * 2**20)
        )
    if left:
        (run_dir / "left-behind.txt").write_text("\n".join(left) + "\n", encoding="utf-8")
    if outcome.cancelled:
        raise Cancelled("the run stopped while this script ran")
    stdout, stderr = (
        read_text(run_dir / name, OUTPUT_CHARS) for name in ("stdout.txt", "stderr.txt")
    )
    return Ran(outcome, stdout, stderr)


def refit_environment(refit: bool, first_fit: FitRounds | None) -> dict[str, str] | None:
    """What the environment tells a refit; None when the run is not one."""
    if not refit:
        return None
    told = {REFIT_VARIABLE: "1"}
    # re-written from what was read back, never passed on as the script wrote it
    if first_fit is not None:
        told[FIRST_FIT_VARIABLE] = json.dumps({k: v for k, v in first_fit.items() if k in FIT_KEYS})
    return told


def _deadlines(timeout: float, held: Held | None) -> dict[str, str]:
    """The times the script's boosting must stop by, and the rows it will predict: its test file's (the
    test rows and the selection rows) and its own validation rows', a quarter of what it learns."""
    now = time.time()
    times = {
        DEADLINE_VARIABLE: f"{now + timeout - predict_room(timeout):.1f}",
        END_VARIABLE: f"{now + timeout:.1f}",
    }
    if held is None:
        return times
    rows = held.test_rows + held.rows + (held.labelled - held.rows) // 4
    return {**times, PREDICT_ROWS_VARIABLE: str(rows)}


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _status(ran: Ran, policy: SandboxPolicy) -> tuple[str, str | None]:
    """What ended the run, from what happened: the limits' own events, whether the sandbox started the
    script (its own word, on a pipe the script never holds), the exit code. Never from what it printed."""
    outcome = ran.outcome
    if outcome.timed_out:
        return "timeout", f"time limit of {policy.timeout:g}s reached; the process tree was killed"
    if outcome.memory_exceeded:
        return (
            "memory_limit",
            f"memory limit of {policy.memory_mb:g} MB exceeded (processes, /tmp and /dev/shm)",
        )
    if not outcome.started:
        raise SandboxUnavailable(
            f"The sandbox failed to start the script: {_last_line(ran.stderr) or 'no reason given'}"
        )
    if outcome.disk_exceeded:
        return "disk_limit", f"disk limit of {policy.disk_mb:g} MB exceeded"
    if outcome.output_exceeded:
        return "output_limit", "the script printed too much output and was stopped"
    if outcome.exit_code != 0 and outcome.processes_exceeded:
        return (
            "process_limit",
            f"more than {policy.pids} processes and threads at once were refused",
        )
    if outcome.exit_code != 0:
        return "error", _last_line(ran.stderr) or f"exit code {outcome.exit_code}"
    return "ok", None


def _graded(
    task: Task,
    held: Held | None,
    run_dir: Path,
    policy: SandboxPolicy,
    valid: float | None,
    status: str,
    error: str | None,
) -> tuple[Grades, str, str | None]:
    """The grades of a run that ended well, and its status: a malformed artefact, or a printed
    validation score the metric cannot take, is the script's failure like a crash."""
    if status != "ok":
        return Grades(None, None), status, error
    folder = run_dir / "workspace"
    try:
        read_importance(folder)  # a malformed one is the script's failure like bad predictions
        grades = (
            grade_dsagent(task, folder, run_dir, policy, held)
            if task.dsagent
            else grade(task, folder, held)
        )
    except ArtefactError as exc:
        return Grades(None, None), "grading_error", str(exc)
    # what it says of itself cannot be believed
    if valid is not None and not task.metric.possible(valid):
        return (
            grades,
            "impossible_score",
            (
                f"the script printed validation {task.metric_name} {valid:g}, which "
                f"{task.metric_name} cannot be (it lies in {task.metric.range})"
            ),
        )
    return grades, "ok", None
