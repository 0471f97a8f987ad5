"""Materialise a task's data by running its prepare.py; on failure nothing half-built is left."""

from __future__ import annotations

import shutil
import subprocess
import sys

from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import exclusive
from dsagent_cbr.tasks.model import Task


def prepare_task(task: Task, *, force: bool = False, timeout: float = 1200) -> str:
    """Returns 'prepared' or 'already prepared'; raises CbrError with the script's last error line."""
    if task.layout != "cbr":
        return "already prepared" if task.is_prepared() else "nothing to prepare"
    if task.is_prepared() and not force:
        return "already prepared"
    # one preparation at a time: two commands started together (a bench's trials, two terminals) would
    # otherwise write the same files at once
    with exclusive(task.root / ".prepare.lock"):
        if task.is_prepared() and not force:  # another process prepared it while this one waited
            return "already prepared"
        return _run_prepare(task, timeout)


def _run_prepare(task: Task, timeout: float) -> str:
    if not task.prepare_script.is_file():
        raise CbrError(f"Task {task.name} has no data and no prepare.py to build it.")
    created = [d for d in (task.public_dir, task.private_dir) if not d.exists()]
    try:
        proc = subprocess.run(
            [sys.executable, str(task.prepare_script)],
            cwd=task.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        _remove(created)
        raise CbrError(f"Preparing {task.name} took longer than {timeout:g}s.") from exc
    if proc.returncode != 0 or not task.is_prepared():
        _remove(created)
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        reason = lines[-1] if lines else "it did not write every file task.toml lists"
        raise CbrError(f"Preparing {task.name} failed: {reason}")
    return "prepared"


def _remove(dirs: list) -> None:
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
