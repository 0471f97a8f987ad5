"""The analysis kernel (dsagent_cbr/analysis/): a real IPython kernel in the real sandbox, run cell by
cell, attacked through its cells as generated code would, and the notebook its session writes, run
again under nbclient. The first tests are the pure helpers, in milliseconds."""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from support.attacks import Listener

from dsagent_cbr.analysis import (
    CellResult,
    KernelDied,
    KernelStartError,
    SandboxedKernel,
    write_notebook,
)
from dsagent_cbr.analysis import session as kernel_session
from dsagent_cbr.analysis.cells import Bounded, Collector, capped, finished, strip_ansi
from dsagent_cbr.analysis.notebook import RAISES, build_notebook
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy, _python_roots, bwrap_problem

REPO = Path(__file__).resolve().parents[1]
POLICY = SandboxPolicy(timeout=300.0, memory_mb=1024.0, disk_mb=256.0)
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}")
DATA = "city,sales\nLyon,3\nNantes,5\nLyon,4\n"


def _msg(parent: str, kind: str, content: dict) -> dict:
    return {"parent_header": {"msg_id": parent}, "header": {"msg_type": kind}, "content": content}


def test_ansi_codes_are_stripped_and_long_text_keeps_head_and_tail():
    assert strip_ansi("\x1b[0;31mZeroDivisionError\x1b[0m: x\x1b[1;32m") == "ZeroDivisionError: x"
    text = "a" * 100 + "b" * 100
    cut = capped(text, 50)
    assert cut.startswith("a" * 25) and cut.endswith("b" * 25) and "150 characters cut" in cut
    assert capped("short", 50) == "short"
    pieces = Bounded(10)
    for piece in ["0123", "4567", "89ab", "cdef"]:
        pieces.add(piece)
    assert pieces.text == "01234" + "\n[... 6 characters cut ...]\n" + "bcdef"
    whole = Bounded(100)
    whole.add("abc")
    whole.add("def")
    assert whole.text == "abcdef"


def test_a_collector_reads_its_own_cell_and_bounds_it():
    c = Collector("m1")
    assert not c.add(_msg("other", "stream", {"name": "stdout", "text": "not mine"}))
    assert not c.add(_msg("m1", "stream", {"name": "stdout", "text": "x" * 50_000}))
    assert not c.add(_msg("m1", "stream", {"name": "stdout", "text": "end"}))
    assert not c.add(_msg("m1", "execute_result", {"data": {"text/plain": "42"}}))
    assert not c.add(_msg("m1", "error", {"ename": "ValueError", "evalue": "bad",
                                          "traceback": ["\x1b[31mValueError\x1b[0m: bad"]}))
    assert not c.add(_msg("m1", "status", {"execution_state": "busy"}))
    assert not c.add({"parent_header": "junk", "content": []})  # a hostile kernel's message
    assert c.add(_msg("m1", "status", {"execution_state": "idle"}))
    result = finished(c, "code", 0.5)
    assert not result.ok and result.result == "42" and "not mine" not in result.stdout
    assert len(result.stdout) < 21_000 and "characters cut" in result.stdout
    assert result.stdout.endswith("end") and "\x1b" not in result.error
    assert [o["output_type"] for o in result.outputs] == ["stream", "execute_result", "error"]


def test_the_notebook_keeps_replayable_cells_and_tags_errors(tmp_path):
    cells = [
        CellResult("x = 1", ok=True),
        CellResult("x + 1", ok=True, result="2", outputs=[
            {"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {},
             "execution_count": None}]),
        CellResult("1/0", ok=False, error="ZeroDivisionError: division by zero", outputs=[
            {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
             "traceback": ["..."]}]),
        CellResult("while True: pass", ok=False, timed_out=True),
        CellResult("print(x)", ok=True, stdout="1\n",
                   outputs=[{"output_type": "stream", "name": "stdout", "text": "1\n"}]),
    ]
    path = write_notebook(cells, tmp_path / "out" / "analysis.ipynb", title="Sales")
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.source for c in code] == ["x = 1", "x + 1", "1/0", "print(x)"]
    assert [c.execution_count for c in code] == [1, 2, 3, 4]
    assert code[1].outputs[0].execution_count == 2 and code[2].metadata.tags == [RAISES]
    assert [p.name for p in path.parent.iterdir()] == ["analysis.ipynb"]  # no temp file left
    assert build_notebook([]).cells == []


