"""Run one command as untrusted code, inside a bubblewrap sandbox.

The child gets a new root that holds only its workspace (read-write, at /workspace), the Python
environment and system libraries (read-only), a private /tmp and /dev/shm of bounded size and a fresh
/proc of its own pid namespace. It has no network (unless asked), no capabilities, no $HOME, no task
folders, no bank, and an environment built from an allowlist, so keys and process-wide settings stay
outside. It dies with us (`--die-with-parent` plus the pid namespace), within a wall-time limit, and
within a memory limit that counts the whole tree and its tmpfs use (a memory cgroup where the machine
lets us make one, and a poll of the tree either way).

Without bubblewrap nothing here pretends to isolate: the caller must ask for `isolate=False`
(`--no-sandbox`), and every result then says `isolated: false`."""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import psutil

from dsagent_cbr.cores import usable_cores
from dsagent_cbr.errors import CbrError

WORKSPACE = "/workspace"  # where the workspace appears inside the sandbox
POLL_SECONDS = 0.05
DISK_POLL_SECONDS = 1.0
# /etc entries a Python data-science script may need (certificates, time zones, the loader cache);
# nothing else of the host's /etc is shown.
_ETC = ("ssl", "ca-certificates", "localtime", "timezone", "nsswitch.conf", "hosts", "passwd", "group",
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "mime.types", "os-release",
        "protocols", "services", "matplotlibrc")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_MAX_THREADS",
                "VECLIB_MAXIMUM_THREADS")


class SandboxUnavailable(CbrError):
    """bubblewrap is missing or cannot start here: ours to fix, never the script's fault."""

    exit_code = 3


@dataclass(frozen=True)
class SandboxPolicy:
    timeout: float = 600.0
    memory_mb: float = 8192.0
    disk_mb: float = 4096.0  # the largest file, and the most the workspace may grow
    cores: int = field(default_factory=usable_cores)
    allow_network: bool = False
    isolate: bool = True  # False: --no-sandbox, a plain child process

    def describe(self) -> dict[str, object]:
        return {"timeout_s": self.timeout, "memory_mb": self.memory_mb, "disk_mb": self.disk_mb,
                "cores": self.cores, "network": self.allow_network, "sandbox": self.isolate}


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


@cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox here, or None when it can (probed once per process)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu/Fedora package: bubblewrap)"
    probe = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
                            "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"],
                           capture_output=True, text=True, timeout=30, env={"PATH": os.environ.get("PATH", "")})
    if probe.returncode != 0:
        return f"bubblewrap cannot start a sandbox here ({probe.stderr.strip() or probe.returncode})"
    return None


def require_sandbox(isolate: bool) -> None:
    """Refuse to run untrusted code unsandboxed unless the user said --no-sandbox."""
    problem = bwrap_problem() if isolate else None
    if problem:
        raise SandboxUnavailable(f"Cannot sandbox generated code: {problem}. Install it, or pass "
                                 "--no-sandbox to run scripts unisolated (recorded in every result).")


