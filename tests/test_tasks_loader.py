"""Task folders: ours, DS-Agent's, and malformed ones, through the real `cbr` command."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.task_copies import dsagent_folder

from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.loader import load_task

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]


def cbr(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CBR, *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.integration
def test_malformed_task_folder_one_line_per_problem(tmp_path):
    bad = tmp_path / "bad-task"
    bad.mkdir()
    (bad / "task.toml").write_text(textwrap.dedent("""
        name = "bad-task"
        modality = "audio"
        task_type = "regression"
        metric = "f7-score"
        stage = "deployment"
        [data]
        format = "csv"
        public = ["train.csv"]
        predictions = "submission.csv"
    """))
    (bad / "train.py").write_text("def train_model(:\n")
    proc = cbr("tasks", "validate", str(bad))
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(str(bad.resolve()))]
    expected = ["modality 'audio'", "unknown metric", "paired_with", "id_column",
                "data.target", "description.md", "does not parse"]
    for fragment in expected:
        assert sum(fragment in ln for ln in lines) == 1, (fragment, proc.stderr)
    assert len(lines) == len(expected)
    assert "Traceback" not in proc.stderr


@pytest.mark.integration
def test_not_a_task_folder(tmp_path):
    proc = cbr("tasks", "validate", str(tmp_path))
    assert proc.returncode == 2 and "missing task.toml" in proc.stderr


@pytest.mark.integration
@pytest.mark.parametrize("two_arguments", [False, True])
def test_dsagent_layout_is_graded_outside_without_labels(concrete, tmp_path, two_arguments):
    folder = dsagent_folder(concrete, tmp_path / "concrete-dsagent", two_arguments=two_arguments)
    task = load_task(folder)
    assert task.layout == "dsagent" and task.metric_name == "rmse" and task.direction == "minimize"
    assert task.modality == "tabular" and task.task_type == "regression"
    assert task.dsagent.label_columns == ("compressive_strength",)
    assert "submission.py" in task.public_files and "train.py" not in task.public_files
    result = run_script(task, task.starter, run_dir=tmp_path / "run")
    assert result.ok, result.error
    assert 5 < result.valid_metric < 20 and 5 < result.test_metric < 20  # a linear model: about 10 MPa
    probe = run_script(task, "import pandas as pd\nt = pd.read_csv('test.csv')\nprint('LABEL', "
                       "t['compressive_strength'].nunique())\n", run_dir=tmp_path / "probe")
    assert "LABEL 1" in probe.stdout  # the script's test.csv keeps the column, one constant, in both forms
    assert "final RMSE on test set" not in result.stdout  # the script's copy of submission.py only saves
    proc = cbr("tasks", "show", str(folder))
    assert proc.returncode == 0 and "dsagent" in proc.stdout


@pytest.mark.integration
def test_cbr_run_prints_metrics_and_writes_json(concrete, tmp_path):
    proc = cbr("run", str(concrete.root), str(concrete.starter), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "validation:" in proc.stdout and "test:" in proc.stdout
    assert (tmp_path / "r" / "result.json").is_file()


def test_cbr_help_does_not_import_heavy_libraries():
    code = ("import sys\nfrom dsagent_cbr.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'chromadb', 'sentence_transformers', 'scrapy') if m in sys.modules]\n"
            "print('HEAVY', heavy)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr
    assert "develop" in proc.stdout and "ingest-kaggle" in proc.stdout
