"""Run one command as a sandboxed child: its own session and process group, a wall-time limit that
kills the whole tree, a resident-memory limit, no secrets in its environment, and chosen folders
hidden behind empty tmpfs mounts in a private mount namespace (where Linux lets us make one)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SECRET_PATTERNS = (re.compile(r".*_API_KEY$"), re.compile(r".*TOKEN.*"), re.compile(r".*SECRET.*"),
                   re.compile(r".*PASSWORD.*"), re.compile(r"^KAGGLE_KEY$"), re.compile(r"^AWS_.*"))
POLL_SECONDS = 0.05
_HIDE_SCRIPT = 'while [ "$1" != "--" ]; do mount -t tmpfs -o size=4k,mode=000 cbr-hidden "$1" || exit 97; shift; done; shift; exec "$@"'
HIDE_FAILED_EXIT = 97


@dataclass
class ProcessOutcome:
    exit_code: int | None
    timed_out: bool
    memory_exceeded: bool
    output_exceeded: bool
    wall_time: float
    peak_memory_mb: float
    isolated: bool


def scrub_environment(environ: dict[str, str]) -> dict[str, str]:
    """Drop anything that looks like a credential: generated code must never see our keys."""
    return {k: v for k, v in environ.items() if not any(p.match(k.upper()) for p in SECRET_PATTERNS)}


@cache
def namespace_prefix() -> tuple[str, ...] | None:
    """The unshare invocation that gives the child a private mount namespace, or None if unavailable."""
    if shutil.which("unshare") is None:
        return None
    prefix = ("unshare", "--mount") if os.geteuid() == 0 else ("unshare", "--user", "--map-root-user", "--mount")
    try:
        probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs none /mnt 2>/dev/null || mount -t tmpfs none /tmp"],
                               capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if probe.returncode == 0 else None


def _process_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgid, rss pages) for every process we can read."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[21]))
    return table


def _tree(root: int, table: dict[int, tuple[int, int, int]]) -> set[int]:
    """The root, its descendants and anything left in its process group."""
    members = {pid for pid, (_, pgid, _) in table.items() if pgid == root} | {root}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _, _) in table.items():
            if ppid in members and pid not in members:
                members.add(pid)
                changed = True
    return members & set(table) | {root}


def _kill(pids: set[int], pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def run_sandboxed(
    command: list[str],
    *,
    cwd: Path,
    stdout_path: Path,
    stderr_path: Path,
    timeout: float,
    memory_mb: float,
    hide: Sequence[Path] = (),
    max_output_bytes: int = 64 * 1024 * 1024,
    environ: dict[str, str] | None = None,
) -> ProcessOutcome:
    env = scrub_environment(dict(os.environ if environ is None else environ))
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONUNBUFFERED"] = "1"
    prefix = namespace_prefix()
    hidden = [str(p) for p in hide if Path(p).is_dir()]
    argv = list(command)
    if prefix is not None and hidden:
        argv = [*prefix, "sh", "-c", _HIDE_SCRIPT, "cbr-sandbox", *hidden, "--", *command]
    page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20
    start = time.monotonic()
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    pid, status, rusage = proc.pid, None, None
    timed_out = memory_exceeded = output_exceeded = False
    peak_mb, members = 0.0, {pid}
    while True:
        done_pid, status, rusage = os.wait4(pid, os.WNOHANG)
        if done_pid == pid:
            break
        table = _process_table()
        members = _tree(pid, table) | (members & set(table))
        rss_mb = sum(table[p][2] for p in members if p in table) * page_mb
        peak_mb = max(peak_mb, rss_mb)
        if time.monotonic() - start > timeout:
            timed_out = True
        elif rss_mb > memory_mb:
            memory_exceeded = True
        elif stdout_path.stat().st_size + stderr_path.stat().st_size > max_output_bytes:
            output_exceeded = True
        if timed_out or memory_exceeded or output_exceeded:
            _kill(members, pid)
            _, status, rusage = os.wait4(pid, 0)
            break
        time.sleep(POLL_SECONDS)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    # Whatever the child left behind (a daemonised grandchild, say) goes with it.
    leftovers = _tree(pid, _process_table()) - {pid}
    if leftovers:
        _kill(leftovers, pid)
    peak_mb = max(peak_mb, rusage.ru_maxrss / 1024 if rusage else 0.0)
    exit_code = proc.returncode
    isolated = prefix is not None or not hidden
    if prefix is not None and hidden and exit_code == HIDE_FAILED_EXIT:
        isolated = False
    return ProcessOutcome(exit_code, timed_out, memory_exceeded, output_exceeded, wall, peak_mb, isolated)
