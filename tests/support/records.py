"""Run records (agent/record.py) built from plain rows and summary fields, as a test writes them."""

from __future__ import annotations

from pathlib import Path

from dsagent_cbr.agent.record import Row, RunRecord


def as_record(rows: list[dict], summary: dict, kind: str = "develop", run_dir: Path | str = "run") -> RunRecord:
    return RunRecord(kind=kind, run_dir=str(run_dir), rows=[Row(**r) for r in rows], **summary)
