"""cbr bench on real Ray workers: a driver SIGKILLed mid-grid leaves nothing running, and the resume
reruns nothing that had finished."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support.scripted_llm import ScriptedLLM

REPO = Path(__file__).resolve().parents[1]
MARK = "CBR_BENCH_TEST_MARK"


def marked(value: str) -> dict[int, str]:
    """pid -> command line of every live process started with MARK=value in its environment."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"{MARK}={value}".encode() in environ.split(b"\0") and state != "Z":
            found[int(entry.name)] = cmdline
    return found


def wait_until_gone(value: str, seconds: float, only: re.Pattern[str] | None = None) -> dict[int, str]:
    deadline = time.monotonic() + seconds
    while True:
        left = {p: c for p, c in marked(value).items() if only is None or only.search(c)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def done_markers(grid: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.parent.relative_to(grid / "trials")): (p.stat().st_mtime_ns, (p.parent / "trial.json").read_bytes())
            for p in (grid / "trials").glob("*/*/*/done")} if (grid / "trials").is_dir() else {}


def bench_command(grid: Path, out: Path) -> list[str]:
    # 4 tiny trials: the starter and the reference of two small tasks, two at a time on local Ray
    return [sys.executable, "-m", "dsagent_cbr.cli", "bench", "run", "--tasks", "titanic-survival,smoke-ban",
            "--agents", "starter,reference", "--parallel", "2", "--timeout", "300", "--grid", str(grid),
            "--name", "kill-test", "--out-dir", str(out)]


@pytest.mark.slow
def test_a_killed_driver_leaves_nothing_running_and_the_resume_reruns_nothing_finished(tmp_path):
    grid, out = tmp_path / "grid", tmp_path / "out"
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen(bench_command(grid, out), cwd=tmp_path, env={**env, MARK: first},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, running = time.monotonic() + 300, {}
        while driver.poll() is None and time.monotonic() < deadline:  # one trial done and another in flight
            running = {p: c for p, c in marked(first).items() if "dsagent_cbr.cli run" in c}
            if done_markers(grid) and running:
                break
            time.sleep(0.2)
        assert driver.poll() is None, driver.stdout.read().decode()[-3000:]
        assert running, "no trial was in flight when the driver was killed"
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    trials_left = wait_until_gone(first, 20, re.compile(r"dsagent_cbr\.cli|train\.py"))
    assert not trials_left, f"trial processes outlived the driver: {trials_left}"
    # A Ray worker writes a trial's record and done marker after the trial's process ends: count the
    # finished trials once the workers are gone too, or a marker written meanwhile is missed. Ray's agents
    # write nothing of ours; they outlive the driver by Ray's 60 s timeout, waited for at the end.
    wait_until_gone(first, 60, re.compile(r"ray::(?!DashboardAgent|RuntimeEnvAgent)"))
    finished = done_markers(grid)
    assert 1 <= len(finished) < 4

    resumed = subprocess.run(bench_command(grid, out), cwd=tmp_path, env={**env, MARK: second},
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"4 trials, {len(finished)} finished before, {4 - len(finished)} to run" in resumed.stdout
    after = done_markers(grid)
    assert len(after) == 4
    for trial_id, (mtime, record) in finished.items():
        assert after[trial_id] == (mtime, record), f"{trial_id} was run again"
        assert trial_id not in resumed.stdout.split("to run", 1)[1]  # not in the progress lines either
    assert (out / "bench-kill-test.md").is_file() and (out / "bench-kill-test.png").is_file()
    assert not wait_until_gone(second, 60), "the resumed grid left processes behind"
    assert not wait_until_gone(first, 120), "Ray processes of the killed driver outlived it"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_default_grid_gives_the_paper_s_deployment_measures(tmp_path):
    """`cbr bench run` with the shipped tasks and agents (one trial of each cell, not two, for CI's time):
    deploy:cbr with no model and with a model on three tasks, on local Ray; the tables come out with every
    measure filled in. The model is a loopback server that answers without code, so the structural adapter
    solves every trial: the real local model's deploy is tests/test_deploy.py's, and three of them here
    took two of CI's minutes."""
    import json

    grid, out = tmp_path / "grid", tmp_path / "out"
    env = {**os.environ, "CBR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "CBR_API_KEY": "test"}
    with ScriptedLLM(lambda messages: "I would adapt the nearest solution.") as server:
        env["CBR_BASE_URL"] = server.url
        done = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "bench", "run", "--parallel", "2", "--trials", "1",
                               "--models", "none,scripted", "--grid", str(grid), "--name", "default", "--out-dir",
                               str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((out / "bench-default.json").read_text())
    assert report["stamp"]["cores"] == os.cpu_count() and "bench run" in report["stamp"]["command"]
    assert report["tasks"] == ["smoke-ban", "titanic-survival", "deliveries-time"]
    agents = {a["agent"]: a for a in report["agents"]}
    assert set(agents) == {"deploy:cbr@none", "deploy:cbr@scripted"}
    none, model = agents["deploy:cbr@none"], agents["deploy:cbr@scripted"]
    # no model: one-pass does not apply, and the structural adapter solves these three tasks
    assert none["one_pass_asked"] == 0 and (none["runs"], none["successes"]) == (3, 3)
    # the model was asked once in every trial, wrote no script, and the adapter solved each task after it
    assert (model["runs"], model["one_pass_asked"], model["successes"]) == (3, 3, 3) and len(server.requests) == 3
    for cell in report["cells"]:
        assert 1 <= cell["best_rank"] <= cell["mean_rank"] <= cell["pool"] <= 4
        assert cell["normalised"] is not None, cell  # baselines.json has both ends for these tasks
    seeds = {}
    for record in report["trials"]:
        folder = grid / "trials" / record["id"]
        assert (folder / "done").is_file() and (folder / "bank").is_dir() and list((folder / "runs").glob("*/*/summary.json"))
        command = record["command"]
        assert "--no-cache" in command and command[command.index("--bank-dir") + 1] == str(folder / "bank")
        seeds[record["id"]] = int(command[command.index("--seed") + 1])
    assert set(seeds.values()) == {0} and all(i.endswith("trial-0") for i in seeds)
    assert (out / "bench-default.png").stat().st_size > 10_000
    assert "| deploy:cbr@scripted |" in (out / "bench-default.md").read_text()
