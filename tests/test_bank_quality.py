"""experiments/retrieval_quality.py in CI: for every task in tasks/, the top-5 insights of the agent's
bank (the shipped seed plus DS-Agent's 186 reference cases) are mostly of the task's modality family."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference" / "dsagent-human-insights"


def _experiment():
    spec = importlib.util.spec_from_file_location("retrieval_quality", REPO / "experiments" / "retrieval_quality.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_retrieval_quality(tmp_path: Path) -> None:
    rq = _experiment()
    subset = rq.read_tasks(REPO / "tasks")
    assert len({t.modality for t in subset}) == 4
    bank = rq.import_reference(REFERENCE, tmp_path / "bank", "faiss", tmp_path / "embeddings.sqlite", seed=True)
    assert bank.stats()["insight"]["count"] >= 186 + 60
    result = rq.evaluate(bank, subset)
    overall = result["table"]["overall"]["match"]
    assert overall >= 0.8, result["table"]
    # the deployment check runs and names development tasks only
    dev_names = {t.name for t in subset if t.stage == "development"}
    for row in rq.nearest_development(bank, subset):
        assert row["nearest"] in dev_names
