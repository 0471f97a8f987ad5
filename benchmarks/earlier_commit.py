"""An earlier commit of this repository beside the working tree, for benchmarks that measure both
in one run: a detached git worktree in a temporary folder, removed afterwards. Run the package of
either with `cbr(root, ...)` (PYTHONPATH and the working folder both point at that root: `python -m`
puts the working folder first on sys.path)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def checkout(commit: str, prefix: str) -> Iterator[tuple[Path, Path]]:
    """(the earlier commit's root, a scratch folder), both gone after the block."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    root = work / "before"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(root), commit], check=True,
                   capture_output=True)
    try:
        yield root, work
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(root)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def cbr(root: Path, *args: str, env: dict[str, str] | None = None, check: bool = False,
        timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *args], cwd=root, check=check, timeout=timeout,
                          env={**(env or os.environ), "PYTHONPATH": str(root)}, capture_output=True, text=True)


def prepare(roots: tuple[Path, ...], tasks: list[str]) -> None:
    for root in roots:
        for name in tasks:
            cbr(root, "tasks", "prepare", name, check=True)
