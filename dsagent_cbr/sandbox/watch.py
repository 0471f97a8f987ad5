"""The limits a sandboxed command is held to while it runs, checked from outside by polling: wall time,
memory where no memory cgroup counts it, output, and disk. The first one broken ends the whole tree;
whatever it left behind goes with it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from dsagent_cbr.sandbox import usage
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.sandbox.cgroups import Cgroup
from dsagent_cbr.sandbox.scratch import Scratch

POLL_SECONDS = 0.05
DISK_POLL_SECONDS = 0.5


@dataclass
class Watch:
    """The limits checked while the child runs; the first one broken ends it."""

    policy: SandboxPolicy
    space: Scratch
    group: Cgroup | None
    outputs: tuple[Path, Path]
    max_output: int
    cancel: threading.Event | None = None
    start: float = field(default_factory=time.monotonic)
    peak_mb: float = 0.0
    next_disk: float = 0.0

    @property
    def polls_memory(self) -> bool:
        return not (self.group and self.group.has("memory"))

    def broken(self, members: list[psutil.Process]) -> str | None:
        now = time.monotonic()
        if self.cancel is not None and self.cancel.is_set():
            return "cancelled"
        if now - self.start > self.policy.timeout:
            return "timeout"
        if self.polls_memory:
            tmpfs = int(self.policy.memory_mb * 2**20) if self.policy.isolate else 0
            used = usage.memory_mb(members, tmpfs, self.policy.memory_mb)
            self.peak_mb = max(self.peak_mb, used)
            if used > self.policy.memory_mb:
                return "memory"
        if sum(p.stat().st_size for p in self.outputs) > self.max_output:
            return "output"
        if now >= self.next_disk:
            # a walk costs more
            self.next_disk = now + DISK_POLL_SECONDS * (1 if self.space.filesystem else 4)
            if self.space.over_limit():
                return "disk"
        return None


def _kill(processes: list[psutil.Process]) -> None:
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.kill()


def wait(proc: subprocess.Popen[bytes], watch: Watch) -> tuple[int, str | None]:
    """Watch the child until it ends or breaks a limit; returns its wait status and the limit broken."""
    root = psutil.Process(proc.pid)
    members = [root]
    try:
        while True:
            done_pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if done_pid == proc.pid:
                return status, None
            members = usage.tree(root) or members
            reason = watch.broken(members)
            if reason:
                _kill(members)
                return os.wait4(proc.pid, 0)[1], reason
            time.sleep(POLL_SECONDS)
    except BaseException:  # Ctrl-C or an error of ours: the child never outlives the run
        _kill(usage.tree(root) or members)
        with contextlib.suppress(ChildProcessError):
            os.wait4(proc.pid, 0)
        raise
    finally:  # whatever the child left behind (a daemonised grandchild, say) goes with it
        _kill([p for p in members[1:] if p.is_running()])


def cap_outputs(paths: tuple[Path, Path], limit: int) -> bool:
    """Whether the output grew (or was ftruncate'd) past the limit; such a file is cut to it, so that
    nothing reads it whole."""
    over = False
    for path in paths:
        with contextlib.suppress(OSError):
            if path.stat().st_size > limit:
                over = True
                os.truncate(path, limit)
    return over
