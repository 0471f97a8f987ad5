"""An agent trial's pictures with the grid's AutoML anchor in them: each develop or deploy trial's report
is drawn again with the selection score each AutoML anchor's trial (FLAML's, AutoGluon's) reached on the
same task as a line, so that the search's tree shows where it stands against what a user would have run
instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsagent_cbr.agent.record import load_record
from dsagent_cbr.bench.spec import AUTOML_KINDS
from dsagent_cbr.bench.trial import AGENT_KINDS
from dsagent_cbr.report.run_report import write_report


def anchors(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per task, each AutoML anchor's selection score (the mean over its graded trials), named as the
    pictures show it: flaml:300 as FLAML-300, autogluon:60 as AutoGluon-60."""
    found: dict[str, dict[str, list[float]]] = {}
    for r in records:
        kind = r.get("kind")
        if (
            kind in AUTOML_KINDS
            and r.get("outcome") == "ok"
            and r.get("selection_metric") is not None
        ):
            name = r["agent"].replace(f"{kind}:", f"{AUTOML_KINDS[kind]}-")
            found.setdefault(r["task"], {}).setdefault(name, []).append(
                float(r["selection_metric"])
            )
    return {task: {name: sum(v) / len(v) for name, v in by.items()} for task, by in found.items()}


def draw_anchors(records: list[dict[str, Any]]) -> int:
    """Redraw every agent trial's report that has an anchor on its task; returns how many were drawn."""
    lines, drawn = anchors(records), 0
    for r in records:
        run_dir = Path(r.get("run_dir") or "")
        if (
            r.get("kind") not in AGENT_KINDS
            or r["task"] not in lines
            or not (run_dir / "summary.json").is_file()
        ):
            continue
        record = load_record(run_dir)
        # the pictures only: summary.json stays
        record.baselines = {**record.baselines, **lines[r["task"]]}
        write_report(run_dir, record)
        drawn += 1
    return drawn