def test_rich_outputs_keep_their_types_and_a_bad_one_falls_back_to_text():
    c = Collector("m")
    c.add(_msg("m", "display_data", {"data": {"application/json": {"a": 1}, "text/plain": "{'a': 1}"}}))
    c.add(_msg("m", "display_data", {"data": {"image/png": ["iVBO", "Rw0K"]}}))
    good = finished(c, "show()", 0.1)
    assert good.outputs[0]["data"]["application/json"] == {"a": 1}
    assert good.outputs[1]["data"]["image/png"] == "iVBORw0K"
    assert build_notebook([good]).cells[0].outputs[0].data["application/json"] == {"a": 1}
    bad = CellResult("x", ok=True, outputs=[{"output_type": "display_data", "metadata": {},
                                            "data": {"image/png": {"not": "text"}, "text/plain": "x"}}])
    assert build_notebook([bad]).cells[0].outputs[0].data == {"text/plain": "x"}


# ---- a real kernel in the real sandbox ----


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "user" / "sales.csv"
    path.parent.mkdir()
    path.write_text(DATA)
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sleepers(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


@pytest.mark.slow
@needs_bwrap
def test_state_lives_between_cells_and_errors_come_back_plain(data_file):
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        assert kernel.data_names == ["sales.csv"]
        assert kernel.run_cell("x = 41").ok
        assert kernel.run_cell("x + 1").result == "42"
        printed = kernel.run_cell("import os\nprint('cwd', os.getcwd())\nprint(len(open('sales.csv').read()))")
        assert printed.ok and printed.stdout == f"cwd /workspace\n{len(DATA)}\n"
        failed = kernel.run_cell("def f():\n    raise ValueError('no such column')\nf()")
        assert not failed.ok and failed.error.startswith("ValueError: no such column")
        assert "\x1b" not in failed.error and "Traceback" in failed.error
        assert kernel.run_cell("x").result == "41"  # an error leaves the state alone
        folder = kernel._folder
    assert not folder.exists() and str(folder) not in Path("/proc/self/mountinfo").read_text()


@pytest.mark.slow
@needs_bwrap
def test_a_kernel_that_cannot_start_is_ours_and_says_why(data_file, monkeypatch):
    failing = [sys.executable, "-c", "import sys; sys.exit('no ipykernel here')"]
    monkeypatch.setattr(kernel_session, "kernel_command", lambda _connection: failing)
    expected = "ended before it was ready.*code 1.*no ipykernel here"
    with pytest.raises(KernelStartError, match=expected), SandboxedKernel([data_file], policy=POLICY):
        pass


@pytest.mark.slow
@needs_bwrap
def test_an_endless_cell_is_interrupted_at_its_limit_and_the_kernel_lives_on(data_file):
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        kernel.run_cell("kept = 'yes'")
        endless = kernel.run_cell("while True:\n    pass", timeout=2)
        assert endless.timed_out and not endless.ok and not endless.kernel_died
        assert "KeyboardInterrupt" in endless.error and "time limit of 2 s" in endless.error
        assert 2 <= endless.seconds < 6
        assert kernel.alive and kernel.run_cell("kept").result == "'yes'"


@pytest.mark.slow
@needs_bwrap
def test_a_cell_deaf_to_interrupts_costs_the_kernel_and_restart_gives_a_fresh_one(data_file):
    deaf = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        kernel.run_cell("state = 1")
        stuck = kernel.run_cell(deaf, timeout=1)
        assert stuck.timed_out and stuck.kernel_died and "restart()" in stuck.error
        assert not kernel.alive
        with pytest.raises(KernelDied, match="restart"):
            kernel.run_cell("1")
        kernel.restart()
        assert kernel.cells == [] and kernel.restarts == 1
        assert "NameError" in kernel.run_cell("state").error
        assert kernel.run_cell("len(open('sales.csv').read())").result == str(len(DATA))


@pytest.mark.slow
@needs_bwrap
def test_cells_cannot_reach_outside_their_workspace(tmp_path, data_file):
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("the answers")
    listener = Listener()
    before = _digest(data_file)
    attacks = {
        "secret": f"open({str(secret)!r}).read()",
        "root": "open('/root/.bashrc').read()",
        "internet": "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)",
        "loopback": f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=2)",
        "write": "open('sales.csv', 'w').write('pwned')",
        "append": "open('sales.csv', 'a').write('pwned')",
        "delete": "import os\nos.remove('sales.csv')",
        "rename": "import os\nos.rename('sales.csv', 'moved.csv')",
        "chmod": "import os\nos.chmod('sales.csv', 0o666)",
        "truncate": "import os\nos.truncate('sales.csv', 0)",
    }
    try:
        with SandboxedKernel([data_file], policy=POLICY) as kernel:
            results = {name: kernel.run_cell(code, timeout=20) for name, code in attacks.items()}
            still = kernel.run_cell("open('sales.csv').read()").result
            root = kernel.run_cell("import os\nsorted(os.listdir('/root'))").result
    finally:
        listener.close()
    assert {name for name, r in results.items() if r.ok} == set(), {n: r.result for n, r in results.items()}
    # each refused by the system (no such file, read-only, busy mount point, unreachable), not a typo
    names = {name: r.error.split(":")[0] for name, r in results.items()}
    assert all(issubclass(getattr(builtins, n, type(None)), OSError) for n in names.values()), names
    assert all("the answers" not in r.result + r.stdout for r in results.values())
    assert still == repr(DATA)
    # of /root only the folders above the Python environment (bound read-only) show
    shown = {Path(r).relative_to("/root").parts[0] for r in _python_roots() if r.startswith("/root/")}
    assert root == repr(sorted(shown))
    assert listener.accepted == 0 and _digest(data_file) == before


