"""The Python API (dsagent_cbr/api/): `import dsagent_cbr` stays light, a DataFrame becomes the task
`cbr tasks new` makes of the same rows, and the calls run real searches, deploys, predictions and an
analysis (a scripted model standing in for one) with short budgets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import dsagent_cbr
from dsagent_cbr.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBR_HOME", str(tmp_path / "home"))
    return tmp_path


def cancer() -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

    return load_breast_cancer(as_frame=True).frame


def test_import_dsagent_cbr_and_its_api_load_nothing_heavy():
    code = (
        "import sys, time\nstart = time.perf_counter()\nimport dsagent_cbr\n"
        "calls = [dsagent_cbr.develop, dsagent_cbr.analyze, dsagent_cbr.runs, dsagent_cbr.Run]\n"
        "print(round(time.perf_counter() - start, 3), [m for m in ('pandas', 'numpy', 'torch', "
        "'sklearn', 'click', 'pydantic') if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    seconds, heavy = proc.stdout.split(" ", 1)
    assert heavy.strip() == "[]", proc.stdout + proc.stderr
    assert float(seconds) < 0.5  # 0.03 s here
    assert "develop" in dir(dsagent_cbr) and dsagent_cbr.develop is dsagent_cbr.api.develop


def test_a_dataframe_becomes_the_task_tasks_new_makes_of_its_rows(here, capsys):
    from dsagent_cbr.api.tables import task_folder

    frame = cancer().head(120)
    frame.to_csv(here / "cancer.csv", index=False)
    made = Path(task_folder(frame, "target", None, {"holdout": 0.25}, here / "made", "cancer"))
    said = capsys.readouterr().out
    assert made.parent == here / "made" and made.name.startswith("cancer-")
    assert "metric:     auroc, higher is better" in said and f"wrote:      {made}/" in said
    assert (
        main(
            [
                "tasks",
                "new",
                str(here / "by-hand"),
                "--train",
                "cancer.csv",
                "--target",
                "target",
                "--holdout",
                "0.25",
            ]
        )
        == 0
    )
    for name in ("train.py", "data/train.csv"):  # the held-out rows' ids are dealt at random
        assert (made / name).read_bytes() == (here / "by-hand" / name).read_bytes(), name

    def toml(folder: Path) -> list[str]:
        lines = (folder / "task.toml").read_text().splitlines()
        return [line for line in lines if not line.startswith(("name =", "source ="))]

    assert toml(made) == toml(here / "by-hand")
    # the same rows again: the same folder, not a second one
    assert task_folder(frame, "target", None, {"holdout": 0.25}, here / "made", "cancer") == str(
        made
    )
    assert "the task made of this table before" in capsys.readouterr().err
    # an option given as None is one not given (deploy passes fewer than develop)
    again = {"holdout": 0.25, "metric": None, "id_column": None}
    assert task_folder(frame, "target", None, again, here / "made", "cancer") == str(made)
    other = task_folder(frame, "mean radius", None, {"holdout": 0.25}, here / "made", "cancer")
    assert other != str(made) and len(list((here / "made").iterdir())) == 2


def test_a_misspelt_target_of_a_dataframe_is_the_command_s_sentence(here):
    from dsagent_cbr.errors import CbrError

    with pytest.raises(CbrError, match=r"no target column 'targt' \(did you mean target\?\)"):
        dsagent_cbr.develop(cancer().head(60), target="targt", budget="20s", runs_dir=here / "runs")


@pytest.mark.slow
def test_develop_predict_deploy_and_runs_on_a_dataframe(here, capsys):
    frame = cancer()
    train, new = frame.iloc[:500], frame.iloc[500:].drop(columns="target")
    run = dsagent_cbr.develop(
        train, target="target", budget="25s", runs_dir=here / "runs", store="faiss", name="cancer"
    )
    said = capsys.readouterr()
    assert "developing cancer-" in said.err and "iteration 1 (draft): ok, auroc" in said.err
    assert f"run:             {run.folder}" in said.out and run.folder.is_dir()
    assert (
        run.record.outcome == "ok" and run.record.best_test is not None
    )  # the hold-out is labelled
    assert len(run.submission) == 100 and list(run.submission.columns) == ["id", "target"]
    board = run.leaderboard
    assert list(board.columns) == [
        "operator",
        "learner",
        "selection",
        "low",
        "high",
        "seconds",
        "status",
    ]
    # the chosen row (a blend's cross-fitted score may sit below a single node's best-of-many one)
    assert board.loc[run.record.best_iteration, "selection"] == run.record.best_score
    single = board[board["operator"] != "ensemble"].iloc[0]
    assert single["low"] <= single["selection"] <= single["high"]
    assert run.report.startswith("# cbr search: cancer-") and run.report._repr_markdown_()
    predicted = run.predict(new)
    assert len(predicted) == len(new) and predicted["target"].between(0, 1).all()
    listed = dsagent_cbr.runs(runs_dir=here / "runs")
    assert listed.iloc[0]["folder"] == str(run.folder.resolve())
    deployed = dsagent_cbr.deploy(
        train, target="target", runs_dir=here / "runs", store="faiss", name="cancer"
    )
    assert deployed.record.kind == "deploy" and len(deployed.submission) == 100
    # the same table: the task made the first time
    assert Path(deployed.record.run_dir).parent.name == run.folder.parent.name


@pytest.mark.slow
def test_analyze_a_dataframe_answers_with_items_and_a_notebook(here, monkeypatch):
    from support.scripted_llm import ScriptedLLM

    frame = pd.DataFrame({"price": [1.0, 2.0, 4.5], "kind": ["a", "b", "a"]})
    replies = [
        "1. Compute the mean of the price column and print it.",
        "```python\nprint(round(df['price'].mean(), 2))\n```",
        "The mean price is 2.5.\n@mean_price[2.5]",
    ]
    with ScriptedLLM(replies) as server:
        monkeypatch.setenv("CBR_BASE_URL", server.url)
        monkeypatch.setenv("CBR_API_KEY", "test")
        answer = dsagent_cbr.analyze(
            frame,
            "What is the mean price?",
            format="@mean_price[value]",
            model="scripted",
            budget="2m",
            runs_dir=here / "runs",
            k=0,
        )
    assert answer.outcome == "ok" and answer.items == {"mean_price": "2.5"}
    assert "2.5" in str(answer) and answer.notebook.is_file() and answer.folder.is_dir()
