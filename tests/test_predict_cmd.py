"""`cbr predict`: each call writes into a folder of its own, made atomically, even when two start in the
same second (they once shared one: the second's script ran in the first's folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dsagent_cbr.files import fresh_folder
from dsagent_cbr.sandbox.bubblewrap import bwrap_problem

REPO = Path(__file__).resolve().parents[1]


def test_a_name_drawn_twice_in_one_second_is_drawn_again(tmp_path, monkeypatch):
    draws = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr("dsagent_cbr.files.secrets.token_hex", lambda _: next(draws))
    monkeypatch.setattr("dsagent_cbr.files.time.strftime", lambda _: "20260101-000000")
    first, second = fresh_folder(tmp_path, "predict-"), fresh_folder(tmp_path, "predict-")
    assert (first.name, second.name) == ("predict-20260101-000000-aaaa", "predict-20260101-000000-bbbb")
    assert first.is_dir() and second.is_dir()


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
