"""Run one command as untrusted code, in the bubblewrap sandbox (bubblewrap.py), and say what ended it.

The command is started through launch.py, which sets its rlimits, joins its cgroups and pins it to its
share of the cores, and behind untrusted/started.py, which tells cbr on a pipe of its own that the sandbox
came up. It dies with us (`--die-with-parent` plus the pid namespace) and within its limits: wall time;
memory for the whole tree, /tmp and /dev/shm included (a memory cgroup nested under cbr's own where one
can be made, else a poll of proportional memory); processes and threads (a pids cgroup, else
RLIMIT_NPROC); disk (a filesystem of its own where cbr may make one, see scratch.py); output. What ended
it is decided by what happened (the limits' own events, the exit code), never by words in its output."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import psutil

from dsagent_cbr.cores import machine_cores
from dsagent_cbr.sandbox.bubblewrap import (
    SandboxPolicy,
    bwrap_argv,
    child_environment,
    require_sandbox,
    runs_as_root,
)
from dsagent_cbr.sandbox.cgroups import Cgroup
from dsagent_cbr.sandbox.scratch import SANDBOX_UID, Scratch
from dsagent_cbr.sandbox.watch import Watch, cap_outputs, wait

MAX_OUTPUT_BYTES = 64 * 2**20
LAUNCH = Path(__file__).with_name("launch.py")
_STARTED = (
    resources.files("dsagent_cbr.untrusted").joinpath("started.py").read_text(encoding="utf-8")
)


@dataclass
class ProcessOutcome:
    exit_code: int | None
    timed_out: bool
    memory_exceeded: bool
    output_exceeded: bool
    disk_exceeded: bool
    wall_time: float
    peak_memory_mb: float
    isolated: bool
    network: bool
    processes_exceeded: bool = False
    limits: dict[str, str] = field(default_factory=dict)  # how each limit was enforced here
    # the sandbox came up and started the command (untrusted/started.py said so)
    started: bool = True
    cancelled: bool = False  # cbr stopped it (its run ended), not the command's doing


@contextlib.contextmanager
def _group(policy: SandboxPolicy) -> Iterator[Cgroup | None]:
    group = (
        Cgroup.create(policy.memory_mb, policy.pids) if policy.isolate and policy.cgroups else None
    )
    try:
        yield group
    finally:
        if group is not None:
            group.remove()


def _tasks_of(uid: int) -> int:
    """Processes and threads the user runs now: RLIMIT_NPROC counts them all, not only the sandbox's."""
    total = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        if proc.info["uids"] and proc.info["uids"].real == uid:
            total += proc.info["num_threads"] or 1
    return total


def _launcher(argv: list[str], policy: SandboxPolicy, group: Cgroup | None) -> list[str]:
    """`argv` started through launch.py, which sets the run's rlimits, joins its cgroups and pins it
    to its share of the cores, then execs it."""
    fsize = int(policy.disk_mb * 2**20)
    limits = {"RLIMIT_FSIZE": fsize, "RLIMIT_CORE": 0}
    # the rlimit is per user: add what it runs already
    if policy.isolate and not (group and group.has("pids")):
        # root is exempt; it binds once setpriv has switched to the sandbox's user
        limits["RLIMIT_NPROC"] = policy.pids + _tasks_of(
            SANDBOX_UID if runs_as_root() else os.getuid()
        )
    settings = {
        "limits": limits,
        "cgroups": group.procs_files() if group else [],
        # a share of the machine (CBR_CORES): its threads keep to that many cores, so must it
        "cores": policy.cores if policy.cores < machine_cores() else None,
    }
    return [sys.executable, "-I", "-S", str(LAUNCH), json.dumps(settings), *argv]


def _start(
    argv: list[str], cwd: Path | None, env: dict[str, str], out: Path, err: Path, marker: int | None
) -> subprocess.Popen[bytes]:
    """No preexec_fn: cbr runs threads, and a child forked from a threaded process may deadlock before
    it execs (CPython's warning); launch.py does in a process of its own what preexec_fn did."""
    with out.open("wb") as stdout, err.open("wb") as stderr:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            pass_fds=() if marker is None else (marker,),
        )


