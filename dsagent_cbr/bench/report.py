"""The tables: JSON, markdown and a PNG of normalised score by task and agent, each stamped with the
command that made it, the machine's cores, the date and the versions of the learners the scripts ran on."""

from __future__ import annotations

import io
import json
import logging
import os
import shlex
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from dsagent_cbr.bench.measures import measure, selection_cells, untested_tasks
from dsagent_cbr.config import PROJECT_ROOT
from dsagent_cbr.files import write_bytes_atomic, write_json_atomic, write_text_atomic
from dsagent_cbr.report.figures import PLAIN_TEXT

# What a trial's score depends on besides cbr's commit: an anchor measured again on other releases of these
# (FLAML's timed search above all) is a different anchor, so the table names them. AutoGluon's releases are
# read from its own environment, when the tables hold its trials (stamp).
LEARNERS = (
    "flaml",
    "lightgbm",
    "xgboost",
    "xgboost-cpu",
    "scikit-learn",
    "pandas",
    "numpy",
    "optuna",
)

log = logging.getLogger(__name__)


def learner_versions() -> dict[str, str]:
    """The installed release of each learner package (those not installed left out)."""
    versions = {}
    for name in LEARNERS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def source_commit() -> str | None:
    """The commit of cbr's own source tree, whatever the settings say: the code that runs now."""
    commit = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return commit or None


def stamp(records: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    """The command, machine, date, commit and learner releases; `records`: the trials tabled."""
    argv = list(sys.argv)
    if argv and (argv[0].endswith("cli.py") or argv[0].endswith("__main__.py")):
        argv[0:1] = ["python", "-m", "dsagent_cbr.cli"]
    elif argv:
        argv[0] = Path(argv[0]).name
    return {
        "command": shlex.join(argv),
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "commit": source_commit(),
        "packages": {**learner_versions(), **_anchor_versions(records or [])},
        **extra,
    }


def _anchor_versions(records: list[dict[str, Any]]) -> dict[str, str]:
    """The releases of AutoGluon and its CatBoost, when some trial ran it (read from the python it runs
    under, which may not be this one: autogluon_script.py)."""
    if not any(r.get("kind") == "autogluon" for r in records):
        return {}
    from dsagent_cbr.bench import autogluon_script

    return autogluon_script.versions()


def load_baselines(path: Path) -> dict[str, dict[str, Any]]:
    """task -> its row of benchmarks/baselines.py's table (random and reference test scores)."""
    if not path.is_file():
        return {}
    return {row["task"]: row for row in json.loads(path.read_text(encoding="utf-8"))}


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def fixed(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def pct(rate: float | None, num: int | None = None, den: int | None = None) -> str:
    if rate is None:
        return "—"
    return f"{100 * rate:.0f}%" + (f" ({num}/{den})" if den is not None else "")


def build(
    records: list[dict[str, Any]], baselines: dict[str, dict[str, Any]], info: dict[str, Any]
) -> dict[str, Any]:
    """The report's data. Tasks without test answers are kept out of the ranks and normalised scores
    (there is no test score to rank them by) and tabled apart by their selection scores."""
    untested = untested_tasks(records)
    measured = measure([r for r in records if r["task"] not in untested], baselines)
    every = list(dict.fromkeys(r["task"] for r in records))
    return {
        "stamp": info,
        "tasks": [t for t in every if t not in untested],
        "untested_tasks": untested,
        "agents": measured["agents"],
        "cells": measured["cells"],
        "selection_scores": selection_cells(records, untested),
        "baselines": {t: _baseline(t, baselines, records) for t in every},
        "trials": records,
    }


def _baseline(
    task: str, baselines: dict[str, dict[str, Any]], records: list[dict[str, Any]]
) -> dict[str, Any]:
    """A task's metric, direction and anchors from the suite's table; a task not in it (a user's own)
    is graded by the metric its trials name, and has no anchors."""
    row = baselines.get(task, {})
    ran = next((r for r in records if r["task"] == task and r.get("metric")), {})
    return {
        "metric": row.get("metric") or ran.get("metric"),
        "direction": row.get("direction") or ran.get("direction"),
        "random": row.get("random"),
        "reference": row.get("reference"),
    }


def _span(trials: list[dict[str, Any]], commit: str | None) -> str:
    """When the trials themselves ran, and at which commits where not the table's (a resumed or re-tabled
    grid's tables are written later than that, maybe by later code)."""
    times = [
        (t["started"], t["started"] + t.get("wall_seconds", 0)) for t in trials if "started" in t
    ]
    if not times:
        return ""
    first, last = min(a for a, _ in times), max(b for _, b in times)
    ran = sorted({t["commit"] for t in trials if t.get("commit")})
    return (
        f"; trials ran {time.strftime('%Y-%m-%d %H:%M', time.localtime(first))} to "
        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(last))}"
        + (f" at commit {', '.join(ran)}" if ran and ran != [commit] else "")
    )


