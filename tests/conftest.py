"""Shared fixtures: real task folders, prepared once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.tasks.prepare import prepare_task

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
SHARED_REFERENCE = REPO.parent / "shared" / "reference"


def prepared(name: str) -> Task:
    task = load_task(TASKS / name)
    prepare_task(task)
    return task


@pytest.fixture(scope="session")
def concrete() -> Task:
    return prepared("concrete-strength")
