"""The folder a script runs in, and what bounds its disk.

Where cbr runs as root and can make one, the folder is a filesystem of its own: an ext4 image on a loop
device, sized to the public files plus the run's disk allowance. The filesystem then does the counting
(every block and inode, however many files hold them) and stops the script with ENOSPC at its limit.
Elsewhere it is a plain folder, measured by walking it: a folder with more entries than a walk may visit
counts as over its limit, so entries cannot hide bytes from the count.

The folder lives beside the run folder under a name that carries cbr's pid (`.scratch-<pid>-<hex>`), so
that a cbr killed with SIGKILL leaves nothing another cbr cannot recognise and clear away."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dsagent_cbr.sandbox.leftovers import maker_alive

SANDBOX_UID = 65534  # "nobody": scripts never run as host root, whoever runs cbr
MAX_ENTRIES = 200_000  # a walked folder with more entries than this is over its limit
_NAME = re.compile(r"^\.scratch-(\d+)-[0-9a-f]+(?:\.img)?$")


def size_mb(paths: list[Path]) -> float:
    """What the files at `paths` (folders with all they hold) take: the room a scratch folder needs."""
    files = [f for p in paths for f in ([p, *p.rglob("*")] if p.is_dir() else [p])]
    return sum(f.lstat().st_size for f in files if f.is_file() and not f.is_symlink()) / 2**20


def _run(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, timeout=60).returncode == 0


@cache
def can_make_filesystems() -> bool:
    """Root, with mkfs.ext4 and loop devices: a sized filesystem per run is possible here."""
    return (
        os.geteuid() == 0
        and shutil.which("mkfs.ext4") is not None
        and shutil.which("mount") is not None
        and Path("/dev/loop-control").exists()
    )


def _walk_mb(folder: Path) -> float | None:
    """Blocks in use under `folder`, or None when it holds more than MAX_ENTRIES entries."""
    total = 0
    seen = 0
    stack = [folder]
    limit = MAX_ENTRIES
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > limit:
                    return None
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
    return total / 2**20


@dataclass
class Scratch:
    path: Path
    filesystem: bool  # True: a sized filesystem of its own; False: a plain folder, walked
    limit_mb: float  # how much it may grow beyond what cbr put in
    base_mb: float = 0.0  # what cbr put in (public files, the script), set by settle()

    def used_mb(self) -> float | None:
        """In use now, or None when a walk found too many entries to count (over the limit either way)."""
        if self.filesystem:
            st = os.statvfs(self.path)
            return (st.f_blocks - st.f_bfree) * st.f_frsize / 2**20
        return _walk_mb(self.path)

    def settle(self) -> None:
        """cbr has put in the public files and the script: what is there now is not the script's."""
        self.base_mb = self.used_mb() or 0.0

    def over_limit(self) -> bool:
        # the filesystem refuses writes at its size: full means the script hit it
        if self.filesystem:
            st = os.statvfs(self.path)
            return st.f_bavail * st.f_frsize < 2**20 or st.f_favail == 0
        used = _walk_mb(self.path)
        return used is None or used - self.base_mb > self.limit_mb

    def holds_file_of(self, size: int) -> bool:
        """Whether some file reached `size` bytes: the largest a file may grow, where a write was cut."""
        seen, stack = 0, [self.path]
        while stack and seen <= MAX_ENTRIES:
            with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(Path(entry.path))
                        elif entry.stat(follow_symlinks=False).st_size >= size:
                            return True
        return False

    def hand_over(self) -> None:
        """Give the folder and its contents to the sandbox's user (only root runs scripts as another)."""
        if os.geteuid() != 0:
            return
        for root, dirs, files in os.walk(self.path):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_UID)
        os.chown(self.path, SANDBOX_UID, SANDBOX_UID)


def _unmount(point: Path) -> None:
    if not _run("umount", str(point)):
        # still busy (a process of ours at its edge): detach it lazily
        _run("umount", "-l", str(point))


def _remove_tree(path: Path) -> None:
    """Remove what a script left, whatever modes it gave its folders."""

    def unlock(func, target, _exc) -> None:  # type: ignore[no-untyped-def]
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            func(target)

    shutil.rmtree(path, onerror=unlock)


def _stale(name: str) -> bool:
    match = _NAME.match(name)
    return match is not None and not maker_alive(int(match.group(1)))


def unmount_stale() -> None:
    """Unmount every scratch filesystem that a dead cbr left mounted, wherever it is."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = Path(line.split()[4].replace("\\040", " "))
            if _stale(point.name):
                _unmount(point)


def sweep(parent: Path) -> None:
    """Unmount what dead cbrs left mounted, and clear the scratch folders they left in `parent`."""
    unmount_stale()
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            if not _stale(child.name):
                continue
            if child.is_dir() and not child.is_symlink():
                _remove_tree(child)
            else:
                child.unlink(missing_ok=True)


def clear_folder(path: Path) -> None:
    """Remove a run folder to redo its run: a cbr killed in it may have left its scratch filesystem
    mounted there, which would refuse removal (EBUSY) until unmounted."""
    unmount_stale()
    if path.exists():
        _remove_tree(path)


def _make_filesystem(point: Path, size_mb: float) -> bool:
    image = point.with_name(point.name + ".img")
    # ext4 keeps about 5% for its own tables; add it, so that the script gets the allowance it was promised
    size = int((size_mb * 1.06 + 16) * 2**20)
    with image.open("wb") as fh:
        fh.truncate(size)
    owner = f"{SANDBOX_UID}:{SANDBOX_UID}"
    made = _run(
        "mkfs.ext4",
        "-q",
        "-F",
        "-m",
        "0",
        "-O",
        "^has_journal",
        "-E",
        f"root_owner={owner},nodiscard",
        str(image),
    ) and _run("mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(point))
    # the loop device holds it open; gone from the folder, freed at unmount
    image.unlink(missing_ok=True)
    if made:
        with contextlib.suppress(OSError):
            (point / "lost+found").rmdir()
    return made


@contextlib.contextmanager
def scratch(parent: Path, base_mb: float, limit_mb: float) -> Iterator[Scratch]:
    """A scratch folder in `parent` for one run: room for `base_mb` of cbr's files and `limit_mb` more."""
    parent.mkdir(parents=True, exist_ok=True)
    sweep(parent)
    point = parent / f".scratch-{os.getpid()}-{secrets.token_hex(3)}"
    point.mkdir()
    filesystem = can_make_filesystems() and _make_filesystem(point, base_mb + limit_mb)
    try:
        yield Scratch(point, filesystem, limit_mb)
    finally:
        if filesystem:
            _unmount(point)
        _remove_tree(point)
