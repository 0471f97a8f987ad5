"""One trial: a subprocess of the public CLI in its own folder, its result read back and classified.

This runs inside a Ray worker (or anywhere: it needs no Ray). A trial's folder is cleared before it
starts, so a trial cut short by a killed driver starts again from nothing; `trial.json` is written
atomically and only then the `done` marker, so a marker always has its record beside it."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.agent.record import SUMMARY, RunRecord
from dsagent_cbr.bench.report import source_commit
from dsagent_cbr.cores import ENV as CORES_ENV
from dsagent_cbr.errors import Outcome
from dsagent_cbr.files import write_text_atomic
from dsagent_cbr.sandbox.scratch import clear_folder

PR_SET_PDEATHSIG = 1
DONE = "done"
RECORD = "trial.json"


@dataclass
class TrialJob:
    """Everything a worker needs; built by the driver, so workers never re-derive the grid."""

    trial_id: str
    task: str
    agent: str  # label
    kind: str  # deploy | develop | flaml | starter | reference
    index: int
    seed: int
    folder: str
    command: list[str]
    wall_limit: float
    bank_base: str | None = None  # copied to <folder>/bank for deploy/develop trials
    bank_remove: list[str] = field(default_factory=list)  # retained cases of this task, taken out
    store: str = "faiss"
    script: str | None = None  # written to <folder>/solution.py before the command runs (FLAML)
    # False: the task has none, and the tables show selection scores instead
    test_answers: bool | None = None


def is_done(folder: Path) -> bool:
    return (folder / DONE).is_file() and (folder / RECORD).is_file()


def load_record(folder: Path) -> dict[str, Any]:
    return json.loads((folder / RECORD).read_text(encoding="utf-8"))


def _die_with(libc: ctypes.CDLL, parent: int) -> None:
    """In the child, before exec: SIGKILL when the worker that started us dies (the driver's SIGKILL
    takes the Ray workers with it, and so the trials). If the parent is already gone, stop now."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def cli_command() -> list[str]:
    return [sys.executable, "-m", "dsagent_cbr.cli"]


def run_cli(
    command: list[str], cwd: Path, env: dict[str, str], wall_limit: float
) -> tuple[int | None, bool]:
    """Run one CLI command with stdout/stderr to files; (exit code, hit the wall limit)."""
    # loaded here: the child only calls it
    parent, libc = (os.getpid(), ctypes.CDLL(None, use_errno=True))
    with (cwd / "stdout.txt").open("wb") as out, (cwd / "stderr.txt").open("wb") as err:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=lambda: _die_with(libc, parent),
        )
        try:
            return proc.wait(timeout=wall_limit), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return proc.returncode, True


def _prepare_bank(job: TrialJob, folder: Path, env: dict[str, str]) -> str | None:
    """The trial's own bank: a copy of the grid's base bank without this task's retained cases."""
    if job.bank_base is None:
        return None
    bank = folder / "bank"
    shutil.copytree(job.bank_base, bank, ignore=shutil.ignore_patterns("cases.jsonl"))
    if job.bank_remove:
        code, _ = run_cli(
            [
                *cli_command(),
                "bank",
                "remove",
                *job.bank_remove,
                "--store",
                job.store,
                "--bank-dir",
                str(bank),
            ],
            folder,
            env,
            600,
        )
        for name in ("stdout.txt", "stderr.txt"):
            (folder / name).replace(folder / f"bank-remove-{name}")
        if code != 0:
            return (
                f"could not take this task's retained cases out of the trial's bank (exit {code})"
            )
    return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


AGENT_KINDS = ("deploy", "develop")  # trials whose command leaves a run record (agent/record.py)


def find_result(kind: str, folder: Path) -> dict[str, Any] | None:
    """The agent run's record, or the script run's result.json; else the command's --json output."""
    if kind in AGENT_KINDS:
        files = sorted((folder / "runs").glob(f"*/*/{SUMMARY}"))
    else:
        files = [folder / "run" / "result.json"]
    for path in reversed(files):
        data = _read_json(path)
        if data is not None:
            return data
    return _read_json(folder / "stdout.txt")


