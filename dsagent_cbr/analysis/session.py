"""One IPython kernel process, run as untrusted code in the bubblewrap sandbox for a whole session.

The kernel is one `run_sandboxed` command (sandbox/run.py) in a thread of its own: the session's
wall time is the command's time limit, and its memory, processes and disk limits bound every cell, and
whatever the cells start, together. cbr talks to it over ZeroMQ on unix sockets (`transport: ipc`) that
the kernel binds inside its workspace, so the sandbox keeps no network at all: cbr connects to the
same socket files from the host side of the workspace folder. The data files are copied out of the
user's folder and bound read-only into the workspace (`read_only`): the kernel can read them, and can
neither write, truncate, remove nor rename them.

When cbr dies the kernel dies with it: `--die-with-parent` kills bubblewrap, and with it the pid
namespace holding the kernel and every process a cell started (double forks and setsid included)."""

from __future__ import annotations

import contextlib
import json
import secrets
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty

import zmq
from jupyter_client.blocking import BlockingKernelClient

from dsagent_cbr.errors import CbrError, InfrastructureError
from dsagent_cbr.harness.workspace import copy_entry
from dsagent_cbr.sandbox import ProcessOutcome, SandboxPolicy, run_sandboxed
from dsagent_cbr.sandbox.bubblewrap import WORKSPACE
from dsagent_cbr.sandbox.scratch import Scratch, scratch
from dsagent_cbr.tasks.sources import hidden_paths

CONNECTION_FILE = "kernel.json"
SOCKETS = ".kernel"  # the kernel binds <workspace>/.kernel-1 ... .kernel-5
MAX_SOCKET_PATH = 100  # a unix socket's path must fit in sun_path (108 bytes, with its end)
RESEND_SECONDS = 2.0  # how often kernel_info is asked again while the kernel starts
STDERR_TAIL = 2000
# for a kernel asked to shut down: it takes a third of a second, but one whose cells left children
# spends up to 14 s signalling them (ipykernel's _progressively_terminate_all_children), which the pid
# namespace does at once when the sandbox stops
CLOSE_GRACE = 2.0
MAX_MESSAGE_BYTES = 64 * 2**20  # a larger message from the kernel drops its connection
SETTLE_SECONDS = 3.0
CUT_OFF = (
    f"cbr lost its connection to it (a message over {MAX_MESSAGE_BYTES // 2**20} MB, such as an "
    "output too large, drops it) and stopped it"
)


class KernelStartError(InfrastructureError):
    """The sandboxed kernel did not come up: ours to fix, never the analysis code's fault."""


def connection_info(ip: str, key: str) -> dict[str, object]:
    """A connection file over unix sockets named `<ip>-<port>`: no TCP, so no network namespace."""
    ports = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
    return {
        "transport": "ipc",
        "ip": ip,
        **{name: number for number, name in enumerate(ports, start=1)},
        "key": key,
        "signature_scheme": "hmac-sha256",
        "kernel_name": "python3",
    }


def kernel_environment(home: str) -> dict[str, str]:
    """Where IPython and Jupyter keep their files: under the kernel's writable home (/tmp inside)."""
    return {
        "IPYTHONDIR": f"{home}/.ipython",
        "JUPYTER_RUNTIME_DIR": f"{home}/.jupyter/runtime",
        "JUPYTER_DATA_DIR": f"{home}/.jupyter/data",
        "JUPYTER_CONFIG_DIR": f"{home}/.jupyter/config",
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }


def kernel_command(connection: str) -> list[str]:
    # no history database: IPython's sqlite file would be one more writer for nothing
    return [
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        connection,
        "--HistoryManager.enabled=False",
    ]


