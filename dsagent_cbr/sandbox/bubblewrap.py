"""Run one command as untrusted code, inside a bubblewrap sandbox.

The child gets a new root that holds only its workspace (read-write, at /workspace), the Python
environment and system libraries (read-only, with the data folders of the packages task data is built
from hidden), a private /tmp and /dev/shm of bounded size, and a fresh /proc of its own pid namespace
whose kernel interfaces (/proc/sys and the like) are read-only. It has no network (unless asked), no
capabilities, no $HOME, no task folders, no bank, and an environment built from an allowlist.

It never runs as host root. When cbr runs as root (containers, CI), the sandbox is set up by root without
a user namespace and the script then runs as uid 65534 ("nobody") with no capabilities and no way back
(no_new_privs); otherwise it runs as cbr's own user inside a user namespace.

It dies with us (`--die-with-parent` plus the pid namespace) and within its limits: wall time; memory
for the whole tree, /tmp and /dev/shm included (a memory cgroup nested under cbr's own where one can be
made, else a poll of proportional memory); processes and threads (a pids cgroup, else RLIMIT_NPROC);
disk (a filesystem of its own where cbr may make one, see scratch.py); output. What ended it is decided
by what happened (the limits' own events, the exit code), never by words in its output.

Without bubblewrap nothing here pretends to isolate: the caller must ask for `isolate=False`
(`--no-sandbox`), and every result then says `isolated: false`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import psutil

from dsagent_cbr.cores import machine_cores, shared, usable_cores
from dsagent_cbr.errors import InfrastructureError
from dsagent_cbr.sandbox import usage
from dsagent_cbr.sandbox.cgroups import Cgroup
from dsagent_cbr.sandbox.scratch import SANDBOX_UID, Scratch

WORKSPACE = "/workspace"  # where the workspace appears inside the sandbox
POLL_SECONDS = 0.05
DISK_POLL_SECONDS = 0.5
MAX_OUTPUT_BYTES = 64 * 2**20
# /etc entries a Python data-science script may need (certificates, time zones, the loader cache);
# nothing else of the host's /etc is shown.
_ETC = (
    "ssl",
    "ca-certificates",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "hosts",
    "passwd",
    "group",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "fonts",
    "mime.types",
    "os-release",
    "protocols",
    "services",
    "matplotlibrc",
)
# Kernel interfaces under the fresh /proc that would let a process change the host, bound read-only
# over themselves (bubblewrap's own covering of them is skipped when its access check fails).
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_MAX_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
# Root sets the sandbox up without a user namespace, then the script drops to nobody for good.
LAUNCH = Path(__file__).with_name("launch.py")
_STARTED = (
    resources.files("dsagent_cbr.untrusted").joinpath("started.py").read_text(encoding="utf-8")
)
_DROP = (
    "setpriv",
    f"--reuid={SANDBOX_UID}",
    f"--regid={SANDBOX_UID}",
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
    "--",
)


class SandboxUnavailable(InfrastructureError):
    """bubblewrap is missing or cannot start here: ours to fix, never the script's fault."""


@dataclass(frozen=True)
class SandboxPolicy:
    timeout: float = 600.0
    memory_mb: float = 8192.0
    disk_mb: float = 1024.0  # the largest file, and how much the workspace may grow
    pids: int = 1024  # processes and threads at once
    cores: int = field(default_factory=usable_cores)
    allow_network: bool = False
    isolate: bool = True  # False: --no-sandbox, a plain child process
    # False: measure and bound by polling only (machines without delegation; tests)
    cgroups: bool = True

    def describe(self) -> dict[str, object]:
        return {
            "timeout_s": self.timeout,
            "memory_mb": self.memory_mb,
            "disk_mb": self.disk_mb,
            "pids": self.pids,
            "cores": self.cores,
            "network": self.allow_network,
            "sandbox": self.isolate,
        }


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


def runs_as_root() -> bool:
    return os.geteuid() == 0


@cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox here, or None when it can (probed once per process, with the
    same arguments every run uses)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (Debian/Ubuntu/Fedora package: bubblewrap)"
    if runs_as_root() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing: as root, scripts are dropped to an unprivileged user with it"
    with tempfile.TemporaryDirectory(prefix="cbr-probe-") as folder:
        argv = bwrap_argv(["true"], Path(folder), SandboxPolicy(memory_mb=64, cores=1))
        probe = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": os.environ.get("PATH", "")},
        )
    if probe.returncode != 0:
        return (
            f"bubblewrap cannot start a sandbox here ({probe.stderr.strip() or probe.returncode})"
        )
    return None


def require_sandbox(isolate: bool) -> None:
    """Refuse to run untrusted code unsandboxed unless the user said --no-sandbox."""
    problem = bwrap_problem() if isolate else None
    if problem:
        raise SandboxUnavailable(
            f"Cannot sandbox generated code: {problem}. Install it, or pass "
            "--no-sandbox to run scripts unisolated (recorded in every result)."
        )


def child_environment(cores: int, home: str) -> dict[str, str]:
    """An environment built from an allowlist: nothing of ours (keys, HF_HUB_OFFLINE...) reaches the child."""
    python_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
    }
    env.update({name: str(cores) for name in _THREAD_VARS})
    # waiting OpenMP threads spin, against the other runs' threads; alone, spinning is faster
    if shared():
        env["OMP_WAIT_POLICY"] = "PASSIVE"  # measured: docs/decisions/openmp-wait.md
    return env


def _python_roots() -> list[str]:
    """The interpreter and every site-packages folder it imports from, read-only inside."""
    roots = {sys.base_prefix, sys.prefix, *(p for p in sys.path if p.endswith("site-packages"))}
    return sorted(r for r in roots if r and Path(r).is_dir() and not r.startswith("/usr/"))


