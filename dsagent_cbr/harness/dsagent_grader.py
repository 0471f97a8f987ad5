"""Grading a DS-Agent folder: its own submission.py scores the predictions the script saved, in a sandbox
of its own beside the folder's labelled files (untrusted/dsagent_grader.py runs there). The score is
the one it prints, never one the script printed. With selection rows, it runs once more on their
predictions, with a test file of those rows, labelled."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path

import numpy as np

from dsagent_cbr.harness.grading import Grades, score_npy
from dsagent_cbr.harness.plan import Held
from dsagent_cbr.harness.readers import ArtefactError, read_bytes, read_npy, read_text
from dsagent_cbr.sandbox import SandboxPolicy, run_sandboxed
from dsagent_cbr.sandbox.scratch import Scratch, scratch, size_mb
from dsagent_cbr.tasks.model import Task

GRADER_POLICY = SandboxPolicy(timeout=300.0, memory_mb=4096.0, disk_mb=64.0)
# what the workspace's submission.py saves (untrusted/dsagent_capture.py)
PREDICTIONS = "predictions.npy"
# the names untrusted/dsagent_grader.py reads and prints
GRADING_CONFIG = "cbr_grading.json"
SELECTION_FILE = "cbr_selection_rows.csv"
SELECTION_MARK = "=== cbr: selection rows ==="


def grade_dsagent(
    task: Task, workspace: Path, run_dir: Path, policy: SandboxPolicy, held: Held | None
) -> Grades:
    """The test score and the selection score, as the folder's own submission.py prints them."""
    predictions = read_bytes(workspace, PREDICTIONS)
    saved = read_npy(predictions, PREDICTIONS, max_items=len(predictions))
    if held is not None and len(saved) != held.test_rows + held.rows:
        raise ArtefactError(
            f"{PREDICTIONS} has {len(saved)} predictions, expected "
            f"{held.test_rows + held.rows} (one per row of {task.test_file})"
        )
    if held is not None:  # the source order the folder's submission.py grades in
        saved = held.unmix(saved)
        predictions = _npy_bytes(saved)
    grading_files = size_mb([p for p in task.public_dir.iterdir() if p.is_file()])
    with scratch(
        run_dir, grading_files * 2 + len(predictions) / 2**20, GRADER_POLICY.disk_mb
    ) as space:
        printed = _run_grader(task, space, predictions, run_dir, policy, held)
    test_part, _, selection_part = printed.partition(SELECTION_MARK)
    if held is None or not held.rows:
        return Grades(_printed_score(task, test_part), None)
    # X_test.npy's selection windows: our metric, as for npy tasks
    if isinstance(held.answers, np.ndarray):
        selection = score_npy(task, held.answers, saved[held.test_rows :], "selection")
        return Grades(_printed_score(task, test_part), selection)
    return Grades(_printed_score(task, test_part), _printed_score(task, selection_part))


def _npy_bytes(values: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, values, allow_pickle=False)
    return buffer.getvalue()


def _fill(task: Task, folder: Path, predictions: bytes, held: Held | None) -> None:
    for path in task.public_dir.iterdir():
        if path.is_file() and not path.is_symlink() and path.name != "train.py":
            (folder / path.name).write_bytes(path.read_bytes())
    (folder / PREDICTIONS).write_bytes(predictions)
    assert task.dsagent is not None
    config = {
        "arity": task.dsagent.arity,
        "label_file": task.dsagent.label_file,
        "label_columns": list(task.dsagent.label_columns),
        "test_rows": held.test_rows if held else None,
    }
    # arrays are scored on the host; a refit has no held rows to grade
    if held is not None and held.rows and not isinstance(held.answers, np.ndarray):
        held.answers.to_csv(folder / SELECTION_FILE, index=False)
    (folder / GRADING_CONFIG).write_text(json.dumps(config), encoding="utf-8")
    grader = (
        resources.files("dsagent_cbr.untrusted")
        .joinpath("dsagent_grader.py")
        .read_text(encoding="utf-8")
    )
    (folder / "cbr_grader.py").write_text(grader, encoding="utf-8")


def _run_grader(
    task: Task,
    space: Scratch,
    predictions: bytes,
    run_dir: Path,
    policy: SandboxPolicy,
    held: Held | None,
) -> str:
    _fill(task, space.path, predictions, held)
    space.settle()
    out, err = run_dir / "grader-stdout.txt", run_dir / "grader-stderr.txt"
    outcome = run_sandboxed(
        [sys.executable, "cbr_grader.py"],
        space=space,
        stdout_path=out,
        stderr_path=err,
        policy=replace(GRADER_POLICY, isolate=policy.isolate, cgroups=policy.cgroups),
    )
    if outcome.exit_code != 0:
        last = next((ln for ln in reversed(read_text(err, 4096).splitlines()) if ln.strip()), "")
        raise ArtefactError(f"submission.py could not score the predictions: {last.strip()}")
    return read_text(out, 64 * 1024)


def _printed_score(task: Task, printed: str) -> float:
    label = re.escape(task.test_pattern or "")
    matches = re.findall(rf"{label}\s*:\s*([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)", printed)
    if not matches:
        raise ArtefactError(f"submission.py printed no line '{task.test_pattern}: <number>'")
    return float(matches[-1])
