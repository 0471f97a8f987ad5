"""How the workspace's files are made: once per run and copied to each node, the labelled file from its
own lines where each row is one. What may be in them is tests/test_workspace_property.py's."""

from __future__ import annotations

import os

import pandas as pd
from support.layouts import kaggle_sample_task

from dsagent_cbr.harness import workspace
from dsagent_cbr.harness.plan import Held, hold_out, id_key, id_keys
from dsagent_cbr.tasks.loader import load_task


def _kept(task, held) -> pd.DataFrame:
    train = pd.read_csv(task.public_dir / task.train_file, dtype=str, keep_default_na=False)
    return train.drop(index=list(held.positions)).reset_index(drop=True)


def test_the_labelled_file_keeps_its_own_lines_without_the_held_rows(tmp_path):
    task = kaggle_sample_task(tmp_path / "tasks")
    held = hold_out(task)
    workspace.build(task, held, tmp_path / "space", "print()\n")
    lines = (task.public_dir / task.train_file).read_bytes().splitlines(keepends=True)
    gone = {1 + p for p in held.positions}
    expected = b"".join(line for n, line in enumerate(lines) if n not in gone)
    assert (tmp_path / "space" / task.train_file).read_bytes() == expected
    refit = tmp_path / "refit"
    workspace.build(task, held.for_refit(), refit, "print()\n", refit=True)
    assert (refit / task.train_file).read_bytes() == b"".join(lines)


def test_a_labelled_file_with_quoted_cells_loses_the_held_rows_and_nothing_else(tmp_path):
    task = kaggle_sample_task(tmp_path / "tasks")
    path = task.public_dir / task.train_file
    train = pd.read_csv(path, dtype=str, keep_default_na=False)
    train["colour"] = train["colour"] + ', "bright"\nshade'  # quotes, a comma and a line break in a cell
    train.to_csv(path, index=False)
    task = load_task(task.root)
    held = hold_out(task)
    workspace.build(task, held, tmp_path / "space", "print()\n")
    got = pd.read_csv(tmp_path / "space" / task.train_file, dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(got, _kept(task, held))


def test_a_public_file_changed_between_two_runs_is_the_one_the_second_gets(tmp_path):
    task = kaggle_sample_task(tmp_path / "tasks")
    sample = task.public_dir / "sample_submission.csv"
    first = tmp_path / "first"
    workspace.build(task, hold_out(task), first, "print()\n")
    frame = pd.read_csv(sample, dtype=str, keep_default_na=False)
    frame[frame.columns[1]] = "42.5"  # a new placeholder
    frame.to_csv(sample, index=False)
    os.utime(sample, ns=(1, 1))  # whatever the clock's grain: the stamp differs
    second = tmp_path / "second"
    workspace.build(task, hold_out(task), second, "print()\n")
    placeholders = pd.read_csv(second / "sample_submission.csv", dtype=str)[frame.columns[1]]
    assert set(placeholders) == {"42.5"}
    assert (first / "sample_submission.csv").read_bytes() != (second / "sample_submission.csv").read_bytes()


def test_a_column_of_ids_is_keyed_as_each_id_alone_is():
    odd = ["7", "7.0", " 7", "007", "-0", "0", "-12", "1e3", "abc", "", "nan", "None", "+5", "5 ", "inf",
           "12345678901234567890", "123456789012345", "1234567890123456", 7, 7.0, float("nan"), None, 2**60]
    column = pd.Series([*odd, *map(str, range(1000))], dtype=object)
    assert id_keys(column).tolist() == [id_key(v) for v in column]
    numbers = pd.Series(range(-5, 500))
    assert id_keys(numbers).tolist() == [id_key(v) for v in numbers]


def test_a_workspace_id_is_found_at_its_test_row_whichever_way_it_is_typed():
    held = Held(rows=0, labelled=0, how="", test_rows=4, source="train.csv", positions=(),
                test_ids=("a", "b", "c", "d"), test_shown=("7", "8.0", "x", "7"))
    # as the grader and the upload look them up: a repeated id is the last row's, an unknown one none
    assert held.test_places(pd.Series(["8", "7", "x", "nope"])).tolist() == [1, 3, 2, -1]
    assert held.test_id_keys.tolist() == ["a", "b", "c", "d"]
    assert Held(rows=0, labelled=0, how="", test_rows=0, source="train.csv",
                positions=()).test_places(["7"]).tolist() == [-1]