class UnixListener:
    """A unix socket of the host's, counting the connections it accepts."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="cbr-unix-"))  # short: sun_path is 108 bytes
        self.path = self.folder / "host.sock"
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(self.path))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.accepted, self._stop = 0, False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            with contextlib.suppress(OSError):
                self.sock.accept()[0].close()
                self.accepted += 1

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()
        shutil.rmtree(self.folder)


@pytest.mark.slow
@needs_bwrap
def test_cbr_never_follows_a_cells_symlinks_to_the_hosts_sockets(data_file):
    """The kernel's socket files lie in its own folder: a cell swaps them for symlinks to a socket of
    the host and drops every connection (by exiting). cbr, root here, must not connect again."""
    listener = UnixListener()
    cell = textwrap.dedent(f"""
        import os
        for n in range(1, 6):
            os.rename(f'.kernel-{{n}}', f'.old-{{n}}')
            os.symlink({str(listener.path)!r}, f'.kernel-{{n}}')
        os._exit(0)
    """)
    try:
        with SandboxedKernel([data_file], policy=POLICY) as kernel:
            died = kernel.run_cell(cell, timeout=10)
            time.sleep(1.0)  # zmq reconnects within 0.1 s by default
    finally:
        listener.close()
    assert died.kernel_died and "exited with code 0" in died.error
    assert listener.accepted == 0


@pytest.mark.slow
@needs_bwrap
def test_processes_a_cell_starts_do_not_outlive_the_session(data_file):
    marker = f"cbr-analysis-sleeper-{os.getpid()}"
    cell = textwrap.dedent(f"""
        import os, shutil, subprocess
        subprocess.Popen([{marker!r}, "1000"], executable=shutil.which("sleep"))
        subprocess.Popen([{marker!r}, "1000"], executable=shutil.which("sleep"), start_new_session=True)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", [{marker!r}, "1000"])
            os._exit(0)
        os.wait()
    """)
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        assert kernel.run_cell(cell).ok
        time.sleep(0.5)
        assert len(_sleepers(marker)) == 3  # a child, one in a session, a daemonised grandchild
    time.sleep(0.5)
    assert not _sleepers(marker)


@pytest.mark.slow
@needs_bwrap
def test_a_memory_hog_is_stopped_and_reported(data_file):
    policy = SandboxPolicy(timeout=120.0, memory_mb=512.0, disk_mb=64.0)
    with SandboxedKernel([data_file], policy=policy) as kernel:
        hog = kernel.run_cell("blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))", timeout=60)
        assert not hog.ok and not hog.timed_out
        assert "MemoryError" in hog.error or "memory limit of 512 MB" in hog.error
        if hog.kernel_died:
            kernel.restart()
        assert kernel.run_cell("1 + 1").result == "2"
    assert psutil.virtual_memory().available > 256 * 2**20


@pytest.mark.slow
@needs_bwrap
def test_an_output_too_large_for_cbr_costs_the_kernel_and_says_so(data_file):
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        assert len(kernel.run_cell("'x' * 10**7").result) < 21_000  # big, but kept head and tail
        huge = kernel.run_cell("'y' * 10**8", timeout=30)
        assert huge.kernel_died and not huge.timed_out and "over 64 MB" in huge.error
        with pytest.raises(KernelDied, match="lost its connection"):
            kernel.run_cell("1")


@pytest.mark.slow
@needs_bwrap
def test_the_session_dies_with_cbr(tmp_path, data_file):
    marker = f"cbr-analysis-orphan-{os.getpid()}"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from dsagent_cbr.analysis import SandboxedKernel
        from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
        with SandboxedKernel([Path({str(data_file)!r})], policy=SandboxPolicy(timeout=300)) as k:
            k.run_cell("import os\\nif os.fork() == 0:\\n    os.setsid()\\n    os.execvp('sleep', [{marker!r}, '1000'])")
            print(k._folder, flush=True)
            time.sleep(300)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cbr = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        left = Path(cbr.stdout.readline().decode().strip())
        assert left.name.startswith(f"cbr-analysis-{cbr.pid}-") and _sleepers(marker)
    finally:
        cbr.send_signal(signal.SIGKILL)
        cbr.wait()
    deadline = time.monotonic() + 10
    while _sleepers(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _sleepers(marker)
    # what the killed cbr left (its copy of the data, its workspace) the next session clears
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        assert kernel.run_cell("1").ok
    assert not left.exists() and str(left) not in Path("/proc/self/mountinfo").read_text()


@pytest.mark.slow
@needs_bwrap
def test_the_notebook_of_a_session_runs_again_under_nbclient(tmp_path, data_file):
    from nbclient import NotebookClient

    cells = [
        "import pandas as pd\ndf = pd.read_csv('sales.csv')",
        "print(df.shape)",
        "df.groupby('city')['sales'].sum().to_dict()",
        "df['missing']",
        "total = int(df['sales'].sum())\ntotal",
    ]
    with SandboxedKernel([data_file], policy=POLICY) as kernel:
        session = [kernel.run_cell(code) for code in cells]
        kernel.run_cell("while True:\n    pass", timeout=1)
        folder = tmp_path / "replay"
        path = write_notebook(kernel.cells, folder / "analysis.ipynb")
    assert [r.ok for r in session] == [True, True, True, False, True]
    shutil.copy(data_file, folder / "sales.csv")
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=60, resources={"metadata": {"path": str(folder)}}).execute()
    replayed = [c for c in notebook.cells if c.cell_type == "code"]
    assert len(replayed) == len(cells)  # the endless cell is left out
    assert replayed[1].outputs[0].text == session[1].stdout == "(3, 2)\n"
    for index in (2, 4):
        assert replayed[index].outputs[0].data["text/plain"] == session[index].result
    assert session[4].result == "12" and replayed[3].outputs[0].ename == "KeyError"
