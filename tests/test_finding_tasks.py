"""A new user's walk, in a working folder of their own outside the checkout: `tasks new` from a
Kaggle-shaped folder, then `tasks show NAME`, `tasks list`, `tasks validate` and develop, by name and
by path, all find the user's task (tasks/finding.py: one rule for every command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cbr(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CBR_HOME": str(home), "CBR_STORE": "faiss"}
    env.pop("CBR_TASKS_DIR", None)
    return subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    assert cbr("tasks", "kaggle-example", "credit", "credit-data", cwd=work, home=home).returncode == 0
    made = cbr("tasks", "new", "tasks/credit-scoring", "--from-kaggle-folder", "credit-data", cwd=work, home=home)
    assert made.returncode == 0, made.stderr
    return work, home


@pytest.mark.integration
def test_task_commands_find_the_users_task_first(workdir):
    work, home = workdir
    shown = cbr("tasks", "show", "credit-scoring", cwd=work, home=home)
    assert shown.returncode == 0 and str(work / "tasks" / "credit-scoring") in shown.stdout, shown.stderr
    listed = cbr("tasks", "list", cwd=work, home=home)
    lines = listed.stdout.splitlines()
    mine = next(line for line in lines if "credit-scoring" in line)  # whole, off a terminal
    assert "yours" in mine and any("recipe" in line and "concrete-strength" in line for line in lines)
    assert lines.index(mine) < next(i for i, line in enumerate(lines) if "concrete-strength" in line)
    rows = json.loads(cbr("tasks", "list", "--json", cwd=work, home=home).stdout)["tasks"]
    assert rows[0]["name"] == "credit-scoring" and rows[0]["where"] == "yours"
    everything = cbr("tasks", "validate", cwd=work, home=home)  # recipes need not be prepared
    assert everything.returncode == 0, everything.stderr
    folder = cbr("tasks", "validate", "tasks/", cwd=work, home=home)  # a folder of task folders
    assert folder.returncode == 0 and "1 task folder(s) valid" in folder.stdout, folder.stderr
    missing = cbr("tasks", "show", "no-such-task", cwd=work, home=home)
    assert missing.returncode == 2 and str(work / "tasks") in missing.stderr


@pytest.mark.slow
def test_develop_finds_the_users_task_by_name_and_by_path(workdir):
    work, home = workdir
    records = []
    for given, retain in (("credit-scoring", "--no-retain"), ("tasks/credit-scoring", None)):
        run = cbr("develop", given, "--model", "none", "-T", "1", "--json", *([retain] if retain else []),
                  cwd=work, home=home)
        assert run.returncode == 0, run.stderr[-2000:]
        records.append(json.loads(run.stdout))
        assert records[-1]["task"] == "credit-scoring" and (work / records[-1]["run_dir"]).is_dir()
    kept, not_kept = records[1]["retained"], records[0]["retained"]
    assert not_kept == [] and len(kept) == 1  # --no-retain kept the first run out of the bank
    listed = cbr("bank", "list", "--kind", "solution", "--retained", cwd=work, home=home).stdout.splitlines()
    assert [line.split()[0] for line in listed] == [kept[0]["solution"]]
    assert f"run {Path(records[1]['run_dir']).name}, iteration 1" in listed[0]
