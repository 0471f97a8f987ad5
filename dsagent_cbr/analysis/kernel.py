"""A stateful Python kernel in the sandbox, for code written cell by cell (an agent's analysis).

    with SandboxedKernel([Path("sales.csv")]) as kernel:
        kernel.run_cell("import pandas as pd; df = pd.read_csv('sales.csv')", timeout=60)
        print(kernel.run_cell("df.shape", timeout=60).result)
        write_notebook(kernel.cells, Path("analysis.ipynb"))

Variables live on between cells; the data files sit in the kernel's working folder under their own
names, read-only. A cell past its time limit is interrupted (an `interrupt_request` on the control
channel: ipykernel sends itself SIGINT, which its pid namespace would not let cbr do); one that does
not stop within INTERRUPT_GRACE seconds has the whole sandbox stopped, and the kernel is then dead:
later cells raise KernelDied until `restart()` starts a fresh kernel, without the old state."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from queue import Empty

from jupyter_client.blocking import BlockingKernelClient

from dsagent_cbr.analysis.cells import CellResult, Collector, finished
from dsagent_cbr.analysis.session import KernelProcess, drain, stage_data, start_kernel
from dsagent_cbr.sandbox import SandboxPolicy, require_sandbox
from dsagent_cbr.sandbox.leftovers import maker_alive
from dsagent_cbr.sandbox.scratch import unmount_stale

DEFAULT_POLICY = SandboxPolicy(timeout=3600.0, memory_mb=4096.0)
START_TIMEOUT = 60.0  # for the kernel to answer: importing ipykernel takes a second or two
INTERRUPT_GRACE = 5.0  # for an interrupted cell to give the kernel back
POLL = 0.1
_OWN = re.compile(r"^cbr-analysis-(\d+)-[^/]+$")


class KernelDied(Exception):
    """The kernel is gone (a limit, a crash, a cell that would not stop): `restart()` gives a fresh
    one, with none of the state the cells built."""


class SandboxedKernel:
    """A context manager: on enter a kernel runs in the sandbox, on exit nothing of it is left."""

    def __init__(
        self,
        data: Sequence[Path] = (),
        *,
        policy: SandboxPolicy | None = None,
        folder: Path | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        """`data`: files (or folders) the cells read by their names; `folder`: where the session
        keeps its workspace, the data's read-only copies and the kernel's own output (kernel/), by
        default a temporary folder removed at the end (a given one keeps kernel/)."""
        self.data = [Path(p) for p in data]
        self.policy = policy or DEFAULT_POLICY
        self.start_timeout = start_timeout
        self.cells: list[CellResult] = []  # the cells of the kernel now running: its notebook
        self.restarts = 0
        self._given = folder
        self._folder: Path | None = None
        self._staged: dict[str, Path] = {}
        self._proc: KernelProcess | None = None
        self._dead: str | None = None

    def __enter__(self) -> SandboxedKernel:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def data_names(self) -> list[str]:
        """The files the cells read, by the paths they read them by (relative to their working
        folder): a data folder's files one by one, in order, without hidden ones."""
        names = []
        for name, copy in self._staged.items():
            if not copy.is_dir():
                names.append(name)
                continue
            inside = sorted(p.relative_to(copy) for p in copy.rglob("*") if p.is_file())
            names += [f"{name}/{p.as_posix()}" for p in inside if not _hidden(p)]
        return names

    @property
    def data_folder(self) -> Path | None:
        """Where the data's read-only copies are on this side: data_names are relative to it."""
        return self._folder / "data" if self._folder is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.running and self._dead is None

    def start(self) -> None:
        """Copy the data out of the user's reach and start the kernel (KernelStartError if it fails)."""
        require_sandbox(self.policy.isolate)
        if self._folder is None:
            self._folder = self._given or _own_folder()
            (self._folder / "data").mkdir(parents=True)
            self._staged = stage_data(self.data, self._folder / "data")
            (self._folder / "data").chmod(0o555)
        self._proc = start_kernel(self._folder, self._staged, self.policy, self.start_timeout)
        self._dead = None

    def restart(self) -> None:
        """A fresh kernel in a fresh workspace: the state and the cells of the old one are gone."""
        if self._proc is not None:
            self._proc.close(grace=1.0)
            self._proc = None
        self.cells = []
        self.restarts += 1
        self.start()

    def close(self) -> None:
        """Shut the kernel down, stop its sandbox, and remove what this object made."""
        if self._proc is not None:
            self._proc.close()
            self._proc = None
        if self._folder is not None and self._given is None:
            _remove(self._folder)
        elif self._folder is not None:
            _remove(self._folder / "data")
        self._folder = None

    def run_cell(self, code: str, timeout: float = 60.0) -> CellResult:
        """Run `code` in the kernel and collect what it gives back. Never raises for the code's own
        failures (an exception, the time limit, a limit that killed the kernel: see the result);
        raises KernelDied when the kernel was already gone."""
        proc = self._usable()
        client = proc.client
        assert client is not None
        start = time.monotonic()
        msg_id = client.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        collector = Collector(msg_id)
        timed_out, note = self._collect(proc, collector, start + timeout)
        if timed_out and not note:
            note = (
                f"Stopped: the cell ran past its time limit of {timeout:g} s and was interrupted."
            )
        result = finished(
            collector,
            code,
            time.monotonic() - start,
            timed_out=timed_out,
            note=note,
            died=self._dead is not None,
        )
        self.cells.append(result)
        if self._dead is None:
            drain(client)  # the execute_reply on shell; iopub is past this cell's idle
        return result

    def _usable(self) -> KernelProcess:
        if self._proc is None:
            raise KernelDied("The analysis kernel is not started (use it as a context manager).")
        gone = self._proc.gone() if self._dead is None else None
        if gone is not None:
            self._dead = f"it died between cells: {gone}"
        if self._dead is not None:
            raise KernelDied(
                f"The analysis kernel is gone: {self._dead}. restart() starts a fresh one, "
                "without the state of earlier cells."
            )
        return self._proc

    def _collect(
        self, proc: KernelProcess, collector: Collector, deadline: float
    ) -> tuple[bool, str | None]:
        """Read iopub until the cell's idle; (whether it was interrupted, what ended it otherwise)."""
        client = proc.client
        assert client is not None
        interrupted: float | None = None
        while True:
            now = time.monotonic()
            if interrupted is None and now > deadline:
                interrupt(client)
                interrupted = now
            elif interrupted is not None and now > interrupted + INTERRUPT_GRACE:
                proc.kill()
                return True, self._died(
                    f"the cell did not stop within {INTERRUPT_GRACE:g} s of its interrupt at its "
                    "time limit, so cbr stopped it"
                )
            gone = proc.gone()
            if gone is not None:
                _take_rest(client, collector)
                return interrupted is not None, self._died(gone)
            try:
                msg = client.get_iopub_msg(timeout=POLL)
            except Empty:
                continue
            if collector.add(msg):
                return interrupted is not None, None

    def _died(self, reason: str) -> str:
        self._dead = reason
        return f"The kernel is gone: {reason}. Its state is lost; restart() starts a fresh kernel."


