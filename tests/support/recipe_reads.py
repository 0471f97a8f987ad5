"""What a task recipe really reads: its prepare.py run on a copy of the recipe folder, in a child
process under a Python audit hook that logs every file opened for reading.

The audit hook sees every open() made from Python (pandas, gzip, bz2, tarfile, numpy and pathlib all
open through it), so the log is what the recipe took its data from, not what it says it did. A file
opened by C code behind Python's back (pyarrow, say) would be missed; no recipe reads that way today.
Everything opened that is not code, package metadata, a kernel or device file or the time zone
database counts as data: a library that reads its own resources when imported (spaCy its config,
sklearn its css) would show them too, which is why recipes read package files directly instead of
importing the package that ships them.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The child: open the log before the hook is installed (writing to an open file is no audit event, so
# the hook never sees itself), then run prepare.py as a script would run.
_CHILD = r"""
import os, runpy, sys
log = open(sys.argv[1], "w", encoding="utf-8", buffering=1)
def hook(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes)):
        return
    flags = args[2] if isinstance(args[2], int) else 0
    if flags & os.O_ACCMODE == os.O_RDONLY:
        log.write(os.path.abspath(os.fsdecode(args[0])) + "\n")
sys.addaudithook(hook)
script = sys.argv[2]
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""

CODE_SUFFIXES = {".py", ".pyc", ".pyi", ".so", ".pth", ".pxd"}
# Not data anything was built from: kernel and device files (cpu counts, random bytes), and the
# system's time zone database, which pandas reads whenever it loads.
SYSTEM = (Path("/proc"), Path("/sys"), Path("/dev"), Path("/usr/share/zoneinfo"))


def python_roots() -> list[Path]:
    """The folders the sandbox mounts read-only for Python: the interpreter prefix and every
    site-packages folder on sys.path (the same rule as the runner's)."""
    roots = {sys.base_prefix, sys.prefix, *(p for p in sys.path if p.endswith("site-packages"))}
    return sorted(Path(r) for r in roots if r and Path(r).is_dir())


def is_code(path: Path) -> bool:
    """Modules, compiled modules and package metadata: what importing opens, never a data set."""
    if path.suffix in CODE_SUFFIXES or "__pycache__" in path.parts:
        return True
    return any(part.endswith((".dist-info", ".egg-info")) for part in path.parts)


def data_files(opened: list[str], ignore: Path) -> list[Path]:
    """The regular files in `opened` that are data: not code, not under `ignore` (the recipe's own
    folder, where it writes), not kernel or device files. Sorted, without repeats."""
    found = set()
    for line in opened:
        path = Path(line)
        if is_code(path) or path.is_relative_to(ignore) or any(path.is_relative_to(s) for s in SYSTEM):
            continue
        if path.is_file():
            found.add(path.resolve())
    return sorted(found)


def script_reads(script: Path, *, timeout: float = 600) -> list[Path]:
    """The data files a Python script reads, run in its own folder (whose files are left out, being
    where it writes) with the worktree's dsagent_cbr importable; raises AssertionError with the end of
    its stderr when it fails."""
    folder = script.parent.resolve()
    with tempfile.TemporaryDirectory(prefix="script-reads-") as scratch:
        log = Path(scratch) / "opened.log"
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(log), str(script)], cwd=folder,
                              env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, f"{script} failed\n{proc.stderr[-2000:]}"
        return data_files(log.read_text(encoding="utf-8").splitlines(), folder)


@functools.cache
def recipe_reads(task_root: Path, *, timeout: float = 600) -> list[Path]:
    """The data files task_root/prepare.py reads, run on a copy of the recipe folder (so the task's
    own data/ and private/ are left alone). Cached for the test session: several tests ask."""
    with tempfile.TemporaryDirectory(prefix="recipe-reads-") as scratch:
        copy = Path(scratch) / task_root.name
        shutil.copytree(task_root, copy, ignore=shutil.ignore_patterns("data", "private", "__pycache__"))
        return script_reads(copy / "prepare.py", timeout=timeout)