def child_environment(cores: int, home: str) -> dict[str, str]:
    """An environment built from an allowlist: nothing of ours (keys, HF_HUB_OFFLINE...) reaches the child."""
    python_bin = str(Path(sys.executable).parent)
    env = {"PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp",
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib"}
    env.update({name: str(cores) for name in _THREAD_VARS})
    return env


def _python_roots() -> list[str]:
    """The interpreter and every site-packages folder it imports from, read-only inside."""
    roots = {sys.base_prefix, sys.prefix, *(p for p in sys.path if p.endswith("site-packages"))}
    return sorted(r for r in roots if r and Path(r).is_dir() and not r.startswith("/usr/"))


def bwrap_argv(command: list[str], workspace: Path, policy: SandboxPolicy) -> list[str]:
    size = str(int(policy.memory_mb * 2**20))  # tmpfs is memory: it can never hold more than the limit
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    if policy.allow_network:
        argv += ["--share-net"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for name in _ETC:
        if (Path("/etc") / name).exists():
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    if policy.allow_network and Path("/etc/resolv.conf").exists():
        argv += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
    for root in _python_roots():
        argv += ["--ro-bind", root, root]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--size", size,
             "--tmpfs", "/tmp", "--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    return [*argv, "--", *command]


class _MemoryCgroup:
    """A memory cgroup (v2, or v1's memory controller) limiting the whole tree, tmpfs pages included."""

    def __init__(self, path: Path, version: int) -> None:
        self.path, self.version = path, version

    @classmethod
    def create(cls, limit_mb: float) -> _MemoryCgroup | None:
        limit = str(int(limit_mb * 2**20))
        name = f"cbr-{os.getpid()}-{secrets.token_hex(4)}"
        v2, v1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")
        try:
            if "memory" in (v2 / "cgroup.controllers").read_text().split() if (v2 / "cgroup.controllers").exists() else False:
                path = v2 / name
                path.mkdir()
                (path / "memory.max").write_text(limit)
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
                return cls(path, 2)
            if (v1 / "memory.limit_in_bytes").exists():
                path = v1 / name
                path.mkdir()
                (path / "memory.limit_in_bytes").write_text(limit)
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(limit)
                return cls(path, 1)
        except OSError:
            return None
        return None

    def join(self) -> None:
        """Called in the child between fork and exec, so every descendant starts inside."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def oom_killed(self) -> bool:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False

    def peak_mb(self) -> float:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int((self.path / name).read_text()) / 2**20
        return 0.0

    def remove(self) -> None:
        for _ in range(40):  # pages of a torn-down tmpfs are released a moment after the last process
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), 9)
                self.path.rmdir()
                return
            time.sleep(0.05)


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _rss_mb(processes: list[psutil.Process]) -> float:
    total = 0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total / 2**20


def _tmpfs_mb(processes: list[psutil.Process], size_bytes: int) -> float:
    """What the child keeps in its private /tmp and /dev/shm: memory too, however it is named. Seen
    through /proc/<pid>/root of the sandboxed processes; a mount counts only once it is one of ours
    (its size is the one we gave), not the host's /tmp of a process still setting up."""
    used: dict[str, int] = {}
    for proc in processes[1:]:
        for mount in ("tmp", "dev/shm"):
            with contextlib.suppress(OSError):
                st = os.statvfs(f"/proc/{proc.pid}/root/{mount}")
                if abs(st.f_blocks * st.f_frsize - size_bytes) <= 2 * st.f_frsize:
                    used[mount] = (st.f_blocks - st.f_bfree) * st.f_frsize
        if len(used) == 2:
            break
    return sum(used.values()) / 2**20


def _size_mb(folder: Path, limit: int = 100_000) -> float:
    total, seen = 0, 0
    stack = [folder]
    while stack and seen < limit:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                seen += 1
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total / 2**20


def _kill(processes: list[psutil.Process]) -> None:
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.kill()


@contextlib.contextmanager
def _cgroup(policy: SandboxPolicy) -> Iterator[_MemoryCgroup | None]:
    group = _MemoryCgroup.create(policy.memory_mb) if policy.isolate else None
    try:
        yield group
    finally:
        if group is not None:
            group.remove()


def run_sandboxed(command: list[str], *, workspace: Path, stdout_path: Path, stderr_path: Path,
                  policy: SandboxPolicy, max_output_bytes: int = 64 * 1024 * 1024,
                  environment: dict[str, str] | None = None) -> ProcessOutcome:
    """Run `command` (paths relative to the workspace) and watch it until it ends or breaks a limit.
    `environment` adds variables of ours (never the caller's own environment)."""
    require_sandbox(policy.isolate)
    if policy.isolate:
        argv, cwd = bwrap_argv(command, workspace, policy), None
        env = child_environment(policy.cores, "/tmp")
    else:
        argv, cwd = command, workspace
        env = child_environment(policy.cores, str(workspace))
    env.update(environment or {})
    fsize, tmpfs_bytes = int(policy.disk_mb * 2**20), int(policy.memory_mb * 2**20)
    with _cgroup(policy) as group:

        def limit_child() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if group is not None:
                group.join()

        start = time.monotonic()
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True, preexec_fn=limit_child)
        root = psutil.Process(proc.pid)
        timed_out = memory_exceeded = output_exceeded = disk_exceeded = False
        peak_mb, members, next_disk_check = 0.0, [root], start + DISK_POLL_SECONDS
        try:
            while True:
                done_pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if done_pid == proc.pid:
                    break
                members = _tree(root) or members
                used_mb = _rss_mb(members) + (_tmpfs_mb(members, tmpfs_bytes) if policy.isolate else 0.0)
                peak_mb = max(peak_mb, used_mb)
                now = time.monotonic()
                if now - start > policy.timeout:
                    timed_out = True
                elif used_mb > policy.memory_mb:
                    memory_exceeded = True
                elif stdout_path.stat().st_size + stderr_path.stat().st_size > max_output_bytes:
                    output_exceeded = True
                elif now >= next_disk_check:
                    next_disk_check = now + DISK_POLL_SECONDS
                    disk_exceeded = _size_mb(workspace) > policy.disk_mb
                if timed_out or memory_exceeded or output_exceeded or disk_exceeded:
                    _kill(members)
                    _, status, rusage = os.wait4(proc.pid, 0)
                    break
                time.sleep(POLL_SECONDS)
        except BaseException:  # Ctrl-C or an error of ours: the child never outlives the run
            _kill(_tree(root) or members)
            with contextlib.suppress(ChildProcessError):
                os.wait4(proc.pid, 0)
            raise
        wall = time.monotonic() - start
        # Whatever the child left behind (a daemonised grandchild, say) goes with it.
        _kill([p for p in members[1:] if p.is_running()])
        if group is not None:
            memory_exceeded = memory_exceeded or group.oom_killed()
            peak_mb = max(peak_mb, group.peak_mb())
    peak_mb = max(peak_mb, rusage.ru_maxrss / 1024 if rusage else 0.0)
    return ProcessOutcome(os.waitstatus_to_exitcode(status), timed_out, memory_exceeded, output_exceeded,
                          disk_exceeded, wall, peak_mb, policy.isolate, policy.allow_network)
