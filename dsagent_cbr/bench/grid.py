"""The driver's side of a grid: its folder, its base bank, and one TrialJob per unfinished trial."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dsagent_cbr.bench import autogluon_script, flaml_script
from dsagent_cbr.bench import trial as trials
from dsagent_cbr.bench.references import reference_script
from dsagent_cbr.bench.spec import AUTOML_KINDS, GridSpec, Trial, trial_dir
from dsagent_cbr.errors import CbrError
from dsagent_cbr.files import write_json_atomic
from dsagent_cbr.tasks.finding import find_task
from dsagent_cbr.tasks.loader import discover_tasks, load_task
from dsagent_cbr.tasks.model import Task

SPEC_FILE = "grid.json"
BASE_BANK = "bank-base"
CASES = "cases.jsonl"
# words of --tasks that name recipe groups, never a task
GROUPS = ("all", "deployment", "development")


def _recipe_group(group: str, tasks_dir: Path) -> list[Path]:
    return [p for p in discover_tasks(tasks_dir) if group == "all" or load_task(p).stage == group]


def select_tasks(selection: str, tasks_dir: Path) -> dict[str, Path]:
    """Task name -> its folder (absolute), in the order given. Each comma-separated item is a group of the
    recipes (deployment, development, all: in the suite's order) or a task found as every command finds
    one (a path, or a name in ./tasks, then ./, then among the recipes: tasks/finding.py)."""
    chosen: dict[str, Path] = {}
    for item in (part.strip() for part in selection.split(",")):
        if not item:
            continue
        for folder in (
            _recipe_group(item, tasks_dir) if item in GROUPS else [find_task(item, tasks_dir)]
        ):
            task = load_task(folder)  # resolves the folder, and names what is wrong with it
            first = chosen.setdefault(task.name, task.root)
            # trials are named by task: two folders of one name would share them
            if first != task.root:
                raise CbrError(
                    f"Two task folders are named {task.name} ({first} and {task.root}); rename one."
                )
    if not chosen:
        raise CbrError(f"--tasks {selection!r} selects no task (no recipes in {tasks_dir}).")
    return chosen


def open_grid(grid_dir: Path, spec: GridSpec) -> bool:
    """Create the grid folder, or check that it holds this grid; True when it already did (a resume)."""
    path = grid_dir / SPEC_FILE
    if path.is_file():
        saved = GridSpec.from_dict(json.loads(path.read_text(encoding="utf-8")))
        older = not saved.task_folders  # made before grids kept their folders: its trials are these
        if older:
            saved = replace(saved, task_folders=spec.task_folders)
        if saved.digest() != spec.digest():
            raise CbrError(_not_this_grid(grid_dir, saved, spec))
        if older:
            write_json_atomic(path, spec.to_dict())
        return True
    grid_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, spec.to_dict())
    return False


def _not_this_grid(grid_dir: Path, saved: GridSpec, spec: GridSpec) -> str:
    moved = [
        t for t in spec.tasks if saved.task_folders.get(t) not in (None, spec.task_folders.get(t))
    ]
    if moved and replace(saved, task_folders=spec.task_folders).digest() == spec.digest():
        # the same trials from another folder: say which, since a name alone looks the same
        task = moved[0]
        return (
            f"{grid_dir} ran {task} from {saved.task_folders[task]}, not {spec.task_folders[task]}; "
            "give --tasks that folder, or choose another --grid or --name."
        )
    return (
        f"{grid_dir} holds another grid (its grid.json differs); choose another --grid or --name."
    )


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
    _cli(
        ["bank", "export", str(tmp / CASES), "--store", store, "--bank-dir", str(tmp)],
        "list the bank's cases",
    )
    if final.exists():
        shutil.rmtree(final)
    tmp.replace(final)
    return final


def retained_ids(bank: Path, task: str) -> list[str]:
    """Cases a run on `task` retained: a trial on that task must not start from its own past answers."""
    ids = []
    for line in (bank / CASES).read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case.get("source_kind") == "retained" and task in (
            case.get("task_name"),
            case.get("competition"),
        ):
            ids.append(case["id"])
    return ids


def wall_limit(spec: GridSpec, trial: Trial) -> float:
    """The harness's own cap on one trial, far above what a healthy run needs (a hung run is ours)."""
    kind = trial.agent.kind
    if kind == "deploy":
        return 5 * spec.timeout + 900
    if kind == "develop" and trial.agent.variant == "search":
        # its last node's limit shrinks to the budget's end
        return spec.budget + spec.timeout + 1800
    if kind == "develop":
        return spec.iterations * 6 * spec.timeout + 1800
    return script_timeout(spec, trial) + 300


# An AutoML anchor keeps its models in its workspace. At five minutes AutoGluon's passed the sandbox's 1 GB
# default on a 26k-row six-class table and a 327k-row one, and the trial failed on a limit of ours, not the
# learner's. A search keeps its models in memory, so its nodes keep the default.
ANCHOR_DISK_MB = 8192.0


def limits(spec: GridSpec, trial: Trial) -> list[str]:
    """The sandbox's limits for the trial's scripts, as the commands' options."""
    given = ["--timeout", f"{script_timeout(spec, trial):g}", "--memory", f"{spec.memory_mb:g}"]
    if trial.agent.kind in AUTOML_KINDS:
        given += ["--disk", f"{ANCHOR_DISK_MB:g}"]
    return given


def script_timeout(spec: GridSpec, trial: Trial) -> float:
    # the budget, the learner's own overrun, and room to load and predict
    if trial.agent.kind in AUTOML_KINDS:
        return max(spec.timeout, 2 * float(trial.agent.variant) + 300)
    return spec.timeout


@dataclass
class Plan:
    jobs: list[trials.TrialJob] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    unsupported: list[dict[str, str]] = field(default_factory=list)


def _command(spec: GridSpec, trial: Trial, task: Task, folder: Path) -> list[str]:
    agent = trial.agent
    if agent.kind in ("deploy", "develop"):
        common = [
            "--model",
            str(agent.model),
            "--json",
            "--no-cache",
            "--store",
            spec.store,
            "--bank-dir",
            str(folder / "bank"),
            "--runs-dir",
            str(folder / "runs"),
            *limits(spec, trial),
        ]
        if spec.max_cost is not None:
            common += ["--max-cost", f"{spec.max_cost:g}"]
        if agent.kind == "deploy":
            return [
                *trials.cli_command(),
                "deploy",
                str(task.root),
                "--strategy",
                agent.variant,
                "--seed",
                str(trial.seed),
                *common,
            ]
        length = (
            ["--budget", f"{spec.budget:g}"]
            if agent.variant == "search"
            else ["-T", str(spec.iterations)]
        )
        ablation = {"no-rerank": ["--no-rerank"], "no-cbr": ["--no-cbr"]}.get(agent.variant, [])
        return [
            *trials.cli_command(),
            "develop",
            str(task.root),
            *length,
            *ablation,
            "--seed",
            str(trial.seed),
            *common,
        ]
    cli = trials.cli_command()
    # AutoGluon's own environment runs `cbr run`: autogluon_script.py says why
    if agent.kind == "autogluon":
        cli = [autogluon_script.python() or cli[0], *cli[1:]]
    return [
        *cli,
        "run",
        str(task.root),
        str(folder / "solution.py"),
        "--json",
        "--out",
        str(folder / "run"),
        *limits(spec, trial),
    ]


def _script(trial: Trial, task: Task) -> tuple[str | None, str | None]:
    """(script text, reason it cannot run) for the agents that run one script."""
    kind = trial.agent.kind
    if kind == "flaml":
        reason = flaml_script.unsupported(task)
        budget = float(trial.agent.variant)
        return (
            (None, reason)
            if reason
            else (flaml_script.flaml_script(task, budget, trial.seed), None)
        )
    if kind == "autogluon":
        reason = autogluon_script.unsupported(task) or autogluon_script.missing()
        return (
            (None, reason)
            if reason
            else (autogluon_script.autogluon_script(task, float(trial.agent.variant)), None)
        )
    if kind == "starter":
        return task.starter.read_text(encoding="utf-8"), None
    if kind == "reference":
        path = reference_script(task.name, task.stage)
        return (path.read_text(encoding="utf-8"), None) if path else (None, "no reference solution")
    return None, None


def plan(grid_dir: Path, spec: GridSpec, bank: Path | None) -> Plan:
    """A job for every trial without a `done` marker; finished ones are listed, never rerun. Each task is
    loaded from the folder the spec keeps, so its commands name that folder whole."""
    out = Plan()
    tasks = {name: load_task(spec.folder(name)) for name in spec.tasks}
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
        out.jobs.append(
            trials.TrialJob(
                trial_id=t.id,
                task=t.task,
                agent=t.agent.label,
                kind=t.agent.kind,
                index=t.index,
                seed=t.seed,
                folder=str(folder),
                command=_command(spec, t, task, folder),
                wall_limit=wall_limit(spec, t),
                bank_base=str(bank) if uses_bank and bank else None,
                bank_remove=removals.get(t.task, []) if uses_bank else [],
                store=spec.store,
                script=script,
                test_answers=task.has_answers,
            )
        )
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
