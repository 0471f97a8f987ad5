"""The driver's side of a grid: its folder, its base bank, and one TrialJob per unfinished trial."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.bench import trial as trials
from dsagent_cbr.bench.flaml_script import flaml_script, unsupported
from dsagent_cbr.bench.references import reference_script
from dsagent_cbr.bench.spec import GridSpec, Trial, trial_dir
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import write_json_atomic
from dsagent_cbr.tasks.loader import discover_tasks, load_task
from dsagent_cbr.tasks.model import Task

SPEC_FILE = "grid.json"
BASE_BANK = "bank-base"
CASES = "cases.jsonl"


def select_tasks(selection: str, tasks_dir: Path) -> list[str]:
    """'deployment', 'development', 'all', or comma-separated task names, in the suite's order."""
    known = {p.name: p for p in discover_tasks(tasks_dir)}
    if selection in ("all", "deployment", "development"):
        return [name for name, path in known.items() if selection == "all" or load_task(path).stage == selection]
    names = [n.strip() for n in selection.split(",") if n.strip()]
    missing = [n for n in names if n not in known]
    if missing:
        raise CbrError(f"No task folder named {', '.join(missing)} in {tasks_dir}.")
    return names


def open_grid(grid_dir: Path, spec: GridSpec) -> bool:
    """Create the grid folder, or check that it holds this grid; True when it already did (a resume)."""
    path = grid_dir / SPEC_FILE
    if path.is_file():
        saved = GridSpec.from_dict(json.loads(path.read_text(encoding="utf-8")))
        if saved.digest() != spec.digest():
            raise CbrError(f"{grid_dir} holds another grid (its grid.json differs); choose another --grid or --name.")
        return True
    grid_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, spec.to_dict())
    return False


def _cli(args: list[str], what: str) -> None:
    done = subprocess.run([*trials.cli_command(), *args], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CbrError(f"Could not {what}: {tail}")


def ensure_base_bank(grid_dir: Path, store: str, source: Path | None) -> Path:
    """The bank every trial copies, made once per grid: a copy of `source`, or a fresh seed bank.
    Built beside its final name and renamed, so a half-made bank is never used (a folder renamed whole:
    not the one-file write of files.py)."""
    final = grid_dir / BASE_BANK
    if (final / CASES).is_file():
        return final
    tmp = grid_dir / (BASE_BANK + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    if source is not None:
        if not source.is_dir():
            raise CbrError(f"No bank folder at {source}.")
        shutil.copytree(source, tmp)
    else:
        _cli(["bank", "build", "--store", store, "--bank-dir", str(tmp)], "build the seed bank")
    _cli(["bank", "export", str(tmp / CASES), "--store", store, "--bank-dir", str(tmp)], "list the bank's cases")
    if final.exists():
        shutil.rmtree(final)
    tmp.replace(final)
    return final


def retained_ids(bank: Path, task: str) -> list[str]:
    """Cases a run on `task` retained: a trial on that task must not start from its own past answers."""
    ids = []
    for line in (bank / CASES).read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case.get("source_kind") == "retained" and task in (case.get("task_name"), case.get("competition")):
            ids.append(case["id"])
    return ids


def wall_limit(spec: GridSpec, trial: Trial) -> float:
    """The harness's own cap on one trial, far above what a healthy run needs (a hung run is ours)."""
    kind = trial.agent.kind
    if kind == "deploy":
        return 5 * spec.timeout + 900
    if kind == "develop" and trial.agent.variant == "search":
        return spec.budget + spec.timeout + 1800  # its last node's limit shrinks to the budget's end
    if kind == "develop":
        return spec.iterations * 6 * spec.timeout + 1800
    return script_timeout(spec, trial) + 300


def script_timeout(spec: GridSpec, trial: Trial) -> float:
    if trial.agent.kind == "flaml":
        return max(spec.timeout, 2 * float(trial.agent.variant) + 300)
    return spec.timeout


@dataclass
class Plan:
    jobs: list[trials.TrialJob] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    unsupported: list[dict[str, str]] = field(default_factory=list)


def _command(spec: GridSpec, trial: Trial, task: Task, folder: Path) -> list[str]:
    agent = trial.agent
    limits = ["--timeout", f"{script_timeout(spec, trial):g}", "--memory", f"{spec.memory_mb:g}"]
    if agent.kind in ("deploy", "develop"):
        common = ["--model", str(agent.model), "--json", "--no-cache", "--store", spec.store,
                  "--bank-dir", str(folder / "bank"), "--runs-dir", str(folder / "runs"), *limits]
        if spec.max_cost is not None:
            common += ["--max-cost", f"{spec.max_cost:g}"]
        if agent.kind == "deploy":
            return [*trials.cli_command(), "deploy", str(task.root), "--strategy", agent.variant,
                    "--seed", str(trial.seed), *common]
        length = ["--budget", f"{spec.budget:g}"] if agent.variant == "search" else ["-T", str(spec.iterations)]
        ablation = {"no-rerank": ["--no-rerank"], "no-cbr": ["--no-cbr"]}.get(agent.variant, [])
        return [*trials.cli_command(), "develop", str(task.root), *length, *ablation, "--seed", str(trial.seed),
                *common]
    return [*trials.cli_command(), "run", str(task.root), str(folder / "solution.py"), "--json",
            "--out", str(folder / "run"), *limits]


def _script(trial: Trial, task: Task) -> tuple[str | None, str | None]:
    """(script text, reason it cannot run) for the agents that run one script."""
    kind = trial.agent.kind
    if kind == "flaml":
        reason = unsupported(task)
        return (None, reason) if reason else (flaml_script(task, float(trial.agent.variant), trial.seed), None)
    if kind == "starter":
        return task.starter.read_text(encoding="utf-8"), None
    if kind == "reference":
        path = reference_script(task.name, task.stage)
        return (path.read_text(encoding="utf-8"), None) if path else (None, "no reference solution")
    return None, None


def plan(grid_dir: Path, spec: GridSpec, tasks_dir: Path, bank: Path | None) -> Plan:
    """A job for every trial without a `done` marker; finished ones are listed, never rerun."""
    out = Plan()
    tasks = {name: load_task(tasks_dir / name) for name in spec.tasks}
    removals = {name: retained_ids(bank, name) for name in spec.tasks} if bank is not None else {}
    for t in spec.trial_list():
        task, folder = tasks[t.task], trial_dir(grid_dir, t)
        script, reason = _script(t, task)
        if reason:
            if t.index == 0:
                out.unsupported.append({"task": t.task, "agent": t.agent.label, "reason": reason})
            continue
        if trials.is_done(folder):
            out.finished.append(t.id)
            continue
        uses_bank = t.agent.kind in ("deploy", "develop")
        out.jobs.append(trials.TrialJob(
            trial_id=t.id, task=t.task, agent=t.agent.label, kind=t.agent.kind, index=t.index, seed=t.seed,
            folder=str(folder), command=_command(spec, t, task, folder),
            wall_limit=wall_limit(spec, t), bank_base=str(bank) if uses_bank and bank else None,
            bank_remove=removals.get(t.task, []) if uses_bank else [], store=spec.store, script=script))
    return out


def needs_bank(spec: GridSpec) -> bool:
    return any(a.kind in ("deploy", "develop") for a in spec.agent_list())


def load_records(grid_dir: Path, spec: GridSpec) -> list[dict[str, Any]]:
    """Every saved trial record of this grid (infrastructure failures included, for the report)."""
    records = []
    for t in spec.trial_list():
        folder = trial_dir(grid_dir, t)
        if (folder / trials.RECORD).is_file():
            records.append(trials.load_record(folder))
    return records
