"""Shared fixtures: real task folders, prepared once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.model import Task
from dsagent_cbr.tasks.prepare import prepare_task

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
SHARED_REFERENCE = REPO.parent / "shared" / "reference"


@pytest.fixture(scope="session", autouse=True)
def one_embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every bank the session's commands open shares one embeddings cache (CBR_EMBEDDING_CACHE): the seed
    cases are embedded by the real model once, not again in each test's new home (about 4 s of every test
    that opens a new bank). Tests that count what was embedded pass a cache of their own."""
    os.environ["CBR_EMBEDDING_CACHE"] = str(tmp_path_factory.mktemp("embeddings") / "embeddings.sqlite")
    yield
    os.environ.pop("CBR_EMBEDDING_CACHE", None)


def prepared(name: str) -> Task:
    task = load_task(TASKS / name)
    prepare_task(task)
    return task


@pytest.fixture(scope="session")
def concrete() -> Task:
    return prepared("concrete-strength")
