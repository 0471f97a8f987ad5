"""How a run ends when it is told to: Ctrl-C or SIGTERM in the middle of a `--parallel 2` search on Ray.
The real command, the real sandbox, real Ray: the run exits 130 with a record that says interrupted (not
completed), the scripts in flight are killed and their scratch filesystems unmounted, and nothing is
printed as a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import prepared


def _started(runs) -> bool:
    journal = next(runs.glob("*/*/journal.jsonl"), None) if runs.is_dir() else None
    return journal is not None and '"role": "started"' in journal.read_text()


def _sandbox_alive(pid: int) -> bool:
    try:
        return "bwrap" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_parallel_search_stops_cleanly_and_says_so(tmp_path, sig):
    task, runs = prepared("concrete-strength"), tmp_path / "runs"
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "develop", str(task.root), "--model", "none",
                             "--budget", "90s", "--parallel", "2", "--runs-dir", str(runs)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _started(runs) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1)  # the first nodes' scripts are running on Ray
    children = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    summary = json.loads(next(runs.glob("*/*/summary.json")).read_text())
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert summary["outcome"] == "interrupted" and summary["exit_code"] == 130
    assert all(r["status"] != "not run" for r in summary["rows"])  # the nodes in flight left no row
    assert not [p for p in children if _sandbox_alive(p)]
    assert f"{runs}/" not in Path("/proc/self/mountinfo").read_text()  # its scratch filesystems unmounted
