"""`cbr tasks new` on real datasets shaped as Kaggle folders: what it infers, the folder it writes (task,
starter, data card, hold-out), and one clear sentence with exit 2 and no half-made folder for bad input.
Everything goes through the real `cbr` command; the starters run as child processes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support.task_copies import build, dsagent_folder

from dsagent_cbr.tasks.datacard import data_card
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.recipes.kaggle_folders import FEEDBACK_SCORES, FOLDERS
from dsagent_cbr.tasks.sources import folder_sources

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]


def cbr(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CBR, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kaggle")
    return {name: make(root / name) for name, make in FOLDERS.items()}


def new_task(dest: Path, *args: str | Path) -> tuple[subprocess.CompletedProcess, dict]:
    proc = cbr("tasks", "new", dest, *args)
    assert proc.returncode == 0, proc.stderr
    return proc, tomllib.loads((dest / "task.toml").read_text())


def run_starter(task_dir: Path, workspace: Path) -> tuple[float, pd.DataFrame]:
    """The starter as train.py beside copies of the public files; its validation score and submission."""
    shutil.copytree(task_dir / "data", workspace)
    shutil.copy2(task_dir / "train.py", workspace / "train.py")
    proc = subprocess.run([sys.executable, "train.py"], cwd=workspace, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("Validation ")][-1]
    return float(line.split(":")[1]), pd.read_csv(workspace / "submission.csv")


@pytest.mark.slow
def test_kaggle_folders_are_inferred_and_starters_write_the_sample_format(kaggle, tmp_path):
    expected = {
        "credit": ("tabular", "binary-classification", "auroc", ["Status"], "id"),
        "debates": ("tabular", "multiclass-classification", "accuracy", ["party"], "id"),
        "feedback": ("text", "regression", "mcrmse", FEEDBACK_SCORES, "text_id"),
    }
    for name, (modality, task_type, metric, target, idc) in expected.items():
        proc, spec = new_task(tmp_path / name, "--from-kaggle-folder", kaggle[name])
        assert (spec["modality"], spec["task_type"], spec["metric"]) == (modality, task_type, metric)
        assert spec["data"]["target"] == target and spec["data"]["id_column"] == idc
        assert "answers" not in spec["data"] and not (tmp_path / name / "private").exists()
        assert spec["source"] == (kaggle[name] / "source.txt").read_text().strip()
        assert spec["sources"] == list(folder_sources(kaggle[name])) and spec["sources"]
        for word in (modality, task_type, metric):
            assert word in proc.stdout
        task = load_task(tmp_path / name, require_data=True)
        assert not task.has_answers and task.test_file == "test.csv"
        _, submission = run_starter(tmp_path / name, tmp_path / f"ws-{name}")
        sample = pd.read_csv(kaggle[name] / "sample_submission.csv")
        assert list(submission.columns) == list(sample.columns)
        assert submission[idc].tolist() == sample[idc].tolist()
    assert "TEXT = \"full_text\"" in (tmp_path / "feedback" / "train.py").read_text()
    assert "POSITIVE = \"good\"" in (tmp_path / "credit" / "train.py").read_text()


@pytest.mark.integration
def test_test_rows_follow_sample_submission_order(kaggle, tmp_path):
    folder = tmp_path / "shuffled"
    shutil.copytree(kaggle["credit"], folder)
    test = pd.read_csv(folder / "test.csv")
    test.sample(frac=1.0, random_state=3).to_csv(folder / "test.csv", index=False)
    new_task(tmp_path / "credit", "--from-kaggle-folder", folder)
    written = pd.read_csv(tmp_path / "credit" / "data" / "test.csv")
    assert written["id"].tolist() == pd.read_csv(folder / "sample_submission.csv")["id"].tolist()
    pd.testing.assert_frame_equal(written.set_index("id").sort_index(), test.set_index("id").sort_index())


@pytest.mark.slow
def test_suite_data_without_sample_multilabel_logloss_regression(tmp_path):
    """Other shapes, from the suite's recipes built in a temporary folder: several 0/1 targets read from
    the columns test.csv lacks; one probability column per class in a sample; a numeric target."""
    yeast = build("yeast-multilabel", tmp_path / "built")
    _, spec = new_task(tmp_path / "yeast", "--train", yeast / "data" / "train.csv", "--test",
                       yeast / "data" / "test.csv")
    assert spec["task_type"] == "multilabel-classification" and spec["metric"] == "auroc"
    assert spec["data"]["target"] == [f"Class{i}" for i in range(1, 15)] and spec["data"]["id_column"] == "id"

    pbc = build("pbc-status", tmp_path / "built")
    test = pd.read_csv(pbc / "data" / "test.csv")
    sample = pd.DataFrame({"id": test["id"], "censored": 0.5, "dead": 0.3, "transplant": 0.2})
    sample.to_csv(tmp_path / "pbc-sample.csv", index=False)
    _, spec = new_task(tmp_path / "pbc", "--train", pbc / "data" / "train.csv", "--test", pbc / "data" / "test.csv",
                       "--sample-submission", tmp_path / "pbc-sample.csv")
    assert spec["task_type"] == "multiclass-classification" and spec["metric"] == "logloss"
    assert spec["data"]["target"] == ["status"] and spec["data"]["classes"] == ["censored", "dead", "transplant"]
    score, submission = run_starter(tmp_path / "pbc", tmp_path / "ws-pbc")
    assert list(submission.columns) == ["id", "censored", "dead", "transplant"] and score > 0.5

    concrete = build("concrete-strength", tmp_path / "built")
    proc, spec = new_task(tmp_path / "concrete", "--train", concrete / "data" / "train.csv", "--test",
                          concrete / "data" / "test.csv", "--metric", "mae")
    assert (spec["modality"], spec["task_type"], spec["metric"]) == ("tabular", "regression", "mae")
    assert "from --metric" in proc.stdout


@pytest.mark.integration
def test_holdout_is_seeded_stratified_and_labelled(kaggle, tmp_path):
    runs = []
    for n in (1, 2):
        new_task(tmp_path / f"d{n}" / "debates", "--from-kaggle-folder", kaggle["debates"], "--holdout", "0.2")
        runs.append(tmp_path / f"d{n}" / "debates")
    seeded = [p.relative_to(runs[0]) for p in runs[0].rglob("*") if p.is_file() and p.parent.name != "private"
              and p.name not in ("test.csv", "sample_submission.csv")]
    differ = [p for p in seeded if (runs[0] / p).read_bytes() != (runs[1] / p).read_bytes()]
    assert seeded and not differ, differ
    # the same rows held out, each with the same label; their order and ids are drawn anew (tasks/create.py)
    labelled = [pd.read_csv(r / "data" / "test.csv").merge(pd.read_csv(r / "private" / "answers.csv"), on="id")
                .drop(columns="id").sort_values(["statement", "debate"]).reset_index(drop=True) for r in runs]
    assert labelled[0].equals(labelled[1])
    task = load_task(runs[0], require_data=True)
    assert task.has_answers
    full = pd.read_csv(kaggle["debates"] / "train.csv")
    train = pd.read_csv(runs[0] / "data" / "train.csv")
    test = pd.read_csv(runs[0] / "data" / "test.csv")
    answers = pd.read_csv(runs[0] / "private" / "answers.csv")
    assert list(test.columns) == ["id", "statement", "debate"] and list(answers.columns) == ["id", "party"]
    assert answers["id"].tolist() == test["id"].tolist()
    assert set(train["id"]).isdisjoint(test["id"]) and len(train) + len(test) == len(full)
    assert abs(len(test) / len(full) - 0.2) < 0.01
    shares = answers["party"].value_counts(normalize=True) - full["party"].value_counts(normalize=True)
    assert shares.abs().max() < 0.01  # stratified: each party's share kept
    sample = pd.read_csv(runs[0] / "data" / "sample_submission.csv")
    assert sample["id"].tolist() == test["id"].tolist() and list(sample.columns) == ["id", "party"]


@pytest.mark.integration
def test_data_card_names_every_column_from_public_files_only(kaggle, tmp_path):
    new_task(tmp_path / "credit", "--from-kaggle-folder", kaggle["credit"], "--holdout", "0.2")
    answers = tmp_path / "credit" / "private" / "answers.csv"
    pd.read_csv(answers).assign(SECRET_ANSWER_COLUMN=1).to_csv(answers, index=False)
    card = data_card(load_task(tmp_path / "credit"))
    train = pd.read_csv(tmp_path / "credit" / "data" / "train.csv")
    for column in train.columns:
        assert f"| `{column}` | {train[column].dtype} |" in card
    income = next(ln for ln in card.splitlines() if ln.startswith("| `Income`"))
    share = train["Income"].isna().mean()
    assert f"{100 * share:.1f}%" in income and f"| {train['Income'].nunique():,} |" in income
    counts = train["Status"].value_counts()
    assert f'"good" {counts["good"]:,}' in card and f'"bad" {counts["bad"]:,}' in card
    assert "Id column: `id`" in card and "Metric: auroc (higher is better)" in card
    assert "SECRET_ANSWER_COLUMN" not in card
    assert card == data_card(load_task(tmp_path / "credit"))  # deterministic
    description = (tmp_path / "credit" / "description.md").read_text()
    assert "## Data card" in description and "| `Income` |" in description

    new_task(tmp_path / "feedback", "--from-kaggle-folder", kaggle["feedback"])
    card = data_card(load_task(tmp_path / "feedback"))
    text_row = next(ln for ln in card.splitlines() if ln.startswith("| `full_text`"))
    assert "…" in text_row and len(text_row) < 220  # essays cut to about 60 characters
    assert "Distribution of `rater_disagreement`" in card and "median" in card


@pytest.mark.integration
def test_data_card_of_a_wide_table_is_bounded(tmp_path):
    rng = np.random.default_rng(0)
    concrete = build("concrete-strength", tmp_path / "built")
    base = pd.read_csv(concrete / "data" / "train.csv")
    wide = pd.concat([base] + [base[["cement"]].rename(columns={"cement": f"cement_noise_{i}"}) +
                               rng.normal(size=(len(base), 1)) for i in range(150)], axis=1)
    wide.to_csv(tmp_path / "wide.csv", index=False)
    wide.drop(columns=["compressive_strength"]).head(40).to_csv(tmp_path / "wide-test.csv", index=False)
    new_task(tmp_path / "wide", "--train", tmp_path / "wide.csv", "--test", tmp_path / "wide-test.csv")
    card = data_card(load_task(tmp_path / "wide"))
    rows = [ln for ln in card.splitlines() if ln.startswith("| `")]
    assert len(rows) == 10 and "| `compressive_strength` |" in card and "| `id` |" in card
    assert "- `cement_noise_0` … `cement_noise_149` (150 columns): float64" in card  # one line for the group
    assert "160 columns: 10 listed one by one, 150 in 1 group" in card and len(card) < 4_000


def test_data_card_of_array_and_dsagent_tasks(concrete, tmp_path):
    from conftest import prepared

    card = data_card(prepared("basic-motions"))
    assert "| `X_train.npy` | (40, 6, 100) | float64 |" in card
    assert '"Walking" 10 (25.0%)' in card

    task = load_task(dsagent_folder(concrete, tmp_path / "concrete-dsagent"))
    card = data_card(task)
    assert "Target: `compressive_strength`" in card and "Distribution of `compressive_strength` in `train.csv`" in card
    assert "`test.csv` has the columns of `train.csv` without `compressive_strength`" in card  # labels unseen
    assert "| `cement` |" in card and "Metric: rmse (lower is better)" in card


# ---------------------------------------------------------------- bad input: one sentence, exit 2, nothing left


def _bad(kaggle, tmp_path, edit, *extra: str) -> str:
    folder = tmp_path / "input"
    shutil.copytree(kaggle["credit"], folder)
    edit(folder)
    dest = tmp_path / "tasks" / "credit"
    proc = cbr("tasks", "new", dest, "--from-kaggle-folder", folder, *extra)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("Error: ")
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1, proc.stderr
    assert not dest.exists()
    leftovers = list((tmp_path / "tasks").iterdir()) if (tmp_path / "tasks").exists() else []
    assert not leftovers, leftovers
    return proc.stderr


def _frame_edit(name: str, change):
    def edit(folder: Path) -> None:
        frame = pd.read_csv(folder / name)
        change(frame).to_csv(folder / name, index=False)
    return edit


@pytest.mark.integration
def test_bad_missing_target_column(kaggle, tmp_path):
    err = _bad(kaggle, tmp_path, _frame_edit("sample_submission.csv", lambda d: d.rename(columns={"Status": "Default"})))
    assert "train.csv lacks the target column(s) 'Default'" in err


@pytest.mark.integration
def test_bad_all_missing_target(kaggle, tmp_path):
    err = _bad(kaggle, tmp_path, _frame_edit("train.csv", lambda d: d.assign(Status=np.nan)))
    assert "missing in every row" in err


@pytest.mark.integration
@pytest.mark.parametrize("infinite", ["inf", "-inf", "1e999"])
def test_bad_infinite_target(kaggle, tmp_path, infinite):
    # A numeric target, one row of it infinite (1e999 overflows float64 and is read as inf).
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        target = frame["Amount"].astype(float).astype(str)
        return frame.assign(Status=target.where(frame.index != 3, infinite))
    err = _bad(kaggle, tmp_path, _frame_edit("train.csv", change))
    assert "The target column 'Status' of train.csv holds 1 infinite value(s)" in err


@pytest.mark.integration
def test_bad_test_columns_differ(kaggle, tmp_path):
    err = _bad(kaggle, tmp_path, _frame_edit("test.csv", lambda d: d.drop(columns=["Income"]).assign(Bonus=1)))
    assert "test.csv's columns differ" in err and "'Income'" in err and "'Bonus'" in err


@pytest.mark.integration
def test_bad_non_unique_id(kaggle, tmp_path):
    err = _bad(kaggle, tmp_path, _frame_edit("train.csv", lambda d: d.assign(id=d["id"].where(d.index != 5, d["id"][4]))))
    assert "is not unique" in err


@pytest.mark.integration
def test_bad_metric_for_task_type(kaggle, tmp_path):
    err = _bad(kaggle, tmp_path, lambda f: None, "--metric", "rmse")
    assert "rmse does not fit a binary-classification task" in err


@pytest.mark.integration
def test_bad_csv_that_does_not_parse(kaggle, tmp_path):
    def edit(folder: Path) -> None:
        with (folder / "train.csv").open("a") as handle:
            handle.write("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20\n")
    err = _bad(kaggle, tmp_path, edit)
    assert "does not parse as CSV" in err


@pytest.mark.integration
def test_bad_file_with_no_rows(kaggle, tmp_path):
    def edit(folder: Path) -> None:
        header = (folder / "test.csv").read_text().splitlines()[0]
        (folder / "test.csv").write_text(header + "\n")
    err = _bad(kaggle, tmp_path, edit)
    assert "has a header but no rows" in err


@pytest.mark.integration
def test_existing_destination_is_left_alone(kaggle, tmp_path):
    dest = tmp_path / "credit"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    proc = cbr("tasks", "new", dest, "--from-kaggle-folder", kaggle["credit"])
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


@pytest.mark.integration
def test_kaggle_slug_is_downloaded_through_the_api_on_loopback(kaggle, tmp_path):
    import io
    import os
    import zipfile

    from support.kaggle_loopback import Loopback, raw_reply

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in ("train.csv", "test.csv", "sample_submission.csv"):
            archive.write(kaggle["credit"] / name, name)
        archive.writestr("../../outside.csv", "a,b\n1,2\n")  # a hostile name lands flat in the scratch folder
    with Loopback() as server:
        server.route(r"/api/v1/competitions/data/download-all/credit-scoring",
                     lambda m, q: (302, {"Location": "/storage/credit.zip"}, b""))
        server.route(r"/storage/credit\.zip", lambda m, q: raw_reply(buffer.getvalue(), "application/zip"))
        env = {**os.environ, "CBR_KAGGLE_API": server.api, "KAGGLE_USERNAME": server.username,
               "KAGGLE_KEY": server.key}
        run = [*CBR, "tasks", "new", str(tmp_path / "credit"), "--kaggle", "credit-scoring"]
        proc = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert server.hits["/storage/credit.zip"] == 1
        bad = subprocess.run([*CBR, "tasks", "new", str(tmp_path / "other"), "--kaggle", "credit-scoring"],
                             capture_output=True, text=True, env={**env, "KAGGLE_KEY": "wrong"}, timeout=300)
    spec = tomllib.loads((tmp_path / "credit" / "task.toml").read_text())
    assert spec["task_type"] == "binary-classification" and spec["source"].startswith("Kaggle competition credit-scoring")
    assert not (tmp_path / "outside.csv").exists() and not (tmp_path.parent / "outside.csv").exists()
    assert bad.returncode == 2 and "rejected the credentials (HTTP 401)" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "other").exists()


@pytest.mark.integration
def test_predict_reads_the_run_and_refuses_what_it_cannot_use(kaggle, tmp_path):
    import json

    new_task(tmp_path / "credit", "--from-kaggle-folder", kaggle["credit"])
    run = tmp_path / "run"
    run.mkdir()
    proc = cbr("predict", run, kaggle["credit"] / "test.csv")
    assert proc.returncode == 2 and "holds no best_solution.py or solution.py" in proc.stderr
    shutil.copy2(tmp_path / "credit" / "train.py", run / "best_solution.py")
    (run / "result.json").write_text(json.dumps({"task": "credit"}))  # a deploy run: the task only by name
    proc = cbr("predict", run, kaggle["credit"] / "test.csv")
    assert proc.returncode == 2 and "give it with --task" in proc.stderr
    rows = pd.read_csv(kaggle["credit"] / "test.csv").head(30)
    rows.drop(columns=["Income"]).to_csv(tmp_path / "lacking.csv", index=False)
    proc = cbr("predict", run, tmp_path / "lacking.csv", "--task", tmp_path / "credit")
    assert proc.returncode == 2 and "lacks the column(s) 'Income'" in proc.stderr and "Traceback" not in proc.stderr
    rows.drop(columns=["id"]).iloc[::-1].to_csv(tmp_path / "no-id.csv", index=False)
    proc = cbr("predict", run, tmp_path / "no-id.csv", "-o", tmp_path / "out.csv", "--task", tmp_path / "credit")
    assert proc.returncode == 0, proc.stderr
    assert "rows are numbered 0..29" in proc.stdout
    out = pd.read_csv(tmp_path / "out.csv")
    assert list(out.columns) == ["id", "Status"] and out["id"].tolist() == list(range(30))
    assert out["Status"].between(0, 1).all()
