"""`cbr predict`: each call writes into a folder of its own, made atomically, even when two start in the
same second (they once shared one: the second's script ran in the first's folder); and it predicts as the
run's submission did, a blend's members each as the submission took them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.fakes import FakeBank

from dsagent_cbr.agent.develop import DevelopConfig
from dsagent_cbr.agent.record import Refit, Row, RunRecord
from dsagent_cbr.agent.seams import SandboxExecutor
from dsagent_cbr.commands.predict_blend import submitted_blend
from dsagent_cbr.commands.predict_cmd import cut_rounds, predict_rows
from dsagent_cbr.files import fresh_folder
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy, bwrap_problem
from dsagent_cbr.search import loop
from dsagent_cbr.search.loop import develop_search

REPO = Path(__file__).resolve().parents[1]


def test_a_name_drawn_twice_in_one_second_is_drawn_again(tmp_path, monkeypatch):
    draws = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr("dsagent_cbr.files.secrets.token_hex", lambda _: next(draws))
    monkeypatch.setattr("dsagent_cbr.files.time.strftime", lambda _: "20260101-000000")
    first, second = fresh_folder(tmp_path, "predict-"), fresh_folder(tmp_path, "predict-")
    assert (first.name, second.name) == ("predict-20260101-000000-aaaa", "predict-20260101-000000-bbbb")
    assert first.is_dir() and second.is_dir()


def blend_record(run: Path, refit: Refit | None) -> None:
    rows = [Row(iteration=1, script="step-01/script.py"), Row(iteration=2, script="step-02/script.py"),
            Row(iteration=3, script="step-03/script.py", operator="ensemble", members={1: 0.9, 2: 0.1})]
    record = RunRecord(kind="search", task="t", model="none", metric="rmse", direction="minimize", run_dir=str(run), rows=rows,
                       best_iteration=3, refit=refit)
    run.mkdir(exist_ok=True)
    (run / "summary.json").write_text(record.model_dump_json())


@pytest.mark.parametrize(("refit", "took"), [
    (None, {1: False, 2: False}),  # no refit: the blend of first fits
    (Refit(status="skipped"), {1: False, 2: False}),
    (Refit(status="ok", first_fits=[]), {1: True, 2: True}),
    (Refit(status="ok", first_fits=[2]), {1: True, 2: False}),
    # a record from before first_fits was kept: its agreement says which
    (Refit(status="ok", agreement="node 1 (0.9) refit; node 2 (0.1) first fit"), {1: True, 2: False}),
])
def test_predict_runs_each_member_of_a_blend_as_the_submission_took_it(tmp_path, refit, took):
    blend_record(tmp_path / "run", refit)
    fits = submitted_blend(tmp_path / "run")
    assert {f.node.iteration: f.refit for f in fits} == took and [f.weight for f in fits] == [0.9, 0.1]


@pytest.mark.parametrize(("rounds", "said"), [
    (None, []), ([[87, 87]], []), ([[87, 120]], []),  # kept the first fit's rounds (one built more)
    ([[87, 61], [40, 40]], ["61 of 87 rounds"]),  # cut at its deadline: predict cannot remake it exactly
    ([["87", 61], [1]], []),  # what is not a pair of counts says nothing
])
def test_predict_says_when_the_run_s_refit_was_cut_at_its_deadline(rounds, said):
    assert cut_rounds({"status": "ok", "rounds": rounds}) == said


@pytest.mark.slow
@pytest.mark.skipif(bwrap_problem() is not None, reason="needs bubblewrap")
def test_two_predicts_at_once_write_two_folders(tmp_path, concrete):
    """A run folder as deploy leaves it (config.json naming the task, best_solution.py), the starter
    as its solution, and two `cbr predict` started together on the same rows."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"task_dir": str(concrete.root)}))
    (run / "best_solution.py").write_text(concrete.starter.read_text())
    pd.read_csv(concrete.public_dir / "test.csv").head(20).to_csv(tmp_path / "new.csv", index=False)
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "dsagent_cbr.cli", "predict", str(run), str(tmp_path / "new.csv")]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in outputs]
    folders = sorted(run.glob("predict-*"))
    assert len(folders) == 2 and all((f / "submission.csv").is_file() for f in folders)
    said = sorted(next(line for line in out.splitlines() if line.startswith("predictions:")) for out, _ in outputs)
    assert said == [f"predictions: {f / 'submission.csv'}" for f in folders]
    assert all(len(pd.read_csv(f / "submission.csv")) == 20 for f in folders)


class LosingTheSecondRefit(SandboxExecutor):
    """The sandbox, where the second refit fails, as one its deadline cut would be lost: the search
    refits the blend's members heaviest first, so the second heaviest is submitted as its first fit."""

    refits = 0

    def run(self, code, folder, refit=False, *args, **kwargs):
        self.refits += refit
        lost = refit and self.refits == 2
        return super().run("raise SystemExit(1)\n" if lost else code, folder, refit, *args, **kwargs)


@pytest.mark.slow
@pytest.mark.skipif(bwrap_problem() is not None, reason="needs bubblewrap")
def test_predict_repeats_a_blend_that_took_a_member_s_first_fit(tmp_path, concrete, monkeypatch):
    """A real search on concrete-strength whose blend is submitted (taken over any single node) with its
    second member's refit lost: `cbr predict` on rows the run scored gives the submission's values."""
    monkeypatch.setattr(loop, "submitted_choice", lambda blend, *_: blend)
    run = tmp_path / "run"
    executor = LosingTheSecondRefit(concrete, SandboxPolicy(timeout=120))
    record = develop_search(concrete, DevelopConfig(iterations=3, refit=True), run, FakeBank(), executor)
    best = next(r for r in record.rows if r.iteration == record.best_iteration)
    assert best.operator == "ensemble" and len(best.members) >= 2, best
    assert record.refit.status == "ok" and 0 < record.refit.share < 1, record.refit
    second = sorted(best.members, key=lambda t: -best.members[t])[1]
    assert record.refit.first_fits == [second] and f"node {second} (" in record.refit.agreement

    rows = pd.read_csv(concrete.public_dir / "test.csv").iloc[::7].head(30)
    rows.to_csv(tmp_path / "again.csv", index=False)
    out, notes = predict_rows(run, tmp_path / "again.csv", task_dir=str(concrete.root))
    assert any(f"node {second} ({best.members[second]:g}, first fit)" in note for note in notes), notes
    again = pd.read_csv(out)
    submitted = pd.read_csv(run / "submission.csv").set_index("id").loc[rows["id"]].reset_index()
    assert again["id"].tolist() == rows["id"].tolist()
    target = concrete.target[0]
    np.testing.assert_allclose(again[target], submitted[target], rtol=1e-9, atol=1e-12)
