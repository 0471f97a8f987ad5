"""`cbr develop --resume` reads a run folder, which is just files anyone (or an escaped script) may have
edited: nothing in it may set a limit of the sandbox, and no damage to it may crash cbr. A damaged file is
refused in one sentence naming it (exit 2), or recovered where a crash explains it (a torn last line)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import prepared

from dsagent_cbr.agent.record import load_record
from dsagent_cbr.commands.options import policy_change, policy_from
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy

CLI = [sys.executable, "-m", "dsagent_cbr.cli"]


def cbr(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One real run folder (the search, no model, a short budget), shared by every case: each corrupts
    a copy of it."""
    root = tmp_path_factory.mktemp("made")
    env = {**os.environ, "CBR_HOME": str(root / "home")}
    task = prepared("concrete-strength")
    proc = cbr("develop", str(task.root), "--model", "none", "--budget", "15s", "--store", "faiss",
               "--runs-dir", str(root / "runs"), "--json", env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    (folder,) = (root / "runs" / "concrete-strength").iterdir()
    assert len((folder / "journal.jsonl").read_bytes().splitlines()) >= 2
    return folder, env


def copy_of(made: tuple[Path, dict[str, str]], tmp_path: Path) -> Path:
    return Path(shutil.copytree(made[0], tmp_path / "run"))


def edit_config(folder: Path, edit) -> None:
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))


def refused(proc: subprocess.CompletedProcess[str], file: str) -> str:
    """The resume stopped on the user's input: exit 2, one sentence naming the file, no traceback."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and file in lines[0], proc.stderr
    return lines[0]


def _drop(config: dict, key: str) -> None:
    del config[key]


def _set_budget(config: dict) -> None:
    config["develop"]["budget"] = "twenty seconds"


CONFIGS = {
    "not JSON": lambda path: path.write_text('{"task_dir": "/tmp", "develop": {'),
    "a list": lambda path: path.write_text("[1, 2, 3]"),
    "missing keys": lambda path: edit_config(path.parent, lambda c: _drop(c, "settings")),
    "a string for a number": lambda path: edit_config(path.parent, _set_budget),
    "nested 100k deep": lambda path: path.write_text('{"task_dir": ' + "[" * 100_000 + "]" * 100_000 + "}"),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(CONFIGS))
def test_a_damaged_config_is_refused_in_one_sentence(made, tmp_path, damage):
    folder = copy_of(made, tmp_path)
    CONFIGS[damage](folder / "config.json")
    line = refused(cbr("develop", "--resume", str(folder), "--json", env=made[1]), "config.json")
    says = {"not JSON": "not JSON", "a list": "holds a JSON array",
            "missing keys": "settings: field required",
            "a string for a number": "develop.budget: input should be a valid number",
            "nested 100k deep": "not JSON cbr can read (RecursionError)"}
    assert says[damage] in line


def _garbage_line(journal: Path) -> None:
    first, *rest = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(first + b"\x00\xff\xfe garbage\n" + b"".join(rest))


def _wrong_shape(journal: Path) -> None:
    first, *rest = journal.read_bytes().splitlines(keepends=True)
    step = json.loads(first)
    del step["role"]
    journal.write_bytes(first + b"[1, 2, 3]\n" + json.dumps(step).encode() + b"\n" + b"".join(rest))


def _nested_line(journal: Path) -> None:
    first, *rest = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(first + b"[" * 100_000 + b"]" * 100_000 + b"\n" + b"".join(rest))


def _edit_execute(journal: Path, edit) -> None:
    """The first execute record (the starter's run) edited as `edit` says: the line stays a step."""
    lines = [json.loads(line) for line in journal.read_bytes().splitlines()]
    edit(next(step for step in lines if step["role"] == "execute")["output"])
    journal.write_text("".join(json.dumps(step) + "\n" for step in lines))


@pytest.mark.slow
@pytest.mark.parametrize("damage, says", [
    (_garbage_line, "line 2 (not JSON)"), (_wrong_shape, "line 2 (not a JSON object)"),
    (_nested_line, "line 2 (not JSON)"),
    (lambda journal: _edit_execute(journal, lambda output: output.pop("wall_time")),
     "the execute record of step 0 is not one (wall_time: field required)"),
    (lambda journal: _edit_execute(journal, lambda output: output.update(wall_time="fast")),
     "the execute record of step 0 is not one (wall_time: input should be a valid number"),
], ids=["garbage", "wrong shape", "nested 100k deep", "an execute record lacking a field",
        "an execute record with text for a number"])
def test_a_damaged_journal_line_is_refused_and_nothing_is_rewritten(made, tmp_path, damage, says):
    folder = copy_of(made, tmp_path)
    damage(folder / "journal.jsonl")
    before = {p: p.read_bytes() for p in (folder / "config.json", folder / "journal.jsonl")}
    assert says in refused(cbr("develop", "--resume", str(folder), "--json", env=made[1]), "journal.jsonl")
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.slow
def test_a_torn_last_journal_line_is_dropped_and_its_step_redone(made, tmp_path):
    """What a crash mid-write leaves (files.py): the step in flight is lost, the rest replayed. The run
    is cut back to its first two steps (the starter's run, then the retrieval every search begins with),
    the second torn halfway, as a kill while it was written leaves it."""
    folder = copy_of(made, tmp_path)
    journal = folder / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)[:2]
    journal.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])  # no newline: torn
    proc = cbr("develop", "--resume", str(folder), "--json", env=made[1])
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    after = [json.loads(line) for line in journal.read_bytes().splitlines()]  # every line whole again
    assert after[0] == json.loads(lines[0])
    torn = json.loads(lines[1])
    assert [(s["iteration"], s["role"]) for s in after].count((torn["iteration"], torn["role"])) == 1
    assert load_record(folder).outcome.value == json.loads(proc.stdout)["outcome"]


