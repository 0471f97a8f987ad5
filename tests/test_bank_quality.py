"""benchmarks/retrieval_quality.py in CI: for every task in tasks/, the top-5 insights of the agent's
bank (the shipped seed plus DS-Agent's 186 reference cases) are mostly of the task's modality family."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scripts import load_script

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference" / "dsagent-human-insights"


def _benchmark():
    return load_script(REPO / "benchmarks" / "retrieval_quality.py")


@pytest.mark.slow
def test_retrieval_quality(tmp_path: Path) -> None:
    rq = _benchmark()
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
