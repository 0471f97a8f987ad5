"""`cbr tasks export TASK OUT --layout dsagent`: our tasks in DS-Agent's layout, loaded by the loader, run
by the runner, and scored by their own submission.py, with and without the test labels in sight."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import prepared

from dsagent_cbr.harness import workspace
from dsagent_cbr.harness.plan import hold_out
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.tasks.export import dsagent_copy, export_dsagent
from dsagent_cbr.tasks.loader import load_task

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]
# What a grader that hides the test labels puts in the workspace instead of submission.py: it keeps the
# predictions, which are then loaded without pickle.
SAVER = textwrap.dedent("""
    import numpy as np
    def submit_predictions_for_test_set(*args):
        np.save("predictions.npy", np.asarray(args[-1]), allow_pickle=False)
""")


def python(code: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_export_writes_dsagent_layout_that_loads(tmp_path):
    task = prepared("mlc-churn")
    folder = export_dsagent(task, tmp_path / "churn")
    assert sorted(p.name for p in (folder / "env").iterdir()) == ["submission.py", "test.csv", "train.csv", "train.py"]
    loaded = load_task(folder)
    assert (loaded.layout, loaded.modality, loaded.metric_name, loaded.direction) == (
        "dsagent", "tabular", "auroc", "maximize")
    assert loaded.test_pattern == "final AUROC on test set"
    test = pd.read_csv(folder / "env" / "test.csv")
    public = pd.read_csv(task.public_dir / "test.csv")
    answers = pd.read_csv(task.private_dir / "answers.csv")
    assert list(test.columns) == [*public.columns, "churn"] and len(test) == len(public)
    assert test.set_index("id")["churn"].equals(answers.set_index("id")["churn"].loc[test["id"]])
    problem = (folder / "scripts" / "research_problem.txt").read_text()
    assert problem.startswith(task.description[:80]) and "AUROC" in problem and "`churn`" in problem
    # the label column is named in submission.py, and the starter reads test.csv's feature columns only
    submission = ast.parse((folder / "env" / "submission.py").read_text())
    assert ["churn"] in [ast.literal_eval(n.value) for n in submission.body if isinstance(n, ast.Assign)]
    assert "test[X.columns]" in (folder / "env" / "train.py").read_text()


@pytest.mark.integration
def test_cli_exports_and_refuses_plainly(tmp_path):
    prepared("concrete-strength")
    out = tmp_path / "concrete"
    proc = subprocess.run([*CBR, "tasks", "export", "concrete-strength", str(out), "--layout", "dsagent"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and str(out) in proc.stdout, proc.stderr
    again = subprocess.run([*CBR, "tasks", "export", "concrete-strength", str(out)], capture_output=True, text=True)
    assert again.returncode == 2 and "already exists" in again.stderr and "Traceback" not in again.stderr
    nested = subprocess.run([*CBR, "tasks", "export", str(out), str(tmp_path / "x")], capture_output=True, text=True)
    assert nested.returncode == 2 and "already in the dsagent layout" in nested.stderr
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob(".*export*"))


# One task per modality, and every kind of label: a value, several values, labels, a positive class
# given by name, one probability per class, and arrays.
SCORED_AS_OURS = ["concrete-strength", "elec-demand"]
SLOW_SCORED_AS_OURS = ["rotten-tomatoes", "basic-motions", "pbc-status", "mlc-churn", "yeast-multilabel",
                       "movie-snippets-sentiment", "trump-tweets-device", "fine-foods-rating"]


def _scores_as_ours(name: str, root: Path) -> None:
    """The exported starter runs in the runner and scores exactly as our starter (same split, guesses
    and metric); run again with the labels out of sight and scored by the original submission.py apart,
    it gives the same test score."""
    task = prepared(name)
    copy = dsagent_copy(task, root / "exports" / name)
    ours = run_script(task, task.starter, run_dir=root / "ours")
    theirs = run_script(copy, copy.starter, run_dir=root / "theirs")
    assert ours.ok and theirs.ok, (ours.error, theirs.error)
    assert theirs.valid_metric == pytest.approx(ours.valid_metric, abs=1e-6)
    assert theirs.test_metric == pytest.approx(ours.test_metric, rel=1e-9)

    hidden, held = root / "hidden", hold_out(copy)  # the same selection rows held back as in the runner
    shutil.copytree(copy.public_dir, hidden)
    (hidden / "submission.py").write_text(SAVER)
    if copy.modality in ("tabular", "text"):
        test = pd.read_csv(hidden / "test.csv")
        test.drop(columns=list(task.target)).to_csv(hidden / "test.csv", index=False)
    else:
        (hidden / "y_test.npy").unlink()
    workspace.build(copy, held, root / "built", "print(1)\n")  # the files the held rows change, as a run sees them
    for name in (held.source, copy.test_file, "y_train.npy", "X_test.npy"):
        if name and (root / "built" / name).is_file():
            shutil.copyfile(root / "built" / name, hidden / name)
    python("import runpy; runpy.run_path('train.py', run_name='__main__')", hidden)
    np.save(hidden / "test-rows.npy", held.unmix(np.load(hidden / "predictions.npy"))[:held.test_rows])
    printed = python("import numpy as np\nfrom submission import submit_predictions_for_test_set as submit\n"
                     f"submit(np.load({str(hidden / 'test-rows.npy')!r}, allow_pickle=False))", copy.public_dir)
    score = re.fullmatch(r"final [\w ]+ on test set: (\S+)\n", printed)
    assert score, printed
    assert float(score.group(1)) == pytest.approx(theirs.test_metric, rel=1e-9)


@pytest.mark.integration
@pytest.mark.parametrize("name", SCORED_AS_OURS)
def test_exported_starter_scores_as_ours_with_labels_hidden(name, tmp_path):
    _scores_as_ours(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_SCORED_AS_OURS)
def test_exported_starter_scores_as_ours_more_label_kinds(name, tmp_path):
    _scores_as_ours(name, tmp_path)


def test_npy_export_names_its_label_file(tmp_path):
    task = prepared("elec-demand")
    copy = dsagent_copy(task, tmp_path / "elec")
    assert np.array_equal(np.load(copy.public_dir / "y_test.npy"), np.load(task.private_dir / "y_test.npy"))
    assert 'np.load("y_test.npy"' in (copy.public_dir / "submission.py").read_text()
    assert "y_test" not in (copy.public_dir / "train.py").read_text()
