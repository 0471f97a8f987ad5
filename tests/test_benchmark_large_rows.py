"""benchmarks/large_rows.py without running a search: its table is seeded and learnable, and what it
reads of a run's record (the first graded node, what was submitted) comes from the right rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scripts import load_script

from dsagent_cbr.agent.record import Refit, Row, RunRecord

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def large_rows():
    return load_script(REPO / "benchmarks" / "large_rows.py")


def test_the_table_is_seeded_binary_and_holds_both_kinds_of_column(large_rows):
    table = large_rows.table(20_000)
    assert table.equals(large_rows.table(20_000))
    assert list(table.columns[:2]) == ["id", "x0"] and table["id"].is_unique
    assert table["city"].nunique() == 300 and set(table["kind"]) == set("abcde")
    assert 0.2 < (table["label"] == "yes").mean() < 0.45


def _record(refit: Refit | None) -> RunRecord:
    rows = [
        Row(iteration=1, operator="draft", score=None, ended=9.0),  # failed: no score
        Row(iteration=2, operator="draft", score=0.7, ended=21.5, test=0.69),
        Row(iteration=3, operator="ensemble", score=0.72, ended=20.0, test=0.71),
        Row(iteration=4, operator="tune", score=0.71, ended=30.0, test=0.70),
    ]
    return RunRecord(kind="search", task="t", model="none", metric="auroc", direction="maximize",
                     run_dir="r", rows=rows, best_iteration=3, best_test=0.71, refit=refit,
                     submission="submission.csv")


def test_the_first_graded_node_is_a_single_script_and_the_submission_is_the_refit_it_used(large_rows):
    used = large_rows.run_facts(_record(Refit(status="ok", test_after_refit=0.7234567)))
    assert used["first_graded_at"] == 21.5 and used["graded"] == 2
    assert used["refit"] == "ok" and used["test"] == 0.72346 and used["submission"]
    cut = large_rows.run_facts(_record(Refit(status="cut", test_after_refit=0.73)))
    assert cut["refit"] == "cut" and cut["test"] == 0.71  # the first fit was submitted