def _hidden(path: Path) -> bool:
    return any(part.startswith(".") for part in path.parts)


def interrupt(client: BlockingKernelClient) -> None:
    """ipykernel answers `interrupt_request` on its control channel (handled in a thread of its own
    while a cell runs) by sending SIGINT to itself: KeyboardInterrupt in the cell."""
    client.control_channel.send(client.session.msg("interrupt_request", {}))


def _take_rest(client: BlockingKernelClient, collector: Collector) -> None:
    """The messages a kernel sent before it died (its last output, the MemoryError it printed)."""
    with contextlib.suppress(Empty):
        while not collector.add(client.get_iopub_msg(timeout=0.2)):
            pass


def _own_folder() -> Path:
    """A temporary folder named after this cbr's pid: what a cbr killed with SIGKILL left (the data's
    copies, its workspace) the next session clears, as scratch.py does for scratch folders."""
    parent = Path(tempfile.gettempdir())
    unmount_stale()
    for child in parent.glob("cbr-analysis-*-*"):
        match = _OWN.match(child.name)
        if match and not maker_alive(int(match.group(1))) and not child.is_symlink():
            _remove(child)
    return Path(tempfile.mkdtemp(prefix=f"cbr-analysis-{os.getpid()}-", dir=parent))


def _remove(folder: Path) -> None:
    """Remove a folder holding the read-only data copies (0555 folders refuse unlinks to non-root)."""
    for root, dirs, _files in os.walk(folder):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o755)
    with contextlib.suppress(OSError):
        os.chmod(folder, 0o755)
    shutil.rmtree(folder, ignore_errors=True)
