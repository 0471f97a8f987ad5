"""Errors that name the way on: each is one sentence, exit 2, and says what to type next or what was
found (a Kaggle folder, a misspelt column, a file's separator, a budget too short)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dsagent_cbr.cli import main


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CBR_HOME", str(tmp_path / "home"))
    return tmp_path


def affairs(rows: int = 40) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rate_marriage": [1 + i % 5 for i in range(rows)],
            "age": [22.5 + i for i in range(rows)],
            "had_affair": [i % 2 for i in range(rows)],
        }
    )


def new_task(dest: str, *options: str) -> list[str]:
    """`cbr tasks new DEST --train affairs.csv` with `options`, and a fifth held out."""
    return ["tasks", "new", dest, "--train", "affairs.csv", *options, "--holdout", "0.2"]


def error_of(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    return next(line for line in err.splitlines() if line.startswith("Error: "))


def test_a_kaggle_folder_is_one_tasks_new_from_a_task(here, capsys):
    folder = here / "data" / "randhie"
    folder.mkdir(parents=True)
    affairs().to_csv(folder / "train.csv", index=False)
    affairs().drop(columns="had_affair").to_csv(folder / "test.csv", index=False)
    assert error_of(capsys, "develop", "data/randhie") == (
        "Error: data/randhie is a Kaggle competition folder, not a task: make it one with "
        "`cbr tasks new tasks/randhie --from-kaggle-folder data/randhie`."
    )


def test_a_folder_of_csv_files_is_one_tasks_new_from_a_task(here, capsys):
    (here / "mine").mkdir()
    affairs().to_csv(here / "mine" / "affairs.csv", index=False)
    assert error_of(capsys, "deploy", "mine") == (
        "Error: mine holds CSV files but no task: make one with "
        "`cbr tasks new tasks/mine --train mine/affairs.csv --target COLUMN --holdout 0.2`."
    )


def test_the_feedback_example_is_named_when_its_task_is_missing(here, capsys):
    line = error_of(capsys, "develop", "tasks/feedback/")
    assert line.startswith("Error: No task folder 'tasks/feedback/' (looked in ")
    assert line.endswith("; make it with `cbr tasks new tasks/feedback --example feedback`.")


def test_a_misspelt_target_lists_the_columns_and_the_nearest(here, capsys):
    affairs().to_csv(here / "affairs.csv", index=False)
    line = error_of(capsys, *new_task("tasks/a", "--target", "had_afair"))
    assert line == (
        "Error: train.csv has no target column 'had_afair' (did you mean had_affair?); train.csv's "
        "columns are rate_marriage, age, had_affair."
    )
    assert not (here / "tasks" / "a").exists()


def test_a_misspelt_id_column_names_the_nearest_too(here, capsys):
    affairs().to_csv(here / "affairs.csv", index=False)
    line = error_of(capsys, *new_task("tasks/a", "--target", "had_affair", "--id", "Age"))
    assert "'Age' is in neither train.csv nor test.csv (did you mean age?)" in line


def test_a_semicolon_separated_file_is_read_with_its_decimal_commas(here, capsys):
    text = affairs().to_csv(index=False, sep=";", decimal=",")
    assert "22,5" in text
    (here / "affairs.csv").write_text(text)
    assert main(new_task("tasks/a", "--target", "had_affair")) == 0
    out = capsys.readouterr().out
    assert "read:       affairs.csv: fields separated by a semicolon (';')" in out
    written = pd.concat(
        [pd.read_csv(here / "tasks/a/data/train.csv"), pd.read_csv(here / "tasks/a/data/test.csv")]
    )
    assert written["age"].dtype == float and sorted(written["age"]) == sorted(affairs()["age"])


def test_a_file_that_its_separator_does_not_parse_names_the_separator(here, capsys):
    (here / "bad.csv").write_text("a;b;c\n1;2;3\n4;5;6;7;8\n")
    line = error_of(capsys, "tasks", "new", "tasks/a", "--train", "bad.csv", "--holdout", "0.2")
    assert line.startswith(
        "Error: The training file bad.csv does not parse as CSV separated by a semicolon (';'): "
    )


@pytest.mark.parametrize("budget, said", [("2", "2s"), ("10s", "10s")])
def test_a_budget_too_short_to_train_anything_is_refused_with_one_that_is_not(
    here, capsys, budget, said
):
    from dsagent_cbr.search.policy import MIN_BUDGET

    assert MIN_BUDGET == 15
    assert error_of(capsys, "develop", "tasks/anything", "--budget", budget) == (
        f"Error: A budget of {said} is too short to train anything: the run's start, the starter "
        "and a first model need 15s; give 15s or more (a minute lets the search tune and blend)."
    )
    assert not (here / "runs").exists()


@pytest.mark.integration
def test_the_command_the_missing_feedback_task_names_makes_it(here, capsys):
    from dsagent_cbr.tasks.loader import load_task

    assert main(["tasks", "new", "tasks/feedback", "--example", "feedback"]) == 0
    assert "metric:     mcrmse" in capsys.readouterr().out
    task = load_task(here / "tasks" / "feedback", require_data=True)
    assert task.modality == "text" and len(task.target) == 6


def test_deploy_with_mixtral_and_no_server_says_so_in_one_sentence(here, capsys, monkeypatch):
    """The README's `cbr deploy tasks/new_task/ --model mixtral`, with no server set."""
    monkeypatch.delenv("CBR_BASE_URL", raising=False)
    affairs(60).to_csv(here / "affairs.csv", index=False)
    assert main(new_task("tasks/new_task", "--target", "had_affair")) == 0
    capsys.readouterr()
    assert main(["deploy", "tasks/new_task/", "--model", "mixtral"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "Error: Model mixtral runs on an OpenAI-compatible server: set CBR_BASE_URL (e.g. "
        "http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for Ollama)."
    ]
    assert not (here / "runs").exists()


def test_ingest_kaggle_without_credentials_says_so_in_one_sentence(here, capsys, monkeypatch):
    """The README's `cbr ingest-kaggle competition-slug`, on a machine without Kaggle's
    credentials."""
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(here / "no-kaggle"))
    assert main(["ingest-kaggle", "competition-slug"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "Error: No Kaggle credentials: set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json "
        f"(from kaggle.com > Settings > Create New Token) at {here / 'no-kaggle' / 'kaggle.json'}."
    ]
