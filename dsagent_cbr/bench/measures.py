"""The paper's measures from trial records, pure (no disk, no processes).

- success: deploy, final success (a graded result); develop, a bug-free model within the step budget;
  the anchors (FLAML, AutoGluon, starter, reference), the script ran and was graded. One-pass: deploy
  with an LLM only.
- ranks: per task, every run of every compared agent is pooled and ranked by test score (1 = best);
  failed runs rank after all graded ones, ties share the average rank. An agent's mean rank on a task
  is the mean of its runs' ranks, its best rank their minimum; over tasks both are averaged.
- normalised score: (score - random) / (reference - random), random = the starter's test score and
  reference = the reference solution's, so 0 is the starter and 1 the reference on every metric and
  direction. A failed run counts as 0 (the starter is what one has without a working solution).
- infrastructure failures (ours, not the model's) are left out of every measure and counted apart.
- a task without test answers (a user's own) has no test score to rank or normalise: what is known of it
  is each run's selection score (cbr's grade of the labelled rows it held back), tabled apart.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any


def graded_score(record: dict[str, Any]) -> float | None:
    """The score a run is ranked by, or None when it failed: the test score of the solution the run
    chose (on its selection score), as the paper ranks; on a task without test answers, its selection
    score."""
    score = record.get("test_metric")
    if score is None:
        score = record.get("selection_metric")
    if not record.get("success") or not isinstance(score, (int, float)) or not math.isfinite(score):
        return None
    return float(score)


def rank_pool(scores: list[float | None], maximize: bool) -> list[float]:
    """1-based ranks, best first; None (failed) after every score; ties share their average rank."""
    keys = [(0, -s if maximize else s) if s is not None else (1, 0.0) for s in scores]
    order = sorted(range(len(scores)), key=lambda i: keys[i])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and keys[order[end + 1]] == keys[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def normalised(score: float | None, random: float | None, reference: float | None) -> float | None:
    if score is None or random is None or reference is None or reference == random:
        return None
    return (score - random) / (reference - random)


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _rate(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _new_cell(kind: str | None, maximize: bool) -> dict[str, Any]:
    return {
        "kind": kind,
        "maximize": maximize,
        "ranks": [],
        "scores": [],
        "norm": [],
        "success": [],
        "one_pass": [],
        "cost": [],
    }


def measure(records: list[dict[str, Any]], baselines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per (task, agent) cells and per-agent totals, from every record of the compared agents."""
    counted = [r for r in records if r.get("outcome") != "infrastructure"]
    infra = defaultdict(int)
    for r in records:
        if r.get("outcome") == "infrastructure":
            infra[(r["task"], r["agent"])] += 1
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in counted:
        by_task[r["task"]].append(r)
    for task, pool in by_task.items():
        base = baselines.get(task, {})
        maximize = (base.get("direction") or pool[0].get("direction")) == "maximize"
        scores = [graded_score(r) for r in pool]
        ranks = rank_pool(scores, maximize)
        for r, score, rank in zip(pool, scores, ranks, strict=True):
            cell = cells.setdefault((task, r["agent"]), _new_cell(r.get("kind"), maximize))
            cell["ranks"].append(rank)
            cell["scores"].append(score)
            norm = normalised(score, base.get("random"), base.get("reference"))
            has_baseline = normalised(0.0, base.get("random"), base.get("reference")) is not None
            cell["norm"].append(norm if norm is not None else (0.0 if has_baseline else None))
            cell["success"].append(score is not None)
            if r.get("one_pass") is not None:
                cell["one_pass"].append(bool(r["one_pass"]))
            cell["cost"].append(float(r.get("cost_usd") or 0.0))
    for key in infra:
        cells.setdefault(key, _new_cell(None, True))
    rows = []
    for (task, agent), c in sorted(cells.items()):
        graded = [s for s in c["scores"] if s is not None]
        norms = [n for n in c["norm"] if n is not None]
        rows.append(
            {
                "task": task,
                "agent": agent,
                "kind": c["kind"],
                "runs": len(c["scores"]),
                "infrastructure": infra.get((task, agent), 0),
                "success": _rate(c["success"]),
                "one_pass": _rate(c["one_pass"]),
                "one_pass_asked": len(c["one_pass"]),
                "mean_test": _mean(graded),
                "best_test": (max if c["maximize"] else min)(graded) if graded else None,
                "mean_rank": _mean(c["ranks"]),
                "best_rank": min(c["ranks"]) if c["ranks"] else None,
                "pool": len(by_task.get(task, [])),
                "normalised": _mean(norms) if len(norms) == len(c["norm"]) else None,
                "cost_per_run": _mean(c["cost"]),
            }
        )
    return {"cells": rows, "agents": _agent_totals(rows, cells, infra)}


