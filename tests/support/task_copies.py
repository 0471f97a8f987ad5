"""Task recipes built in temporary folders and scripts run beside copies of their public files, as
child processes: independent of the package's runner and grader, and never touching the task folders
in the repository."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
SOLUTIONS = REPO / "casebank" / "solutions"


def build(name: str, where: Path) -> Path:
    """A copy of the task's recipe with data/ and private/ built next to it."""
    folder = where / name
    folder.mkdir(parents=True)
    shutil.copy2(TASKS / name / "prepare.py", folder / "prepare.py")
    proc = subprocess.run([sys.executable, "prepare.py"], cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return folder


def run_in_workspace(folder: Path, script: Path, workspace: Path, metric: str) -> float:
    """Run `script` as train.py in `workspace` holding only the public files; the last validation
    score it prints. What it wrote stays in `workspace`."""
    workspace.mkdir()
    for public in (folder / "data").iterdir():
        shutil.copy2(public, workspace / public.name)
    shutil.copy2(script, workspace / "train.py")
    proc = subprocess.run([sys.executable, "train.py"], cwd=workspace, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = re.findall(rf"Validation {metric}:\s*([-+0-9.eE]+)", proc.stdout)
    assert printed, proc.stdout[-2000:]
    return float(printed[-1])


def dsagent_folder(concrete, root: Path, *, two_arguments: bool = False) -> Path:
    """A folder in DS-Agent's benchmark layout, built from the real concrete data: test.csv holds the
    labels, and submission.py reads them itself (or, in the older two-argument form, gets y_true)."""
    env, scripts = root / "env", root / "scripts"
    env.mkdir(parents=True)
    scripts.mkdir()
    shutil.copy(concrete.public_dir / "train.csv", env / "train.csv")
    test = pd.read_csv(concrete.public_dir / "test.csv").merge(pd.read_csv(concrete.private_dir / "answers.csv"))
    test.to_csv(env / "test.csv", index=False)
    (scripts / "research_problem.txt").write_text(
        "You are solving this machine learning task of regression: predict the compressive strength of "
        "concrete. The evaluation metric is root mean squared error (RMSE). Fill in train.py.")
    if two_arguments:
        submission = """
            import numpy as np
            def submit_predictions_for_test_set(y_true, y_pred):
                rmse = float(np.sqrt(np.mean((np.asarray(y_true) - np.asarray(y_pred)) ** 2)))
                print("final RMSE on test set: ", rmse)
        """
        submit = 'submit_predictions_for_test_set(test["compressive_strength"], model.predict(test[cols]))'
    else:
        submission = """
            import numpy as np
            import pandas as pd
            def submit_predictions_for_test_set(y_pred):
                y_true = pd.read_csv("test.csv")["compressive_strength"].to_numpy()
                rmse = float(np.sqrt(np.mean((y_true - np.asarray(y_pred, dtype=float)) ** 2)))
                print("final RMSE on test set: ", rmse)
        """
        submit = "submit_predictions_for_test_set(model.predict(test[cols]))"
    (env / "submission.py").write_text(textwrap.dedent(submission))
    (env / "train.py").write_text(textwrap.dedent("""
        import numpy as np
        import pandas as pd
        from sklearn.linear_model import LinearRegression
        from sklearn.model_selection import train_test_split
        from submission import submit_predictions_for_test_set
        train, test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
        cols = [c for c in train.columns if c not in ("id", "compressive_strength")]
        X_train, X_valid, y_train, y_valid = train_test_split(train[cols], train["compressive_strength"],
                                                              test_size=0.2, random_state=42)
        model = LinearRegression().fit(X_train, y_train)
        print("final RMSE on validation set: ", float(np.sqrt(np.mean((model.predict(X_valid) - y_valid) ** 2))))
        SUBMIT
    """).replace("SUBMIT", submit))
    return root
