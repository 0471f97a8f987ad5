"""Public data develop would trip on (an empty or header-only train.csv, UTF-16 text, arrays that need
pickle or disagree in length) is named by `cbr tasks validate`, and refused up front by develop, deploy
and run with exit code 2: through the real `cbr` command on copies of real task folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TASKS
from support.task_copies import dsagent_folder

CBR = [sys.executable, "-m", "dsagent_cbr.cli"]


def cbr(*args: str, home: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    # an unreachable model server: before the checks, develop met the data card's traceback before the model
    env = {**os.environ, "CBR_HOME": str(home), "CBR_BASE_URL": "http://127.0.0.1:9/v1", "CBR_API_KEY": "test"}
    return subprocess.run([*CBR, *args], capture_output=True, text=True, env=env, timeout=timeout)


def utf16(text: str) -> bytes:
    return text.encode("utf-16")  # with its byte-order mark, as Excel's "Unicode text" saves it


def copy_with_train(concrete, where: Path, train: bytes) -> Path:
    folder = where / concrete.name  # the folder's name must stay the task's name
    shutil.copytree(concrete.root, folder, ignore=shutil.ignore_patterns("prepare.py"))
    (folder / "data" / "train.csv").write_bytes(train)
    return folder


BROKEN = {
    "empty": (lambda text: b"", "empty (0 bytes)"),
    "header-only": (lambda text: text.splitlines(keepends=True)[0].encode(), "a header and no data rows"),
    "utf-16": (lambda text: utf16(text), "UTF-16 text, not UTF-8"),
    "utf-16-no-bom": (lambda text: text.encode("utf-16-le"), "NUL bytes"),
}


@pytest.fixture
def broken(concrete, tmp_path):
    text = (concrete.public_dir / "train.csv").read_text(encoding="utf-8")
    return {kind: copy_with_train(concrete, tmp_path / kind, make(text)) for kind, (make, _) in BROKEN.items()}


@pytest.mark.integration
def test_validate_names_each_bad_train_csv(broken, tmp_path):
    proc = cbr("tasks", "validate", *map(str, broken.values()), home=tmp_path / "home")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()[1:]
    assert len(lines) == len(BROKEN), proc.stderr
    for kind, folder in broken.items():
        train = f"{folder.resolve()}/data/train.csv: "
        named = [line for line in lines if line.startswith(train)]
        assert len(named) == 1 and BROKEN[kind][1] in named[0], (kind, lines)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["empty", "header-only", "utf-16"])
def test_develop_refuses_up_front_with_exit_2(broken, tmp_path, kind):
    runs = tmp_path / "runs"
    proc = cbr("develop", str(broken[kind]), "--model", "scripted", "-T", "1", "--store", "faiss",
               "--runs-dir", str(runs), home=tmp_path / "home")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.startswith("Error: Task folder") and "data/train.csv: " in proc.stderr
    assert BROKEN[kind][1] in proc.stderr and "model server" not in proc.stderr
    assert not runs.exists()  # refused before a run folder was made


@pytest.mark.integration
def test_deploy_and_run_refuse_too(broken, tmp_path):
    folder = broken["utf-16"]
    for args in (["deploy", str(folder), "--model", "none", "--store", "faiss", "--runs-dir", str(tmp_path / "runs")],
                 ["run", str(folder), str(folder / "train.py"), "--out", str(tmp_path / "run")]):
        proc = cbr(*args, home=tmp_path / "home")
        assert proc.returncode == 2 and "UTF-16 text, not UTF-8" in proc.stderr, (args, proc.stderr[-3000:])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "run").exists()


@pytest.mark.integration
def test_missing_columns_and_a_utf8_bom_are_told_apart(concrete, tmp_path):
    text = (concrete.public_dir / "train.csv").read_text(encoding="utf-8")
    fine = copy_with_train(concrete, tmp_path / "bom", "\ufeff".encode() + text.encode())
    no_target = copy_with_train(concrete, tmp_path / "no-target", text.replace("compressive_strength", "y").encode())
    test = no_target / "data" / "test.csv"
    test.write_text(test.read_text(encoding="utf-8").replace("id,", "key,", 1), encoding="utf-8")
    proc = cbr("tasks", "validate", str(fine), home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    proc = cbr("tasks", "validate", str(no_target), home=tmp_path / "home")
    assert proc.returncode == 2
    assert f"{no_target.resolve()}/data/train.csv: no target column 'compressive_strength'" in proc.stderr
    assert f"{no_target.resolve()}/data/test.csv: no id column 'id'" in proc.stderr


def npy_task(where: Path, arrays: dict[str, np.ndarray]) -> Path:
    """A time-series classification task in our layout with the arrays given (acsf1's files around them)."""
    folder = where / "acsf1"
    (folder / "data").mkdir(parents=True)
    (folder / "private").mkdir()
    for name in ("task.toml", "description.md", "train.py"):
        shutil.copy(TASKS / "acsf1" / name, folder / name)
    for name, array in arrays.items():
        np.save(folder / ("private" if name == "y_test.npy" else "data") / name, array, allow_pickle=True)
    return folder


@pytest.mark.integration
def test_npy_tasks_load_without_pickle_and_agree_in_length(tmp_path):
    good = {"X_train.npy": np.zeros((8, 1, 5)), "y_train.npy": np.arange(8), "X_test.npy": np.zeros((3, 1, 5)),
            "y_test.npy": np.arange(3)}
    assert cbr("tasks", "validate", str(npy_task(tmp_path / "good", good)), home=tmp_path / "home").returncode == 0
    bad = npy_task(tmp_path / "bad", {**good, "y_train.npy": np.arange(7), "X_test.npy": np.array([{"a": 1}])})
    proc = cbr("tasks", "validate", str(bad), home=tmp_path / "home")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    data = bad.resolve() / "data"
    assert f"{data}/y_train.npy: 7 rows but X_train.npy has 8" in proc.stderr
    assert f"{data}/X_test.npy: not a .npy array that loads without pickle" in proc.stderr


def test_array_problems_name_empty_and_scalar_arrays(tmp_path):
    from dsagent_cbr.tasks.data_checks import array_problems

    np.save(tmp_path / "X_train.npy", np.zeros((0, 4)))
    np.save(tmp_path / "y_train.npy", np.float64(1.0))
    (tmp_path / "X_test.npy").write_bytes(b"")
    problems = array_problems(tmp_path, ["X_train.npy", "y_train.npy", "X_test.npy"])
    assert [p.split(": ")[0].rsplit("/", 1)[1] for p in problems] == ["X_train.npy", "y_train.npy", "X_test.npy"]
    assert "holds no rows (shape (0, 4))" in problems[0] and "holds no rows (shape ())" in problems[1]


@pytest.mark.integration
def test_dsagent_layout_csvs_are_checked(concrete, tmp_path):
    folder = dsagent_folder(concrete, tmp_path / "concrete-dsagent")
    assert cbr("tasks", "validate", str(folder), home=tmp_path / "home").returncode == 0
    (folder / "env" / "train.csv").write_bytes(b"")
    proc = cbr("tasks", "validate", str(folder), home=tmp_path / "home")
    assert proc.returncode == 2 and f"{folder.resolve()}/env/train.csv: empty (0 bytes)" in proc.stderr


def _pipe(entry: Path, outside: Path) -> None:
    os.mkfifo(entry)


def _link_out(entry: Path, outside: Path) -> None:
    (outside / "secret.txt").write_text("not the task's", encoding="utf-8")
    entry.symlink_to(outside / "secret.txt")


def _folder_with_pipe(entry: Path, outside: Path) -> None:
    (entry / "inner").mkdir(parents=True)
    os.mkfifo(entry / "inner" / "feed")


ODD_ENTRIES = {"pipe": (_pipe, "a pipe"), "link-out": (_link_out, "leads outside data/ through a symlink"),
               "folder-with-pipe": (_folder_with_pipe, "a folder holding a pipe (FIFO) (inner/feed)")}


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(ODD_ENTRIES))
def test_a_pipe_or_a_link_in_public_data_is_refused_up_front(concrete, tmp_path, kind):
    """A FIFO listed in data.public used to pass validate and hang every run (opening it blocks)."""
    folder = tmp_path / concrete.name
    shutil.copytree(concrete.root, folder, ignore=shutil.ignore_patterns("prepare.py"))
    toml = folder / "task.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('"test.csv"]', '"test.csv", "notes.txt"]', 1),
                    encoding="utf-8")
    (tmp_path / "outside").mkdir()
    make, said = ODD_ENTRIES[kind]
    make(folder / "data" / "notes.txt", tmp_path / "outside")
    for args in (["tasks", "validate", str(folder)],
                 ["run", str(folder), str(folder / "train.py"), "--out", str(tmp_path / "run")]):
        started = time.monotonic()
        proc = cbr(*args, home=tmp_path / "home", timeout=60)
        assert time.monotonic() - started < 30, args
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr[-3000:])
        details = proc.stderr.splitlines()[1:]
        assert len(details) == 1 and "notes.txt" in details[0] and said in details[0], (args, proc.stderr)
    assert not (tmp_path / "run").exists()


def test_entry_problem_names_what_an_entry_is_without_opening_it(tmp_path):
    from dsagent_cbr.tasks.data_checks import entry_problem

    (tmp_path / "plain.csv").write_text("a\n1\n", encoding="utf-8")
    (tmp_path / "folder" / "deeper").mkdir(parents=True)
    (tmp_path / "folder" / "deeper" / "rows.csv").write_text("a\n1\n", encoding="utf-8")
    (tmp_path / "inside-link.csv").symlink_to(tmp_path / "plain.csv")
    os.mkfifo(tmp_path / "fifo.csv")  # opening it would block this test: lstat must be all that is done
    assert entry_problem(tmp_path / "plain.csv") is None and entry_problem(tmp_path / "folder") is None
    assert entry_problem(tmp_path / "inside-link.csv").startswith("a link; ")
    assert entry_problem(tmp_path / "fifo.csv").startswith("a pipe (FIFO); ")
    (tmp_path / "folder" / "deeper" / "out").symlink_to("/etc", target_is_directory=True)
    assert entry_problem(tmp_path / "folder").startswith("a folder holding a link (deeper/out); ")