@dataclass
class KernelProcess:
    """A running sandboxed kernel: its workspace, the thread that waits on the sandbox, its client."""

    space: Scratch
    policy: SandboxPolicy
    logs: Path  # the kernel process's own stdout.txt and stderr.txt (not the cells')
    cancel: threading.Event = field(default_factory=threading.Event)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    client: BlockingKernelClient | None = None
    thread: threading.Thread | None = None
    outcome: ProcessOutcome | None = None
    failure: BaseException | None = None
    monitors: list[zmq.Socket] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def serve(self, command: list[str], binds: tuple[tuple[Path, str], ...], home: str) -> None:
        """The thread's body: the whole session is this one sandboxed command."""
        try:
            self.outcome = run_sandboxed(
                command,
                space=self.space,
                stdout_path=self.logs / "stdout.txt",
                stderr_path=self.logs / "stderr.txt",
                policy=self.policy,
                hidden=tuple(hidden_paths()),
                environment=kernel_environment(home),
                cancel=self.cancel,
                read_only=binds,
            )
        except BaseException as exc:  # SandboxUnavailable and the like: told by why_ended
            self.failure = exc

    def why_ended(self) -> str:
        """Why the sandboxed kernel is gone, from what the sandbox saw (never from what it printed)."""
        done, policy = self.outcome, self.policy
        if self.failure is not None:
            return f"the sandbox failed: {self.failure}"
        if done is None:
            return "it is still running"
        reasons = [
            (done.memory_exceeded, f"the memory limit of {policy.memory_mb:g} MB was exceeded"),
            (done.timed_out, f"the session's time limit of {policy.timeout:g} s was reached"),
            (done.disk_exceeded, f"the disk limit of {policy.disk_mb:g} MB was exceeded"),
            (done.output_exceeded, "it printed more than the output limit"),
            (done.processes_exceeded, f"more than {policy.pids} processes were refused"),
            (done.cancelled, "cbr stopped it"),
            (not done.started, "the sandbox did not start it"),
        ]
        return next(
            (why for broke, why in reasons if broke), f"it exited with code {done.exit_code}"
        )

    def watch_connections(self) -> None:
        """Be told when cbr's connection to iopub or shell drops: cbr never reconnects (see _connect),
        so a kernel that sent a message over MAX_MESSAGE_BYTES is never heard again."""
        assert self.client is not None
        for channel in (self.client.iopub_channel, self.client.shell_channel):
            monitor = channel.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            self.monitors.append(monitor)
            self.stack.callback(_unmonitor, channel.socket, monitor)

    def cut_off(self) -> bool:
        """Whether a connection dropped (any event the monitors report is a disconnection)."""
        for monitor in self.monitors:
            with contextlib.suppress(zmq.Again, zmq.ZMQError):
                monitor.recv_multipart(zmq.NOBLOCK)
                return True
        return False

    def gone(self) -> str | None:
        """Why cbr can no longer use the kernel, or None while it can. A kernel that dies (the memory
        limit, say) drops its connections before the sandbox's thread has seen it end: the sandbox is
        given SETTLE_SECONDS to say what happened before a dropped connection is blamed."""
        if self.running and not self.cut_off():
            return None
        if self.running and self.thread is not None:
            self.thread.join(SETTLE_SECONDS)
        if self.running:
            self.kill()
            return CUT_OFF
        return self.why_ended()

    def stderr_tail(self) -> str:
        path = self.logs / "stderr.txt"
        with contextlib.suppress(OSError), path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - STDERR_TAIL))
            return fh.read().decode("utf-8", "replace").strip()
        return ""

    def kill(self) -> None:
        """Stop the sandbox now: the kernel and all it started go with its pid namespace."""
        self.cancel.set()
        if self.thread is not None:
            self.thread.join()

    def close(self, grace: float = CLOSE_GRACE) -> None:
        """Ask the kernel to shut down, give it `grace` seconds, then stop the sandbox and clear up."""
        if self.running and self.client is not None and not self.cancel.is_set():
            with contextlib.suppress(Exception):
                self.client.shutdown()
            self.thread.join(grace)  # type: ignore[union-attr]
        self.stack.close()


def start_kernel(
    folder: Path, data: dict[str, Path], policy: SandboxPolicy, timeout: float
) -> KernelProcess:
    """Start a kernel in a fresh workspace under `folder`, `data` (name: a read-only copy on the host)
    shown in it, and wait until it answers; KernelStartError when it does not."""
    logs = folder / "kernel"
    logs.mkdir(parents=True, exist_ok=True)
    stack = contextlib.ExitStack()
    deadline = time.monotonic() + timeout
    try:
        space = stack.enter_context(scratch(folder, 0.0, policy.disk_mb))
        proc = KernelProcess(space=space, policy=policy, logs=logs, stack=stack)
        info = _launch(proc, data)
        _connect(proc, info, deadline)
        _wait_ready(proc, deadline)
        return proc
    except BaseException:
        stack.close()
        raise


