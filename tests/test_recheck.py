"""`cbr bank recheck`: retained solutions graded again by today's harness. One that scored by reading the
held rows' labels in a sample submission (as the builder once allowed) is dropped with its insight; an
honest one is kept. Real scripts in the real sandbox, on a small Kaggle-shaped task."""

from __future__ import annotations

import pytest
from support.layouts import every_layout

from dsagent_cbr.agent.recheck import recheck
from dsagent_cbr.bank.cases import Case
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox import SandboxPolicy

# What the builder once let through: the sample submission held the held rows' labels, so a copy of it
# scored RMSE 0.0 on them.
COPIES_THE_SAMPLE = "import shutil\nshutil.copy('sample_submission.csv', 'submission.csv')\n"
HONEST = """import pandas as pd
from sklearn.linear_model import LinearRegression
train, test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
features = ["x1", "x2"]
model = LinearRegression().fit(train[features], train["price"])
pd.DataFrame({"id": test["id"], "price": model.predict(test[features])}).to_csv("submission.csv", index=False)
"""


class RetainedOnly:
    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases

    def list(self, kind: str = "insight", where: dict | None = None) -> list[Case]:
        return [c for c in self.cases if c.kind == kind and c.source_kind == "retained"]

    def remove(self, ids: list[str]) -> list[str]:
        self.cases = [c for c in self.cases if c.id not in ids]
        return ids


def retained(task: str, script: str, score: float, run: str) -> list[Case]:
    extra = {"run": run, "iteration": 1}
    return [Case(kind="solution", text="t", source_kind="retained", task_name=task, script=script,
                 selection_score=score, metric="rmse", modality="tabular", task_type="regression", extra=extra),
            Case(kind="insight", text=f"how {run} went", source_kind="retained", task_name=task, extra=extra,
                 modality="tabular", task_type="regression")]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return every_layout(tmp_path_factory.mktemp("layouts"))["kaggle-sample-regression"]


@pytest.mark.integration
def test_a_solution_that_read_the_held_labels_is_dropped_and_an_honest_one_kept(task, tmp_path):
    honest_score = run_script(task, HONEST, run_dir=tmp_path / "honest").selection_metric
    bank = RetainedOnly([*retained(task.name, COPIES_THE_SAMPLE, 0.0, "leaky"),
                         *retained(task.name, HONEST, honest_score, "honest"),
                         *retained("elsewhere", HONEST, 1.0, "other")])
    verdicts = {v.case.extra["run"]: v for v in recheck(bank, {task.name: task}, SandboxPolicy(timeout=60),
                                                          tmp_path / "runs")}
    assert verdicts["leaky"].outcome == "dropped" and "labels it was shown" in verdicts["leaky"].why
    assert verdicts["honest"].outcome == "kept" and verdicts["other"].outcome == "not checked"
    assert {c.extra["run"] for c in bank.cases} == {"honest", "other"}  # the leaky pair, solution and insight, went
    assert len(bank.cases) == 4