@pytest.mark.slow
def test_a_corrupt_summary_is_written_anew(made, tmp_path):
    folder = copy_of(made, tmp_path)
    (folder / "summary.json").write_bytes(b'{"kind": "search", "rows": [\xff')
    proc = cbr("develop", "--resume", str(folder), "--json", env=made[1])
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert load_record(folder).kind == "search"


@pytest.mark.slow
def test_resume_takes_every_sandbox_limit_from_its_command_line(made, tmp_path):
    """config.json edited to lift the time limit, starve memory and turn cgroups off: the resumed leg
    runs the starter again (its journal removed) with the command line's limits and the defaults."""
    folder = copy_of(made, tmp_path)
    for gone in ("journal.jsonl", "summary.json"):
        (folder / gone).unlink()
    shutil.rmtree(folder / "step-00")

    def weaken(config: dict) -> None:
        config["develop"].update(iterations=0, budget=None)  # the starter alone, then the run ends
        config["develop"]["policy"].update(timeout=99999, memory_mb=10, cgroups=False)

    edit_config(folder, weaken)
    proc = cbr("develop", "--resume", str(folder), "--timeout", "300", "--json", env=made[1])
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    expected = asdict(SandboxPolicy(timeout=300.0))
    assert json.loads((folder / "config.json").read_text())["develop"]["policy"] == expected
    assert json.loads((folder / "summary.json").read_text())["sandbox"] == expected
    starter = json.loads((folder / "step-00" / "exec" / "result.json").read_text())
    first = json.loads((made[0] / "step-00" / "exec" / "result.json").read_text())
    assert starter["status"] == "ok" and starter["isolated"] and not starter["network"]  # 10 MB would kill it
    assert starter["limits"] == first["limits"]  # enforced as the fresh run's were (cgroups where it had)
    said = [line for line in proc.stderr.splitlines() if line.startswith("resuming with")]
    assert said == ["resuming with --timeout 300, --memory 8192, cgroups on (the run so far used --timeout "
                    "99999, --memory 10, cgroups off; give --timeout 99999 --memory 10 to keep them)"]


def test_the_change_line_names_each_limit_once_and_only_when_one_changed():
    policy = policy_from(600.0, 8192.0, 1024.0, allow_network=False, no_sandbox=False)
    assert policy_change(asdict(policy), policy) is None
    assert policy_change({**asdict(policy), "timeout": 600}, policy) is None  # 600 is 600.0
    assert policy_change({**asdict(policy), "timeout": 1200.0}, policy) == (
        "resuming with --timeout 600 (the run so far used --timeout 1200; give --timeout 1200 to keep it)")
    assert policy_change({"isolate": False, "allow_network": True}, policy) == (
        "resuming with no network, the sandbox (the run so far used --allow-network, --no-sandbox; "
        "give --allow-network --no-sandbox to keep them)")


@pytest.mark.parametrize("before", ["a string", [1, 2], None, {"timeout": "\x1b[2J\nlong"}, {"pids": True}])
def test_the_change_line_survives_any_edited_policy(before):
    line = policy_change(before, SandboxPolicy())
    assert line is None or ("\n" not in line and "\x1b" not in line and "keep" not in line)


def test_a_damaged_ledger_line_is_refused_not_forgotten(tmp_path):
    """A budget in dollars must not forget what was spent: a ledger line that is not a call is refused in one
    sentence (a torn last line, which was never counted, is skipped)."""
    from dsagent_cbr.errors import CbrError
    from dsagent_cbr.llm.ledger import Ledger

    call = '{"role": "plan", "model": "m", "prompt_tokens": 1, "completion_tokens": 2, "latency": 0.1, "cost": 0.5, "cached": false}'
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(f"{call}\n{call[:30]}")
    assert Ledger(ledger).total_cost == 0.5
    ledger.write_text(f"{call}\n[1, 2]\n{call}\n")
    with pytest.raises(CbrError, match="damaged at line 2"):
        Ledger(ledger)
