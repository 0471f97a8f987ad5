"""Runs as a process of its own between cbr and the sandbox (`python -I -S launch.py SETTINGS
COMMAND...`): it applies the run's resource limits to itself, joins the run's cgroups and, when the
run has a share of the cores (CBR_CORES), pins itself to that many, then becomes COMMAND
(bubblewrap) by exec, so that every process of the run starts inside all three.

cbr once did this in a preexec_fn, which CPython documents as unsafe in a process that runs threads (a
search runs its nodes in threads): the forked child may deadlock before it execs. This file imports
only the standard library, so that it starts in milliseconds."""

import fcntl
import json
import os
import resource
import sys
import tempfile

# in the temporary folder: the runs of one machine choose their cores one at a time
LOCK = "cbr-cores.lock"


def least_claimed(allowed: list[int], count: int, claims: dict[int, int]) -> list[int]:
    """The `count` cores of `allowed` that the fewest pinned processes hold, the lowest on a tie."""
    return sorted(sorted(allowed), key=lambda core: claims.get(core, 0))[:count]


def claims(allowed: set[int]) -> dict[int, int]:
    """How many processes are pinned to each core: those whose affinity is a part of `allowed`
    (other runs' sandboxes), not all of it (every other process)."""
    held: dict[int, int] = {}
    for name in os.listdir("/proc"):
        try:
            cores = os.sched_getaffinity(int(name)) if name.isdigit() else allowed
        except OSError:  # gone since the listing
            continue
        if cores < allowed:
            for core in cores:
                held[core] = held.get(core, 0) + 1
    return held


def pin(count: int) -> None:
    """Keep this process, and all it starts, to `count` of the cores it may use, the least claimed;
    chosen under a lock and pinned before it is let go, so two runs starting at once take different
    cores (pinned to the same first ones, two runs would share them and leave the rest idle)."""
    allowed = os.sched_getaffinity(0)
    if count >= len(allowed):
        return
    fd = _locked()
    try:
        os.sched_setaffinity(0, least_claimed(list(allowed), count, claims(allowed)))
    finally:
        if fd is not None:
            os.close(fd)


def _locked() -> int | None:
    """The lock, held; None when there is none to be had (the choice is then made all the same)."""
    path = os.path.join(tempfile.gettempdir(), LOCK)
    # another user's lock file: a sticky folder refuses O_CREAT on it, so it is opened as it is
    for flags in (os.O_RDONLY | os.O_CREAT, os.O_RDONLY):
        try:
            fd = os.open(path, flags, 0o644)
        except OSError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    return None


def main() -> None:
    settings = json.loads(sys.argv[1])
    for name, value in settings["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    for procs in settings["cgroups"]:
        with open(procs, "w") as fh:
            fh.write(str(os.getpid()))
    if settings.get("cores"):
        pin(settings["cores"])
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