def _head(report: dict[str, Any], title: str) -> list[str]:
    s = report["stamp"]
    counted = [r for r in report["trials"] if r.get("outcome") != "infrastructure"]
    return [
        f"# {title}",
        "",
        f"- command: `{s['command']}`",
        f"- machine: {s['cores']} cores"
        + (f"; Ray: {s['ray_cpus']} CPUs, --parallel {s['parallel']}" if s.get("ray_cpus") else "")
        + (
            f"; load average {s['load_average'][0]} at the end (other work shares the cores)"
            if s.get("load_average")
            else ""
        ),
        f"- date: {s['date']}"
        + (f" (commit {s['commit']})" if s.get("commit") else "")
        + _span(report["trials"], s.get("commit")),
        *(
            [f"- packages: {', '.join(f'{k} {v}' for k, v in s['packages'].items())}"]
            if s.get("packages")
            else []
        ),
        f"- trials: {len(counted)} counted, {len(report['trials']) - len(counted)} infrastructure failures "
        "(ours, not the model's: left out of every measure)",
        "",
    ]


def _metric(base: dict[str, Any]) -> str:
    arrow = {"maximize": " ↑", "minimize": " ↓"}.get(base.get("direction") or "", "")
    return f"{base.get('metric') or '?'}{arrow}"


