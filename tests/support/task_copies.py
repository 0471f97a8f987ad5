"""Task recipes built in temporary folders and scripts run beside copies of their public files, as
child processes: independent of the package's runner and grader, and never touching the task folders
in the repository."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SOLUTIONS = REPO / "casebank" / "solutions"


def build(name: str, where: Path) -> Path:
    """A copy of the task's recipe with data/ and private/ built next to it."""
    folder = where / name
    folder.mkdir(parents=True)
    shutil.copy2(TASKS / name / "prepare.py", folder / "prepare.py")
    proc = subprocess.run([sys.executable, "prepare.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder


def run_in_workspace(folder: Path, script: Path, workspace: Path, metric: str) -> float:
    """Run `script` as train.py in `workspace` holding only the public files; the last validation
    score it prints. What it wrote stays in `workspace`."""
    workspace.mkdir()
    for public in (folder / "data").iterdir():
        shutil.copy2(public, workspace / public.name)
    shutil.copy2(script, workspace / "train.py")
    proc = subprocess.run([sys.executable, "train.py"], cwd=workspace, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = re.findall(rf"Validation {metric}:\s*([-+0-9.eE]+)", proc.stdout)
    assert printed, proc.stdout[-2000:]
    return float(printed[-1])
