"""The bubblewrap sandbox: the policy a run is held to, whether bubblewrap can start here, and the new
root it builds for a command (run.py starts the command in it and watches it).

The child gets a new root that holds only its workspace (read-write, at /workspace), the Python
environment and system libraries (read-only, with the data folders of the packages task data is built
from hidden), a private /tmp and /dev/shm of bounded size, and a fresh /proc of its own pid namespace
whose kernel interfaces (/proc/sys and the like) are read-only. It has no network (unless asked), no
capabilities, no $HOME, no task folders, no bank, and an environment built from an allowlist.

It never runs as host root. When cbr runs as root (containers, CI), the sandbox is set up by root without
a user namespace and the script then runs as uid 65534 ("nobody") with no capabilities and no way back
(no_new_privs); otherwise it runs as cbr's own user inside a user namespace.

Without bubblewrap nothing here pretends to isolate: the caller must ask for `isolate=False`
(`--no-sandbox`), and every result then says `isolated: false`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from dsagent_cbr.cores import shared, usable_cores
from dsagent_cbr.errors import InfrastructureError
from dsagent_cbr.sandbox.scratch import SANDBOX_UID

WORKSPACE = "/workspace"  # where the workspace appears inside the sandbox
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