@contextlib.contextmanager
def _start_marker(
    isolate: bool,
) -> Iterator[tuple[int | None, Callable[[], bool], Callable[[], None]]]:
    """(the fd the sandbox writes "started" to, whether it did, our copy's close once the child holds
    its own): a pipe the script never holds, since untrusted/started.py closes it before the script
    starts. Unsandboxed runs have nothing to start. Each end is closed once: a second close of a number
    another thread has opened since closes that thread's file (a subprocess pipe, seen as EBADF)."""
    if not isolate:
        yield None, lambda: True, lambda: None
        return
    read, write = os.pipe()
    os.set_blocking(read, False)
    held = {read, write}

    def close(fd: int) -> None:
        if fd in held:
            held.discard(fd)
            os.close(fd)

    try:
        yield write, lambda: _drained(read) == b"started", lambda: close(write)
    finally:
        for fd in list(held):
            close(fd)


def _drained(fd: int) -> bytes:
    try:
        return os.read(fd, 64)
    except BlockingIOError:
        return b""


def run_sandboxed(
    command: list[str],
    *,
    space: Scratch,
    stdout_path: Path,
    stderr_path: Path,
    policy: SandboxPolicy,
    hidden: tuple[Path, ...] = (),
    max_output_bytes: int = MAX_OUTPUT_BYTES,
    environment: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
    read_only: tuple[tuple[Path, str], ...] = (),
) -> ProcessOutcome:
    """Run `command` (paths relative to the workspace) in `space` and watch it until it ends, breaks a
    limit, or `cancel` is set. `environment` adds variables of ours (never the caller's own environment);
    `read_only` binds host files into the workspace read-only (bwrap_argv; sandboxed runs only)."""
    require_sandbox(policy.isolate)
    outputs = (stdout_path, stderr_path)
    with _group(policy) as group, _start_marker(policy.isolate) as (marker, started, handed):
        argv, cwd, env = _command(command, space, policy, marker, hidden, read_only)
        env.update(environment or {})
        watch = Watch(policy, space, group, outputs, max_output_bytes, cancel)
        proc = _start(_launcher(argv, policy, group), cwd, env, stdout_path, stderr_path, marker)
        handed()  # the child holds its copy; ours would keep the pipe open for nothing
        status, broke = wait(proc, watch)
        wall = time.monotonic() - watch.start
        outcome = ProcessOutcome(
            exit_code=os.waitstatus_to_exitcode(status),
            timed_out=broke == "timeout",
            memory_exceeded=broke == "memory" or (group.oom_killed() if group else False),
            output_exceeded=broke == "output" or cap_outputs(outputs, max_output_bytes),
            disk_exceeded=broke == "disk"
            or space.over_limit()
            or space.holds_file_of(int(policy.disk_mb * 2**20)),
            wall_time=wall,
            peak_memory_mb=_peak(group, watch),
            isolated=policy.isolate,
            network=policy.allow_network,
            processes_exceeded=group.pids_refused() if group else False,
            limits=_limits(group, space),
            started=started(),
            cancelled=broke == "cancelled",
        )
    return outcome


def _command(
    command: list[str],
    space: Scratch,
    policy: SandboxPolicy,
    marker: int | None,
    hidden: tuple[Path, ...],
    read_only: tuple[tuple[Path, str], ...],
) -> tuple[list[str], Path | None, dict[str, str]]:
    """(argv, working folder, environment) of the command: inside bubblewrap, announced on `marker`, or
    (--no-sandbox) as it is, in the scratch folder."""
    if policy.isolate:
        space.hand_over()
        argv = bwrap_argv(_announced(command, marker), space.path, policy, hidden, read_only)
        return argv, None, child_environment(policy.cores, "/tmp")
    return command, space.path, child_environment(policy.cores, str(space.path))


def _announced(command: list[str], marker: int | None) -> list[str]:
    """`command` behind untrusted/started.py, which tells cbr on `marker` that the sandbox started it."""
    return [sys.executable, "-I", "-S", "-c", _STARTED, str(marker), *command]


def _peak(group: Cgroup | None, watch: Watch) -> float:
    peak = group.peak_mb() if group and group.has("memory") else None
    return peak if peak is not None else watch.peak_mb


def _limits(group: Cgroup | None, space: Scratch) -> dict[str, str]:
    """How each limit was enforced here."""
    return {
        "memory": "cgroup" if group and group.has("memory") else "poll",
        "processes": "cgroup" if group and group.has("pids") else "rlimit",
        "disk": "filesystem" if space.filesystem else "walk",
    }
