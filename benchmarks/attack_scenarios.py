"""The attacks of the third round that are not one script under `cbr run`: a task's data, a run folder or a
bank server made hostile, a signal in the middle of a search, a column name that is not text matplotlib
can draw. Each scenario runs one version of cbr (the root of a checkout) through its command line and
says what happened: exit codes, whether a traceback was printed, what the run's record says. Shared by
benchmarks/attack_table.py; the tests that hold each of them are named in its docstring."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

Scenario = Callable[[Path, Path, dict[str, str]], dict[str, object]]
HUNG = 60  # seconds after which a command that should have refused at once counts as hung


def _cbr(root: Path, *args: str, env: dict[str, str], timeout: float = 600) -> tuple[str, str]:
    """(exit code or 'hung', stderr) of a version's `cbr`."""
    try:
        proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", *args], cwd=root, timeout=timeout,
                              env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return f"hung ({timeout:g} s)", ""
    return str(proc.returncode), proc.stderr


def _said(code: str, err: str) -> str:
    return f"exit {code}" + (", traceback" if "Traceback" in err else "")


def fifo_in_task_data(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_data_checks.py: a named pipe listed among a task's public files, named like a csv (the
    builder looks into every csv for the test ids)."""
    folder = work / f"fifo-{root.name}" / "concrete-strength"
    shutil.copytree(root / "tasks" / "concrete-strength", folder)
    os.mkfifo(folder / "data" / "notes.csv")
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('public = ["train.csv", "test.csv"]',
                                             'public = ["train.csv", "test.csv", "notes.csv"]'))
    validate = _said(*_cbr(root, "tasks", "validate", str(folder), env=env, timeout=HUNG))
    run = _said(*_cbr(root, "run", str(folder), str(folder / "train.py"), "--out", str(folder.parent / "run"),
                      env=env, timeout=HUNG))
    return {"validate": validate, "run": run}


def infinite_target(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_tasks_new.py: a training file whose target holds inf."""
    frame = pd.DataFrame({"id": range(60), "x": np.arange(60.0), "y": np.r_[np.arange(59.0), np.inf]})
    source, dest = work / f"inf-{root.name}.csv", work / f"inf-task-{root.name}"
    frame.to_csv(source, index=False)
    code, err = _cbr(root, "tasks", "new", str(dest), "--train", str(source), "--target", "y", "--holdout", "0.2",
                     env=env)
    return {"tasks new": _said(code, err), "task made": dest.is_dir()}


def _made_run(root: Path, work: Path, env: dict[str, str], name: str) -> tuple[Path, str]:
    """A finished `develop --model none` run of this version on concrete-strength, and its exit code."""
    runs = work / f"{name}-{root.name}"
    code, _ = _cbr(root, "develop", "concrete-strength", "--model", "none", "--budget", "10s", "--runs-dir",
                   str(runs), env=env)
    return next(runs.glob("*/*/")), code


def corrupt_journal(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_resume_input.py: a journal line of the wrong shape, then --resume."""
    run, _ = _made_run(root, work, env, "journal")
    with (run / "journal.jsonl").open("a") as fh:
        fh.write("[1, 2, 3]\n")
    return {"resume": _said(*_cbr(root, "develop", "--resume", str(run), env=env))}


def edited_limits(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_resume_input.py: config.json edited to lift the time limit and drop the cgroups."""
    run, _ = _made_run(root, work, env, "limits")
    config = json.loads((run / "config.json").read_text())
    config["develop"]["policy"].update({"timeout": 99999.0, "cgroups": False})
    (run / "config.json").write_text(json.dumps(config))
    code, err = _cbr(root, "develop", "--resume", str(run), env=env)
    used = json.loads((run / "config.json").read_text())["develop"]["policy"]
    return {"resume": _said(code, err), "timeout used": used.get("timeout"), "cgroups used": used.get("cgroups")}


def sigterm_parallel(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_stops.py: SIGTERM to a `--parallel 2` search while its first nodes run on Ray."""
    runs = work / f"sigterm-{root.name}"
    proc = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "develop", "concrete-strength", "--model",
                             "none", "--budget", "90s", "--parallel", "2", "--runs-dir", str(runs)], cwd=root,
                            env={**env, "PYTHONPATH": str(root)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _journaled(runs, "started"):
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    return {"develop": _said(str(proc.returncode), err), "record": _record(runs)}


def _record(runs: Path) -> str:
    """What the run's summary says ended it, or that it left none."""
    found = next(runs.glob("*/*/summary.json"), None)
    if found is None:
        return "no record"
    summary = json.loads(found.read_text())
    return f"{summary['outcome']}, {summary['stopped'][:60]}"


def _journaled(runs: Path, role: str) -> bool:
    """Whether the run under `runs` has journaled a step of `role` (its cases retrieved, a node started)."""
    journal = next(runs.glob("*/*/journal.jsonl"), None) if runs.is_dir() else None
    return journal is not None and f'"role": "{role}"' in journal.read_text()


def mathtext_column(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_report.py: an honest `--model none` run on a table with a column named `$x^$`."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"id": range(300), "$x^$": rng.normal(size=300), "z": rng.normal(size=300)})
    frame["y"] = frame["$x^$"] * 2 + rng.normal(size=300)
    source, dest = work / f"math-{root.name}.csv", work / f"math-task-{root.name}"
    frame.to_csv(source, index=False)
    _cbr(root, "tasks", "new", str(dest), "--train", str(source), "--target", "y", "--holdout", "0.2", env=env)
    runs = work / f"math-runs-{root.name}"
    code, err = _cbr(root, "develop", str(dest), "--model", "none", "--budget", "60s", "--runs-dir", str(runs),
                     env=env)
    return {"develop": _said(code, err), "report": any(runs.glob("*/*/report.md"))}


def chroma_dies(root: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """tests/test_bank_backends.py: the Chroma server the bank lives on dies while the search runs."""
    port = _free_port()
    server = _chroma(work / f"chroma-{root.name}", port)
    runs = work / f"chroma-runs-{root.name}"
    proc = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "develop", "concrete-strength", "--model",
                             "none", "--budget", "25s", "--runs-dir", str(runs), "--chroma-url",
                             f"http://127.0.0.1:{port}"], cwd=root, env={**env, "PYTHONPATH": str(root)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not _journaled(runs, "retrieve"):
        time.sleep(0.2)
    server.terminate()
    server.wait()
    _, err = proc.communicate(timeout=300)
    return {"develop": _said(str(proc.returncode), err), "record": _record(runs)}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _chroma(data: Path, port: int) -> subprocess.Popen:
    import urllib.request

    server = subprocess.Popen([shutil.which("chroma") or "chroma", "run", "--host", "127.0.0.1", "--port", str(port),
                               "--path", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
            return server
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the chroma server did not start")


SCENARIOS: dict[str, Scenario] = {
    "fifo-in-task-data": fifo_in_task_data, "infinite-target": infinite_target,
    "corrupt-journal-resume": corrupt_journal, "resume-edited-limits": edited_limits,
    "sigterm-parallel-search": sigterm_parallel, "mathtext-column-name": mathtext_column,
    "chroma-dies-mid-run": chroma_dies,
}