def _launch(proc: KernelProcess, data: dict[str, Path]) -> dict[str, object]:
    """Write the connection file and start the sandbox thread; the connection info for cbr's side."""
    space, isolate = proc.space, proc.policy.isolate
    host_ip = str(space.path / SOCKETS)
    if len(host_ip) + 3 > MAX_SOCKET_PATH:
        raise KernelStartError(
            f"The analysis folder's path is too long for the kernel's unix sockets: {space.path}"
        )
    for name, source in data.items():  # mount points, or (unsandboxed) plain copies
        if not isolate:
            copy_entry(source, space.path / name, "the data of an analysis")
        elif source.is_dir():
            (space.path / name).mkdir()
        else:
            (space.path / name).touch()
    key = secrets.token_hex(32)
    inside = f"{WORKSPACE}/{SOCKETS}" if isolate else host_ip
    (space.path / CONNECTION_FILE).write_text(json.dumps(connection_info(inside, key)))
    space.settle()
    folder = WORKSPACE if isolate else str(space.path)
    binds = tuple((source, name) for name, source in data.items()) if isolate else ()
    home = "/tmp" if isolate else str(space.path / ".home")
    command = kernel_command(f"{folder}/{CONNECTION_FILE}")
    proc.thread = threading.Thread(
        target=proc.serve, args=(command, binds, home), name="analysis-kernel", daemon=True
    )
    proc.thread.start()
    proc.stack.callback(proc.kill)  # before the scratch folder goes (last in, first out)
    return connection_info(host_ip, key)


def _socket_paths(info: dict[str, object]) -> list[Path]:
    return [Path(f"{info['ip']}-{info[name]}") for name in info if str(name).endswith("_port")]


def _connect(proc: KernelProcess, info: dict[str, object], deadline: float) -> None:
    """Connect once the kernel has bound its sockets, and never again. The socket files lie in a
    folder the kernel owns: were cbr to reconnect (zmq's default, whenever a connection drops), a cell
    could have put there a symlink to any unix socket of the host, and cbr would connect to it."""
    paths = _socket_paths(info)
    while not all(_is_socket(path) for path in paths):
        _check_running(proc)
        if time.monotonic() > deadline:
            raise KernelStartError(_late(proc))
        time.sleep(0.05)
    context = zmq.Context()
    proc.stack.callback(context.destroy, linger=0)
    context.setsockopt(zmq.RECONNECT_IVL, -1)  # the first connection is the only one
    context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # what one message may make cbr hold
    proc.client = BlockingKernelClient(context=context)
    proc.client.load_connection_info(info)
    proc.client.start_channels(hb=False)
    proc.stack.callback(proc.client.stop_channels)
    proc.watch_connections()


def _unmonitor(socket: zmq.Socket, monitor: zmq.Socket) -> None:
    with contextlib.suppress(zmq.ZMQError):
        socket.disable_monitor()
    monitor.close(linger=0)


def _is_socket(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_ISSOCK(path.lstat().st_mode)
    return False


def _check_running(proc: KernelProcess) -> None:
    if not proc.running:
        raise KernelStartError(
            f"The analysis kernel ended before it was ready ({proc.why_ended()}): "
            f"{proc.stderr_tail() or 'it printed nothing'}"
        )


def _late(proc: KernelProcess) -> str:
    return (
        f"The analysis kernel did not answer within its start time: "
        f"{proc.stderr_tail() or 'it printed nothing'}"
    )


def _wait_ready(proc: KernelProcess, deadline: float) -> None:
    """Until the kernel answers kernel_info on shell and its iopub reaches us (so no output of the
    first cell is lost), or the sandbox ends, or the `deadline` passes."""
    client = proc.client
    assert client is not None
    asked = 0.0
    while time.monotonic() < deadline:
        _check_running(proc)
        if time.monotonic() - asked > RESEND_SECONDS:
            client.kernel_info()
            asked = time.monotonic()
        try:
            reply = client.get_shell_msg(timeout=0.2)
            if reply.get("msg_type") == "kernel_info_reply":
                client.get_iopub_msg(timeout=0.5)
                drain(client)
                return
        except Empty:
            continue
    raise KernelStartError(_late(proc))


def drain(client: BlockingKernelClient) -> None:
    """Drop what waits on iopub and shell (replies to requests already answered)."""
    for get in (client.get_iopub_msg, client.get_shell_msg):
        with contextlib.suppress(Empty):
            while True:
                get(timeout=0.05)


def stage_data(files: list[Path], folder: Path) -> dict[str, Path]:
    """Copies of the data under `folder` (owned by cbr, read-only), by the name the cells use: the
    user's own files are never bound into the sandbox, so nothing there can reach them. A path the
    user names is theirs to resolve; inside a folder, a link (which could lead to a file only root
    may read) or a pipe is refused, as in a task's data."""
    staged: dict[str, Path] = {}
    for source in files:
        source = Path(source).resolve()
        name = source.name
        if name in staged or name == CONNECTION_FILE or name.startswith(SOCKETS):
            raise CbrError(f"Two data files, or a data file and the kernel, share a name: {name}")
        target = folder / name
        copy_entry(source, target, "the data of an analysis")
        for path in [target, *(target.rglob("*") if target.is_dir() else [])]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        staged[name] = target
    return staged