def _namespaces(policy: SandboxPolicy) -> list[str]:
    """Root needs no user namespace (it would map the script to host root); everyone else needs one."""
    if runs_as_root():
        spaces = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        spaces += [] if policy.allow_network else ["--unshare-net"]
        return [
            *spaces,
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
            "--cap-add",
            "CAP_SETPCAP",
        ]
    return [
        "--unshare-all",
        *(["--share-net"] if policy.allow_network else []),
        "--cap-drop",
        "ALL",
    ]


def _system_binds(policy: SandboxPolicy) -> list[str]:
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    names = [*_ETC, *(["resolv.conf"] if policy.allow_network else [])]
    for name in names:
        if (Path("/etc") / name).exists():
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return argv


def _python_binds() -> list[str]:
    """The Python roots, each with the folders above it made traversable (bubblewrap makes them 0700,
    which an unprivileged script could not pass)."""
    argv: list[str] = []
    made: set[Path] = set()
    for root in _python_roots():
        for ancestor in reversed(Path(root).parents[:-1]):
            if ancestor not in made:
                made.add(ancestor)
                argv += ["--perms", "0755", "--dir", str(ancestor)]
        argv += ["--ro-bind", root, root]
    return argv


def _hiding(hidden: tuple[Path, ...]) -> list[str]:
    """Cover the source data of the tasks: an empty read-only folder over a folder, /dev/null over a file.
    What lies outside the mounted Python roots is not in the sandbox to begin with."""
    roots = [Path(r) for r in _python_roots()]
    argv: list[str] = []
    for path in hidden:
        if not any(path.is_relative_to(root) for root in roots):
            continue
        if path.is_dir():
            argv += [
                "--perms",
                "0555",
                "--size",
                "4096",
                "--tmpfs",
                str(path),
                "--remount-ro",
                str(path),
            ]
        elif path.is_file():
            argv += ["--ro-bind", "/dev/null", str(path)]
    return argv


def bwrap_argv(
    command: list[str],
    workspace: Path,
    policy: SandboxPolicy,
    hidden: tuple[Path, ...] = (),
    read_only: tuple[tuple[Path, str], ...] = (),
) -> list[str]:
    """`read_only` shows (host path, name) pairs read-only at /workspace/<name>: a mount point the
    command can neither write through nor unlink or rename (EBUSY), whatever it owns around it."""
    # tmpfs is memory: it can never hold more than the limit
    size = str(int(policy.memory_mb * 2**20))
    argv = [
        "bwrap",
        *_namespaces(policy),
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        *_system_binds(policy),
        *_python_binds(),
        *_hiding(hidden),
        "--proc",
        "/proc",
    ]
    for name in _PROC_READ_ONLY:
        if Path("/proc", name).exists():
            argv += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    argv += [
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--perms",
        "1777",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--bind",
        str(workspace),
        WORKSPACE,
        *(a for src, name in read_only for a in ("--ro-bind", str(src), f"{WORKSPACE}/{name}")),
        "--chdir",
        WORKSPACE,
        "--remount-ro",
        "/",
    ]
    return [*argv, "--", *(_DROP if runs_as_root() else ()), *command]


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


@dataclass
class _Watch:
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


def _wait(proc: subprocess.Popen[bytes], watch: _Watch) -> tuple[int, str | None]:
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


def _cap_outputs(paths: tuple[Path, Path], limit: int) -> bool:
    """Whether the output grew (or was ftruncate'd) past the limit; such a file is cut to it, so that
    nothing reads it whole."""
    over = False
    for path in paths:
        with contextlib.suppress(OSError):
            if path.stat().st_size > limit:
                over = True
                os.truncate(path, limit)
    return over


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
        if policy.isolate:
            space.hand_over()
            argv = bwrap_argv(_announced(command, marker), space.path, policy, hidden, read_only)
            cwd = None
            env = child_environment(policy.cores, "/tmp")
        else:
            argv = command
            cwd = space.path
            env = child_environment(policy.cores, str(space.path))
        env.update(environment or {})
        watch = _Watch(policy, space, group, outputs, max_output_bytes, cancel)
        proc = _start(_launcher(argv, policy, group), cwd, env, stdout_path, stderr_path, marker)
        handed()  # the child holds its copy; ours would keep the pipe open for nothing
        status, broke = _wait(proc, watch)
        wall = time.monotonic() - watch.start
        limits = {
            "memory": "cgroup" if group and group.has("memory") else "poll",
            "processes": "cgroup" if group and group.has("pids") else "rlimit",
            "disk": "filesystem" if space.filesystem else "walk",
        }
        outcome = ProcessOutcome(
            exit_code=os.waitstatus_to_exitcode(status),
            timed_out=broke == "timeout",
            memory_exceeded=broke == "memory" or (group.oom_killed() if group else False),
            output_exceeded=broke == "output" or _cap_outputs(outputs, max_output_bytes),
            disk_exceeded=broke == "disk"
            or space.over_limit()
            or space.holds_file_of(int(policy.disk_mb * 2**20)),
            wall_time=wall,
            peak_memory_mb=_peak(group, watch),
            isolated=policy.isolate,
            network=policy.allow_network,
            processes_exceeded=group.pids_refused() if group else False,
            limits=limits,
            started=started(),
            cancelled=broke == "cancelled",
        )
    return outcome


def _announced(command: list[str], marker: int | None) -> list[str]:
    """`command` behind untrusted/started.py, which tells cbr on `marker` that the sandbox started it."""
    return [sys.executable, "-I", "-S", "-c", _STARTED, str(marker), *command]


def _peak(group: Cgroup | None, watch: _Watch) -> float:
    peak = group.peak_mb() if group and group.has("memory") else None
    return peak if peak is not None else watch.peak_mb
