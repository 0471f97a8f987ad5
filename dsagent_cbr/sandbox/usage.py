"""How much memory a sandboxed tree holds, measured from outside when there is no memory cgroup to ask.

Resident set sizes overstate it: pages a forked child shares with its parent count once per process, so
an honest script that forks eight workers over one array would be killed for memory it does not use.
What counts instead: each process's proportional share of the pages it maps (PSS, from smaps_rollup;
shared memory left out there), plus shared memory held by name: the private /tmp and /dev/shm, and
memfd files, which hold pages whether or not anything maps them. The cheap RSS total is an upper bound
of the anonymous and file part, so PSS is read only when RSS alone would break the limit."""

from __future__ import annotations

import contextlib
import os

import psutil

_PSS_KEYS = ("Pss_Anon:", "Pss_File:")


def tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def rss_mb(processes: list[psutil.Process]) -> float:
    total = 0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total / 2**20


def _pss_kb(pid: int) -> int:
    """A process's proportional share of its anonymous and file pages (kB); plain Pss on kernels that
    do not split it, which then includes mapped shared memory too (an overcount, never an undercount)."""
    fields: dict[str, int] = {}
    with (
        contextlib.suppress(OSError, ValueError),
        open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh,
    ):
        for line in fh:
            key, *rest = line.split()
            if key in (*_PSS_KEYS, "Pss:") and rest:
                fields[key] = int(rest[0])
    if all(k in fields for k in _PSS_KEYS):
        return sum(fields[k] for k in _PSS_KEYS)
    return fields.get("Pss:", 0)


def pss_mb(processes: list[psutil.Process]) -> float:
    return sum(_pss_kb(p.pid) for p in processes) / 1024


def _shmem_by_name(processes: list[psutil.Process], tmpfs_bytes: int) -> int:
    """Bytes in the sandbox's own /tmp and /dev/shm (seen through /proc/<pid>/root of its processes; a
    mount counts only once it is one of ours, sized as we sized it) and in memfd files."""
    used: dict[str, int] = {}
    memfds: dict[tuple[int, int], int] = {}
    for proc in processes[1:]:
        for mount in ("tmp", "dev/shm"):
            if mount in used:
                continue
            with contextlib.suppress(OSError):
                st = os.statvfs(f"/proc/{proc.pid}/root/{mount}")
                if abs(st.f_blocks * st.f_frsize - tmpfs_bytes) <= 2 * st.f_frsize:
                    used[mount] = (st.f_blocks - st.f_bfree) * st.f_frsize
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{proc.pid}/fd"):
                path = f"/proc/{proc.pid}/fd/{fd}"
                with contextlib.suppress(OSError):
                    if os.readlink(path).startswith("/memfd:"):
                        st_fd = os.stat(path)
                        memfds[(st_fd.st_dev, st_fd.st_ino)] = st_fd.st_blocks * 512
    return sum(used.values()) + sum(memfds.values())


def memory_mb(processes: list[psutil.Process], tmpfs_bytes: int, limit_mb: float) -> float:
    """The tree's memory as a memory cgroup would charge it, near enough to enforce a limit with."""
    held = _shmem_by_name(processes, tmpfs_bytes) / 2**20
    rss = rss_mb(processes)
    if rss + held <= limit_mb:
        return rss + held
    return pss_mb(processes) + held
