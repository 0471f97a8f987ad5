"""The whole task suite: every task prepares offline and validates; one task per modality runs its
starter and reference end to end, and the reference beats the random starter."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
from conftest import REPO, TASKS

from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.loader import discover_tasks, load_task

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]
ONE_PER_MODALITY = ["concrete-strength", "rotten-tomatoes", "elec-demand", "basic-motions"]


@pytest.fixture(scope="module")
def suite():
    proc = subprocess.run([*CBR, "tasks", "prepare", "--all"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [load_task(p) for p in discover_tasks(TASKS)]


@pytest.mark.slow
def test_every_task_prepares_and_validates(suite):
    proc = subprocess.run([*CBR, "tasks", "validate"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len(suite) >= 24
    modalities = {t.modality for t in suite}
    assert modalities == {"tabular", "text", "forecasting", "time-series-classification"}
    dev = [t for t in suite if t.stage == "development"]
    deployment = [t for t in suite if t.stage == "deployment"]
    assert len(dev) >= 12 and len(deployment) >= 10
    names = {t.name for t in dev}
    for task in deployment:
        assert task.paired_with and set(task.paired_with) <= names, task.name
    for task in dev:  # every development task ships its reference solution as a seed case
        folder = REPO / "casebank" / "solutions" / task.name
        meta = tomllib.loads((folder / "meta.toml").read_text())
        assert (folder / "solution.py").is_file() and meta["task"] == task.name
        assert isinstance(meta["test_score"], float)
    readme = (TASKS / "README.md").read_text()
    assert all(t.name in readme for t in suite)


@pytest.mark.slow
@pytest.mark.parametrize("name", ONE_PER_MODALITY)
def test_reference_beats_random_end_to_end(suite, name, tmp_path):
    task = next(t for t in suite if t.name == name)
    starter = run_script(task, task.starter, run_dir=tmp_path / "starter")
    reference = run_script(task, REPO / "casebank" / "solutions" / name / "solution.py", run_dir=tmp_path / "ref",
                           timeout=180)
    assert starter.ok and reference.ok, (starter.error, reference.error)
    assert task.metric.better(reference.test_metric, starter.test_metric)
    assert reference.wall_time < 180