def _ranked(report: dict[str, Any]) -> list[str]:
    """The agents' totals and the normalised score by task: tasks with test answers only."""
    lines = [
        "## Agents",
        "",
        "| agent | tasks | runs | one-pass | success | mean rank | best rank | normalised | $ / run | infra |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for a in report["agents"]:
        lines.append(
            f"| {a['agent']} | {a['tasks']} | {a['runs']} | "
            f"{pct(a['one_pass'], a['one_pass_passed'], a['one_pass_asked']) if a['one_pass_asked'] else 'n/a'} | "
            f"{pct(a['success'], a['successes'], a['runs'])} | {fmt(a['mean_rank'], 3)} | "
            f"{fmt(a['best_rank'], 3)} | {fixed(a['normalised'])} | {fmt(a['cost_per_run'], 3)} | "
            f"{a['infrastructure']} |"
        )
    agents = [a["agent"] for a in report["agents"]]
    lines += [
        "",
        "## Normalised score by task (mean rank / best rank in the task's pool)",
        "",
        "| task | metric | random | reference | " + " | ".join(agents) + " |",
        "|---|---|---:|---:|" + "---:|" * len(agents),
    ]
    cells = {(c["task"], c["agent"]): c for c in report["cells"]}
    for task in report["tasks"]:
        base = report["baselines"][task]
        row = [task, _metric(base), fmt(base.get("random")), fmt(base.get("reference"))]
        for agent in agents:
            c = cells.get((task, agent))
            row.append(
                ""
                if c is None or not c["runs"]
                else f"{fixed(c['normalised'])} ({fmt(c['mean_rank'], 3)} / {fmt(c['best_rank'], 3)})"
            )
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def _untested(report: dict[str, Any]) -> list[str]:
    """One small table per task without test answers: what is known of each agent's runs there."""
    lines = [
        "## Scores on your tasks",
        "",
        "These tasks have no test answers, so no run has a test score to rank or normalise. Each agent's "
        "selection score is cbr's grade of the labelled rows held back from its script (what a run chooses "
        "its solution by), over the runs that succeeded.",
        "",
    ]
    for task in report["untested_tasks"]:
        lines += [
            f"### {task} ({_metric(report['baselines'][task])})",
            "",
            "| agent | succeeded | mean selection score | best selection score |",
            "|---|---:|---:|---:|",
        ]
        for c in (c for c in report["selection_scores"] if c["task"] == task):
            # some held no rows back
            scored = f" (of {c['scored']})" if c["scored"] != c["successes"] else ""
            lines.append(
                f"| {c['agent']} | {c['successes']}/{c['runs']} | {fmt(c['mean_selection'])}{scored} | "
                f"{fmt(c['best_selection'])} |"
            )
        lines.append("")
    return lines


def _per_task(report: dict[str, Any]) -> list[str]:
    lines = [
        "## Per task and agent",
        "",
        "| task | agent | runs | one-pass | success | mean test | best test | mean rank | best rank | pool | normalised |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in report["cells"]:
        one_pass = pct(c["one_pass"]) if c["one_pass_asked"] else "n/a"
        lines.append(
            f"| {c['task']} | {c['agent']} | {c['runs']} | {one_pass} | {pct(c['success'])} | "
            f"{fmt(c['mean_test'])} | {fmt(c['best_test'])} | {fmt(c['mean_rank'], 3)} | "
            f"{fmt(c['best_rank'], 3)} | {c['pool']} | {fixed(c['normalised'])} |"
        )
    return lines + [""]


def markdown(report: dict[str, Any], title: str) -> str:
    # the user's tasks come before the per-task detail: `cbr bench run` prints the tables up to that
    lines = _head(report, title) + (_ranked(report) if report["tasks"] else [])
    lines += _untested(report) if report.get("untested_tasks") else []
    lines += _per_task(report) if report["tasks"] else []
    skipped = report.get("unsupported") or []
    if skipped:
        lines += ["## Not run", "", "| task | agent | why |", "|---|---|---|"]
        lines += [f"| {u['task']} | {u['agent']} | {u['reason']} |" for u in skipped] + [""]
    infra = [r for r in report["trials"] if r.get("outcome") == "infrastructure"]
    if infra:
        lines += ["## Infrastructure failures (not counted)", ""]
        lines += [f"- {r['id']}: {r.get('reason')}" for r in infra] + [""]
    lines += [
        "One-pass: the LLM's first script ran and was graded (deploy with a model only). Success: deploy, "
        "a graded final result; develop, a bug-free model within the step budget; the anchors (FLAML, "
        "AutoGluon, starter, reference), the script was graded. Ranks pool every counted run of every agent on a task "
        "(1 = best; failed runs last, ties averaged); the agent rows average them over the agent's tasks. "
        "Normalised: (score - random) / (reference - random), a failed run counted as 0.",
        "",
    ]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path, title: str) -> None:
    """The PNG of normalised score by task and agent. Task and agent names and the command are a user's
    text: every label is drawn plain (report/figures.py's PLAIN_TEXT: no mathtext, no TeX)."""
    import matplotlib

    # read when a text is made, and tick labels are made in savefig
    with matplotlib.rc_context(PLAIN_TEXT):
        write_bytes_atomic(path, _png(report, title))


def _png(report: dict[str, Any], title: str) -> bytes:
    import numpy as np
    from matplotlib.figure import Figure  # not pyplot: no global figure to close, whatever fails

    tasks, agents = report["tasks"], [a["agent"] for a in report["agents"]]
    cells = {(c["task"], c["agent"]): c["normalised"] for c in report["cells"] if c["runs"]}
    width = 0.8 / max(len(agents), 1)
    fig = Figure(figsize=(max(7.0, 0.9 * len(tasks) + 3), 4.8))
    ax = fig.add_subplot()
    x = np.arange(len(tasks))
    for i, agent in enumerate(agents):
        values = [cells.get((t, agent)) for t in tasks]
        heights = [np.nan if v is None else float(np.clip(v, -1.5, 1.5)) for v in values]
        ax.bar(x + (i - (len(agents) - 1) / 2) * width, heights, width, label=agent)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.axhline(1, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(x, tasks, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("normalised score (0 starter, 1 reference)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    s = report["stamp"]
    fig.text(
        0.01,
        0.005,
        f"{s['command']}  |  {s['cores']} cores  |  {s['date']}",
        fontsize=6,
        color="dimgrey",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    return png.getvalue()


def write(report: dict[str, Any], name: str, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"cbr bench: {name}"
    paths = [
        out_dir / f"bench-{name}.json",
        out_dir / f"bench-{name}.md",
        out_dir / f"bench-{name}.png",
    ]
    write_json_atomic(paths[0], report)
    text = markdown(report, title)
    if not report["tasks"]:  # only tasks without test answers: no normalised score to draw
        paths.pop()
        text += (
            "\nNo figure: no task here has test answers, so there is no normalised score to draw.\n"
        )
    else:
        try:
            plot(report, paths[2], title)
        # Broad on purpose: matplotlib raises many types (ValueError, RuntimeError, OverflowError, KeyError,
        # OSError, MemoryError...), and the tables are worth having without their picture.
        except Exception as exc:
            log.warning("cbr: the bench figure %s could not be drawn", paths[2], exc_info=True)
            text += f"\nThe figure could not be drawn ({type(exc).__name__}); the log says why.\n"
            paths.pop()
    write_text_atomic(paths[1], text)
    return paths
