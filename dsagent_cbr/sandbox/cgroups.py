"""A cgroup per sandboxed run: memory and process limits on the whole tree, nested under the cgroup cbr
itself runs in, so that whatever caps cbr (a container, a CI job, `systemd-run -p MemoryMax=`) caps the
script too. cgroup v2, or v1's memory and pids hierarchies, whichever holds each controller. Where a
controller cannot be delegated to a child of cbr's own cgroup (v2 forbids it while that cgroup holds
processes of its own, unless it is the root), the run goes without it: it then polls the tree's
memory (watch.py) and sets RLIMIT_NPROC (run.py), and the result says which way it was measured.

A group is named cbr-<pid>-<hex> after the cbr process that made it. Groups whose maker is dead (a cbr
killed with SIGKILL cannot remove its own) are removed by the next cbr that makes one beside them."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.sandbox.leftovers import maker_alive

PREFIX = "cbr-"
KINDS = ("memory", "pids")
_STALE = re.compile(rf"^{PREFIX}(\d+)-[0-9a-f]+$")


@dataclass(frozen=True)
class _Place:
    """Where a controller's groups go: cbr's own cgroup folder in the hierarchy holding it."""

    folder: Path
    version: int


def _mounts() -> list[tuple[Path, str, set[str]]]:
    """(mount point, filesystem type, super options) of every cgroup hierarchy this process sees."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            head, _, tail = line.partition(" - ")
            fstype, _, options = (tail.split() + ["", "", ""])[:3]
            if fstype in ("cgroup", "cgroup2"):
                found.append((Path(head.split()[4]), fstype, set(options.split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """Controller name -> this process's cgroup path in its hierarchy ("" is the v2 unified one)."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _delegates(folder: Path, kind: str) -> bool:
    """Whether a child of this v2 cgroup gets the controller: enabled in its subtree, or enabled now."""
    control = folder / "cgroup.subtree_control"
    try:
        if kind in control.read_text().split():
            return True
        control.write_text(f"+{kind}")
        return True
    except OSError:  # not offered by the parent, or our cgroup holds processes (EBUSY)
        return False


def places() -> dict[str, _Place]:
    """For each controller a group can have here, the folder its groups are made in."""
    mounts, own = _mounts(), _own_paths()
    found: dict[str, _Place] = {}
    for kind in KINDS:
        for point, fstype, options in mounts:
            if fstype == "cgroup" and kind in options and kind in own:
                found[kind] = _Place(point / own[kind].lstrip("/"), 1)
    unified = next((point for point, fstype, _ in mounts if fstype == "cgroup2"), None)
    if unified is not None and "" in own:
        folder = unified / own[""].lstrip("/")
        for kind in KINDS:
            if kind not in found and _delegates(folder, kind):
                found[kind] = _Place(folder, 2)
    return found


def _empty_and_remove(folder: Path, attempts: int = 40) -> bool:
    """Kill what is left in a group and remove it; the pages of a torn-down tmpfs are released a moment
    after its last process, so removal is retried for up to two seconds."""
    for _ in range(attempts):
        with contextlib.suppress(OSError):
            for pid in (folder / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), 9)
            folder.rmdir()
            return True
        if not folder.exists():
            return True
        time.sleep(0.05)
    return False


def sweep(parent: Path) -> list[Path]:
    """Remove the groups beside ours whose cbr is gone; returns the ones removed."""
    removed = []
    with contextlib.suppress(OSError):
        for child in parent.iterdir():
            match = _STALE.match(child.name)
            if (
                match
                and child.is_dir()
                and not maker_alive(int(match.group(1)))
                and _empty_and_remove(child, 4)
            ):
                removed.append(child)
    return removed


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _limit(folder: Path, version: int, kind: str, memory_bytes: int, pids: int) -> bool:
    """Set the group's limit for one controller; False when the hierarchy refuses it."""
    if kind == "pids":
        return _write(folder / "pids.max", str(pids))
    if version == 2:
        ok = _write(folder / "memory.max", str(memory_bytes))
        _write(folder / "memory.swap.max", "0")
        return ok
    ok = _write(folder / "memory.limit_in_bytes", str(memory_bytes))
    # absent without swap accounting
    _write(folder / "memory.memsw.limit_in_bytes", str(memory_bytes))
    return ok


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


class Cgroup:
    """One run's group: a folder per hierarchy (one under v2, one per controller under v1)."""

    def __init__(self, folders: dict[str, tuple[Path, int]]) -> None:
        self.folders = folders  # kind -> (folder, version)

    @classmethod
    def create(cls, memory_mb: float, pids: int) -> Cgroup | None:
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        folders: dict[str, tuple[Path, int]] = {}
        for kind, place in places().items():
            folder = place.folder / name
            sweep(place.folder)
            try:
                folder.mkdir(exist_ok=True)
            except OSError:
                continue
            if _limit(folder, place.version, kind, int(memory_mb * 2**20), pids):
                folders[kind] = (folder, place.version)
            elif not any(f == folder for f, _ in folders.values()):
                _empty_and_remove(folder, 1)  # refused its limit, and no other controller shares it
        return cls(folders) if folders else None

    def has(self, kind: str) -> bool:
        return kind in self.folders

    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join the group (launch.py does, before the sandbox
        starts, so that every descendant starts inside)."""
        return sorted({str(folder / "cgroup.procs") for folder, _ in self.folders.values()})

    def oom_killed(self) -> bool:
        if "memory" not in self.folders:
            return False
        folder, version = self.folders["memory"]
        events = folder / ("memory.events" if version == 2 else "memory.oom_control")
        return _counter(events, "oom_kill") > 0

    def pids_refused(self) -> bool:
        """Whether a fork or a thread was refused at the process limit."""
        return (
            "pids" in self.folders and _counter(self.folders["pids"][0] / "pids.events", "max") > 0
        )

    def peak_mb(self) -> float | None:
        if "memory" not in self.folders:
            return None
        folder, version = self.folders["memory"]
        with contextlib.suppress(OSError, ValueError):
            return (
                int(
                    (
                        folder / ("memory.peak" if version == 2 else "memory.max_usage_in_bytes")
                    ).read_text()
                )
                / 2**20
            )
        return None

    def remove(self) -> None:
        for folder in {f for f, _ in self.folders.values()}:
            _empty_and_remove(folder)