def summarise(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """The fields the measures need, whichever command wrote the result."""
    if kind in AGENT_KINDS:
        record = RunRecord.model_validate(data)
        facts = record.deploy
        error = (facts.llm_error or facts.adapter_error) if facts else None
        return {
            "success": record.solved,
            "run_outcome": str(record.outcome),
            "one_pass": facts.one_pass if facts else None,
            "solved_by": facts.solved_by if facts else None,
            "test_metric": record.best_test,
            "valid_metric": record.best_valid,
            "selection_metric": record.best_selection,
            "score": record.best_score,
            "error": error or (None if record.stopped == "completed" else record.stopped),
            "stopped": record.stopped,
            "cost_usd": record.cost_usd,
            "tokens": record.tokens,
            "run_dir": record.run_dir,
        }
    return {
        "success": data.get("status") == "ok",
        "one_pass": None,
        "test_metric": data.get("test_metric"),
        "valid_metric": data.get("valid_metric"),
        "selection_metric": data.get("selection_metric"),
        "score": data.get("selection_metric")
        if data.get("selection_rows")
        else data.get("valid_metric"),
        "error": data.get("error"),
        "status": data.get("status"),
        "cost_usd": 0.0,
        "tokens": 0,
        "script_seconds": data.get("wall_time"),
    }


def _last_line(path: Path) -> str:
    try:
        lines = [
            ln.strip()
            for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()
            if ln.strip()
        ]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def classify(
    kind: str,
    data: dict[str, Any] | None,
    summary: dict[str, Any],
    exit_code: int | None,
    timed_out: bool,
    stderr_line: str,
    wall_limit: float,
) -> tuple[str, str | None]:
    """(outcome, reason): ok, failed (the model's or the script's), or infrastructure (ours: the budget,
    a dead server, no sandbox, an interrupt, as the run's record says; or no record at all)."""
    if timed_out:
        return (
            "infrastructure",
            f"the trial passed the harness's wall limit of {wall_limit:g}s and was killed",
        )
    if data is None:
        return (
            "infrastructure",
            f"no result was written (exit {exit_code}): {stderr_line or 'no output'}",
        )
    if kind in AGENT_KINDS and Outcome(summary["run_outcome"]).ours:
        return "infrastructure", str(summary.get("stopped") or stderr_line)
    if summary["success"]:
        return "ok", None
    return "failed", str(summary.get("error") or "") or None


def execute(job: TrialJob, cores: int | None = None) -> dict[str, Any]:
    """Run the trial from a clean folder and save its record; returns the record. `cores`: the trial's
    share of the machine, which its run keeps its threads to (scripts and the local model alike)."""
    folder = Path(job.folder)
    clear_folder(folder)
    folder.mkdir(parents=True)
    env = {**os.environ, "CBR_HOME": str(folder / "home"), "PYTHONUNBUFFERED": "1"}
    if cores:
        env[CORES_ENV] = str(cores)
    started = time.time()
    record: dict[str, Any] = {
        "id": job.trial_id,
        "task": job.task,
        "agent": job.agent,
        "kind": job.kind,
        "trial": job.index,
        "seed": job.seed,
        "test_answers": job.test_answers,
        "command": job.command,
        "host": os.uname().nodename,
        "cores": cores,
        "started": started,
        "commit": source_commit(),
    }
    problem = _prepare_bank(job, folder, env)
    if job.script is not None:
        write_text_atomic(folder / "solution.py", job.script)
    if problem is not None:
        exit_code = None
        timed_out = False
        data = None
        record.update(outcome="infrastructure", reason=problem, exit_code=None)
    else:
        exit_code, timed_out = run_cli(job.command, folder, env, job.wall_limit)
        data = find_result(job.kind, folder)
        summary = (
            summarise(job.kind, data)
            if data is not None
            else {"success": False, "test_metric": None}
        )
        outcome, reason = classify(
            job.kind,
            data,
            summary,
            exit_code,
            timed_out,
            _last_line(folder / "stderr.txt"),
            job.wall_limit,
        )
        record.update(summary, outcome=outcome, reason=reason, exit_code=exit_code)
        if data is not None:
            record.update(metric=data.get("metric"), direction=data.get("direction"))
    record["wall_seconds"] = round(time.time() - started, 3)
    write_text_atomic(folder / RECORD, json.dumps(record, indent=2, default=str))
    if record["outcome"] != "infrastructure":  # ours failed: a resume tries it again
        write_text_atomic(folder / DONE, f"{time.time()}\n")
    return record