def _agent_totals(
    rows: list[dict[str, Any]],
    cells: dict[tuple[str, str], dict[str, Any]],
    infra: dict[tuple[str, str], int],
) -> list[dict[str, Any]]:
    out = []
    for agent in dict.fromkeys(r["agent"] for r in rows):
        mine = [r for r in rows if r["agent"] == agent and r["runs"]]
        raw = [c for (_, a), c in cells.items() if a == agent]
        success = [s for c in raw for s in c["success"]]
        one_pass = [s for c in raw for s in c["one_pass"]]
        norms = [r["normalised"] for r in mine if r["normalised"] is not None]
        out.append(
            {
                "agent": agent,
                "tasks": len(mine),
                "runs": len(success),
                "infrastructure": sum(n for (_, a), n in infra.items() if a == agent),
                "success": _rate(success),
                "successes": sum(success),
                "one_pass": _rate(one_pass),
                "one_pass_passed": sum(one_pass),
                "one_pass_asked": len(one_pass),
                "mean_rank": _mean([r["mean_rank"] for r in mine]),
                "best_rank": _mean([r["best_rank"] for r in mine]),
                "normalised": _mean(norms),
                "normalised_tasks": len(norms),
                "cost_per_run": _mean([x for c in raw for x in c["cost"]]),
            }
        )
    return out


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def untested_tasks(records: list[dict[str, Any]]) -> list[str]:
    """Tasks without test answers, in the records' order: as their trials' records say (older records do
    not: then a task where no counted run has a test score and some run has a selection score)."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_task[r["task"]].append(r)
    out = []
    for task, runs in by_task.items():
        said = {r["test_answers"] for r in runs if r.get("test_answers") is not None}
        counted = [r for r in runs if r.get("outcome") != "infrastructure"]
        inferred = not any(_finite(r.get("test_metric")) is not None for r in counted) and any(
            _finite(r.get("selection_metric")) is not None for r in counted
        )
        if said == {False} or (not said and inferred):
            out.append(task)
    return out


def selection_cells(records: list[dict[str, Any]], tasks: list[str]) -> list[dict[str, Any]]:
    """Per task and agent, on tasks without test answers: the counted runs, how many succeeded, and the
    mean and best selection score of those that succeeded and have one (a task too small to hold rows
    back has none: nothing is put in its place)."""
    rows = []
    for task in tasks:
        mine = [r for r in records if r["task"] == task]
        for agent in dict.fromkeys(r["agent"] for r in mine):
            runs = [r for r in mine if r["agent"] == agent]
            counted = [r for r in runs if r.get("outcome") != "infrastructure"]
            scores = [
                s
                for r in counted
                if r.get("success") and (s := _finite(r.get("selection_metric"))) is not None
            ]
            maximize = (
                next((r.get("direction") for r in runs if r.get("direction")), "maximize")
                == "maximize"
            )
            rows.append(
                {
                    "task": task,
                    "agent": agent,
                    "kind": runs[0].get("kind"),
                    "runs": len(counted),
                    "successes": sum(bool(r.get("success")) for r in counted),
                    "scored": len(scores),
                    "mean_selection": _mean(scores),
                    "best_selection": (max if maximize else min)(scores) if scores else None,
                    "infrastructure": len(runs) - len(counted),
                }
            )
    return rows
